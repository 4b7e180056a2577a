"""Wiring: the run service and its storage, built from :class:`~engine.settings.Settings`.

The one place that picks implementations for the engine's ports: the SQL run store
(``Settings.database_url``, else SQLite at ``<home>/flowloom.db``), node memory (Redis
with ``Settings.redis_url``, else files under ``<home>/memory``), the model registry
(``Settings.models``, else the bundled one, with the settings' environment and
base-URL override), the built-in node catalog and the
workflow directories for workflow tools. With ``Settings.redis_url`` the command
channel is Redis (:class:`~workers.redis_bus.RedisCommandChannel`: a stop reaches a
queued run's worker on any machine); without it, the SQL store. The CLI, the HTTP API
and the queue workers (``flowloom worker``) all use this function.
"""

from __future__ import annotations

import contextlib
from typing import AsyncIterator

from engine.service import RunService, Stores
from engine.settings import Settings
from engine.workflow_store import WorkflowStore
from nodes import builtin_catalog
from nodes.model_registry import registry_for
from workers.memory import memory_store_for
from workers.redis_bus import RedisCommandChannel
from workers.sql import SqlStore, default_database_url
from workers.sql.chats import SqlChatStore

from .redaction import install as install_log_redaction

__all__ = ["database_url", "open_service"]


def database_url(settings: Settings) -> str:
    """``settings.database_url``, else the embedded SQLite file under ``settings.home``."""
    return settings.database_url or default_database_url(settings.home)


@contextlib.asynccontextmanager
async def open_service(settings: Settings) -> AsyncIterator[RunService]:
    """A :class:`RunService` over the stores ``settings`` name; closes them on exit.

    The database is created and migrated on first use (no setup step).

    Raises:
        StoreError: the database cannot be reached or migrated (names the URL, password masked).
        ModelConfigError: the model registry file is invalid.
    """
    install_log_redaction()  # the HTTP clients' request logs name URLs, which may hold keys
    registry = registry_for(settings)
    store = await SqlStore.open(database_url(settings))
    memory = memory_store_for(settings)
    commands = RedisCommandChannel(settings.redis_url) if settings.redis_url else store
    try:
        stores = Stores(runs=store, events=store, commands=commands, chats=SqlChatStore(store))
        yield RunService(catalog=builtin_catalog(), stores=stores,
                         settings=settings, models=registry, memory=memory,
                         workflows=WorkflowStore.from_settings(settings))
    finally:
        with contextlib.suppress(Exception):
            await memory.close()
        if settings.redis_url:
            with contextlib.suppress(Exception):
                await commands.close()  # type: ignore[union-attr]
        await store.close()
