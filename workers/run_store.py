"""Run-state store: saved runs, so a paused run can be resumed by another process (issue 5).

Built on a :class:`~workers.memory.MemoryStore`, so the embedded default (JSON files
on local disk) and Redis behave the same and pass one shared test suite.

Keys (inside the memory store's namespace):

- ``run:<run id>`` -> ``{"state": RunState as JSON, "workflow_hash": str}``
- ``workflow:<content hash>`` -> the workflow document the run was started with
- ``chat:<chat id>:paused`` -> the id of that chat's paused run (removed when it ends),
  so the next user message of the conversation can answer its interrupt.
"""

from __future__ import annotations

from typing import Any

from schemas.run import RunState
from schemas.types import RunStatus

from .memory import MemoryStore, default_store

__all__ = ["RunNotFound", "RunStore", "default_run_store"]


class RunNotFound(KeyError):
    """No saved run with that id (message names the id and the store)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


class RunStore:
    """Saves and loads run states with the workflow documents they belong to."""

    def __init__(self, backend: MemoryStore) -> None:
        self.backend = backend

    async def save(self, state: RunState, workflow: dict[str, Any]) -> None:
        """Save ``state`` (and ``workflow`` under its content hash, once).

        A paused run is indexed by its chat id; any other status removes that index.
        """
        await self.backend.set(f"workflow:{state.workflow_hash}", workflow)
        await self.backend.set(f"run:{state.run_id}",
                               {"state": state.model_dump(mode="json"), "workflow_hash": state.workflow_hash})
        chat_id = state.sys.get("chat_id")
        if chat_id:
            key = f"chat:{chat_id}:paused"
            if state.status is RunStatus.paused:
                await self.backend.set(key, state.run_id)
            elif await self.backend.get(key) == state.run_id:
                await self.backend.delete(key)

    async def load(self, run_id: str) -> tuple[RunState, dict[str, Any]]:
        """The saved state of ``run_id`` and its workflow document.

        Raises:
            RunNotFound: no such run (or its workflow document is missing).
        """
        record = await self.backend.get(f"run:{run_id}")
        if not isinstance(record, dict) or "state" not in record:
            raise RunNotFound(f"no saved run {run_id!r} in the run store ({self.describe()})")
        workflow = await self.backend.get(f"workflow:{record['workflow_hash']}")
        if not isinstance(workflow, dict):
            raise RunNotFound(f"run {run_id!r} is saved but its workflow document is missing ({self.describe()})")
        return RunState.model_validate(record["state"]), workflow

    async def paused_run_for_chat(self, chat_id: str) -> str | None:
        """The id of ``chat_id``'s paused run, if any."""
        run_id = await self.backend.get(f"chat:{chat_id}:paused")
        return run_id if isinstance(run_id, str) else None

    def describe(self) -> str:
        """Where runs are kept, for messages (never includes credentials)."""
        directory = getattr(self.backend, "directory", None)
        return f"local files in {directory}" if directory is not None else type(self.backend).__name__

    async def close(self) -> None:
        """Release the backend's connections."""
        await self.backend.close()


def default_run_store() -> RunStore:
    """Redis when ``FLOWLOOM_REDIS_URL`` is set, else local files (``$FLOWLOOM_HOME`` or ``~/.flowloom``)."""
    return RunStore(default_store())
