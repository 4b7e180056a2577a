"""What a run-starting route needs, solved as one FastAPI dependency.

``POST /v1/runs`` and ``POST /v1/workflows/{id}/runs`` need the caller, the run service,
the workflow repository, the app's settings, the run's placement and the SSE heartbeat.
As separate dependencies (:mod:`api.auth`, :mod:`api.deployment`) FastAPI solves each
one - and the deployment under each - on every request: fourteen nested solves per run
start, a measurable share of a short run's CPU. :func:`run_context` gives them all from
one solve (plus the bearer scheme's, which also names the route's security in the
OpenAPI document), in the order the separate dependencies were solved: the key first
(401), then the placement headers (422), then FastAPI's own validation of the path,
query and body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials

from engine.ports import WorkflowRepo
from engine.service import RunService
from engine.settings import Settings
from schemas.launch import Placement

from .auth import Principal, authenticate, bearer
from .composition import Deployment
from .deployment import placement_for

__all__ = ["RunContext", "RunStartContext", "run_context"]


@dataclass(frozen=True, slots=True)
class RunContext:
    """The parts of a run start: ``caller`` (its key checked), ``service``, ``workflows``,
    ``settings`` (the app's), ``placement`` (from the request's headers) and
    ``heartbeat_s`` (seconds between SSE comments while a stream is quiet)."""

    caller: Principal
    service: RunService
    workflows: WorkflowRepo
    settings: Settings
    placement: Placement
    heartbeat_s: float


async def run_context(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> RunContext:
    """The run start's parts for ``request``.

    Raises:
        ApiError 401: no valid, active key (before anything else is looked at).
        ApiError 422: an execution or priority header of another value.
    """
    state = request.app.state
    found: Deployment = state.deployment
    caller = await authenticate(found.keys, credentials)
    return RunContext(
        caller=caller,
        service=found.service,
        workflows=found.workflows,
        settings=state.settings,
        placement=placement_for(request, found),
        heartbeat_s=float(state.heartbeat_s),
    )


RunStartContext = Annotated[RunContext, Depends(run_context)]
