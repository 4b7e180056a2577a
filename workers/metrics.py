"""Prometheus metrics of a Flowloom process: the engine's telemetry port, counted.

:class:`PrometheusTelemetry` implements :class:`engine.telemetry.Telemetry` over its
own :class:`prometheus_client.CollectorRegistry` (one per process: the API server's
``GET /metrics``, a worker's ``--metrics-port``). What it exposes, all prefixed
``flowloom_``:

- ``runs_started_total{workflow}``, ``runs_finished_total{workflow,status}`` (status:
  succeeded, failed, cancelled), ``runs_paused_total{workflow}``: runs this process
  executed, counted from their events;
- ``node_duration_seconds{kind,status}``: a histogram of node runs, by node kind;
- ``model_calls_total{model,provider,outcome}`` (outcome ``ok`` or the error's reason
  code), ``model_tokens_total{model,provider,direction,source}`` (direction ``input`` /
  ``output``; source ``provider`` or ``estimated``), ``model_cost_usd_total{model,provider}``:
  chat and embedding calls;
- ``checkpoint_duration_seconds``: how long storing a run's checkpoint took;
- ``sse_subscribers``: followers of event streams connected now;
- ``recoveries_total{outcome}``: orphaned runs recovered (or that failed to be);
- ``runs_executing``: runs executing in this process now;
- ``runs{status}``: runs in the store by status (pending, running, paused...) - set by
  :func:`observe_store` before a scrape, by the API (a worker has no event loop to ask
  the store from its scrape thread);
- ``queue_jobs{queue}``, ``queue_oldest_job_age_seconds{queue}``: jobs waiting in each
  RQ queue and the age of the oldest, read from Redis at scrape time (:class:`QueueCollector`).

Labels are bounded by what an operator configured (workflows, models, node kinds,
queues); no run id, tenant or user text ever becomes a label.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC
from typing import Any, TypedDict

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from engine.telemetry import Telemetry
from schemas.events import NodeFinished, RunCancelled, RunFailed, RunFinished, RunPaused, RunStarted
from schemas.run import Usage

__all__ = ["CONTENT_TYPE", "PrometheusTelemetry", "QueueCollector", "observe_store", "render"]

logger = logging.getLogger("flowloom.metrics")

#: node durations in seconds: plumbing nodes take milliseconds, model and agent nodes minutes
NODE_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0)
#: checkpoint durations in seconds: a local SQLite commit to a PostgreSQL across a network, or a store waited out
CHECKPOINT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_ENDS: dict[type, str] = {RunFinished: "succeeded", RunFailed: "failed", RunCancelled: "cancelled"}


class _Common(TypedDict):
    """The arguments every metric of one telemetry shares."""

    registry: CollectorRegistry
    namespace: str


class PrometheusTelemetry(Telemetry):
    """The telemetry port counted in Prometheus metrics (module docstring); ``registry``
    holds them (a new one by default, so two servers in one test process do not clash).
    ``executing`` (optional) returns how many runs this process executes now."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, executing: Callable[[], int] | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        on = _Common(registry=self.registry, namespace="flowloom")
        self.runs_started = Counter("runs_started", "Runs started by this process", ["workflow"], **on)
        self.runs_finished = Counter(
            "runs_finished", "Runs this process executed to an end", ["workflow", "status"], **on
        )
        self.runs_paused = Counter("runs_paused", "Runs paused for an answer", ["workflow"], **on)
        self.node_duration = Histogram(
            "node_duration_seconds", "Node run durations", ["kind", "status"], buckets=NODE_BUCKETS, **on
        )
        self.model_calls = Counter("model_calls", "Model calls", ["model", "provider", "outcome"], **on)
        self.model_tokens = Counter(
            "model_tokens", "Model tokens", ["model", "provider", "direction", "source"], **on
        )
        self.model_cost = Counter("model_cost_usd", "Model cost in US dollars", ["model", "provider"], **on)
        self.checkpoints = Histogram(
            "checkpoint_duration_seconds",
            "Time to store a run's checkpoint",
            buckets=CHECKPOINT_BUCKETS,
            **on,
        )
        self.sse = Gauge("sse_subscribers", "Event streams (SSE) connected now", **on)
        self.recoveries = Counter("recoveries", "Orphaned runs handled by recovery", ["outcome"], **on)
        self.store_runs = Gauge("runs", "Runs in the store by status (set when scraped)", ["status"], **on)
        self.executing = Gauge("runs_executing", "Runs executing in this process now", **on)
        #: ``node_duration``'s child per (kind, status), found once: ``labels()`` checks and
        #: looks the labels up under a lock, once per node run otherwise (a 10,000-node run
        #: made 10,000 such calls); bounded as the labels are
        self._durations: dict[tuple[str, str], Any] = {}
        #: the run counters' children per workflow (and end), found once for the same reason;
        #: the metric holds every one of them anyway, so this bounds nothing new
        self._started: dict[str, Any] = {}
        self._finished: dict[tuple[str, str], Any] = {}
        if executing is not None:
            self.executing.set_function(lambda: float(executing()))

    def run_event(self, workflow_id: str, event: Any) -> None:
        kind = type(event)
        if kind is NodeFinished:
            labels = (event.kind, event.status.value)
            child = self._durations.get(labels)
            if child is None:
                child = self._durations[labels] = self.node_duration.labels(*labels)
            child.observe(event.elapsed_ms / 1000.0)
        elif kind is RunStarted:
            started = self._started.get(workflow_id)
            if started is None:
                started = self._started[workflow_id] = self.runs_started.labels(workflow_id)
            started.inc()
        elif kind in _ENDS:
            ended = (workflow_id, _ENDS[kind])
            finished = self._finished.get(ended)
            if finished is None:
                finished = self._finished[ended] = self.runs_finished.labels(*ended)
            finished.inc()
        elif kind is RunPaused:
            self.runs_paused.labels(workflow_id).inc()

    def checkpoint(self, seconds: float) -> None:
        self.checkpoints.observe(seconds)

    def model_call(self, *, model: str, provider: str, outcome: str, usage: Usage | None) -> None:
        self.model_calls.labels(model, provider, outcome).inc()
        if usage is None:
            return
        source = usage.token_source
        if usage.tokens_in:
            self.model_tokens.labels(model, provider, "input", source).inc(usage.tokens_in)
        if usage.tokens_out:
            self.model_tokens.labels(model, provider, "output", source).inc(usage.tokens_out)
        if usage.cost:
            self.model_cost.labels(model, provider).inc(usage.cost)

    def recovered(self, outcome: str) -> None:
        self.recoveries.labels(outcome).inc()

    def subscribers(self, change: int) -> None:
        self.sse.inc(change)


