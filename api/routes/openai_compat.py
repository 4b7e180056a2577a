"""The OpenAI-compatible endpoint: published workflows ("apps") as chat models, so the
official ``openai`` SDK and the tools built on it are working clients.

- ``POST /v1/chat/completions``: one turn of an app. ``model`` is the app's workflow
  id (a key scoped to an app may leave it out, or must name its own app; a key of the
  whole tenant must name one); the published version runs. The last ``user`` message
  is the turn's message (``sys.query`` and the ``query`` input). Extra body fields:
  ``chat_id`` (the stored conversation: its messages are ``sys.history`` and the
  request's earlier messages are ignored; without it, the earlier ``user`` and
  ``assistant`` messages are ``sys.history``), ``inputs`` (the workflow's inputs),
  ``detail`` (node events in the stream). Not streaming: a ``chat.completion`` whose
  content is the run's answer; streaming: ``chat.completion.chunk`` lines
  (``data: {...}``) with the answer's deltas, a last chunk with ``finish_reason`` and
  ``usage``, then ``data: [DONE]``. ``finish_reason`` is ``length`` when a model reply in
  the answer was cut at its ``max_tokens``, ``content_filter`` when the provider filtered
  it, else ``stop``; ``usage.estimated`` (an extension) is true when the model server did
  not report some count and Flowloom estimated it. Every answer carries ``flowloom: {run_id, chat_id,
  status, interrupts}`` and ``citations`` (on the message, or on the last chunk: the
  sources the answer cites, QuotePiece objects) - fields OpenAI clients ignore.
- ``GET /v1/models``: the published apps the key may run, as an OpenAI model list.

A run that pauses for a question answers with the question as its content
(``finish_reason`` ``stop``, ``flowloom.status`` ``paused``); the next message to the
same ``chat_id`` answers it (the paused run continues, no new run). Usage is the
tokens of this turn (for a continued run, those since it continued).

Errors are OpenAI's shape ``{"error": {"message", "type", "code", "param"}}`` with the
status (every error of these paths, a 413 of the body-size middleware too:
:func:`api.errors.openai_error`): 400 no model named by a tenant-wide key
(``model_required``), 401 bad key, 404 unknown app (``model_not_found``), 413 a body
over ``FLOWLOOM_MAX_REQUEST_BYTES``, 422 bad inputs or request (``param`` the field),
409 a ``chat_id`` used by another app, 503 a model key the deployment lacks
(``missing_api_key``: nothing ran), 500 a failed run (``run_failed``, with the
run's own message, never a traceback). Errors carry ``x-should-retry: false`` (the SDK
would otherwise retry 409 and 5xx, running the turn again). An error after the stream
started is a ``data: {"error": ...}`` line then ``data: [DONE]``. Runs execute in app
tasks: a client that disconnects never stops one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from engine.plain_errors import did_you_mean
from engine.ports import KeyStore, WorkflowNotFound, WorkflowRepo
from engine.service import RunService
from schemas.api import OpenAIErrorBody
from schemas.events import NodeDelta, PendingInterrupt
from schemas.knowledge import run_citations
from schemas.launch import RunTicket, StartRun
from schemas.openai_compat import ChatCompletionRequest, message_text
from schemas.types import RunStatus

from ..auth import Principal, bearer, principal
from ..deployment import Heartbeat, Keys, Service, Workflows
from ..errors import ApiError, describe, field_path, openai_error, parse_body
from ..sse import EventStreamResponse, with_heartbeats

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["openai"])

_QUESTION_KEYS = ("question", "description", "prompt", "message", "title", "text")


def _inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``#/$defs/...`` references replaced by the definitions: inside
    the OpenAPI document such a reference would point at the document's root."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(dict(defs[ref.removeprefix("#/$defs/")]))
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(schema)


#: the key is read by hand (errors in OpenAI's shape), so the scheme is declared here
_SECURITY: dict[str, Any] = {"security": [{"ApiKey": []}]}
_BODY = {
    **_SECURITY,
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _inline_defs(ChatCompletionRequest.model_json_schema())}},
    },
}
_OPENAI_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIErrorBody, "description": text}
    for status, text in (
        (400, "no `model` named by a key of the whole tenant"),
        (401, "a missing, invalid or revoked key"),
        (404, "`model_not_found`: unknown, unpublished, or not this key's"),
        (409, "`chat_conflict`"),
        (422, "an invalid request or inputs"),
        (429, "a quota is used up (`Retry-After`)"),
        (500, "`run_failed`: the run failed or was cancelled"),
        (
            503,
            "the run store is not available, or a model key this deployment lacks (`missing_api_key`: nothing ran)",
        ),
    )
}


# ------------------------------------------------------------------- errors


def _error_payload(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, {"error": {message, type, code, param}}, headers)`` for ``exc``, from
    the API's own mapping (:func:`api.errors.describe`), so no traceback ever leaves."""
    return openai_error(*describe(exc))


