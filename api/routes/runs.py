"""``/v1/runs``: runs of the caller's tenant, through the run service only.

- ``POST /v1/runs``: run a workflow document (``blocking``: the finished or paused run;
  ``streaming``: SSE of its live events, text deltas included, after a ``meta`` event
  naming the run; ``async``: 202 with the run id). Each route is a translator onto the
  run service's ``launch`` and ``follow`` (:mod:`engine.frontdoor`): the run executes in
  a task of the app or on a worker, and a client that disconnects never stops it.
- ``GET /v1/runs`` (filters ``status``, ``workflow_id``, ``chat_id``, ``limit``) and
  ``GET /v1/runs/{id}`` (with inputs, outputs, answer and node runs).
- ``POST /v1/runs/{id}/stop``: the run ends ``cancelled`` within about a second.
- ``POST /v1/runs/{id}/resume``: answer a paused run (202; it continues in an app task).
- ``POST /v1/runs/{id}/rerun``: a new run from one node of a past run, with the current
  draft; the nodes before it are reused, not executed again.
- ``GET /v1/runs/{id}/events``: SSE of the run's events from the start, or after
  ``Last-Event-ID`` (or ``?after=``), live until the run ends or pauses, then ``done``.

A run of another tenant (or, for a key scoped to an app, of another app) is 404, as a
run that does not exist. Errors before a stream starts are JSON with their status;
after, an ``error`` event then the end of the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Header, Query
from fastapi.responses import Response

from engine.documents import DocumentCaps
from engine.ports import RunNotFound, WorkflowNotFound
from engine.rerun import RerunRefused
from engine.service import RunService
from schemas.api import (
    MAX_NUMBER,
    ErrorBody,
    RerunRequest,
    ResumeRequest,
    RunAccepted,
    RunCreate,
    RunDetail,
    RunList,
    RunOut,
    WorkflowRunCreate,
)
from schemas.launch import Placement, Published, RerunRun, ResumeRun, RunTicket, StartRun
from schemas.records import RunSummary
from schemas.types import RunStatus
from workers.sql.run_reads import RunReads

from ..auth import Caller, Principal, Service
from ..deployment import AppSettings, Heartbeat, RunPlacement, Workflows
from ..detail_rows import detail_body_of_rows
from ..errors import ApiError, error_body
from ..limits import check_document
from ..openapi import RUN_SSE_CONTENT
from ..responses import JsonBody, run_detail_body
from ..run_context import RunStartContext
from ..run_route import RunStartRoute
from ..screened_router import ScreenedRouter
from ..sse import EventStreamResponse, Frame, event_stream

__all__ = ["RUN_LINKS", "RunStart", "link", "router", "run_document"]

#: the body fields of a run start (``RunCreate`` and ``WorkflowRunCreate`` both have them)
RunStart = RunCreate | WorkflowRunCreate

#: how long ``stop`` waits for the run to end before answering with its current state
STOP_WAIT_S = 2.0
_ENDED = {RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled}
_SSE = {"description": "server-sent events: the run's events (RunEvent)", "content": RUN_SSE_CONTENT}

router = ScreenedRouter(prefix="/v1/runs", tags=["runs"], responses={401: {"model": ErrorBody}})
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}


def link(operation_id: str, description: str, **parameters: Any) -> dict[str, Any]:
    """An OpenAPI link: the operation a client may call next, with parameters taken
    from this call (runtime expressions such as ``$response.body#/run_id``)."""
    return {"operationId": operation_id, "description": description, "parameters": parameters}


#: what a client does next with a run it started (clients and the property tests follow them)
RUN_LINKS = {
    "GetRun": link(
        "get_run_v1_runs__run_id__get", "the run with its node runs", run_id="$response.body#/run_id"
    ),
    "RunEvents": link(
        "run_events_v1_runs__run_id__events_get", "the run's events (SSE)", run_id="$response.body#/run_id"
    ),
    "StopRun": link("stop_run_v1_runs__run_id__stop_post", "stop the run", run_id="$response.body#/run_id"),
}


def _events_url(run_id: str) -> str:
    return f"/v1/runs/{run_id}/events"


async def _summary(service: RunService, caller: Principal, run_id: str) -> RunSummary:
    """The caller's run. Raises RunNotFound for another tenant's run or another app's."""
    summary = await service.get(caller.tenant_id, run_id)
    if caller.app_id is not None and summary.workflow_id != caller.app_id:
        raise RunNotFound(f"no run {run_id}")
    return summary


async def _detail(service: RunService, tenant_id: str, run_id: str) -> Response:
    """The run as ``RunDetail`` shows it, dumped once and encoded by orjson (:mod:`api.responses`):
    straight from its rows when they hold only values its models keep as they are
    (:mod:`api.detail_rows`), else from the models."""
    store = service.stores.runs
    if not isinstance(store, RunReads):  # a store of the engine's port only
        return JsonBody(run_detail_body(*await service.detail(tenant_id, run_id)))
    row, node_rows = await store.load_detail_rows(tenant_id, run_id)
    body = detail_body_of_rows(row, node_rows)
    return JsonBody(body if body is not None else run_detail_body(*store.detail_of_rows(row, node_rows)))


# --------------------------------------------------------------------------- start


async def run_document(
    doc: dict[str, Any],
    body: RunStart,
    *,
    caller: Principal,
    service: RunService,
    settings: Any,
    placement: Placement,
    heartbeat_s: float,
    workflow_version: str | None = None,
    published: Published | None = None,
    checked: tuple[str, DocumentCaps] | None = None,
) -> Response:
    """Start a run of ``doc`` (``body``: inputs, ``response_mode``, chat; in a chat whose
    run waits for one answer, the message answers it) and answer as ``response_mode``
    says: the finished or paused run, SSE of its events, or 202. The one start path of
    ``POST /v1/runs`` and ``POST /v1/workflows/{id}/runs`` (``published``: the version
    ``doc`` is, which must still be the published one: else StalePublished, nothing stored;
    ``checked``: the caller's caps check of ``doc``, :func:`api.limits.check_published`).

    Raises:
        CompileError, InvalidInputs: the document is over a size cap (:mod:`api.limits`),
        does not compile, or the inputs do not fit (422).
        QuotaExceeded: a quota of the tenant or of the app is used up (429, ``Retry-After``).
    """
    checked = checked if checked is not None else check_document(doc, settings)
    ticket = await service.launch(
        caller.tenant_id,
        StartRun(
            doc,
            body.inputs,
            chat_id=body.chat_id,
            message=body.message,
            workflow_version=workflow_version,
            published=published,
            checked=checked,
        ),
        dataclasses.replace(placement, detached=body.response_mode == "async"),
    )
    return await respond(ticket, body.response_mode, caller=caller, service=service, heartbeat_s=heartbeat_s)


async def respond(
    ticket: RunTicket, mode: str, *, caller: Principal, service: RunService, heartbeat_s: float
) -> Response:
    """Answer for a launched run as ``mode`` says: 202 (``async``), SSE of its events
    (``streaming``), or the run once it ended or paused (``blocking``: followed to there;
    a client that goes away leaves the run executing)."""
    if mode == "async":
        return JsonBody(
            {
                "run_id": ticket.run_id,
                "chat_id": ticket.chat_id,
                "status": ticket.status.value,
                "events_url": _events_url(ticket.run_id),
            },
            status_code=202,
        )
    if mode == "streaming":
        frames = _relay(service, caller.tenant_id, ticket)
        return EventStreamResponse(event_stream(frames, heartbeat_s))
    await service.follow_to_end(caller.tenant_id, ticket.run_id)
    return await _detail(service, caller.tenant_id, ticket.run_id)


async def start_run(body: RunCreate, context: RunStartContext) -> Response:
    """Compile, store and execute the document (422 with every problem when it does not
    compile or the inputs do not fit). The answer depends on ``response_mode``."""
    caller = context.caller
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}; running a workflow "
            f"document needs a key of the whole tenant",
        )
    return await run_document(
        body.workflow,
        body,
        caller=caller,
        service=context.service,
        settings=context.settings,
        placement=context.placement,
        heartbeat_s=context.heartbeat_s,
    )


