"""Where a run executes: in this API process (inline) or on a worker (queued).

A deployment without ``FLOWLOOM_REDIS_URL`` runs everything inline (the embedded
default: no Redis, no worker). With it, the app's :class:`Dispatcher` queues on RQ:

- runs started with ``response_mode: async``;
- runs whose workflow has a node of a kind that drives a model through tool calls - a
  catalog kind that is both a ``container`` (it runs a body per tool call) and
  ``streams`` a model's answer (the agent and tool-call kinds of the built-in catalog) -
  since those run for minutes and must not live in an API process;
- answers to paused runs (``POST /v1/runs/{id}/resume``, which answers 202 anyway).

The caller may choose per run with the header ``X-Flowloom-Execution: inline|queued``,
and the queue with ``X-Flowloom-Priority: high|default|low`` (default ``default``). A
blocking or streaming request for a queued run waits on the event bus: its events come
from the run's Redis stream, text deltas included, exactly as from an inline run.

The run is prepared (stored, inputs checked) by the run service before it is queued, so
a bad request is still a 422 here and the job carries only ``(tenant_id, run_id)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from typing import Any, AsyncIterator, Mapping

from engine.catalog import NodeCatalog
from engine.compiler import CompiledPlan
from engine.errors import UnknownInterrupt
from engine.leases import orphaned
from engine.service import RunService
from engine.settings import Settings
from schemas.events import event_adapter
from schemas.types import RunStatus
from workers.redis_bus import RedisCommandChannel, RedisEventBus
from workers.rq.queues import enqueue_run, queue_name

from .errors import ApiError

__all__ = ["Dispatcher", "EXECUTION_HEADER", "PRIORITY_HEADER", "QueuedEvents", "dispatcher", "drives_agents"]

EXECUTION_HEADER = "X-Flowloom-Execution"
PRIORITY_HEADER = "X-Flowloom-Priority"
_ENDED_OR_PAUSED = {RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled, RunStatus.paused}


def drives_agents(plan: CompiledPlan, catalog: NodeCatalog) -> bool:
    """True when a node of ``plan`` is of a kind that is a ``container`` and ``streams``
    (a model's answer, with tool calls as its body): runs that may take minutes."""
    for node in plan.workflow.nodes:
        spec = catalog.get(node.type)
        if spec is not None and spec.container and spec.streams is not None:
            return True
    return False


class QueuedEvents:
    """The events of a queued run as event models, followed on the bus: an async iterator
    the app's executor drives like the run service's own (it ends when the run ends or
    pauses). Closing it only stops following; the run goes on on its worker."""

    def __init__(self, source: AsyncIterator[dict[str, Any]]) -> None:
        self._source = source
        self._adapter = event_adapter()

    def __aiter__(self) -> "QueuedEvents":
        return self

    async def __anext__(self) -> Any:
        return self._adapter.validate_python(await self._source.__anext__())

    async def aclose(self) -> None:
        """Stop following."""
        await self._source.aclose()  # type: ignore[attr-defined]


class Dispatcher:
    """The queued execution mode of one app (module docstring). ``settings.redis_url``
    must be set; ``service`` is the app's run service (its command channel is Redis)."""

    def __init__(self, settings: Settings, service: RunService) -> None:
        assert settings.redis_url, "queued execution needs FLOWLOOM_REDIS_URL"
        from redis import Redis

        self.settings, self.service = settings, service
        self.bus = RedisEventBus(settings.redis_url)
        self._redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, health_check_interval=5)

    @property
    def redis(self) -> Any:
        """The sync Redis client that enqueues jobs (also the recovery's, :mod:`api.recovery`)."""
        return self._redis

    def close(self) -> None:
        """Release the enqueueing connection."""
        self._redis.close()

    # ------------------------------------------------------------------ choice

    def should_queue(self, doc: Mapping[str, Any], response_mode: str, headers: Mapping[str, str]) -> bool:
        """Queued or inline for a new run of ``doc`` (module docstring).

        Raises:
            ApiError 422: an ``X-Flowloom-Execution`` value other than inline/queued.
        """
        requested = (headers.get(EXECUTION_HEADER) or "").strip().lower()
        if requested not in ("", "inline", "queued"):
            raise ApiError(422, "invalid_request", f"{EXECUTION_HEADER} must be inline or queued, not {requested!r}")
        if requested:
            return requested == "queued"
        return response_mode == "async" or drives_agents(self.service.compile(doc), self.service.catalog)

    def _queue(self, headers: Mapping[str, str]) -> str:
        priority = (headers.get(PRIORITY_HEADER) or "default").strip().lower()
        try:
            return queue_name(priority)
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"{PRIORITY_HEADER}: {exc}") from None

    # ------------------------------------------------------------------ start, resume

    async def enqueue(self, tenant_id: str, run_id: str, doc: Mapping[str, Any],
                      headers: Mapping[str, str]) -> QueuedEvents:
        """Queue the prepared run of ``doc``; its events, followed on the bus from the first.

        Raises:
            ApiError 422 (bad priority); ApiError 503 when Redis cannot be reached (the stored
            run is then ended ``cancelled``: nothing would execute it).
        """
        queue = self._queue(headers)
        wall = self.service.compile(doc).workflow.limits.max_wall_time  # the plan cache has it
        try:
            await asyncio.to_thread(enqueue_run, self._redis, tenant_id, run_id, queue=queue, max_wall_time=wall)
        except _redis_errors() as exc:
            # Nothing will execute it: end the stored run rather than leave it pending forever.
            with contextlib.suppress(Exception):
                await self.service.cancel(tenant_id, run_id, "the run queue (Redis) was unreachable")
            raise _unavailable(exc) from None
        return self.events(tenant_id, run_id)

    async def resume(self, tenant_id: str, run_id: str, answers: dict[str, Any], message: str | None,
                     headers: Mapping[str, str]) -> None:
        """Leave the answers for the worker (the job carries only ids) and queue the paused run.

        Raises:
            UnknownInterrupt: an answer to an interrupt the run is not waiting for (409).
            ApiError 503: Redis cannot be reached (the run stays paused).
        """
        summary = await self.service.get(tenant_id, run_id)
        pending = {i["id"] for i in summary.pending_interrupts}
        unknown = sorted(set(answers) - pending)
        if unknown:
            raise UnknownInterrupt(f"run {run_id}: no pending interrupt {unknown[0]!r} "
                                   f"(pending: {', '.join(sorted(pending)) or 'none'})")
        commands = self.service.stores.commands
        if not isinstance(commands, RedisCommandChannel):
            raise ApiError(500, "internal", "queued execution needs the Redis command channel")
        doc = await self.service.workflow_of(tenant_id, run_id)
        wall = self.service.compile(doc).workflow.limits.max_wall_time
        try:
            await commands.send_answers(tenant_id, run_id, answers, message)
            await asyncio.to_thread(enqueue_run, self._redis, tenant_id, run_id, queue=self._queue(headers),
                                    max_wall_time=wall, first=False)
        except _redis_errors() as exc:
            raise _unavailable(exc) from None  # the run stays paused: the same answer may be sent again

    # ------------------------------------------------------------------ follow

    def events(self, tenant_id: str, run_id: str, after_seq: int = 0) -> QueuedEvents:
        """The run's events after ``after_seq`` as event models (see :class:`QueuedEvents`)."""
        return QueuedEvents(self.watch(tenant_id, run_id, after_seq))

    def watch(self, tenant_id: str, run_id: str, after_seq: int = 0) -> AsyncIterator[dict[str, Any]]:
        """The run's events after ``after_seq`` as JSON objects, from the run's stream (any
        replica, deltas included), with the SQL log behind it; until it ends or pauses. A
        run nobody executes (its owner died) is reported to the recovery loop
        (``RunService.on_orphan``), and its recovered execution's events follow."""
        service = self.service

        async def durable(after: int) -> list[dict[str, Any]]:
            return await service.stores.events.read(tenant_id, run_id, after)

        async def ended() -> bool:
            summary = await service.get(tenant_id, run_id)
            now = time.time()
            if service.on_orphan is not None and orphaned(summary, now=now, pending_grace_s=self.settings.lease_ttl):
                service.on_orphan(tenant_id, run_id)  # nobody executes it: recover it now, and keep following
            return summary.status in _ENDED_OR_PAUSED

        return self.bus.follow(tenant_id, run_id, after_seq, durable=durable, ended=ended)


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _unavailable(exc: BaseException) -> ApiError:
    """503: the queue cannot be reached (no address or password in the message)."""
    return ApiError(503, "queue_unavailable", f"the run queue (Redis) is unreachable ({type(exc).__name__}); "
                                              f"retry later", headers={"Retry-After": "5"})


