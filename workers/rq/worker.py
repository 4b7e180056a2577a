"""The RQ worker of ``flowloom worker``: :class:`FlowloomWorker`.

It is RQ's :class:`~rq.worker.SimpleWorker` (the job runs in the worker process, no
fork per job), because a run needs the process's long-lived parts - the database pool,
the model clients, the Redis subscriptions, the event loop of :mod:`workers.rq.runtime`
- and forking a process that holds an event loop thread and open sockets is unsafe (the
child would share the parent's connections) and would cost a fork plus a fresh service
per job, several times a short run's own time. Isolation comes from running several
worker processes instead (one machine or many); a crash of one only loses its current
run's progress since the last checkpoint, which another worker continues.

Stopping a run never kills the worker or a work horse: the run service cancels it
cooperatively (the node in progress is cancelled, a code node's process killed, a model
stream closed), the job returns, and the worker takes the next job.

Redis outages: RQ already retries its dequeue with backoff; this class also survives
an outage during its other calls (heartbeat, suspension check, maintenance, a job's
bookkeeping), waiting with backoff until Redis answers, and registers itself again when
Redis came back without its registration, so ``rq info`` keeps listing it.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, TypeVar

from rq.worker import SimpleWorker

__all__ = ["FlowloomWorker", "LOG_DATE_FORMAT", "LOG_FORMAT"]

#: every line a worker logs starts with this prefix (then the pid) - RQ's own lines and ours
LOG_FORMAT = "flowloom-worker %(process)d %(asctime)s %(levelname)s %(message)s"
#: the one timestamp format of those lines (local time, to the second, as RQ's default but with the date)
LOG_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

F = TypeVar("F", bound=Callable[..., Any])


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _surviving_redis(method: F) -> F:
    """Wrap a worker method so a Redis outage waits (with backoff) instead of ending the worker."""

    @functools.wraps(method)
    def wrapper(self: "FlowloomWorker", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except _redis_errors() as exc:
            self.wait_for_redis(f"{method.__name__}: {exc}")
            return None

    return wrapper  # type: ignore[return-value]


class FlowloomWorker(SimpleWorker):
    """RQ's SimpleWorker that survives Redis outages (module docstring).

    ``max_backoff_s``: the longest wait between two connection attempts.
    """

    max_backoff_s = 5.0

    def wait_until_reachable(self) -> None:
        """Return once Redis answers a PING, waiting with backoff (a worker may start before Redis)."""
        try:
            self.connection.ping()
        except _redis_errors() as exc:
            self.wait_for_redis(f"start: {exc}", register=False)

    def wait_for_redis(self, why: str, *, register: bool = True) -> None:
        """Block until Redis answers a PING (0.1 s doubling to ``max_backoff_s``), then
        register this worker again when Redis lost its registration."""
        self.log.warning("Worker %s: redis unreachable (%s); waiting for it", self.name, why)
        delay = 0.1
        while True:
            time.sleep(delay)
            try:
                self.connection.ping()
                break
            except _redis_errors():
                delay = min(delay * 2, self.max_backoff_s)
        self.log.warning("Worker %s: redis reachable again", self.name)
        if register:
            self._register_again()

    def _register_again(self) -> None:
        try:
            if not self.connection.sismember(self.redis_workers_keys, self.key):
                self.connection.delete(self.key)
                self.register_birth()
                self.log.info("Worker %s: registered again", self.name)
        except _redis_errors():
            pass  # the next failing call waits again

    def execute_job(self, job: Any, queue: Any) -> None:
        """Run the job; an outage during RQ's bookkeeping of it (status, result) is waited
        out - the run's own outcome is in the database either way."""
        try:
            super().execute_job(job, queue)
        except _redis_errors() as exc:
            self.wait_for_redis(f"job {job.id}: {exc}")

    @_surviving_redis
    def heartbeat(self, *args: Any, **kwargs: Any) -> None:  # noqa: D102 - RQ's
        super().heartbeat(*args, **kwargs)

    @_surviving_redis
    def check_for_suspension(self, *args: Any, **kwargs: Any) -> None:  # noqa: D102 - RQ's
        super().check_for_suspension(*args, **kwargs)

    @_surviving_redis
    def run_maintenance_tasks(self) -> None:  # noqa: D102 - RQ's
        super().run_maintenance_tasks()
