"""The app's side of the composition root: the :class:`~api.composition.Deployment` the app's
lifespan opened, installed on the app (:func:`install`), and the typed FastAPI
dependencies routes get from it. This module is the only one that reads ``app.state``
for the deployment: a route names what it needs (``Service``, ``Keys``, ``Workflows``,
``Chats``, ``QuotaPolicy``, ``Knowledge``, ``AppSettings``, ``Heartbeat``, ``RunPlacement``) and
gets it typed; a door that is no FastAPI route (the MCP endpoint) asks
:func:`deployment_of` with the app.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Request

from engine.knowledge.service import KnowledgeService
from engine.ports import ChatStore, KeyStore, WorkflowRepo
from engine.service import RunService
from engine.settings import Settings
from schemas.launch import Placement

from .composition import Deployment
from .errors import ApiError
from .quotas import Quotas

__all__ = [
    "AppSettings",
    "Chats",
    "Heartbeat",
    "Keys",
    "Knowledge",
    "QuotaPolicy",
    "RunPlacement",
    "Service",
    "Workflows",
    "EXECUTION_HEADER",
    "PRIORITY_HEADER",
    "deployment",
    "deployment_of",
    "install",
    "placement_for",
    "placement_of",
]

EXECUTION_HEADER = "X-Flowloom-Execution"
#: the header's values (none: the deployment chooses)
_EXECUTIONS: dict[str, Literal["inline", "queued"] | None] = {
    "": None,
    "inline": "inline",
    "queued": "queued",
}
PRIORITY_HEADER = "X-Flowloom-Priority"


def install(app: Any, found: Deployment) -> None:
    """Make ``found`` the app's deployment. The parts are also left on ``app.state`` under
    their names (``service``, ``keys``, ``workflows``, ``quotas``, ``knowledge``) for
    tests and tools that inspect a running app."""
    app.state.deployment = found
    app.state.service, app.state.keys, app.state.workflows = found.service, found.keys, found.workflows
    app.state.quotas, app.state.knowledge = found.quotas, found.knowledge


def deployment_of(app: Any) -> Deployment:
    """The deployment installed on ``app`` (the lifespan has run)."""
    return app.state.deployment


# The dependencies are ``async``: FastAPI runs a plain ``def`` dependency in its thread
# pool, a thread hand-off per dependency per request for a mere attribute read.


async def deployment(request: Request) -> Deployment:
    """The app's deployment."""
    return request.app.state.deployment


Running = Annotated[Deployment, Depends(deployment)]


async def _service(found: Running) -> RunService:
    return found.service


async def _keys(found: Running) -> KeyStore:
    return found.keys


async def _workflows(found: Running) -> WorkflowRepo:
    return found.workflows


async def _chats(found: Running) -> ChatStore:
    return found.chats


async def _quotas(found: Running) -> Quotas:
    assert found.quotas is not None, "the API's deployment admits runs under the quotas"
    return found.quotas


async def _knowledge(found: Running) -> KnowledgeService:
    return found.knowledge


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _heartbeat(request: Request) -> float:
    return float(request.app.state.heartbeat_s)


async def placement_of(request: Request, found: Running) -> Placement:
    """Where the request's run executes (:func:`placement_for`).

    Raises:
        ApiError 422: another value of either header.
    """
    return placement_for(request, found)


def placement_for(request: Request, found: Deployment) -> Placement:
    """Where the request's run executes (:class:`~schemas.launch.Placement`): the header
    ``X-Flowloom-Execution: inline|queued`` (default: the deployment chooses) and, when
    the deployment has a queue, ``X-Flowloom-Priority: high|default|low``.

    Raises:
        ApiError 422: another value of either header.
    """
    requested = (request.headers.get(EXECUTION_HEADER) or "").strip().lower()
    if requested not in _EXECUTIONS:
        raise ApiError(
            422, "invalid_request", f"{EXECUTION_HEADER} must be inline or queued, not {requested!r}"
        )
    priority = (request.headers.get(PRIORITY_HEADER) or "default").strip().lower()
    if found.queue is not None:
        from workers.rq.queues import queue_name

        try:
            queue_name(priority)
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"{PRIORITY_HEADER}: {exc}") from None
    return Placement(execution=_EXECUTIONS[requested], priority=priority)


Service = Annotated[RunService, Depends(_service)]
Keys = Annotated[KeyStore, Depends(_keys)]
Workflows = Annotated[WorkflowRepo, Depends(_workflows)]
Chats = Annotated[ChatStore, Depends(_chats)]
QuotaPolicy = Annotated[Quotas, Depends(_quotas)]
Knowledge = Annotated[KnowledgeService, Depends(_knowledge)]
AppSettings = Annotated[Settings, Depends(_settings)]
Heartbeat = Annotated[float, Depends(_heartbeat)]
RunPlacement = Annotated[Placement, Depends(placement_of)]
