"""The tasks that execute runs in the API server: owned by the app, never by a request.

A request that starts or resumes a run hands the run service's event iterator to
:meth:`RunExecutor.launch`, which drives it in a task of its own. The request may then
wait for the end (blocking), relay the events (streaming) or answer at once (async):
whichever it does, a client that disconnects only stops listening; the run goes on
and ends as the run service ends it (succeeded, failed, paused, or cancelled by a
stop). When the app shuts down, running executions get a grace period, then are
cancelled (the run service records them ``cancelled``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from .errors import logger

__all__ = ["END", "Execution", "RunExecutor"]

#: Put on a listener's queue after the last event of an execution.
END: Any = object()


@dataclass(slots=True)
class Execution:
    """One execution of a run: its task, its listeners (queues of events, then
    :data:`END`), and the error that ended it early (None: it ended normally)."""

    run_id: str
    listeners: list[asyncio.Queue[Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    error: BaseException | None = None
    started: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def unsubscribe(self, queue: asyncio.Queue[Any]) -> None:
        """Stop feeding ``queue`` (its reader went away); the execution goes on."""
        with contextlib.suppress(ValueError):
            self.listeners.remove(queue)

    async def wait(self) -> None:
        """Until the execution ends. Cancelling the waiter leaves the execution running."""
        assert self.task is not None
        await asyncio.shield(self.task)


class RunExecutor:
    """Executions of runs as tasks of the app (see module docstring)."""

    def __init__(self) -> None:
        self._executions: dict[str, Execution] = {}

    def get(self, run_id: str) -> Execution | None:
        """The execution of ``run_id`` in this server, if one is going on."""
        return self._executions.get(run_id)

    async def launch(self, run_id: str, events: AsyncIterator[Any],
                     listener: asyncio.Queue[Any] | None = None) -> Execution:
        """Drive ``events`` (the run service's iterator of the run) in an app task; return
        once it produced its first event, so the run is claimed and executing.

        ``listener`` receives every event from the first on, then :data:`END`.

        Raises:
            whatever the iterator raises before its first event (RunNotFound,
            RunNotResumable, UnknownInterrupt, RunOwned...): nothing was executed.
        """
        execution = Execution(run_id)
        if listener is not None:
            execution.listeners.append(listener)
        execution.task = asyncio.create_task(self._drive(execution, events), name=f"run {run_id}")
        self._executions[run_id] = execution
        await asyncio.shield(execution.started)
        return execution

    async def _drive(self, execution: Execution, events: AsyncIterator[Any]) -> None:
        try:
            async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
                async for event in stream:
                    if not execution.started.done():
                        execution.started.set_result(None)
                    for queue in execution.listeners:
                        queue.put_nowait(event)
        except Exception as exc:  # noqa: BLE001 - reported to the launcher or the listeners
            execution.error = exc
            if not execution.started.done():
                execution.started.set_exception(exc)
            else:
                logger.error("run %s stopped with %s: %s", execution.run_id, type(exc).__name__, exc)
        finally:
            if not execution.started.done():
                execution.started.set_result(None)
            for queue in execution.listeners:
                queue.put_nowait(END)
            if self._executions.get(execution.run_id) is execution:
                del self._executions[execution.run_id]

    async def close(self, grace_s: float = 5.0) -> None:
        """Give running executions ``grace_s`` seconds to end, then cancel the rest."""
        tasks = [e.task for e in self._executions.values() if e.task is not None]
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
