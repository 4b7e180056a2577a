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

Failed runs: a run that ended ``failed`` makes its job raise
:class:`~workers.rq.jobs.RunFailed`. RQ records such a job in its ``FailedJobRegistry``
with the run's reason as the job's failure text (not a Python traceback: the worker did
nothing wrong), logs no traceback for it, and never retries it - the run has ended, its
record in the run store says ``failed``; RQ's retries stay for jobs whose execution
itself failed (a crash, RQ's own timeout).

Names: operators restart a worker under the name it had. A worker killed with SIGKILL
(or by a crash of its machine) never registers its death, and RQ keeps its registration
until the key's TTL runs out - up to its job timeout, an hour by default - refusing the
name meanwhile. So before registering, a registration under the same name is looked at
(:func:`namesake_dead`): when its process is gone it is cleaned as RQ cleans a worker
that stops (:meth:`~rq.worker.BaseWorker.register_death`); when it is alive the start
fails with :class:`WorkerNameTaken`. The dead worker's run is not touched here: the
sweeper of :mod:`workers.rq.runtime` tracks runs by host and pid, not by worker name, and
enqueues it again.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from rq.worker import BaseWorker, SimpleWorker, Worker

__all__ = ["FlowloomWorker", "LOG_DATE_FORMAT", "LOG_FORMAT", "WorkerNameTaken", "namesake_dead"]

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
    def wrapper(self: FlowloomWorker, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except _redis_errors() as exc:
            self.wait_for_redis(f"{method.__name__}: {exc}")
            return None

    return wrapper  # type: ignore[return-value]  # the method's signature; None after an outage


class WorkerNameTaken(Exception):
    """A live worker holds the name this one was given (``host``, ``pid``: that worker's)."""

    def __init__(self, name: str, host: str | None, pid: int | None) -> None:
        super().__init__(
            f"a worker named {name} is already running ({host or 'unknown host'}, "
            f"pid {pid if pid else '?'}); pick another --name"
        )
        self.name, self.host, self.pid = name, host, pid


def _pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a process of this host other than this one.

    This process's own pid counts as gone: a restarted container often gives the new
    worker the pid its dead predecessor had, on the same hostname."""
    if not pid or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def namesake_dead(old: BaseWorker, ttl_s: float | None, *, stale_after_s: float) -> bool:
    """Whether the registered worker ``old`` (of the name a new worker wants) is gone.

    ``ttl_s``: the seconds its key has left (Redis ``TTL``; None when it has no expiry).
    A worker of this host is gone when its pid is. A worker of another host is judged by
    its heartbeat alone: each heartbeat pushes the key's expiry past the next one (past
    the job timeout while it runs a job), so a key that still exists is a live worker;
    only a key without expiry whose last heartbeat is older than ``stale_after_s`` is
    taken for dead (nothing would ever expire it)."""
    if old.hostname == socket.gethostname():
        return not _pid_alive(old.pid)
    if ttl_s is not None:
        return False
    if old.last_heartbeat is None:
        return True
    beat = old.last_heartbeat if old.last_heartbeat.tzinfo else old.last_heartbeat.replace(tzinfo=UTC)
    return (datetime.now(UTC) - beat).total_seconds() > stale_after_s


class FlowloomWorker(SimpleWorker):
    """RQ's SimpleWorker that survives Redis outages (module docstring).

    ``max_backoff_s``: the longest wait between two connection attempts.
    """

    max_backoff_s = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: job id -> the reason of the failed run it executed (between RQ's two failure calls)
        self._run_failures: dict[str, str] = {}

    def handle_exception(self, job: Any, *exc_info: Any) -> None:
        """RQ's handling of a job that raised, except for a failed run (module docstring):
        its reason is kept for :meth:`handle_job_failure`, no traceback is logged (the job
        logged the run's outcome); and except for a cold shut down, logged in one line."""
        from .jobs import RunFailed

        if isinstance(exc_info[1], RunFailed):
            self._run_failures[job.id] = str(exc_info[1])
            return
        if isinstance(exc_info[1], SystemExit):
            # RQ's cold shutdown (a second Ctrl+C) raises SystemExit inside the job: an
            # operator's stop, not a fault, so one line instead of a traceback; RQ still
            # records the failure and enqueues the job again for another worker.
            from rq.job_lifecycle import call_exception_handlers

            self.log.warning("Worker %s: job %s stopped by a cold shut down", self.name, job.id)
            call_exception_handlers(self._exc_handlers, job, *exc_info)
            return
        super().handle_exception(job, *exc_info)

    def handle_job_failure(
        self,
        job: Any,
        queue: Any,
        started_job_registry: Any = None,
        exc_string: str = "",
        execution: Any = None,
    ) -> None:
        """RQ's bookkeeping of a failed job; a failed run's job is never retried and
        carries the run's reason as its failure text."""
        reason = self._run_failures.pop(job.id, None)
        if reason is not None:
            job.retries_left = 0
            exc_string = reason
        super().handle_job_failure(
            job, queue, started_job_registry=started_job_registry, exc_string=exc_string, execution=execution
        )

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

    def register_birth(self) -> None:
        """RQ's registration, after cleaning a dead worker's registration under this name
        (module docstring). Raises :class:`WorkerNameTaken` when a live worker has it."""
        key = self.key
        if self.connection.exists(key) and not self.connection.hexists(key, "death"):
            old = Worker.find_by_key(key, connection=self.connection)
            if old is not None:
                ttl = self.connection.ttl(key)
                if not namesake_dead(old, ttl if ttl >= 0 else None, stale_after_s=self.worker_ttl + 60):
                    raise WorkerNameTaken(self.name, old.hostname, old.pid)
                self.log.warning(
                    "Worker %s: the worker of that name before (%s pid %s) is gone; cleaning its "
                    "registration",
                    self.name,
                    old.hostname,
                    old.pid,
                )
                old.register_death()
        try:
            super().register_birth()
        except ValueError as exc:  # another worker of this name registered meanwhile
            old = Worker.find_by_key(key, connection=self.connection)
            raise WorkerNameTaken(
                self.name, old.hostname if old is not None else None, old.pid if old is not None else None
            ) from exc

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
    def heartbeat(self, *args: Any, **kwargs: Any) -> None:
        super().heartbeat(*args, **kwargs)

    @_surviving_redis
    def check_for_suspension(self, *args: Any, **kwargs: Any) -> None:
        super().check_for_suspension(*args, **kwargs)

    @_surviving_redis
    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
