"""The HTTP API as a FastAPI app: ``create_app(settings)``.

The app's lifespan opens the deployment of :func:`api.composition.open_deployment` (the same
stores and wiring as the CLI: SQLite under ``FLOWLOOM_HOME`` by default, or
``FLOWLOOM_DATABASE_URL``; the key store on the same database; the launcher whose tasks
run the runs; the queue with Redis) and installs it (:mod:`api.deployment`); it creates
the default tenant on first start. Every route
goes through the run service (the one implementation of the run lifecycle); the
dataset routes through its knowledge service, whose unfinished ingestions a sweeper
task hands to the ingestion queue again (at start, then every :data:`SWEEP_S` seconds;
with Redis the workers sweep instead).

``/health`` (liveness), ``/ready`` (readiness: the stores answer), ``/metrics``
(Prometheus, :mod:`api.metrics`) and the OpenAPI document (``/openapi.json``, ``/docs``) are open; every other route needs an API key
(:mod:`api.auth`). Errors are JSON with their real status (:mod:`api.errors`); no
response ever carries a traceback. A JSON body nested too deep or holding a lone
surrogate is refused as it is read (:class:`api.limits.JsonBodyCheck`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from importlib import metadata
from typing import Any

from fastapi import FastAPI

from engine.settings import Settings, get_settings
from schemas.records import DEFAULT_TENANT

from .composition import key_store_of, open_deployment
from .deployment import install
from .errors import install_error_handlers
from .gc_tuning import GC_YOUNG_THRESHOLD, tune_gc
from .limits import BodyLimit, JsonBodyCheck
from .metrics import router as metrics_router
from .metrics import start_metrics
from .openapi import install_openapi
from .recovery import start_recovery
from .routes import chats as chat_routes
from .routes import routers
from .static import dist_of, install_canvas
from .traces import instrument as instrument_traces
from .traces import start_traces, stop_traces

__all__ = [
    "GC_YOUNG_THRESHOLD",
    "HEARTBEAT_S",
    "SWEEP_S",
    "create_app",
    "key_store_of",
    "sweep_ingestion",
    "tune_gc",
]

#: seconds between two heartbeat comments of an idle SSE stream
HEARTBEAT_S = 15.0
#: seconds between two sweeps for unfinished ingestions (an ingestion lease's length)
SWEEP_S = 30.0
logger = logging.getLogger("flowloom.api")


def _version() -> str:
    try:
        return metadata.version("flowloom")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


async def sweep_ingestion(knowledge: Any, every_s: float) -> None:
    """Give documents whose ingestion stopped (a process ended mid-way: its lease expired,
    or it was queued and never started) to the ingestion queue again: at start, then
    every ``every_s`` seconds. A failure is logged and tried again next round."""
    while True:
        try:
            found = await knowledge.resubmit_unfinished()
            if found:
                logger.info("ingestion: %d unfinished document(s) queued again", len(found))
        except Exception as exc:
            logger.warning("ingestion sweep failed: %s", exc)
        await asyncio.sleep(every_s)


def create_app(
    settings: Settings | None = None,
    *,
    heartbeat_s: float = HEARTBEAT_S,
    shutdown_grace_s: float = 5.0,
    sweep_s: float = SWEEP_S,
    server: bool = False,
) -> FastAPI:
    """The API app over the stores ``settings`` name (default: the process settings).

    ``heartbeat_s``: seconds between heartbeat comments of idle SSE streams; ``sweep_s``:
    seconds between two sweeps for documents whose ingestion stopped (:func:`sweep_ingestion`);
    ``shutdown_grace_s``: how long a shutdown waits for executing runs before
    cancelling them; ``server``: the app is the process's one long-lived app
    (``flowloom serve``): the garbage collector is tuned once it started (:func:`tune_gc`). ``app.state`` holds ``settings``, and while the app runs ``deployment``
    (:class:`api.composition.Deployment`), its ``service``, ``keys``, ``workflows``, ``quotas``
    (:class:`api.quotas.Quotas`),
    ``knowledge`` (the knowledge service: ``/v1/datasets``), ``recovery`` (the loop
    continuing runs whose owner died, :mod:`api.recovery`; None when
    ``recovery_concurrency`` is 0) and ``first_start`` (True when this start created the
    default tenant). Request bodies
    over ``settings.max_request_bytes`` get 413 unread (:mod:`api.limits`).
    """
    chosen = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_deployment(chosen, admission=True, shutdown_grace_s=shutdown_grace_s) as found:
            _tenant, created = await found.keys.ensure_tenant(DEFAULT_TENANT, "Default tenant")
            install(app, found)
            app.state.first_start = created
            # with Redis the workers sweep (workers.rq.knowledge.sweep_unfinished), one at a time
            sweeper = (
                asyncio.create_task(sweep_ingestion(found.knowledge, sweep_s))
                if not chosen.redis_url
                else None
            )
            app.state.metrics = await start_metrics(found)
            start_traces(app)  # over the metrics: the process's one telemetry does both
            # runs whose owner died (a crash of this server or another process) continue by themselves
            app.state.recovery = await start_recovery(found)
            if server:
                tune_gc()
            try:
                yield
            finally:
                if app.state.recovery is not None:
                    await app.state.recovery.close()
                if sweeper is not None:
                    sweeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await sweeper
                await stop_traces(app)
                await app.state.metrics.close()

    app = FastAPI(
        title="Flowloom",
        version=_version(),
        lifespan=lifespan,
        redoc_url=None,
        description="Run Flowloom workflows over HTTP: runs, their events (SSE), API keys.",
    )
    app.state.heartbeat_s = heartbeat_s
    app.state.settings = chosen
    install_openapi(app)  # the run event stream's schemas too, for the canvas's generated types
    install_error_handlers(app)
    instrument_traces(app)  # OTEL_* variables: a span per request, the caller's traceparent its parent
    app.add_middleware(JsonBodyCheck)  # a body too deep or with a lone surrogate: 422 naming the field
    # Outermost: a body over the cap is refused before any other part of the app reads it.
    app.add_middleware(BodyLimit, max_bytes=chosen.max_request_bytes)
    for router in routers:
        app.include_router(router)
    app.include_router(chat_routes.router)
    app.include_router(metrics_router)  # GET /metrics: open, counts only (api.metrics)
    install_canvas(app, dist_of(chosen))  # the web canvas at / (only where no route answers)
    return app