#: the answers of a run start (both run routes): the run or its events, or the accepted run
RUN_START_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "blocking: the run; streaming: its events (SSE)",
        "content": RUN_SSE_CONTENT,
        "links": RUN_LINKS,
    },
    202: {"model": RunAccepted, "description": "async: the run executes", "links": RUN_LINKS},
}
RUN_QUOTA_ANSWER: dict[int | str, dict[str, Any]] = {
    429: {"model": ErrorBody, "description": "a quota is used up (`Retry-After`)"}
}


# Registered here, where a decorator would stand (the OpenAPI document keeps its order), to
# take the short way of a plain run start (api.run_route).
router.add_api_route(
    "",
    start_run,
    methods=["POST"],
    route_class_override=RunStartRoute,
    response_model=RunDetail,
    summary="Run a workflow document",
    responses={
        **RUN_START_ANSWERS,
        403: {"model": ErrorBody},
        409: {"model": ErrorBody},
        422: {"model": ErrorBody},
        **RUN_QUOTA_ANSWER,
    },
)


async def _relay(service: RunService, tenant_id: str, ticket: RunTicket) -> AsyncIterator[Frame]:
    """``meta``, the run's events as they come, then ``done`` (or the execution's error)."""
    yield "meta", None, {"run_id": ticket.run_id, "chat_id": ticket.chat_id}
    async for event in service.follow(tenant_id, ticket.run_id):
        yield event.type, event.seq, event.model_dump(mode="json")
    yield _end_frame(await service.get(tenant_id, ticket.run_id))