def _error_response(exc: BaseException) -> JSONResponse:
    status, body, headers = _error_payload(exc)
    return JSONResponse(body, status_code=status, headers=headers)


class _RunFailed(ApiError):
    """A run that ended failed or cancelled: 500 ``run_failed`` with the run's message."""

    def __init__(self, run_id: str, status: str, message: str) -> None:
        super().__init__(500, "run_failed", f"run {run_id} {status}: {message}")


async def _caller(request: Request, keys: KeyStore) -> Principal:
    """The caller of the request (its Bearer key). Raises ApiError 401."""
    return await principal(keys, await bearer(request))


# --------------------------------------------------------------------- apps


def _not_found(model: str) -> ApiError:
    return ApiError(
        404,
        "model_not_found",
        f"The model {model!r} does not exist or you do not have access to it "
        f"(a model is a published workflow's id; GET /v1/models lists them)",
    )


async def _app(repo: WorkflowRepo, caller: Principal, model: str | None) -> tuple[str, dict[str, Any], str]:
    """``(workflow id, published document, version)`` of the app the request names.

    Raises:
        ApiError: 400 no model named by a key of the whole tenant; 404 an app of another
        tenant, another app for an app key, unknown, or not published.
    """
    if caller.app_id is not None and model not in (None, "", caller.app_id):
        raise _not_found(str(model))
    workflow_id = model or caller.app_id
    if not workflow_id:
        raise ApiError(
            400,
            "model_required",
            "name the app in `model` (a published workflow's id; GET /v1/models lists them)",
        )
    try:
        record = await repo.get(caller.tenant_id, workflow_id)
    except WorkflowNotFound:
        raise _not_found(workflow_id) from None
    if record.published_version is None:
        raise _not_found(workflow_id)
    found = await repo.get_version(caller.tenant_id, workflow_id, record.published_version)
    return workflow_id, found.doc or {}, str(found.version)


@router.get(
    "/models",
    summary="The apps this key may call (OpenAI model list)",
    openapi_extra=_SECURITY,
    responses={k: v for k, v in _OPENAI_ERRORS.items() if k in (401, 503)},
)
async def list_models(request: Request, keys: Keys, workflows: Workflows) -> Response:
    """``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}``:
    the tenant's published workflows (a key scoped to an app: that app only)."""
    try:
        caller = await _caller(request, keys)
        found = await workflows.list(caller.tenant_id, caller.app_id)
    except Exception as exc:
        return _error_response(exc)
    data = [
        {"id": r.id, "object": "model", "created": int(r.created_at), "owned_by": caller.tenant_id}
        for r in found
        if r.published_version is not None
    ]
    return JSONResponse({"object": "list", "data": data})


# -------------------------------------------------------------------- start


#: the roles of OpenAI's chat messages; another is refused (422) with the closest, since
#: a misspelt one ('usr') would otherwise drop its message from the turn unsaid
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _turn(body: ChatCompletionRequest) -> tuple[str, list[dict[str, Any]]]:
    """The turn's message (the last ``user`` message) and the history before it (its
    ``user`` and ``assistant`` messages with text). Raises ApiError 422 without one, or
    for a message whose role is none of OpenAI's."""
    for i, m in enumerate(body.messages):
        if m.role not in _ROLES:
            what = f"unknown role {m.role!r}{did_you_mean(m.role, _ROLES)} (roles: {', '.join(_ROLES)})"
            loc: list[Any] = ["body", "messages", i, "role"]
            problem = {"loc": loc, "message": what, "code": "unknown_role"}
            raise ApiError(422, "invalid_request", f"{field_path(loc)}: {what}", problems=[problem])
    last = max((i for i, m in enumerate(body.messages) if m.role == "user"), default=None)
    if last is None:
        raise ApiError(422, "invalid_request", "`messages` needs a message with role `user`")
    history = [
        {"role": m.role, "content": message_text(m)}
        for m in body.messages[:last]
        if m.role in ("user", "assistant") and message_text(m)
    ]
    return message_text(body.messages[last]), history


async def _chat_owner_check(service: RunService, tenant: str, chat_id: str, workflow_id: str) -> None:
    """A chat belongs to the app of its runs: another app's chat is refused (409), so
    one app never reads or answers another's conversation."""
    newest = await service.list(tenant, chat_id=chat_id, limit=1)
    if newest and newest[0].workflow_id != workflow_id:
        raise ApiError(409, "chat_conflict", f"chat {chat_id!r} belongs to another app; use a new chat_id")


