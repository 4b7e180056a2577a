"""The server's Prometheus metrics: counted while the app runs, served at ``GET /metrics``.

:func:`start_metrics` (called by the app's lifespan) installs a
:class:`workers.metrics.PrometheusTelemetry` as the process's telemetry, with the RQ
queues' depth when Redis is configured; :func:`serve_metrics` answers the scrape. The
store's gauges (``flowloom_runs{status}``: pending, running, paused) are read at each
scrape, within :data:`STORE_TIMEOUT_S` (a slow store leaves them as last read rather
than stalling the scrape). ``/metrics`` needs no key: it holds counts by workflow id,
model and node kind, never a tenant's data. ``FLOWLOOM_METRICS=false`` turns it off
(404); ``FLOWLOOM_METRICS_PORT`` serves the metrics on a port of their own instead (the
store's gauges are then refreshed every :data:`REFRESH_S` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from engine.telemetry import Telemetry, install_telemetry

__all__ = ["Metrics", "REFRESH_S", "STORE_TIMEOUT_S", "router", "start_metrics"]

logger = logging.getLogger("flowloom.api")

#: seconds a scrape waits for the store's run counts
STORE_TIMEOUT_S = 2.0
#: seconds between two reads of the store's run counts when the metrics have their own port
REFRESH_S = 5.0
_UNENDED = ("pending", "running", "paused")

router = APIRouter(tags=["metrics"])


@dataclass
class Metrics:
    """The metrics of a running app: ``telemetry`` (None: turned off), whether ``/metrics``
    answers on the API's port (``on_api_port``), and what :meth:`close` stops."""

    telemetry: Any = None
    on_api_port: bool = False
    service: Any = None
    previous: Telemetry | None = None
    _stops: list[Any] = field(default_factory=list)

    async def refresh_store(self) -> None:
        """Read the store's unended runs by status into ``flowloom_runs``; a failure or a
        store slower than :data:`STORE_TIMEOUT_S` is logged and leaves the last values."""
        from workers.metrics import observe_store

        try:
            counts = await asyncio.wait_for(self.service.stores.runs.count_unended(), STORE_TIMEOUT_S)
        except Exception as exc:
            logger.warning(
                "metrics: the run store's counts could not be read (%s: %s)", type(exc).__name__, exc
            )
            return
        observe_store(self.telemetry, counts, _UNENDED)

    async def close(self) -> None:
        """Stop the metrics' own server and refresher; restore the telemetry it replaced."""
        for stop in self._stops:
            with contextlib.suppress(Exception):
                result = stop()
                if asyncio.iscoroutine(result):
                    await result
        if self.telemetry is not None:
            install_telemetry(self.previous)


async def start_metrics(found: Any) -> Metrics:
    """Install the metrics of the deployment ``found`` (module docstring)."""
    settings = found.settings
    if not settings.metrics:
        return Metrics()
    from workers.metrics import PrometheusTelemetry, QueueCollector
    from workers.rq.queues import queue_names

    telemetry = PrometheusTelemetry(executing=found.service.executing_count)
    if found.queue is not None:
        telemetry.registry.register(QueueCollector(found.queue.redis, queue_names()))
    metrics = Metrics(
        telemetry=telemetry,
        on_api_port=settings.metrics_port is None,
        service=found.service,
        previous=install_telemetry(telemetry),
    )
    if settings.metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            server, _thread = start_http_server(
                settings.metrics_port, addr=settings.metrics_host, registry=telemetry.registry
            )
        except OSError as exc:  # the port is taken: the API still serves; the operator reads why
            logger.error(
                "metrics: cannot listen on %s:%s (%s); no metrics are served",
                settings.metrics_host,
                settings.metrics_port,
                exc.strerror or exc,
            )
            return metrics
        refresher = asyncio.create_task(_refresh_forever(metrics), name="metrics store refresh")
        metrics._stops += [server.shutdown, server.server_close, refresher.cancel]
    return metrics


async def _refresh_forever(metrics: Metrics) -> None:
    while True:
        await metrics.refresh_store()
        await asyncio.sleep(REFRESH_S)


@router.get("/metrics", include_in_schema=False)
async def serve_metrics(request: Request) -> Response:
    """The server's metrics in the Prometheus text format; 404 when they are turned off
    or served on their own port."""
    from workers.metrics import CONTENT_TYPE, render

    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    if metrics is None or metrics.telemetry is None or not metrics.on_api_port:
        return PlainTextResponse(
            "metrics are not served here (FLOWLOOM_METRICS / FLOWLOOM_METRICS_PORT)\n", status_code=404
        )
    await metrics.refresh_store()
    # rendering reads the RQ queues with a synchronous Redis client: off the event loop
    body = await asyncio.to_thread(render, metrics.telemetry)
    return Response(body, media_type=CONTENT_TYPE)
