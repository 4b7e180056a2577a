"""Queued recovery: a run whose owner died goes back to the **front** of its queue, and the
dead execution leaves RQ's registries.

:func:`requeue_orphan` is the ``recover_one`` of :class:`engine.recovery.OrphanRecovery`
in a deployment with Redis (every ``flowloom worker``, and ``flowloom serve`` with
``FLOWLOOM_REDIS_URL``). For one orphaned run it:

1. looks at the run's jobs in RQ: a job still waiting for a worker, or one a live worker
   has just started, means the run is in hand - nothing to do (a waiting job the
   recovery queued itself gets its placeholder lease extended instead);
2. **claims** the run in the run store for the job it is about to queue: the owner id is
   ``queued:<job id>`` (host: this one, pid 0: no process), for ``Settings.lease_ttl``.
   The claim is one conditional UPDATE: of several processes that found the same orphan,
   one wins, the others get ``RunOwned`` and skip it. The worker that takes the job
   continues the run taking that placeholder over (``RunService.recover(take_over=...)``);
   any other job of the run finds it owned;
3. cleans the dead execution out of RQ: its entry in the queue's ``StartedJobRegistry``
   goes, the job is recorded failed ("abandoned"), and the dead worker's registration is
   ended as RQ ends a worker that stops - so ``rq info`` shows no ghost executing job, and
   RQ's own abandoned-job handling does not queue the run a second time;
4. enqueues the job with ``at_front=True``: the run was accepted before every run waiting
   in the queue, so it goes ahead of them.

A worker is taken for dead when its registration is gone or ended, when it is a process
of this host that no longer exists, or when it is the run's owner in the run store (same
host and pid) whose lease expired - a live owner renews its lease every third of its length.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from engine.service import RunService
from schemas.records import OwnerInfo, RunSummary
from schemas.types import RunStatus

from .queues import JOB_GRACE_S, PRIORITIES, enqueue_run, later_job_id, queue_name
from .worker import _pid_alive

__all__ = ["HANDOFF_PREFIX", "handoff_id", "requeue_orphan", "still_queued"]

logger = logging.getLogger("flowloom.worker")

#: owner ids of runs a recovery queued, waiting for the job named after the prefix
HANDOFF_PREFIX = "queued:"
_WAITING = ("queued", "scheduled", "deferred")


def handoff_id(job_id: str) -> str:
    """The placeholder owner id of a run queued again by a recovery for job ``job_id``."""
    return f"{HANDOFF_PREFIX}{job_id}"


@dataclass
class _Jobs:
    """What RQ holds for one run: the started executions by liveness, and whether a job waits."""

    ghosts: list[tuple[Any, Any, str]] = field(default_factory=list)  # (job, its worker or None, queue)
    in_hand: bool = False
    waiting: bool = False
    origin: str | None = None


def _worker_dead(worker: Any, owner: OwnerInfo | None) -> bool:
    if worker is None or worker.death_date is not None:
        return True
    if worker.hostname == socket.gethostname():
        return not _pid_alive(worker.pid)
    return owner is not None and owner.host == worker.hostname and owner.pid == worker.pid


def _jobs_of(connection: Any, summary: RunSummary) -> _Jobs:
    """The run's jobs in RQ (sync; run in a thread): its started ones in every Flowloom
    queue, and whether one waits (the first job, or the one a recovery queued)."""
    from rq import Worker
    from rq.exceptions import NoSuchJobError
    from rq.job import Job
    from rq.registry import StartedJobRegistry

    found = _Jobs()
    run_id, owner = summary.run_id, summary.owner
    prefix = f"run-{run_id}"
    for queue in [queue_name(p) for p in PRIORITIES]:
        registry = StartedJobRegistry(queue, connection=connection)
        for job_id, _execution in registry.get_job_and_execution_ids(cleanup=False):
            if job_id != prefix and not job_id.startswith(prefix + "-"):
                continue
            try:
                job = Job.fetch(job_id, connection=connection)
            except NoSuchJobError:
                continue
            worker = (
                Worker.find_by_key(
                    Worker.redis_worker_namespace_prefix + (job.worker_name or "?"), connection=connection
                )
                if job.worker_name
                else None
            )
            found.origin = found.origin or job.origin
            if _worker_dead(worker, owner):
                found.ghosts.append((job, worker, queue))
            else:
                found.in_hand = True
    waiting_id = (
        owner.id[len(HANDOFF_PREFIX) :]
        if owner is not None and owner.id.startswith(HANDOFF_PREFIX)
        else prefix
        if owner is None and summary.status is RunStatus.pending
        else None
    )
    if waiting_id is not None:
        try:
            job = Job.fetch(waiting_id, connection=connection)
            found.waiting = job.get_status() in _WAITING
            found.origin = found.origin or job.origin
        except NoSuchJobError:
            pass
    return found


def _clean(connection: Any, ghosts: list[tuple[Any, Any, str]], successor: str) -> None:
    """Remove dead executions from their started registries, record their jobs failed
    (abandoned) and end their dead workers' registrations (sync)."""
    from rq.job_lifecycle import record_job_failure
    from rq.registry import StartedJobRegistry

    for job, worker, queue in ghosts:
        with connection.pipeline() as pipe:
            StartedJobRegistry(queue, connection=connection).remove_executions(job, pipeline=pipe)
            record_job_failure(job, f"abandoned: its worker died; the run continues in job {successor}", pipe)
            pipe.execute()
        if worker is not None and worker.death_date is None and worker.get_current_job_id() in (job.id, None):
            logger.warning(
                "Worker %s (%s pid %s) is gone; cleaning its registration",
                worker.name,
                worker.hostname,
                worker.pid,
            )
            worker.register_death()


