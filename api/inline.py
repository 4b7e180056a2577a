"""The in-process launcher: executions of runs as tasks owned by the app (or the CLI
command), never by a request - the engine's :class:`~engine.ports.Launcher` port.

``RunService.launch`` hands it an execution (the run service's event iterator of the
run); :meth:`InlineLauncher.launch` drives it in a task of its own and returns once it
produced its first event (the run is claimed). Whoever asked may then follow the run
(``RunService.follow``) or not: a client that disconnects only stops following; the
run goes on and ends as the run service ends it (succeeded, failed, paused, or cancelled
by a stop). :meth:`InlineLauncher.close` gives running executions a grace period, then
cancels them (the run service records them ``cancelled``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from engine.ports import Launch

#: the API's logger (:mod:`api.errors` uses it too), named here: importing that module
#: would load FastAPI into every CLI run
logger = logging.getLogger("flowloom.api")

__all__ = ["Execution", "InlineLauncher"]


@dataclass(slots=True)
class Execution:
    """One execution of a run: its task, whether it produced its first event, and the
    error that ended it early (None: it ended normally)."""

    run_id: str
    task: asyncio.Task[None] | None = None
    error: BaseException | None = None
    started: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    async def wait(self) -> None:
        """Until the execution ends. Cancelling the waiter leaves the execution running."""
        assert self.task is not None
        await asyncio.shield(self.task)


class InlineLauncher:
    """Executions of runs as tasks of this process (module docstring)."""

    def __init__(self) -> None:
        self._executions: dict[str, Execution] = {}

    def get(self, run_id: str) -> Execution | None:
        """The execution of ``run_id`` in this process, if one is going on."""
        return self._executions.get(run_id)

    async def launch(self, launch: Launch) -> None:
        """Drive ``launch.events()`` in a task; return once it produced its first event.

        Raises:
            whatever the execution raises before its first event (RunNotFound,
            RunNotResumable, UnknownInterrupt, RunOwned...): nothing was executed.
        """
        await self.start(launch)

    async def start(self, launch: Launch) -> Execution:
        """:meth:`launch`, returning the execution (its task: :meth:`Execution.wait`)."""
        execution = Execution(launch.run_id)
        execution.task = asyncio.create_task(self._drive(execution, launch), name=f"run {launch.run_id}")
        self._executions[launch.run_id] = execution
        await asyncio.shield(execution.started)
        return execution

    async def _drive(self, execution: Execution, launch: Launch) -> None:
        try:
            async with contextlib.aclosing(launch.events()) as stream:  # type: ignore[type-var]  # an async generator
                async for _event in stream:
                    if not execution.started.done():
                        execution.started.set_result(None)
        except Exception as exc:
            execution.error = exc
            if not execution.started.done():
                execution.started.set_exception(exc)
            else:
                logger.error("run %s stopped with %s: %s", execution.run_id, type(exc).__name__, exc)
        finally:
            if not execution.started.done():
                execution.started.set_result(None)
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
