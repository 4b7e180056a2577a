"""The job function RQ calls: execute (or continue) one run in this worker process.

It only hands the ids to the worker's runtime (:mod:`workers.rq.runtime`), which runs
the run service on its event loop; a job outside a ``flowloom worker`` process fails
with a message saying so.

A run that ended ``failed`` makes its job fail too (:class:`RunFailed`), so ``rq info``,
RQ's ``FailedJobRegistry`` and dashboards over it show failed runs with their reason. RQ
never retries such a job (:class:`workers.rq.worker.FlowloomWorker` sees to it): the run
has ended and its record in the run store says so; a second execution would only find
it ended. A cancelled run (stopped by a person) is not a failure: its job succeeds.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.events import NodeError

__all__ = ["RunFailed", "execute_run", "ingest_document"]


class RunFailed(Exception):
    """The run a job executed ended ``failed``. Its text is the run's reason, as RQ's
    failed registry shows it: ``run <id> (tenant <t>) failed: <code>: <message>``, the
    code being the run error's ``reason`` (``max_wall_time``, ``node_failed``...) or, when
    it has none, its type."""

    def __init__(self, tenant_id: str, run_id: str, error: NodeError | None) -> None:
        self.tenant_id, self.run_id = tenant_id, run_id
        self.code = (error.reason or error.type) if error is not None else "failed"
        self.message = (error.message if error is not None else "") or "the run failed without a message"
        node = f" at node {error.node_id}" if error is not None and error.node_id else ""
        super().__init__(f"run {run_id} (tenant {tenant_id}) failed{node}: {self.code}: {self.message}")


def execute_run(tenant_id: str, run_id: str) -> str:
    """Execute the run ``run_id`` of ``tenant_id`` from its stored state; returns how it
    ended (``succeeded``, ``failed``, ``cancelled``, ``paused``, or why nothing ran).

    Raises:
        RunFailed: the run ended ``failed`` (module docstring: the job fails, not retried).
        RuntimeError: not called inside a ``flowloom worker`` process.
    """
    from rq import get_current_job

    from .runtime import current_runtime

    job = get_current_job()
    queue = job.origin if job is not None else "flowloom-default"
    timeout = float(job.timeout) if job is not None and job.timeout else 3600.0
    ended = current_runtime().run_job(
        tenant_id, run_id, queue=queue, job_timeout=timeout, job_id=job.id if job is not None else ""
    )
    # RQ logs every job that returned as "Job OK"; the run's own outcome is this line.
    level = logging.WARNING if ended in ("failed", "cancelled") else logging.INFO
    logging.getLogger("flowloom.worker").log(
        level, "run %s (tenant %s, %s): %s", run_id, tenant_id, queue, ended
    )
    if ended == "failed":
        raise RunFailed(tenant_id, run_id, current_runtime().run_error(tenant_id, run_id))
    return ended


def ingest_document(tenant_id: str, dataset_id: str, document_id: str) -> str:
    """Ingest (or continue ingesting) one document of a knowledge base in this worker
    process; returns its status after (``ready``, ``failed``, or as another worker that
    holds it left it), or ``deleted``.

    Raises:
        RuntimeError: not called inside a ``flowloom worker`` process, or the worker has
            no knowledge service.
    """
    from .runtime import current_runtime

    status = current_runtime().ingest_job(tenant_id, document_id)
    level = logging.WARNING if status == "failed" else logging.INFO
    logging.getLogger("flowloom.worker").log(
        level, "document %s of dataset %s (tenant %s): %s", document_id, dataset_id, tenant_id, status
    )
    return status