def _waiting_first_jobs(connection: Any, run_ids: list[str]) -> set[str]:
    """Of ``run_ids`` (pending, never claimed), those whose first job waits in a queue (sync:
    one pipeline of ``HGET <job key> status``)."""
    from rq.job import Job

    with connection.pipeline(transaction=False) as pipe:
        for run_id in run_ids:
            pipe.hget(Job.key_for(f"run-{run_id}"), "status")
        statuses = pipe.execute()
    return {
        run_id
        for run_id, status in zip(run_ids, statuses, strict=True)
        if status is not None and status.decode() in _WAITING
    }


async def still_queued(connection: Any, summaries: list[RunSummary]) -> set[str]:
    """The ``still_queued`` of :class:`engine.recovery.OrphanRecovery` with Redis: the ids
    of the runs among ``summaries`` that are pending, never claimed, and whose first job
    waits in its queue - a backlog longer than the pending grace, not an orphan - found
    with one Redis round trip for all of them. ``connection``: a sync ``redis.Redis``.
    Anything else (a started job, a job gone, a run a recovery queued again) is left to
    :func:`requeue_orphan`, which looks at it closely. Raises Redis errors (the look is
    tried again later)."""
    fresh = [s.run_id for s in summaries if s.status is RunStatus.pending and s.owner is None]
    if not fresh:
        return set()
    return await asyncio.to_thread(_waiting_first_jobs, connection, fresh)


async def _max_wall_time(service: RunService, summary: RunSummary) -> float:
    doc = await service.workflow_of(summary.tenant_id, summary.run_id)
    return service.compile(doc).workflow.limits.max_wall_time


async def requeue_orphan(
    service: RunService,
    connection: Any,
    summary: RunSummary,
    *,
    queue: str | None = None,
    max_wall_time: float | None = None,
) -> str | None:
    """Queue orphaned run ``summary`` again at the front of its queue (module docstring);
    the new job's id, or None when the run is in hand already (a job waits for it, or a
    live worker just started one).

    ``connection``: a sync ``redis.Redis``; ``queue``: the queue (default: the queue of its
    last job, else ``flowloom-default``); ``max_wall_time``: the run's (default: read from
    its workflow).

    Raises:
        RunOwned: another process claimed the run first (it continues it, or queued it).
        RunNotFound: the run was deleted meanwhile. Redis errors: the run stays as it was.
    """
    runs = service.stores.runs
    jobs = await asyncio.to_thread(_jobs_of, connection, summary)
    owner = summary.owner
    lease = time.time() + service.settings.lease_ttl
    if jobs.in_hand or (jobs.waiting and owner is None):
        return None
    if jobs.waiting and owner is not None:  # the job a recovery queued still waits: keep its place
        await runs.claim(summary.tenant_id, summary.run_id, owner.model_copy(update={"lease_until": lease}))
        return None
    job_id = later_job_id(summary.run_id)
    placeholder = OwnerInfo(id=handoff_id(job_id), host=socket.gethostname(), pid=0, lease_until=lease)
    await runs.claim(summary.tenant_id, summary.run_id, placeholder, take_from=owner.id if owner else None)
    try:
        queue = queue or jobs.origin or queue_name("default")
        wall = max_wall_time if max_wall_time is not None else await _max_wall_time(service, summary)
        await asyncio.to_thread(_clean, connection, jobs.ghosts, job_id)
        await asyncio.to_thread(
            enqueue_run,
            connection,
            summary.tenant_id,
            summary.run_id,
            queue=queue,
            max_wall_time=wall,
            job_id=job_id,
            at_front=True,
        )
    except BaseException:
        await runs.release(summary.run_id, placeholder.id)  # the next look tries again
        raise
    who = "worker" if jobs.ghosts else "owner"
    logger.warning(
        "run %s: its %s is gone (%s pid %s); enqueued again at the front of %s to continue from its "
        "last checkpoint",
        summary.run_id,
        who,
        owner.host if owner else "-",
        owner.pid if owner else "-",
        queue,
    )
    return job_id


def job_wall_time(timeout: float | None) -> float | None:
    """The run's ``max_wall_time`` from its job's timeout (seconds), None when unknown."""
    return max(1.0, float(timeout) - JOB_GRACE_S) if timeout else None
