"""The API server's recovery loop: runs whose owner died continue without an operator.

:func:`start_recovery` gives the app an :class:`engine.recovery.OrphanRecovery` (unless
``FLOWLOOM_RECOVERY_CONCURRENCY`` is 0). Where a recovered run goes depends on the
deployment, as for a new run:

- **embedded** (no ``FLOWLOOM_REDIS_URL``): the server executes it itself, through the
  run service's front door (``RunService.launch`` of a ``ContinueRun``, in a task of the
  deployment's :class:`~api.inline.InlineLauncher`) - so a follower of the run (``GET
  /v1/runs/{id}/events``) follows it live, and a shutdown stops it like any other. A
  recovery holds its concurrency slot until the run ends or pauses;
- **queued** (Redis): the run goes back to the front of its queue for a worker, the dead
  execution cleaned out of RQ (:func:`workers.rq.recovery.requeue_orphan`).
"""

from __future__ import annotations

from engine.recovery import OrphanRecovery
from schemas.launch import ContinueRun, Placement
from schemas.records import RunSummary

from .composition import Deployment

__all__ = ["start_recovery"]


async def start_recovery(deployment: Deployment) -> OrphanRecovery | None:
    """Start the app's recovery loop (module docstring) in the running event loop; None
    when ``recovery_concurrency`` is 0. Stop it with ``await recovery.close()``."""
    service, queue = deployment.service, deployment.queue
    if service.settings.recovery_concurrency <= 0:
        return None

    async def continue_here(summary: RunSummary) -> None:
        await service.launch(summary.tenant_id, ContinueRun(summary.run_id), Placement(execution="inline"))
        execution = deployment.launcher.get(summary.run_id)
        if execution is not None:
            await execution.wait()

    async def queue_again(summary: RunSummary) -> None:
        from workers.rq.recovery import requeue_orphan

        assert queue is not None
        await requeue_orphan(service, queue.redis, summary)

    async def queued(found: list[RunSummary]) -> set[str]:
        from workers.rq.recovery import still_queued

        assert queue is not None
        return await still_queued(queue.redis, found)

    recovery = OrphanRecovery(
        service,
        continue_here if queue is None else queue_again,
        still_queued=None if queue is None else queued,
    )
    await recovery.start()
    return recovery