async def _start(
    service: RunService, workflows: WorkflowRepo, caller: Principal, body: ChatCompletionRequest
) -> tuple[str, RunTicket, tuple[int, int, int]]:
    """Launch the turn: ``(app id, ticket, (tokens in, tokens out, answer length) before
    this turn)`` - a message to a chat whose run waits for it continues that run.

    Raises:
        ApiError, WorkflowNotFound, InvalidInputs, CompileError, RunNotResumable...;
        QuotaExceeded (429) before the run is created or continued.
    """
    workflow_id, doc, version = await _app(workflows, caller, body.model)
    message, history = _turn(body)
    tenant, before = caller.tenant_id, (0, 0, 0)
    if body.chat_id:
        await _chat_owner_check(service, tenant, body.chat_id, workflow_id)
        paused = await service.list(tenant, status=RunStatus.paused, chat_id=body.chat_id, limit=1)
        if paused and len(paused[0].pending_interrupts) == 1:  # the turn continues it: usage counts from here
            answered = len((await service.state(tenant, paused[0].run_id)).answer)
            before = (paused[0].tokens_in, paused[0].tokens_out, answered)
    ticket = await service.launch(
        tenant,
        StartRun(
            doc,
            body.inputs,
            chat_id=body.chat_id,
            message=message,
            user_id=body.user,
            workflow_version=version,
            history=None if body.chat_id else history,
        ),
    )
    return workflow_id, ticket, before


# ------------------------------------------------------------------ results


def _question(interrupts: list[PendingInterrupt]) -> str:
    """The pending questions as text: each payload's question (or description), with
    its options' labels when it has some."""
    lines = []
    for interrupt in interrupts:
        payload = interrupt.payload.model_dump()
        text = next(
            (str(payload[k]) for k in _QUESTION_KEYS if isinstance(payload.get(k), str) and payload[k]),
            f"({interrupt.kind})",
        )
        options = [
            str(o.get("label") or o.get("id")) for o in payload.get("options") or [] if isinstance(o, dict)
        ]
        lines.append(text + (f" ({' / '.join(options)})" if options else ""))
    return "\n".join(lines)


async def _outcome(
    service: RunService, caller: Principal, run_id: str, before: tuple[int, int, int]
) -> dict[str, Any]:
    """The turn's end: ``{answer, question, citations, usage, finish_reason, flowloom}`` from the stored run
    (``citations``: :func:`~schemas.knowledge.run_citations` of the run's node runs).

    Raises:
        _RunFailed for a run that failed or was cancelled.
    """
    summary = await service.get(caller.tenant_id, run_id)
    state = await service.state(caller.tenant_id, run_id)
    if summary.status in (RunStatus.failed, RunStatus.cancelled):
        message = state.error.message if state.error is not None else summary.status.value
        raise _RunFailed(run_id, summary.status.value, message)
    prompt, completion = summary.tokens_in - before[0], summary.tokens_out - before[1]
    interrupts = summary.pending_interrupts if summary.status is RunStatus.paused else []
    citations = [p.model_dump(mode="json") for p in run_citations(state.node_runs.values())]
    return {
        "answer": state.answer[before[2] :],
        "question": _question(interrupts),
        "citations": citations,
        "usage": _usage(state, prompt, completion),
        "finish_reason": _finish_reason(state),
        "flowloom": {
            "run_id": run_id,
            "chat_id": summary.chat_id,
            "status": summary.status.value,
            "interrupts": [i.model_dump(mode="json") for i in interrupts],
        },
    }


#: the provider finish reasons a turn passes on, strongest first (a filtered part outweighs a cut one)
_PASSED_ON = ("content_filter", "length")


def _finish_reason(state: Any) -> str:
    """``content_filter`` or ``length`` when a model reply in the answer ended so (the
    provider filtered it, or cut it at its ``max_tokens``), else ``stop``. A node run's
    reply counts when its ``answer`` output is part of the run's answer, so a cut draft
    that a later node replaced does not mark the turn."""
    seen: set[str] = set()
    for run in state.node_runs.values():
        answer = (run.outputs or {}).get("answer") if isinstance(run.outputs, dict) else None
        if not isinstance(answer, str) or not answer or answer not in state.answer:
            continue
        reason = (run.data.get("chat") or {}).get("finish_reason")
        if reason in _PASSED_ON:
            seen.add(reason)
    return next((reason for reason in _PASSED_ON if reason in seen), "stop")


