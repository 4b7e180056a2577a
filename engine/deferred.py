"""A helper coroutine of a run that starts only when its first wait is over.

An execution keeps two helpers beside the run (the lease heartbeat, the idle watch), and
each begins by sleeping: a third of the lease, the idle interval. Most runs end long
before either wakes, so a task per helper per run - created, stepped into its first
sleep, cancelled, stepped again to finish, gathered - was pure overhead on every short
run. :class:`Deferred` waits out that first sleep as a plain timer of the loop and
creates the helper's task only when the timer fires; a run that ends first just cancels
the timer. What the helper does, and when, is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["Deferred", "stop_all"]


class Deferred:
    """``start()`` run as a task of the running loop after ``delay`` seconds (at once when
    ``delay`` <= 0). ``task``: the task once started, else None. Create it inside the
    loop (it schedules on the running loop)."""

    __slots__ = ("_handle", "_start", "task")

    def __init__(self, delay: float, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._start = start
        self.task: asyncio.Task[None] | None = None
        self._handle: asyncio.TimerHandle | asyncio.Handle | None = asyncio.get_running_loop().call_later(
            max(delay, 0.0), self._begin
        )

    def _begin(self) -> None:
        self._handle = None
        self.task = asyncio.get_running_loop().create_task(self._start())

    def cancel(self) -> asyncio.Task[None] | None:
        """Stop it: the timer if it has not fired, else its task (returned, to be awaited)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.task is not None:
            self.task.cancel()
        return self.task


async def stop_all(helpers: list[Deferred]) -> None:
    """Cancel every helper and wait for those whose task had started to finish (their
    errors, the cancellation included, are not raised)."""
    started = [task for helper in helpers if (task := helper.cancel()) is not None]
    if started:
        await asyncio.gather(*started, return_exceptions=True)
