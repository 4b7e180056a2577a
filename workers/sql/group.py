"""Group commit: the checkpoints of concurrent runs share one transaction.

Every checkpoint of a store goes through one :class:`GroupCommit`: a caller queues its
job and waits; one writer task (started when the queue was empty, gone when it is
empty again) takes every job that is ready and hands them to the store's ``flush`` as
one batch, which commits them in one transaction. While a batch is being written the
next jobs gather, so under load a commit carries many runs' checkpoints; alone, a job is
written at once (no timer, no waiting for company).

A batch holds at most one job per run: the next checkpoint of a run is built from what
the previous one committed (which node run is current, their positions), so it waits
for the next batch. A caller cancelled while its job waits (queued, or in a batch that
waits for the connection) has nothing of it written; once the batch is being written it
is written whatever the caller does, as a checkpoint already sent to the database would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.ports import CheckpointDelta
from schemas.run import RunState

__all__ = ["CheckpointJob", "GroupCommit"]


@dataclass(slots=True, eq=False)
class CheckpointJob:
    """One checkpoint waiting for its batch (the arguments of ``RunStore.checkpoint``).
    ``future`` gets None once committed, or the error that kept it out."""

    state: RunState
    delta: CheckpointDelta
    owner_id: str | None
    events: Sequence[Any]
    release: bool
    future: asyncio.Future[None] = field(init=False)  # made by GroupCommit.submit, on its loop

    def settle(self, error: BaseException | None = None) -> None:
        """Report the job's outcome to its caller (unless the caller has gone)."""
        if not self.future.done():
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)


Flush = Callable[[list[CheckpointJob]], Awaitable[None]]


class GroupCommit:
    """The queue and the one writer of a store's checkpoints (module docstring).

    ``flush(batch)`` writes a batch and settles every job in it; it must not raise (an
    error it lets through is given to every job of the batch that is still unsettled).
    """

    def __init__(self, flush: Flush) -> None:
        self._flush = flush
        self._jobs: list[CheckpointJob] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, job: CheckpointJob) -> None:
        """Queue ``job`` and wait until it is committed. Raises what kept it out
        (LeaseLost, RunNotFound, StoreError...)."""
        loop = asyncio.get_running_loop()
        job.future = loop.create_future()
        self._jobs.append(job)
        writer = self._writer
        if writer is None or writer.done() or writer.get_loop() is not loop:
            self._writer = loop.create_task(self._drain())
        try:
            await job.future
        except asyncio.CancelledError:
            if job in self._jobs:  # not taken yet: nothing of it will be written
                self._jobs.remove(job)
            raise

    async def _drain(self) -> None:
        while self._jobs:
            batch: list[CheckpointJob] = []
            later: list[CheckpointJob] = []
            runs: set[str] = set()
            for job in self._jobs:
                if job.future.done():  # its caller was cancelled
                    continue
                if job.state.run_id in runs:
                    later.append(job)
                else:
                    runs.add(job.state.run_id)
                    batch.append(job)
            self._jobs = later
            try:
                await self._flush(batch)
            except BaseException as error:
                for job in batch:
                    job.settle(
                        error if isinstance(error, Exception) else RuntimeError("checkpoint writer stopped")
                    )
                if not isinstance(error, Exception):
                    for job in self._jobs:
                        job.settle(RuntimeError("checkpoint writer stopped"))
                    self._jobs = []
                    raise