def dispatcher(request: Any) -> Dispatcher | None:
    """The app's dispatcher, or None in a deployment without Redis (everything inline)."""
    return getattr(request.app.state, "dispatch", None)


def open_dispatcher(settings: Settings, service: RunService) -> Dispatcher | None:
    """The dispatcher of an app whose settings name Redis, else None (everything inline).
    It holds only a Redis connection pool, released when it is dropped."""
    return Dispatcher(settings, service) if settings.redis_url else None



async def queued_or_inline(request: Any, service: RunService, tenant_id: str, run_id: str,
                           events: AsyncIterator[Any], doc: Mapping[str, Any], response_mode: str) -> AsyncIterator[Any]:
    """The events a route drives for the run it just opened: ``events`` (the run service
    executing it here) or, when this deployment queues it (:meth:`Dispatcher.should_queue`),
    the run enqueued and followed on the bus. Only a new (``pending``) run is queued: a
    chat message answering a paused run continues it here. ``events`` has not started
    (nothing was claimed), so dropping it for the queued path does nothing.

    Raises:
        ApiError 422 (a bad execution or priority header), 503 when Redis is away.
    """
    dispatch = dispatcher(request)
    if dispatch is None or not dispatch.should_queue(doc, response_mode, request.headers):
        return events
    if (await service.get(tenant_id, run_id)).status is not RunStatus.pending:
        return events
    await events.aclose()  # type: ignore[attr-defined]
    return await dispatch.enqueue(tenant_id, run_id, doc, request.headers)


def is_queued(events: Any) -> bool:
    """True for the events of a queued run (:class:`QueuedEvents`): an ``async`` request
    need not follow them."""
    return isinstance(events, QueuedEvents)


async def watch_source(request: Any, service: RunService, tenant_id: str, run_id: str,
                       after_seq: int) -> AsyncIterator[dict[str, Any]]:
    """Where ``GET /v1/runs/{id}/events`` reads: the run service's watch when the run
    executes in this process (or there is no Redis), else the bus (a worker's run, or
    another replica's), so any replica serves any run's events."""
    dispatch = dispatcher(request)
    if dispatch is not None:
        owner = (await service.get(tenant_id, run_id)).owner
        here = owner is not None and owner.pid == os.getpid() and owner.host == socket.gethostname()
        if not here:
            return dispatch.watch(tenant_id, run_id, after_seq)
    return service.watch(tenant_id, run_id, after_seq)
