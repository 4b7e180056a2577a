"""Runs whose owner died continue by themselves: the recovery loop of a server or worker.

A process that executes runs (``flowloom serve``, ``flowloom worker``) keeps one
:class:`OrphanRecovery`. On start, then every ``Settings.lease_ttl``/2 seconds (jittered
by a quarter, so replicas started together do not look at the same moment), and at once
when a watcher of a run finds its owner gone (:attr:`RunService.on_orphan`), it asks the
run store for the unfinished runs of every tenant that nobody holds
(:meth:`~engine.ports.RunStore.list_unfinished`, indexed on status), keeps those that
are orphaned (:func:`~engine.leases.orphaned`: a lease expired, an owner process of
this host that no longer exists, a pending run never claimed), and hands each to
``recover_one``, oldest first, at most ``Settings.recovery_concurrency`` at once.

``recover_one`` is where the run goes: executed in this process (the API server without
Redis: through the app's executor, :mod:`api.recovery`), or queued again at the front of
its queue (with Redis: :mod:`workers.rq.recovery`). Either way it starts with an atomic
claim of the run's lease in the run store, so when several processes find the same
orphan, exactly one continues it and the others skip it (``RunOwned``). What continuing
means is :meth:`~engine.service.RunService.recover`'s: finished nodes never run again;
the node that was running runs again with the same idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from schemas.records import RunSummary

from .leases import orphaned
from .ports import LeaseLost, RunNotFound, RunOwned
from .service import RunNotResumable, RunService
from .telemetry import telemetry

__all__ = ["OrphanRecovery", "RecoverOne", "StillQueued"]

logger = logging.getLogger("flowloom.recovery")

#: what continues one orphaned run (raises RunOwned when another process took it first)
RecoverOne = Callable[[RunSummary], Awaitable[Any]]
#: of the runs a look found orphaned, the ids of those a queue still holds (nothing to recover)
StillQueued = Callable[[list[RunSummary]], Awaitable[set[str]]]
#: runs looked at per look (oldest first; the rest wait for the next look)
BATCH = 500
#: errors that mean "not this process's to recover" rather than a fault
_SKIP = (RunOwned, RunNotResumable, RunNotFound, LeaseLost)


class OrphanRecovery:
    """The recovery loop of one process (module docstring).

    ``concurrency``: orphans continued at once (``Settings.recovery_concurrency``; a
    recovery that executes the run here holds its slot until the run ends or pauses);
    ``interval_s``: seconds between two looks (default ``Settings.lease_ttl``/2);
    ``pending_grace_s``: how long a never-claimed pending run may wait before it counts as
    orphaned (default ``Settings.lease_ttl``); ``still_queued``: in a deployment with a
    queue, which of the runs found are still waiting in it, asked once per look for all of
    them - a backlog holds pending runs longer than the grace, and handing each to
    ``recover_one`` only to learn that costs a queue round trip per run and process.
    :meth:`start` installs it as the service's ``on_orphan``; :meth:`close` stops it.
    """

    def __init__(
        self,
        service: RunService,
        recover_one: RecoverOne,
        *,
        concurrency: int | None = None,
        interval_s: float | None = None,
        pending_grace_s: float | None = None,
        still_queued: StillQueued | None = None,
    ) -> None:
        settings = service.settings
        self.service, self.recover_one, self.still_queued = service, recover_one, still_queued
        self.concurrency = max(1, concurrency if concurrency is not None else settings.recovery_concurrency)
        self.interval_s = interval_s if interval_s is not None else settings.lease_ttl / 2
        self.pending_grace_s = pending_grace_s if pending_grace_s is not None else settings.lease_ttl
        self._slots = asyncio.Semaphore(self.concurrency)
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        #: ids of the runs this process continued (recover_one returned), oldest first
        self.recovered: list[str] = []

    async def start(self, *, settle_s: float = 0.0) -> None:
        """Look now, then periodically, in a task of the running loop; watchers' orphans
        are reported here. ``settle_s`` > 0: the first look happens before this returns,
        and waits up to that many seconds for its recoveries to be done - what a worker
        does before it takes jobs, so the runs it queues again are ahead of the waiting ones."""
        self.service.on_orphan = self.request
        looked = False
        if settle_s > 0:
            try:
                await self.scan()
                looked = True
            except Exception as exc:
                logger.warning(
                    "looking for runs whose owner is gone failed (%s: %s)", type(exc).__name__, exc
                )
            if self._busy:
                await asyncio.wait(list(self._busy.values()), timeout=settle_s)
        self._loop = asyncio.create_task(self._forever(looked), name="orphan recovery")

    async def close(self) -> None:
        """Stop looking and cancel the recoveries waiting for a slot or driving a run (a run
        executing through an executor is that executor's to stop)."""
        if self.service.on_orphan == self.request:
            self.service.on_orphan = None
        tasks = [t for t in (self._loop, *self._busy.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def request(self, tenant_id: str, run_id: str) -> None:
        """A watcher found run ``run_id`` orphaned: look now instead of at the next interval."""
        if run_id not in self._busy:
            self._wake.set()

    async def _forever(self, looked: bool = False) -> None:
        while True:
            if looked:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval_s * random.uniform(0.75, 1.25))
                self._wake.clear()
            looked = True
            try:
                started = await self.scan()
                if started:  # a warning: a process died, and operators look for that
                    logger.warning(
                        "recovering %d run(s) whose owner is gone: %s", len(started), ", ".join(started)
                    )
            except Exception as exc:
                logger.warning(
                    "looking for runs whose owner is gone failed (%s: %s); trying again",
                    type(exc).__name__,
                    exc,
                )

    async def scan(self) -> list[str]:
        """One look: start recovering every orphan not being recovered here yet, oldest
        first; returns their ids. Raises what the run store raises."""
        now = time.time()
        found = await self.service.stores.runs.list_unfinished(
            now=now, host=socket.gethostname(), limit=BATCH
        )
        found = [
            summary
            for summary in found
            if summary.run_id not in self._busy
            # A lease this process let lapse (its loop stalled past the heartbeat) is
            # not an orphan: the heartbeat renews it, or learns another process took it.
            and not self.service.executes(summary.run_id)
            and orphaned(summary, now=now, pending_grace_s=self.pending_grace_s)
        ]
        if found and self.still_queued is not None:
            queued = await self.still_queued(found)
            found = [summary for summary in found if summary.run_id not in queued]
        started: list[str] = []
        for summary in found:
            self._busy[summary.run_id] = asyncio.create_task(
                self._recover(summary), name=f"recover run {summary.run_id}"
            )
            started.append(summary.run_id)
        return started

    async def _recover(self, summary: RunSummary) -> None:
        try:
            async with self._slots:  # FIFO: runs are continued in the order they were found (oldest first)
                await self.recover_one(summary)
            self.recovered.append(summary.run_id)
            telemetry().recovered("recovered")
        except _SKIP as exc:
            logger.info("run %s: not recovered by this process (%s)", summary.run_id, exc)
        except Exception as exc:
            telemetry().recovered("failed")
            logger.warning(
                "run %s: recovery failed (%s: %s); the next look tries again",
                summary.run_id,
                type(exc).__name__,
                exc,
            )
        finally:
            self._busy.pop(summary.run_id, None)