def _end_frame(summary: RunSummary) -> Frame:
    """The last frame of a run's stream: ``done`` with its status; for a run the idle
    watchdog ended, an ``error`` frame naming the idle interval and the node, so the
    client learns the stream ended because nothing came (and the connection is not held)."""
    error = summary.error
    if summary.status is RunStatus.failed and error is not None and error.reason == "idle_timeout":
        return "error", None, error_body("run_idle_timeout", error.message or "the run was idle too long")
    return "done", None, {"run_id": summary.run_id, "status": summary.status.value}


# ---------------------------------------------------------------------------- read


@router.get("", response_model=RunList, summary="List runs")
async def list_runs(
    caller: Caller,
    service: Service,
    status: RunStatus | None = None,
    workflow_id: str | None = None,
    chat_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RunList:
    """The tenant's runs, newest first (a key scoped to an app sees that app's runs)."""
    if caller.app_id is not None:
        if workflow_id not in (None, caller.app_id):
            return RunList(runs=[])
        workflow_id = caller.app_id
    found = await service.list(
        caller.tenant_id, status=status, workflow_id=workflow_id, chat_id=chat_id, limit=limit
    )
    return RunList(runs=[RunOut.of(summary) for summary in found])


@router.get("/{run_id}", response_model=RunDetail, responses=NOT_FOUND, summary="A run with its node runs")
async def get_run(run_id: str, caller: Caller, service: Service) -> Response:
    """The run, its inputs, outputs, answer and every node run (loop rounds included)."""
    await _summary(service, caller, run_id)
    return await _detail(service, caller.tenant_id, run_id)


# ------------------------------------------------------------------------- control


@router.post(
    "/{run_id}/stop",
    response_model=RunOut,
    responses={**NOT_FOUND, 409: {"model": ErrorBody}},
    summary="Stop a run",
)
async def stop_run(run_id: str, caller: Caller, service: Service) -> RunOut:
    """A running run ends ``cancelled`` within about a second (the node in progress is
    stopped); a paused or pending run at once. Answers with the run once it ended (or,
    after a short wait, as it is). 409 when it has already ended."""
    await _summary(service, caller, run_id)
    summary = await service.cancel(caller.tenant_id, run_id, "stopped through the API")
    deadline = time.monotonic() + STOP_WAIT_S
    while summary.status not in _ENDED and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        summary = await service.get(caller.tenant_id, run_id)
    return RunOut.of(summary)


@router.post(
    "/{run_id}/resume",
    status_code=202,
    response_model=RunAccepted,
    responses={
        **NOT_FOUND,
        409: {"model": ErrorBody},
        422: {"model": ErrorBody},
        429: {"model": ErrorBody, "description": "a quota is used up (`Retry-After`)"},
    },
    summary="Answer a paused run",
)
async def resume_run(
    run_id: str, body: ResumeRequest, caller: Caller, service: Service, placement: RunPlacement
) -> RunAccepted:
    """The run continues with the answers (follow it at ``events_url``). 409 when the run
    is not paused or an interrupt is not pending; 422 when an answer does not fit its
    question (not one of the options, a form field of the wrong type), naming what fits."""
    summary = await _summary(service, caller, run_id)
    ticket = await service.launch(
        caller.tenant_id,
        ResumeRun(
            run_id,
            answers=body.answers,
            answer=body.answer,
            interrupt_id=body.interrupt_id,
            message=body.message,
        ),
        dataclasses.replace(placement, detached=True),
    )
    # the stored run says whether it is in a chat (the run state's sys.chat_id falls back
    # to the run id for templates, which is no chat)
    return RunAccepted(
        run_id=run_id, chat_id=summary.chat_id, status=ticket.status, events_url=_events_url(run_id)
    )


@router.post(
    "/{run_id}/rerun",
    response_model=RunDetail,
    summary="Run again from a node of a past run",
    responses={
        200: {
            "description": "blocking: the new run; streaming: its events (SSE)",
            "content": RUN_SSE_CONTENT,
        },
        202: {"model": RunAccepted, "description": "async: the new run executes"},
        **NOT_FOUND,
        403: {"model": ErrorBody},
        409: {"model": ErrorBody},
        422: {"model": ErrorBody},
        429: {"model": ErrorBody, "description": "a quota is used up (`Retry-After`)"},
    },
)
async def rerun_run(
    run_id: str,
    body: RerunRequest,
    caller: Caller,
    service: Service,
    workflows: Workflows,
    settings: AppSettings,
    heartbeat_s: Heartbeat,
) -> Response | RunDetail:
    """A new run with the past run's inputs: the node runs before ``node_id`` are reused
    (not executed again; ``reused_from`` on each), ``node_id`` and what follows run with
    ``workflow`` if given, else the saved workflow's current draft, else the past run's own
    document. 422 names an unknown node or one the past run did not reach; 409 while the
    past run executes; the new run is admitted under the quotas as any run start (429).
    Answers as ``POST /v1/runs`` for ``response_mode``."""
    if caller.app_id is not None:
        raise ApiError(403, "forbidden", "rerunning with a draft needs a key of the whole tenant")
    summary = await _summary(service, caller, run_id)
    version: str | None
    doc, version = body.workflow, "draft"
    if doc is None:
        try:
            doc = (await workflows.get(caller.tenant_id, summary.workflow_id)).draft
        except WorkflowNotFound:  # a run of an unsaved document: run its own document again
            doc, version = await service.workflow_of(caller.tenant_id, run_id), summary.workflow_version
    check_document(doc, settings)
    try:
        ticket = await service.launch(
            caller.tenant_id, RerunRun(run_id, body.node_id, doc, workflow_version=version)
        )
    except RerunRefused as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    return await respond(ticket, body.response_mode, caller=caller, service=service, heartbeat_s=heartbeat_s)


# -------------------------------------------------------------------------- events


def _resume_point(last_event_id: str | None, after: int | None) -> int:
    """The sequence number to continue after: ``Last-Event-ID`` wins over ``?after=``."""
    if last_event_id is not None and last_event_id.strip():
        try:
            value = int(last_event_id.strip())
        except ValueError:
            raise ApiError(422, "invalid_request", "Last-Event-ID must be an event id (an integer)") from None
        if not 0 <= value <= MAX_NUMBER:
            raise ApiError(
                422, "invalid_request", f"Last-Event-ID must be an event id from 0 to {MAX_NUMBER}"
            )
        return value
    return after or 0


# a plain response class: FastAPI documents every declared response with the route class's
# media type, and the errors before a stream starts are JSON
@router.get(
    "/{run_id}/events",
    response_class=Response,
    responses={200: _SSE, **NOT_FOUND, 422: {"model": ErrorBody}},
    summary="The run's events (SSE)",
)
async def run_events(
    run_id: str,
    caller: Caller,
    service: Service,
    heartbeat_s: Heartbeat,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_NUMBER, description="continue after this event id")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """Stored events after the resume point, then live ones until the run ends or
    pauses, then ``done`` with its status. Ids are the events' ``seq``: a client that
    reconnects with ``Last-Event-ID`` gets exactly what it missed."""
    await _summary(service, caller, run_id)
    start = _resume_point(last_event_id, after)
    return EventStreamResponse(event_stream(_watch(service, caller.tenant_id, run_id, start), heartbeat_s))


async def _watch(service: RunService, tenant_id: str, run_id: str, after: int) -> AsyncIterator[Frame]:
    async for event in service.follow(tenant_id, run_id, after):
        yield event.type, event.seq, event.model_dump(mode="json")
    yield _end_frame(await service.get(tenant_id, run_id))
