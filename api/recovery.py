"""The API server's recovery loop: runs whose owner died continue without an operator.

:func:`start_recovery` gives the app an :class:`engine.recovery.OrphanRecovery` (unless
``FLOWLOOM_RECOVERY_CONCURRENCY`` is 0). Where a recovered run goes depends on the
deployment, as for a new run:

- **embedded** (no ``FLOWLOOM_REDIS_URL``): the server executes it itself, through the
  app's :class:`~api.executor.RunExecutor` - the execution is the app's, as a request's
  run is, so a watcher of the run (``GET /v1/runs/{id}/events``) follows it live, and a
  shutdown stops it like any other. A recovery holds its concurrency slot until the run
  ends or pauses;
- **queued** (Redis): the run goes back to the front of its queue for a worker, the dead
  execution cleaned out of RQ (:func:`workers.rq.recovery.requeue_orphan`).
"""

from __future__ import annotations

from typing import Any

from engine.recovery import OrphanRecovery
from engine.service import RunService
from schemas.records import RunSummary

from .executor import RunExecutor

__all__ = ["start_recovery"]


async def start_recovery(service: RunService, executor: RunExecutor, dispatch: Any) -> OrphanRecovery | None:
    """Start the app's recovery loop (module docstring) in the running event loop; None
    when ``recovery_concurrency`` is 0. Stop it with ``await recovery.close()``."""
    if service.settings.recovery_concurrency <= 0:
        return None

    async def execute_here(summary: RunSummary) -> None:
        execution = await executor.launch(summary.run_id, service.recover(summary.tenant_id, summary.run_id))
        await execution.wait()

    async def queue_again(summary: RunSummary) -> None:
        from workers.rq.recovery import requeue_orphan

        await requeue_orphan(service, dispatch.redis, summary)

    recovery = OrphanRecovery(service, execute_here if dispatch is None else queue_again)
    await recovery.start()
    return recovery
