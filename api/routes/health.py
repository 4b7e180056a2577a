"""``GET /health`` (liveness) and ``GET /ready`` (readiness), both open (no key, nothing
about tenants).

``/health`` says the process answers: a probe that restarts the server on failure
should use it. ``/ready`` says whether the server can take work: it asks the run store
for one row and, when ``FLOWLOOM_REDIS_URL`` is set, pings Redis, each within
:data:`CHECK_TIMEOUT_S`; 503 ``not_ready`` names the dependency that failed (a load
balancer stops sending requests, nothing restarts). A SQLite run store also needs
:data:`MIN_FREE_BYTES` free on its disk: on a full disk reads still work while no run
can be stored. Why a check failed goes to the server log only: the answer is open, and
a store's error may name hosts or paths.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from schemas.api import Health, Readiness, ReadinessCheck
from schemas.records import DEFAULT_TENANT

from ..deployment import Running
from ..screened_router import ScreenedRouter

__all__ = ["CHECK_TIMEOUT_S", "MIN_FREE_BYTES", "router"]

#: seconds each readiness check may take before it counts as failed
CHECK_TIMEOUT_S = 5.0
#: bytes a SQLite run store's disk must have free to be ready (a run's checkpoints are
#: kilobytes; well below this, writes soon fail with "database or disk is full")
MIN_FREE_BYTES = 16 * 1024 * 1024

router = ScreenedRouter(tags=["health"])
logger = logging.getLogger("flowloom.api")


@router.get("/health", response_model=Health, summary="The service answers (liveness)")
async def health(request: Request) -> Health:
    """200 while the server runs; says nothing about its stores (``GET /ready`` does)."""
    return Health(version=request.app.version)


@router.get(
    "/ready",
    response_model=Readiness,
    summary="The service can take work (readiness)",
    responses={503: {"model": Readiness, "description": "a dependency does not answer"}},
)
async def ready(request: Request, found: Running) -> JSONResponse:
    """200 ``ready`` when the run store (and Redis, when configured) answer; else 503
    ``not_ready`` with the check that failed."""
    checks = {"store": await _check("the run store", lambda: _query_store(found.service))}
    if checks["store"].ok:
        checks["store"] = _disk_space(found.service)
    queue = found.queue
    if queue is not None:
        checks["redis"] = await _check("Redis", lambda: asyncio.to_thread(queue.redis.ping))
    ok = all(check.ok for check in checks.values())
    body = Readiness(status="ready" if ok else "not_ready", version=request.app.version, checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


async def _query_store(service: Any) -> None:
    await service.list(DEFAULT_TENANT, limit=1)


def _disk_space(service: Any) -> ReadinessCheck:
    """Not ready when the disk of a SQLite run store has less than :data:`MIN_FREE_BYTES`
    free (other stores: their server's business)."""
    url = getattr(service.stores.runs, "url", None)
    database = getattr(url, "database", None)
    if url is None or not url.drivername.startswith("sqlite") or not database or database == ":memory:":
        return ReadinessCheck(ok=True)
    folder = os.path.dirname(os.path.abspath(database))
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    if free >= MIN_FREE_BYTES:
        return ReadinessCheck(ok=True)
    logger.error("readiness: the run store's disk has %d bytes free at %s", free, folder)
    return ReadinessCheck(
        ok=False,
        message=f"the run store's disk is full ({free // 1024} KiB free, "
        f"{MIN_FREE_BYTES // (1024 * 1024)} MiB needed)",
    )


async def _check(name: str, probe: Callable[[], Awaitable[Any]]) -> ReadinessCheck:
    """Run ``probe``; a failure or a timeout is logged and answered without its text."""
    try:
        await asyncio.wait_for(probe(), CHECK_TIMEOUT_S)
    except TimeoutError:
        logger.error("readiness: %s did not answer within %.0f s", name, CHECK_TIMEOUT_S)
        return ReadinessCheck(ok=False, message=f"{name} did not answer within {CHECK_TIMEOUT_S:.0f} s")
    except Exception as exc:
        logger.error("readiness: %s failed: %s: %s", name, type(exc).__name__, exc)
        return ReadinessCheck(ok=False, message=f"{name} does not answer (see the server log)")
    return ReadinessCheck(ok=True)
