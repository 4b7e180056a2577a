"""A run that kills its own process with SIGKILL at a chosen point, for the crash tests.

``python -m tests.support.crash_run FLOW.json NODE_ID before|after`` executes the
workflow in FLOW.json through a :class:`~engine.service.RunService` on the run store the
environment names (``FLOWLOOM_HOME``, ``FLOWLOOM_DATABASE_URL``), prints the run id on
its first line, and kills itself when node NODE_ID starts its work (``before``) or has
done it (``after``: its request sent and answered, its result not yet recorded by the
scheduler). The kill comes from inside the node's executor (a subclass of the built-in
one, same kind and traits), so it lands at exactly that point, with whatever the
process had not stored lost as a real crash loses it. Recovery is the real command:
``flowloom recover RUN_ID``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from typing import Any

from api.composition import database_url
from engine.catalog import NodeCatalog, NodeExecutor
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes import builtin_catalog
from workers.sql import SqlStore
from workers.sql.chats import SqlChatStore


def _killing(cls: type[NodeExecutor[Any]], node_id: str, when: str) -> type[NodeExecutor[Any]]:
    class Killing(cls):  # type: ignore[valid-type, misc]
        async def run(self, ctx: Any) -> Any:
            if ctx.node_id == node_id and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            result = await super().run(ctx)
            if ctx.node_id == node_id and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
            return result

    Killing.__name__ = Killing.__qualname__ = f"Killing{cls.__name__}"
    return Killing


def killing_catalog(doc: dict[str, Any], node_id: str, when: str) -> NodeCatalog:
    """The built-in catalog with the executors of ``doc``'s kinds made to kill the process
    at node ``node_id`` (``before``/``after`` its work)."""
    base = builtin_catalog()
    kinds = {node["type"] for node in doc["nodes"]}
    return base.with_kinds(*(dataclasses.replace(base[kind], executor=_killing(base[kind].executor_class(),
                                                                                node_id, when))
                             for kind in sorted(kinds)))


async def main(path: str, node_id: str, when: str) -> None:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    settings = Settings()
    store = await SqlStore.open(database_url(settings))
    try:
        service = RunService(catalog=killing_catalog(doc, node_id, when), settings=settings,
                             stores=Stores(runs=store, events=store, commands=store, chats=SqlChatStore(store)))
        state = await service.prepare(doc, {})
        print(state.run_id, flush=True)
        async for _event in service.execute(state.tenant_id, state.run_id):
            pass
    finally:
        await store.close()
    print("not killed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
