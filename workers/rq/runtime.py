"""The asyncio side of a worker process.

RQ calls job functions synchronously in the worker's main thread. Runs are asyncio, and
opening the run service (database pool, model registry, Redis clients) per job would cost
more than most runs, so a :class:`WorkerRuntime` keeps one event loop in a thread of its
own for the life of the process, with the run service opened once; a job hands its ids to
it and waits (:meth:`WorkerRuntime.run_job`).

What the runtime adds around the run service's front door (a job launches the run's
continuation here, ``RunService.launch`` of a ``ContinueRun``, and follows it - the one
way a queued run is executed or continued):

- **Live events** go to the run's Redis stream (:class:`~workers.redis_bus.EventPublisher`);
  a continued run first removes what a crashed execution published past its last
  checkpoint, since those sequence numbers are published again.
- **Executing set**: while a run executes here it is in the sorted set
  ``<ns>:executing`` (score: the lease deadline in Unix seconds, renewed every third of
  ``Settings.lease_ttl``) with its tenant, queue, host, pid and job timeout in
  ``<ns>:executing:info``.
- **Recovery**: each worker runs the recovery loop of :mod:`engine.recovery` (on start,
  then every ``Settings.lease_ttl``/2 seconds): a run of any tenant whose owner is gone -
  a dead worker, a dead API server's inline run - is queued again at the front of its
  queue and the dead execution cleaned out of RQ (:mod:`workers.rq.recovery`; of several
  workers finding it, the one whose claim in the run store succeeds does it). The worker
  that takes the new job takes the run over and continues it from its last checkpoint:
  finished nodes never run again.
- **Sweeper**: every ``sweep_s`` seconds each worker also looks at the executing set, which
  notices a dead worker sooner than a look at the database: an entry whose deadline passed,
  or whose worker was a process of this host that no longer exists, wakes the recovery
  loop at once. A run the database shows ended - a stopped run among them - is only
  dropped from the set: it never runs again.
- **Answers**: a paused run's job continues it with the answers stored in the run's
  state before it was queued (``RunService.launch`` of a resume): one job verb for a new,
  an answered or a crashed run.
- **Knowledge bases**: ingestion jobs (:mod:`workers.rq.knowledge`) run the run
  service's knowledge service (:meth:`ingest_job`), and the sweeper also gives documents
  whose ingestion stopped to the queue again (at start, then every round).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from engine.ports import RunNotFound, RunOwned
from engine.recovery import OrphanRecovery
from engine.service import RunNotResumable, RunService
from engine.settings import Settings
from schemas.events import NodeError
from schemas.launch import ContinueRun, Placement
from schemas.records import OwnerInfo, RunSummary
from schemas.types import RunStatus

from ..redis_bus import (
    DEFAULT_NAMESPACE,
    EventPublisher,
    RedisCommandChannel,
    RedisEventBus,
    redis_client,
    shielded,
)
from .recovery import handoff_id, job_wall_time, requeue_orphan, still_queued

__all__ = ["WorkerRuntime", "current_runtime", "install_runtime"]

logger = logging.getLogger("flowloom.worker")

#: the run's status once an event of this type was published
_STATUS_AFTER = {
    "run_finished": "succeeded",
    "run_failed": "failed",
    "run_cancelled": "cancelled",
    "run_paused": "paused",
}
_RUNTIME: WorkerRuntime | None = None
#: seconds a starting worker waits for its first recovery look to queue the orphans it found
SETTLE_S = 20.0

ServiceFactory = Callable[[Settings], contextlib.AbstractAsyncContextManager[RunService]]


def install_runtime(runtime: WorkerRuntime | None) -> None:
    """Make ``runtime`` the one :func:`current_runtime` returns (the worker does this at start)."""
    global _RUNTIME
    _RUNTIME = runtime


def current_runtime() -> WorkerRuntime:
    """The worker runtime of this process. Raises RuntimeError outside ``flowloom worker``."""
    if _RUNTIME is None:
        raise RuntimeError("flowloom jobs run only in a `flowloom worker` process")
    return _RUNTIME


def _pid_gone(host: str | None, pid: int | None) -> bool:
    """True when ``pid`` names a process of this host that no longer exists."""
    if host != socket.gethostname() or not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class WorkerRuntime:
    """One event loop thread with the run service (module docstring).

    ``open_service``: builds the run service from settings (the API's wiring, so workers
    and API replicas use the same stores); ``settings.redis_url`` must be set;
    ``sweep_s``: seconds between two looks for runs whose worker died.

    Raises (from :meth:`start`): whatever opening the service raises (unreachable
    database...), RuntimeError when it does not open within 60 s.
    """

    def __init__(
        self,
        settings: Settings,
        open_service: ServiceFactory,
        *,
        sweep_s: float = 1.0,
        namespace: str = DEFAULT_NAMESPACE,
        name: str = "",
    ) -> None:
        if not settings.redis_url:
            raise ValueError("a worker needs FLOWLOOM_REDIS_URL")
        self.settings, self.sweep_s, self.namespace = settings, sweep_s, namespace
        self.name = name or f"{socket.gethostname()}.{os.getpid()}"
        self.bus = RedisEventBus(settings.redis_url, namespace=namespace)
        self._open_service = open_service
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.service: RunService | None = None
        self._stop: asyncio.Event | None = None
        self._executing: dict[str, dict[str, Any]] = {}
        self._sync_redis: Any = None
        self.recovery: OrphanRecovery | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Open the run service in the runtime thread; returns when it is ready."""
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main()), name="flowloom-runtime", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the worker runtime did not start within 60 s")
        if self._error is not None:
            raise self._error

    async def _main(self) -> None:
        try:
            async with self._open_service(self.settings) as service:
                self.service, self.loop, self._stop = service, asyncio.get_running_loop(), asyncio.Event()
                helpers = [
                    asyncio.create_task(self._sweep_forever()),
                    asyncio.create_task(self._renew_forever()),
                ]
                with contextlib.suppress(Exception):  # the database or Redis away: the next round
                    await self.sweep_documents()
                if self.settings.recovery_concurrency > 0:
                    # before taking jobs: the runs it queues again go ahead of those waiting
                    self.recovery = OrphanRecovery(
                        service,
                        self._recover_one,
                        still_queued=lambda found: still_queued(self._sync(), found),
                    )
                    await self.recovery.start(settle_s=SETTLE_S)
                self._ready.set()
                await self._stop.wait()
                if self.recovery is not None:
                    await self.recovery.close()
                for task in helpers:
                    task.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    @property
    def executing(self) -> list[str]:
        """Ids of the runs executing in this process now."""
        return list(self._executing)

    def stop(self) -> None:
        """Close the service and end the thread (runs executing here are abandoned to the sweepers)."""
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(15)

    # ------------------------------------------------------------------ jobs

    def run_job(
        self, tenant_id: str, run_id: str, *, queue: str, job_timeout: float, job_id: str = ""
    ) -> str:
        """Execute the run on the runtime's loop and wait for it (called by the job, in
        RQ's thread). When RQ's timeout fires (its exception arrives here), the run is
        stopped (ends ``cancelled``) before the exception goes on to RQ. A cold shutdown
        (SystemExit) leaves the run to the sweepers, which continue it elsewhere. ``job_id``:
        the RQ job's id (the run may be taken over from a recovery that queued it for this job)."""
        assert self.loop is not None, "start() first"
        done = threading.Event()
        future = asyncio.run_coroutine_threadsafe(
            self._run_job_on_loop(tenant_id, run_id, queue, job_timeout, done, job_id), self.loop
        )
        try:
            return future.result()
        except SystemExit:
            raise
        except BaseException:
            if not future.done():
                self.loop.call_soon_threadsafe(future.cancel)
                done.wait(10)
            raise

    def run_error(self, tenant_id: str, run_id: str) -> NodeError | None:
        """The stored error of run ``run_id``, None
        when it has none or is gone (called by the job, in RQ's thread, after the run ended)."""
        assert self.loop is not None and self.service is not None, "start() first"
        future = asyncio.run_coroutine_threadsafe(self.service.get(tenant_id, run_id), self.loop)
        try:
            return future.result(60).error
        except RunNotFound:
            return None

    async def _run_job_on_loop(
        self,
        tenant_id: str,
        run_id: str,
        queue: str,
        job_timeout: float,
        done: threading.Event,
        job_id: str = "",
    ) -> str:
        """Execute the run; how it ended. No read precedes the run service's own (claim,
        then load), and the run enters the executing set with its first events, in the
        same Redis pipeline: a job costs what the run costs plus two Redis round trips
        (its first events, its last ones with the exit from the set) for a short run."""
        service = self.service
        assert service is not None
        self._executing[run_id] = {
            "tenant": tenant_id,
            "queue": queue,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "worker": self.name,
            "timeout": job_timeout,
            "job": job_id,
        }
        try:
            try:
                status, stream_key, publisher, held = await self._drive(service, tenant_id, run_id, job_id)
            except RunOwned as exc:
                # Another process holds the run's lease: keep it in the executing set until
                # that lease ends, so a sweeper looks again if that owner turns out dead.
                await self._untrack(run_id, keep_until=exc.owner)
                logger.info("run %s: owned by another process (%s); not executed here", run_id, exc)
                return "owned by another process"
            except (RunNotResumable, RunNotFound) as exc:
                await self._untrack(run_id)
                try:  # ended (a stopped run among them) or paused with no answer: nothing to do
                    return f"already {(await service.get(tenant_id, run_id)).status.value}"
                except RunNotFound:
                    return f"unknown run ({exc})"
            except BaseException:
                await asyncio.shield(self._untrack(run_id))
                raise
            await self._finish(run_id, publisher, held, stream_key)
            return status
        finally:
            done.set()

    async def _finish(
        self, run_id: str, publisher: EventPublisher | None, held: list[Any], stream_key: str | None
    ) -> None:
        """After the run service is done with the run: the events held back (its end) and
        leaving the executing set (with the stream's expiry when the run ended: the stream
        lives on for the bus's ttl) in one Redis round trip."""
        if publisher is None:
            await self._untrack(run_id, expire_stream=stream_key)
            return
        self._executing.pop(run_id, None)
        set_key, ttl = self._set_key, int(self.bus.ttl_s)

        def leave(pipe: Any) -> None:
            pipe.zrem(set_key, run_id)
            pipe.hdel(f"{set_key}:info", run_id)
            if stream_key is not None:
                pipe.expire(stream_key, ttl)

        for event in held:
            publisher.add(event)
        await publisher.close(ended=False, also=leave)

    async def _drive(
        self,
        service: RunService,
        tenant_id: str,
        run_id: str,
        job_id: str = "",
    ) -> tuple[str, str | None, EventPublisher | None, list[Any]]:
        """Run it: ``(status, the stream's key when the run ended else None, the open
        publisher, the events held back)`` (:meth:`_publish`). The job is a door like any
        other: it launches the continuation of the run here - a new, answered or crashed
        run, from its stored state, taken over from a recovery that queued it for job
        ``job_id`` - and follows it onto the run's stream. A job stopped while it follows
        (RQ's timeout) stops the run: it ends ``cancelled``."""
        take_over = handoff_id(job_id) if job_id else None
        ticket = await service.launch(
            tenant_id, ContinueRun(run_id, take_over=take_over), Placement("inline")
        )
        try:
            status, publisher, held = await self._publish(
                service.follow(tenant_id, run_id, ticket.after_seq), tenant_id, run_id
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._stop_run(service, tenant_id, run_id))
            raise
        commands = service.stores.commands
        if isinstance(commands, RedisCommandChannel):
            commands.forget(run_id)
        ended = status in ("succeeded", "failed", "cancelled")
        return status, (self.bus.key(tenant_id, run_id) if ended else None), publisher, held

    @staticmethod
    async def _stop_run(service: RunService, tenant_id: str, run_id: str) -> None:
        """Stop the run this job executes and wait until it ended (a stop the run had ended
        before is nothing to do)."""
        with contextlib.suppress(Exception):
            await service.cancel(tenant_id, run_id, "its job was stopped (job timeout)")
            async for _event in service.follow(tenant_id, run_id):
                pass

    async def _publish(
        self, events: Any, tenant_id: str, run_id: str
    ) -> tuple[str, EventPublisher | None, list[Any]]:
        """Drive the run service's ``events`` to the run's stream: ``(the status they end
        with, the publisher - still open - or None when there was no event, the events
        held back)``. The event that ends or pauses the run (and anything after it) is held
        back until the run service is done with the run - its last checkpoint committed,
        its lease given up - because a reader that sees it on the stream reads the run next
        (a blocking request's answer, a follower's ended-or-paused check) and must find it
        ended or paused. Raises what the run service raises before the first event
        (nothing was executed); on any error the publisher is closed, held events sent."""
        publisher: EventPublisher | None = None
        held: list[Any] = []
        status = "running"
        try:
            async with contextlib.aclosing(events) as stream:
                async for event in stream:
                    if publisher is None:
                        publisher = self.bus.publisher(tenant_id, run_id, first=self._entering(run_id))
                        if event.seq > 1:
                            # The run had events before (continued after a crash, or resumed):
                            # what a crashed execution published past the checkpoint goes.
                            with contextlib.suppress(Exception):
                                await self.bus.rewind(tenant_id, run_id, event.seq - 1)
                    if held or event.type in _STATUS_AFTER:
                        held.append(event)
                    else:
                        publisher.add(event)
                    status = _STATUS_AFTER.get(event.type, status)
        except BaseException:
            if publisher is not None:
                for event in held:
                    publisher.add(event)
                await publisher.close(ended=False)
            raise
        return status, publisher, held

    # ------------------------------------------------------------------ executing set

    @property
    def _set_key(self) -> str:
        return f"{self.namespace}:executing"

    def _entering(self, run_id: str) -> Callable[[Any], None]:
        """What puts run ``run_id`` in the executing set (its entry in ``_executing``),
        added to the pipeline that carries its first events: no round trip of its own."""
        set_key = self._set_key

        def enter(pipe: Any) -> None:
            info = self._executing.get(run_id)
            if info is not None:  # still executing here when the pipeline is built
                pipe.zadd(set_key, {run_id: time.time() + self.settings.lease_ttl})
                pipe.hset(f"{set_key}:info", run_id, json.dumps(info))

        return enter

    async def _write_tracking(self, run_id: str, info: dict[str, Any], deadline: float) -> None:
        client = redis_client(self.bus.url)
        with contextlib.suppress(Exception):  # Redis down: the next renewal writes it again
            pipe = client.pipeline(transaction=True)
            pipe.zadd(self._set_key, {run_id: deadline})
            pipe.hset(f"{self._set_key}:info", run_id, json.dumps(info))
            await shielded(pipe.execute())

    async def _untrack(
        self, run_id: str, keep_until: OwnerInfo | None = None, expire_stream: str | None = None
    ) -> None:
        info = self._executing.pop(run_id, None)
        client = redis_client(self.bus.url)
        with contextlib.suppress(Exception):
            if keep_until is not None and info is not None:
                info = {**info, "host": keep_until.host, "pid": keep_until.pid, "worker": "?"}
                await self._write_tracking(run_id, info, keep_until.lease_until + 0.5)
                return
            pipe = client.pipeline(transaction=False)
            pipe.zrem(self._set_key, run_id)
            pipe.hdel(f"{self._set_key}:info", run_id)
            if expire_stream is not None:  # the run ended: its stream lives on for the bus's ttl
                pipe.expire(expire_stream, int(self.bus.ttl_s))
            await shielded(pipe.execute())

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_ttl / 3)
            for run_id, info in list(self._executing.items()):
                await self._write_tracking(run_id, info, time.time() + self.settings.lease_ttl)

    # ------------------------------------------------------------------ sweeper

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_s)
            try:
                await self.sweep()
                await self.sweep_documents()
            except Exception as exc:
                logger.debug("sweep skipped: %s", exc)

    # ------------------------------------------------------------------ knowledge bases

    @property
    def knowledge(self) -> Any:
        """The run service's knowledge service (None when this deployment has none)."""
        knowledge = getattr(self.service, "knowledge", None)
        return knowledge if hasattr(knowledge, "ingest") else None

    def ingest_job(self, tenant_id: str, document_id: str) -> str:
        """Ingest the document on the runtime's loop and wait (called by the job, in RQ's
        thread); its status after, or ``deleted``. Raises RuntimeError without a
        knowledge service."""
        assert self.loop is not None, "start() first"
        if self.knowledge is None:
            raise RuntimeError(
                "this worker has no knowledge service: ingestion jobs need the knowledge store"
            )
        future = asyncio.run_coroutine_threadsafe(self._ingest(tenant_id, document_id), self.loop)
        try:
            return future.result()
        except BaseException:
            # RQ's timeout or a cold shutdown: the ingestion stops and gives its lease up,
            # so another worker continues the document from its stored vectors at once
            if not future.done():
                self.loop.call_soon_threadsafe(future.cancel)
            raise

    async def _ingest(self, tenant_id: str, document_id: str) -> str:
        from engine.knowledge.ports import DocumentNotFound

        try:
            return (await self.knowledge.ingest(tenant_id, document_id)).status.value
        except DocumentNotFound:
            return "deleted"

    async def sweep_documents(self) -> list[str]:
        """Give documents whose ingestion stopped to the queue again
        (:func:`workers.rq.knowledge.sweep_unfinished`); their ids."""
        from .knowledge import sweep_unfinished

        knowledge = self.knowledge
        if knowledge is None:
            return []
        lease_s = float(getattr(getattr(knowledge, "ingestor", None), "lease_s", self.settings.lease_ttl))
        return await sweep_unfinished(
            knowledge, redis_client(self.bus.url), lease_s=lease_s, namespace=self.namespace
        )

    async def sweep(self) -> list[str]:
        """One look at the executing set (module docstring): entries of runs that ended are
        dropped; an entry whose worker is gone wakes the recovery loop. Returns the ids of
        the runs whose worker is gone."""
        client = redis_client(self.bus.url)
        now = time.time()
        gone: list[str] = []
        for run_id, deadline in await shielded(client.zrange(self._set_key, 0, -1, withscores=True)):
            if run_id in self._executing:
                continue
            info = json.loads(await shielded(client.hget(f"{self._set_key}:info", run_id)) or "{}")
            if deadline >= now and not _pid_gone(info.get("host"), info.get("pid")):
                continue
            try:
                summary = await self.service.get(info.get("tenant") or "", run_id) if self.service else None
            except RunNotFound:
                summary = None
            if summary is None or summary.status not in (RunStatus.pending, RunStatus.running):
                await self._forget(client, run_id)  # ended (a stopped run among them): never again
                continue
            gone.append(run_id)
        if gone and self.recovery is not None:
            self.recovery.request("", gone[0])
        return gone

    async def _forget(self, client: Any, run_id: str) -> None:
        pipe = client.pipeline(transaction=True)
        pipe.zrem(self._set_key, run_id)
        pipe.hdel(f"{self._set_key}:info", run_id)
        await shielded(pipe.execute())

    async def _recover_one(self, summary: RunSummary) -> None:
        """The recovery loop's ``recover_one``: queue the run again at the front of the queue
        it was executing from (the executing set says which, with its job's timeout)."""
        assert self.service is not None
        client = redis_client(self.bus.url)
        info = json.loads(await shielded(client.hget(f"{self._set_key}:info", summary.run_id)) or "{}")
        await requeue_orphan(
            self.service,
            self._sync(),
            summary,
            queue=info.get("queue"),
            max_wall_time=job_wall_time(info.get("timeout")),
        )
        if (
            summary.run_id not in self._executing
        ):  # queued again, or a job has it: whoever executes it tracks it
            await self._forget(client, summary.run_id)

    def _sync(self) -> Any:
        if self._sync_redis is None:
            from redis import Redis

            self._sync_redis = Redis.from_url(self.bus.url, socket_connect_timeout=2)
        return self._sync_redis