def _usage(state: Any, prompt: int, completion: int) -> dict[str, Any]:
    """OpenAI's usage, plus ``estimated`` (an extension OpenAI clients ignore): true when
    some count of the run was estimated because the model server did not report it."""
    estimated = any(
        run.usage is not None and run.usage.estimated for run in (*state.node_runs.values(), *state.history)
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "estimated": estimated,
    }


def _envelope(kind: str, run_id: str, model: str, created: int) -> dict[str, Any]:
    return {"id": f"chatcmpl-{run_id}", "object": kind, "created": created, "model": model}


# --------------------------------------------------------------- the route


@router.post(
    "/chat/completions",
    openapi_extra=_BODY,
    summary="A turn of an app (OpenAI chat completions)",
    responses={
        200: {
            "description": "chat.completion, or chat.completion.chunk lines (SSE)",
            "content": {
                "text/event-stream": {
                    "schema": {"type": "string"},
                    "itemSchema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "data": {"type": "string", "description": "a chunk as JSON, or [DONE]"}
                        },
                    },
                }
            },
        },
        **_OPENAI_ERRORS,
    },
)
async def chat_completions(
    request: Request, service: Service, keys: Keys, workflows: Workflows, heartbeat_s: Heartbeat
) -> Response:
    """One turn of the app ``model`` names (module docstring): a ``chat.completion``, or
    with ``stream`` its chunks. Errors in OpenAI's shape with their status."""
    try:
        caller = await _caller(request, keys)
        body = parse_body(await request.body(), ChatCompletionRequest, "invalid request: ")
        model, ticket, before = await _start(service, workflows, caller, body)
    except Exception as exc:
        return _error_response(exc)
    created = int(time.time())
    if body.stream:
        chunks = _stream(service, caller, body, ticket.run_id, (model, created, before))
        return EventStreamResponse(_with_heartbeats(chunks, heartbeat_s))
    try:
        async for _event in service.follow(caller.tenant_id, ticket.run_id):
            pass  # a client that goes away leaves the run executing
        outcome = await _outcome(service, caller, ticket.run_id, before)
    except Exception as exc:
        return _error_response(exc)
    content = "\n\n".join(part for part in (outcome["answer"], outcome["question"]) if part)
    return JSONResponse(
        {
            **_envelope("chat.completion", ticket.run_id, model, created),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "citations": outcome["citations"]},
                    "finish_reason": outcome["finish_reason"],
                    "logprobs": None,
                }
            ],
            "usage": outcome["usage"],
            "flowloom": outcome["flowloom"],
        }
    )


def _data(payload: dict[str, Any] | str) -> str:
    text = (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    )
    return f"data: {text}\n\n"


async def _with_heartbeats(chunks: AsyncIterator[str], heartbeat_s: float) -> AsyncIterator[str]:
    """``chunks`` with a keep-alive comment after every ``heartbeat_s`` seconds of silence
    (proxies and clients see the stream alive while a node works). Closing it closes
    ``chunks`` (the run goes on)."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    end = object()

    async def pump() -> None:
        try:
            async for item in chunks:
                await queue.put(item)
        finally:
            queue.put_nowait(end)

    task = asyncio.create_task(pump())
    try:
        async for item in with_heartbeats(queue, heartbeat_s):
            if item is end:
                return
            yield item
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            await chunks.aclose()  # type: ignore[attr-defined]  # an async generator


async def _stream(
    service: RunService,
    caller: Principal,
    body: ChatCompletionRequest,
    run_id: str,
    meta: tuple[str, int, tuple[int, int, int]],
) -> AsyncIterator[str]:
    """The chunks of a turn: the role, the answer's deltas (``detail``: every other event
    as a chunk with an empty delta and ``flowloom.event``), the question of a pause, a
    last chunk with ``finish_reason``, ``usage`` and ``flowloom``, then ``[DONE]``; an
    error ends it with an error line then ``[DONE]``. Closing it only stops listening."""
    model, created, before = meta
    head = _envelope("chat.completion.chunk", run_id, model, created)

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        return _data(
            {
                **head,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
                **extra,
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for event in service.follow(caller.tenant_id, run_id):
            if isinstance(event, NodeDelta) and event.channel == "answer":
                yield chunk({"content": event.text})
            elif body.detail:
                yield chunk({}, flowloom={"event": event.model_dump(mode="json")})
        outcome = await _outcome(service, caller, run_id, before)
    except Exception as exc:
        yield _data(_error_payload(exc)[1])
        yield _data("[DONE]")
        return
    if outcome["question"]:
        yield chunk({"content": ("\n\n" if outcome["answer"] else "") + outcome["question"]})
    yield chunk(
        {},
        outcome["finish_reason"],
        usage=outcome["usage"],
        flowloom=outcome["flowloom"],
        citations=outcome["citations"],
    )
    yield _data("[DONE]")
