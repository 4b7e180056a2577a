"""Queue names by priority and enqueueing a run.

Three queues, served in this order by a worker listening on all of them:
``flowloom-high``, ``flowloom-default``, ``flowloom-low``. A job is the function
:func:`workers.rq.jobs.execute_run` with ``(tenant_id, run_id)``: never a document, an
input or a secret (those stay in the database, where every read is scoped by tenant).
The job's timeout follows the run's ``max_wall_time`` plus a grace period: the engine
ends a run that runs out of wall time itself (``max_wall_time`` failure), RQ's timeout is
only the backstop for a worker that hangs. Jobs are retried by RQ (:data:`JOB_RETRIES`),
RQ's abandoned-job handling being the backstop of the workers' own crash detection; the
job of a run that ended ``failed`` fails without a retry (:mod:`workers.rq.jobs`).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

__all__ = [
    "JOB_FUNCTION",
    "JOB_GRACE_S",
    "JOB_RETRIES",
    "PRIORITIES",
    "enqueue_run",
    "job_timeout",
    "later_job_id",
    "queue_name",
    "queue_names",
]

#: priorities, most urgent first (the order a worker serves its queues in)
PRIORITIES = ("high", "default", "low")
#: seconds a job may run beyond its run's max_wall_time before RQ stops it
JOB_GRACE_S = 60
JOB_FUNCTION = "workers.rq.jobs.execute_run"
#: times RQ enqueues a job again that failed or was abandoned (its worker died without the
#: sweepers of :mod:`workers.rq.runtime` noticing, e.g. before the run was tracked); the
#: run's lease makes a second execution continue the first, never run beside it
JOB_RETRIES = 2
#: seconds RQ keeps a finished job's result / a failed job (for `rq info` and dashboards)
RESULT_TTL_S, FAILURE_TTL_S = 3600, 7 * 86400


def queue_name(priority: str) -> str:
    """``flowloom-<priority>``. Raises ValueError for a priority not in :data:`PRIORITIES`."""
    if priority not in PRIORITIES:
        raise ValueError(f"unknown priority {priority!r}; use one of {', '.join(PRIORITIES)}")
    return f"flowloom-{priority}"


def queue_names(priorities: list[str] | None = None) -> list[str]:
    """The queue names of ``priorities`` (default: all), most urgent first. A name that
    is already a queue name (``flowloom-...``) is kept as it is."""
    chosen = priorities or list(PRIORITIES)
    names = [p if p.startswith("flowloom-") else queue_name(p) for p in chosen]
    order = {queue_name(p): i for i, p in enumerate(PRIORITIES)}
    return sorted(names, key=lambda n: order.get(n, len(order)))


def job_timeout(max_wall_time: float) -> int:
    """Seconds RQ lets the job run: the run's ``max_wall_time`` (seconds) rounded up plus
    :data:`JOB_GRACE_S`."""
    return int(math.ceil(max_wall_time)) + JOB_GRACE_S


def later_job_id(run_id: str) -> str:
    """A unique id for a job that continues run ``run_id`` (recovery, answers): ``run-<run_id>-<hex>``."""
    return f"run-{run_id}-{uuid.uuid4().hex[:8]}"


def enqueue_run(
    connection: Any,
    tenant_id: str,
    run_id: str,
    *,
    queue: str,
    max_wall_time: float,
    first: bool = True,
    job_id: str | None = None,
    at_front: bool = False,
) -> str:
    """Enqueue the job that executes (or continues) the run on ``queue``; returns its id.

    ``connection``: a sync ``redis.Redis``; ``first``: the run's first job gets the id
    ``run-<run_id>`` (enqueueing it twice is refused by Redis key, so a retried request
    cannot queue a run twice); later ones (recovery, answers) get a unique suffix
    (:func:`later_job_id`), or ``job_id`` when given. ``at_front``: ahead of every job
    waiting in the queue (a recovered run was accepted before them).
    """
    from rq import Queue, Retry

    job_id = job_id or (f"run-{run_id}" if first else later_job_id(run_id))
    job = Queue(queue, connection=connection).enqueue(
        JOB_FUNCTION,
        tenant_id,
        run_id,
        job_id=job_id,
        job_timeout=job_timeout(max_wall_time),
        result_ttl=RESULT_TTL_S,
        failure_ttl=FAILURE_TTL_S,
        description=f"flowloom run {run_id} ({tenant_id})",
        retry=Retry(max=JOB_RETRIES),
        at_front=at_front,
    )
    return job.id
