"""A deferred helper is a timer until its first wait ends, then a task; stopping it
before that leaves no task behind, after it cancels and awaits the task."""

from __future__ import annotations

import asyncio

from engine.deferred import Deferred, stop_all


async def test_a_helper_stopped_before_its_delay_never_starts():
    started: list[str] = []

    async def helper() -> None:
        started.append("yes")

    deferred = Deferred(0.2, helper)
    await asyncio.sleep(0.01)
    await stop_all([deferred])
    await asyncio.sleep(0.3)  # past the delay: the timer was cancelled
    assert started == [] and deferred.task is None


async def test_a_helper_starts_after_its_delay_and_is_cancelled_and_awaited():
    events: list[str] = []
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def helper() -> None:
        events.append(f"started after {loop.time() - t0:.2f}")
        try:
            await asyncio.sleep(10)
        finally:
            events.append("cleaned up")

    deferred = Deferred(0.05, helper)
    assert deferred.task is None
    await asyncio.sleep(0.15)
    assert deferred.task is not None and not deferred.task.done()
    assert len(events) == 1 and float(events[0].split()[-1]) >= 0.04
    await stop_all([deferred])
    assert deferred.task.cancelled() and events[-1] == "cleaned up", "awaited to its end"


async def test_a_helper_error_is_not_raised_by_stop_all_and_a_past_delay_starts_at_once():
    async def failing() -> None:
        raise RuntimeError("boom")

    deferred = Deferred(-1.0, failing)
    await asyncio.sleep(0.05)
    assert deferred.task is not None and deferred.task.done()
    await stop_all([deferred])  # the helper's own error is not the execution's
