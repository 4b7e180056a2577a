"""The queue launcher: the engine's :class:`~engine.ports.Launcher` port on RQ.

A launch enqueues the job of :func:`workers.rq.queues.enqueue_run` - only the run's ids,
on the queue of its priority, with a timeout that follows the run's ``max_wall_time`` -
and returns; a worker executes the run (:mod:`workers.rq.runtime`). A Redis that cannot
be reached is :class:`~engine.ports.QueueUnavailable` (its message names no address or
password): nothing was queued.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.ports import Launch, QueueUnavailable

from .queues import enqueue_run, queue_name

__all__ = ["QueueLauncher"]


class QueueLauncher:
    """Launches on the RQ queues of ``redis_url`` (one sync connection pool, :meth:`close` it)."""

    def __init__(self, redis_url: str) -> None:
        from redis import Redis

        self.redis: Any = Redis.from_url(redis_url, socket_connect_timeout=2, health_check_interval=5)

    async def launch(self, launch: Launch) -> None:
        """Enqueue the run's job (a new run's first job, or a continuation's).

        Raises:
            ValueError: an unknown priority (the door checks it first).
            QueueUnavailable: Redis cannot be reached.
        """
        import redis.exceptions

        queue = queue_name(launch.priority)
        wall = launch.max_wall_time if launch.max_wall_time is not None else 3600.0
        try:
            await asyncio.to_thread(
                enqueue_run,
                self.redis,
                launch.tenant_id,
                launch.run_id,
                queue=queue,
                max_wall_time=wall,
                first=launch.first,
            )
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            raise QueueUnavailable(
                f"the run queue (Redis) is unreachable ({type(exc).__name__}); retry later"
            ) from None

    def close(self) -> None:
        """Release the connection pool."""
        self.redis.close()
