"""The MCP endpoint: published workflows as the tools of a Model Context Protocol server.

``/v1/mcp`` speaks MCP over Streamable HTTP (the official ``mcp`` SDK's low-level
:class:`mcp.server.lowlevel.Server` behind its :class:`StreamableHTTPSessionManager`),
so Claude Desktop, IDEs and the SDK's own :class:`mcp.Client` can call Flowloom apps.

- **Keys.** Every request needs ``Authorization: Bearer <key>`` (the API's keys,
  :mod:`api.auth`); without a valid key the answer is 401 before any MCP message is read.
  A session belongs to the key that opened it (the SDK refuses it to another key).
- **Tools.** ``tools/list``: each published workflow the key may run (the tenant's, or
  the one app of a key scoped to an app) is a tool named by the workflow id, described
  by its description (else its name); the input schema is made of the workflow's
  declared inputs (type, description, required unless it has a default). A key of
  another tenant sees none of them and cannot call them.
- **Calls.** ``tools/call`` starts a run of the published version through the run
  service's front door (``RunService.launch`` then ``follow``) as every other door - and
  answers when it ends: the answer (else the outputs as JSON) as text, and
  ``structuredContent`` ``{run_id, status, outputs, answer}``. A failed run, or one that
  paused to ask a person (the question is in the text; the run stays paused and is
  answered through ``/v1/runs/{id}/resume``), is an ``isError`` result. A ``query``
  argument is also the run's user message (``sys.query``); a chat flow without a
  ``query`` input takes it as ``message`` (its schema lists it, required when the
  workflow reads ``sys.query``).
- **Progress.** With a progress token, each node event (started, finished, failed,
  interrupts; not text deltas) is a ``notifications/progress`` whose message says what
  happened (``node 'fetch' succeeded``); ``progress`` counts the events.
- **Cancellation.** A client that cancels the call (``notifications/cancelled``, or a
  request dropped by the client) stops the run as ``POST /v1/runs/{id}/stop`` does: the
  run ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, FastAPI
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from engine.errors import FlowloomError
from engine.ports import WorkflowNotFound
from engine.shapes import system_reads, workflow_writes
from schemas.events import NodeDelta, PendingInterrupt
from schemas.launch import StartRun
from schemas.types import RunStatus, VarType
from schemas.workflow import InputVar

from ..auth import Principal, bearer, principal
from ..deployment import deployment_of
from ..errors import ApiError, describe

if TYPE_CHECKING:  # the SDK is imported when the endpoint is first used (about a second of start-up)
    import mcp.types as mt
    from mcp.server.lowlevel import Server

__all__ = ["MCP_PATH", "build_server", "input_schema", "router"]

MCP_PATH = "/v1/mcp"
_CALLER = "flowloom_caller"
_JSON_TYPES = {
    VarType.string: "string",
    VarType.number: "number",
    VarType.boolean: "boolean",
    VarType.object: "object",
    VarType.array: "array",
}
_QUESTION_KEYS = ("question", "description", "prompt", "message", "title", "text")


# --------------------------------------------------------------------- callers


async def _authenticate(app: FastAPI, request: Request) -> Principal:
    """The key behind a request's ``Authorization`` header. Raises ApiError 401."""
    return await principal(deployment_of(app).keys, await bearer(request))


async def _caller_of(ctx: Any) -> tuple[FastAPI, Principal]:
    """The app and the caller of an MCP request, from the HTTP request that carried it.

    Raises:
        ValueError: no HTTP request (the endpoint serves HTTP only).
    """
    request: Request | None = getattr(ctx, "request", None)
    if request is None:
        raise ValueError("the Flowloom MCP endpoint serves HTTP requests only")
    app: FastAPI = request.scope["app"]
    caller = request.scope.get("state", {}).get(_CALLER)
    if caller is None:  # a request framed without our wrapper's state: authenticate again
        caller = await _authenticate(app, request)
    return app, caller


# ----------------------------------------------------------------------- tools


#: the argument that carries the user's message to a chat flow without a ``query`` input
MESSAGE_ARG = "message"