def observe_store(telemetry: PrometheusTelemetry, counts: Mapping[str, int], statuses: Iterable[str]) -> None:
    """Set ``runs{status}`` from the store's ``counts`` (status -> runs); every status in
    ``statuses`` is set, 0 when the store has none, so a series never goes stale."""
    for status in statuses:
        telemetry.store_runs.labels(status).set(counts.get(status, 0))


class QueueCollector(Collector):
    """``queue_jobs`` and ``queue_oldest_job_age_seconds`` per RQ queue, read from Redis
    when scraped: ``connection`` is a synchronous Redis client, ``queues`` the queue names.
    Redis away: the two families are left out of that scrape (logged), the rest is served."""

    def __init__(self, connection: Any, queues: list[str]) -> None:
        self.connection, self.queues = connection, queues

    def collect(self) -> Iterable[GaugeMetricFamily]:
        from rq import Queue

        jobs = GaugeMetricFamily("flowloom_queue_jobs", "Jobs waiting in an RQ queue", labels=["queue"])
        age = GaugeMetricFamily(
            "flowloom_queue_oldest_job_age_seconds",
            "Age of the oldest job waiting in an RQ queue (0: empty)",
            labels=["queue"],
        )
        now = time.time()
        try:
            for name in self.queues:
                queue = Queue(name, connection=self.connection)
                jobs.add_metric([name], float(queue.count))
                age.add_metric([name], _oldest_age(queue, now))
        except Exception as exc:
            logger.warning("metrics: the RQ queues could not be read (%s: %s)", type(exc).__name__, exc)
            return []
        return [jobs, age]


def _oldest_age(queue: Any, now: float) -> float:
    """Seconds since the job at the head of ``queue`` was enqueued (0 when it is empty)."""
    ids = queue.get_job_ids(0, 1)
    if not ids:
        return 0.0
    job = queue.fetch_job(ids[0])
    enqueued = getattr(job, "enqueued_at", None) if job is not None else None
    if enqueued is None:
        return 0.0
    if enqueued.tzinfo is None:  # RQ writes UTC; a naive value read as local time would be off by the zone
        enqueued = enqueued.replace(tzinfo=UTC)
    return max(0.0, now - enqueued.timestamp())


def render(telemetry: PrometheusTelemetry) -> bytes:
    """The registry in the Prometheus text format (:data:`CONTENT_TYPE`)."""
    from prometheus_client import generate_latest

    return generate_latest(telemetry.registry)