def input_schema(doc: dict[str, Any], reads: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON Schema of a workflow's declared inputs: one property per input (its
    type when it has a JSON one, its description); required when declared required
    without a default.

    ``reads`` are the ``sys`` names the workflow reads (:func:`engine.shapes.system_reads`).
    A chat flow (it reads ``query`` or ``history``) needs the user's message, which is no
    declared input, so a client could not send it: it gets a string ``message`` property
    (a declared ``query`` input carries the message instead), required when the workflow
    reads ``query`` - without it the run would answer an empty message.
    """
    props: dict[str, Any] = {}
    required: list[str] = []
    reads = set(reads)
    for raw in doc.get("inputs") or []:
        try:
            var = InputVar.model_validate(raw)
        except ValidationError:
            continue  # a published document compiled; an odd entry is left out, not fatal
        schema: dict[str, Any] = {}
        if var.type in _JSON_TYPES:
            schema["type"] = _JSON_TYPES[var.type]
        if var.description:
            schema["description"] = var.description
        if var.default is not None:
            schema["default"] = var.default
        props[var.name] = schema
        if var.required and var.default is None:
            required.append(var.name)
    if reads & {"query", "history"}:
        carrier = "query" if "query" in props else MESSAGE_ARG
        if carrier not in props:
            props[carrier] = {"type": "string"}
        props[carrier].setdefault("description", "the user's message to the chat flow")
        if "query" in reads and carrier not in required and "default" not in props[carrier]:
            required.append(carrier)
    return {"type": "object", "properties": props, "required": required}


async def _published(app: FastAPI, caller: Principal) -> list[tuple[str, dict[str, Any], str]]:
    """``(workflow id, published document, version)`` of every app ``caller`` may run."""
    repo = deployment_of(app).workflows
    found = []
    for record in await repo.list(caller.tenant_id, caller.app_id):
        if record.published_version is None:
            continue
        version = await repo.get_version(caller.tenant_id, record.id, record.published_version)
        found.append((record.id, version.doc or {}, str(version.version)))
    return found


async def _list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
    """``tools/list``: the published workflows the caller may run (module docstring)."""
    import mcp.types as mt

    app, caller = await _caller_of(ctx)
    tools = []
    for workflow_id, doc, _version in await _published(app, caller):
        description = doc.get("description") or doc.get("name") or f"Run the Flowloom workflow {workflow_id}"
        # Read-only when no node of it can change anything outside the run, so a client
        # (a Flowloom agent among them) may call it without asking first.
        catalog = deployment_of(app).service.catalog
        read_only = workflow_writes(doc, catalog=catalog) is None
        schema = input_schema(doc, system_reads(doc, catalog=catalog))
        tools.append(
            mt.Tool(
                name=workflow_id,
                description=description,
                input_schema=schema,
                annotations=mt.ToolAnnotations(
                    title=doc.get("name") or workflow_id, read_only_hint=read_only, open_world_hint=True
                ),
            )
        )
    return mt.ListToolsResult(tools=tools)


async def _app_of(app: FastAPI, caller: Principal, name: str) -> tuple[dict[str, Any], str]:
    """The published document and version of app ``name`` for ``caller``.

    Raises:
        ApiError 404: not an app this key may run (another tenant's, another app for an
        app key, unknown, or not published) - one answer for all, so nothing leaks.
    """
    missing = ApiError(
        404, "not_found", f"no tool {name!r} (tools/list names the published workflows this key may run)"
    )
    if caller.app_id is not None and name != caller.app_id:
        raise missing
    repo = deployment_of(app).workflows
    try:
        record = await repo.get(caller.tenant_id, name)
    except WorkflowNotFound:
        raise missing from None
    if record.published_version is None:
        raise missing
    version = await repo.get_version(caller.tenant_id, name, record.published_version)
    return version.doc or {}, str(version.version)


# ------------------------------------------------------------------------ calls


def _error(message: str, **structured: Any) -> mt.CallToolResult:
    import mcp.types as mt

    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=message)],
        is_error=True,
        structured_content=structured or None,
    )


def _progress_text(event: Any) -> str | None:
    """What a progress notification says about ``event`` (None: not worth one): ``node
    'fetch' started``, ``node 'fetch' succeeded`` / ``skipped`` / ``failed`` (a finished
    node's status: a skipped branch is no finished work), ``run <id> started``..."""
    kind = getattr(event, "type", "")
    node = getattr(event, "node_id", None)
    if isinstance(event, NodeDelta) or not kind:
        return None
    if node:
        status = getattr(event, "status", None)
        if kind == "node_finished" and status is not None:  # skipped, failed... say so, not "finished"
            return f"node {node!r} {getattr(status, 'value', status)}"
        return f"node {node!r} {kind.removeprefix('node_')}"
    if kind.startswith("run_") and getattr(event, "run_id", None):
        return f"run {event.run_id} {kind.removeprefix('run_').replace('_', ' ')}"
    return kind.replace("_", " ")


async def _start(app: FastAPI, caller: Principal, name: str, arguments: dict[str, Any]) -> str:
    """Launch a run of app ``name`` (the deployment places it, as any run without
    execution headers); its id.

    Raises:
        ApiError (404, 429), InvalidInputs, CompileError: nothing was executed.
    """
    doc, version = await _app_of(app, caller, name)
    declared = {raw.get("name") for raw in doc.get("inputs") or [] if isinstance(raw, dict)}
    arguments = dict(arguments)
    if MESSAGE_ARG not in declared and isinstance(arguments.get(MESSAGE_ARG), str):
        message = arguments.pop(MESSAGE_ARG)  # the chat flow's message, not an input
    else:
        message = arguments.get("query")
    ticket = await deployment_of(app).service.launch(
        caller.tenant_id,
        StartRun(
            doc, arguments, message=message if isinstance(message, str) else None, workflow_version=version
        ),
    )
    return ticket.run_id


def _question(interrupts: list[PendingInterrupt]) -> str:
    """The pending questions of a paused run, one per line."""
    lines = []
    for interrupt in interrupts:
        payload = interrupt.payload.model_dump()
        lines.append(
            next(
                (str(payload[k]) for k in _QUESTION_KEYS if isinstance(payload.get(k), str) and payload[k]),
                f"({interrupt.kind})",
            )
        )
    return "\n".join(lines)


async def _result(app: FastAPI, caller: Principal, run_id: str) -> mt.CallToolResult:
    """The tool result of an ended (or paused) run."""
    import mcp.types as mt

    service = deployment_of(app).service
    summary = await service.get(caller.tenant_id, run_id)
    state = await service.state(caller.tenant_id, run_id)
    status = summary.status
    structured = {"run_id": run_id, "status": status.value, "outputs": state.outputs, "answer": state.answer}
    if status is RunStatus.succeeded:
        text = state.answer or json.dumps(state.outputs, ensure_ascii=False, default=str)
        return mt.CallToolResult(
            content=[mt.TextContent(type="text", text=text)], structured_content=structured
        )
    if status is RunStatus.paused:
        question = _question(summary.pending_interrupts)
        return _error(
            f"run {run_id} paused to ask a person: {question} (answer it with POST /v1/runs/{run_id}/resume)",
            **structured,
        )
    message = state.error.message if state.error is not None else status.value
    return _error(f"run {run_id} {status.value}: {message}", **structured)


async def _follow(ctx: Any, app: FastAPI, caller: Principal, run_id: str) -> None:
    """Relay the run's events as progress notifications until it ends or pauses."""
    count = 0
    async for event in deployment_of(app).service.follow(caller.tenant_id, run_id):
        text = _progress_text(event)
        if text is not None:
            count += 1
            with contextlib.suppress(Exception):  # a client gone away only stops listening
                await ctx.session.report_progress(count, None, text)


async def _call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
    """``tools/call``: run the workflow, relay progress, answer with its result; a call
    the client cancels stops the run (shielded, so the stop is sent even while cancelled)."""
    app, caller = await _caller_of(ctx)
    arguments = dict(params.arguments or {})
    try:
        run_id = await _start(app, caller, params.name, arguments)
    except (ApiError, FlowloomError) as exc:
        return _error(_refusal(exc))
    try:
        await _follow(ctx, app, caller, run_id)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _stop(app, caller, run_id)
        raise
    return await _result(app, caller, run_id)


def _refusal(exc: BaseException) -> str:
    """The API's own message for a call refused before it ran (bad inputs, quota...), with
    each problem it lists, never a traceback."""
    _status, body, _headers = describe(exc)
    error = body.get("error", {})
    problems = [
        p.get("message", str(p)) if isinstance(p, dict) else str(p) for p in error.get("problems") or []
    ]
    return "; ".join([error.get("message", "refused"), *problems])


async def _stop(app: FastAPI, caller: Principal, run_id: str) -> None:
    """Stop a run whose caller cancelled the call (as ``POST /v1/runs/{id}/stop``)."""
    service = deployment_of(app).service
    with contextlib.suppress(FlowloomError):  # it may have ended in between
        await service.cancel(caller.tenant_id, run_id, "cancelled by the MCP client")


def build_server() -> Server[Any]:
    """The low-level MCP server of the endpoint (tools only), announcing Flowloom's
    package version in ``serverInfo`` (as the OpenAPI document does)."""
    from importlib import metadata

    from mcp.server.lowlevel import Server

    try:
        version = metadata.version("flowloom")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        version = "0.0.0"
    return Server(
        "flowloom",
        version=version,
        instructions="Each tool runs a published Flowloom workflow and returns its answer.",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )


# ------------------------------------------------------------------------ HTTP


class _Sessions:
    """The SDK's session manager of one app, started by the first MCP request (apps that
    never serve MCP never import the SDK) and stopped with the app. Its task group lives
    in a task of its own: an anyio task group must be left by the task that entered it."""

    def __init__(self) -> None:
        self.manager: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        self.lock = asyncio.Lock()

    async def get(self) -> Any:
        """The running session manager.

        Raises:
            whatever stopped the manager from starting.
        """
        async with self.lock:
            if self.manager is None:
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                manager = StreamableHTTPSessionManager(build_server())
                ready = asyncio.Event()

                async def hold() -> None:
                    async with manager.run():
                        ready.set()
                        await self.stop.wait()

                self.task = asyncio.create_task(hold(), name="mcp session manager")
                waiter = asyncio.create_task(ready.wait())
                await asyncio.wait([self.task, waiter], return_when=asyncio.FIRST_COMPLETED)
                if not ready.is_set():
                    waiter.cancel()
                    task, self.task = self.task, None
                    await task  # raises what stopped it
                self.manager = manager
        return self.manager

    async def close(self) -> None:
        """Stop the manager (its sessions end) if it was started."""
        if self.task is not None:
            self.stop.set()
            await self.task


class _Endpoint:
    """The ASGI endpoint at ``/v1/mcp``: the key first (401 without one), then the SDK's
    session manager with the key as the session's owner."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app: FastAPI = scope["app"]
        request = Request(scope, receive)
        try:
            caller = await _authenticate(app, request)
        except ApiError as exc:
            status, body, headers = describe(exc)
            await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        scope["user"] = AuthenticatedUser(
            AccessToken(token=caller.key_id, client_id=caller.key_id, scopes=[], subject=caller.tenant_id)
        )
        scope.setdefault("state", {})[_CALLER] = caller
        manager = await app.state.mcp.get()
        await manager.handle_request(scope, receive, send)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's MCP sessions (:class:`_Sessions`), closed when the app stops."""
    sessions = _Sessions()
    app.state.mcp = sessions
    try:
        yield
    finally:
        await sessions.close()


router = APIRouter(lifespan=_lifespan)
router.routes.append(
    Route(MCP_PATH, endpoint=_Endpoint(), methods=["GET", "POST", "DELETE"], include_in_schema=False)
)
