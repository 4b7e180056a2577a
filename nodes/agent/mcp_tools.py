"""MCP servers as tool sources of the tool-loop nodes (``tool_call``, ``agent``).

A node's ``mcp_servers`` (:class:`~schemas.nodes_agent.McpServer`) are opened when the
node starts, with the official ``mcp`` SDK's :class:`mcp.Client`, and stay open while
its loop runs (:func:`open_mcp_tools`, an async context manager the node wraps around
its loop; leaving it - answer, failure, pause, cancellation - closes every session, so a
stdio server process ends with the node):

- **Connect.** HTTP servers (Streamable HTTP) go through the HTTP node's address
  policy (:class:`~nodes.http.guard.AddressPolicy`, on every connection, after DNS
  resolution): loopback and private targets are refused unless ``FLOWLOOM_HTTP_ALLOW``
  allows them. Stdio servers start only when the operator set
  ``FLOWLOOM_MCP_ALLOW_STDIO``; they get the SDK's small default environment plus the
  config's ``env``, never the whole environment of the Flowloom process. Header and
  ``env`` values have their ``{{secret:NAME}}`` references replaced by the variable
  ``FLOWLOOM_SECRET_NAME`` (:meth:`engine.settings.Settings.environ`) and their
  ``{{ env.NAME }}`` references by the run's environment variable (the workflow's
  settings and secrets, per tenant); a secret that is not set fails the node naming it,
  and values are never recorded or put in messages.
- **List.** Every tool the server lists, or those ``tools`` names (a name the server
  no longer has fails the node, naming the server and the tool), becomes a
  :class:`~nodes.agent.loop.ToolSpec`: the name (``prefix`` + the tool's name, other
  characters than letters, digits, ``_`` and ``-`` replaced by ``_``), description and
  input schema as listed, risk ``read`` for a tool annotated ``readOnlyHint`` and not
  ``destructiveHint``, else ``write`` for ``destructiveHint``, else unknown (the risk gate
  treats unknown as write). The kernel then does the rest as for any tool: argument
  validation against the schema, the per-call timeout, errors back to the model,
  results fenced as data, the confirmation gate.
- **Call.** The result's content blocks become text (text as is; images and audio as
  a note with their type and size; resources by text or URI; structured content as JSON
  when there is no text); ``isError`` results and JSON-RPC errors are error results the
  model may correct. A server that goes away (process exited, connection lost) is not
  something the model can correct: the node fails with reason ``mcp_server_failed``
  naming the server and the tool that was called (:class:`~nodes.agent.loop.ToolSourceFailed`).
- **Refusals.** An HTTP server that answers a request with an error status (a 401 for a
  wrong key, a 403, a 5xx) reaches the SDK, which replaces it with a generic JSON-RPC
  error ("Server returned an error response"). The HTTP client records the last such
  status and the server's message (:func:`http_refusal`), and the node error (or the
  error result of a call) says ``refused the request: 401 unauthorized: <message>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tempfile
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpcore2
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from engine.context import InterruptRequested, NodeContext
from engine.errors import BlockedAddress, FlowloomError, NodeFailed
from engine.settings import SECRET_ENV_PREFIX, Settings
from engine.telemetry import telemetry
from schemas.node_records import McpServerRecord
from schemas.nodes_agent import SECRET_REF, McpServer

from ..http.guard import AddressPolicy, GuardedBackend
from .loop import ToolCallContext, ToolOutcome, ToolSourceFailed, ToolSpec
from .loop_types import Risk

__all__ = [
    "SECRET_ENV_PREFIX",
    "McpConnection",
    "list_server_tools",
    "mcp_risk",
    "open_mcp_tools",
    "render_result",
    "resolve_secrets",
]


_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")
_STDERR_TAIL = 400


#: ``{{ env.NAME }}`` in an MCP server's header or environment value: the run's environment variable
_ENV_REF = re.compile(r"\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def resolve_secrets(
    text: str,
    environ: Mapping[str, str],
    *,
    where: str,
    node_id: str | None = None,
    run_env: Mapping[str, Any] | None = None,
    used: list[str] | None = None,
) -> str:
    """``text`` with each ``{{secret:NAME}}`` replaced by ``environ["FLOWLOOM_SECRET_NAME"]``
    (the operator's secrets) and each ``{{ env.NAME }}`` by the run's environment variable
    ``NAME`` (``run_env``: the workflow's settings and secrets, per tenant). ``used``
    collects the environment values put in, so errors can mask them.

    Raises:
        NodeFailed: (``missing_secret``) a referenced secret or environment variable is not
            set; the message names the variable and ``where`` it is used, never a value.
    """

    def from_run(found: re.Match[str]) -> str:
        name = found.group(1)
        value = (run_env or {}).get(name)
        if value is None or value == "":
            raise NodeFailed(
                f"{where} uses the environment variable {name!r}, which has no value here: declare it "
                "in the workflow's environment (a secret's value is set in the workflow's Environment "
                "section or with `flowloom secrets set`)",
                node_id=node_id,
                reason="missing_secret",
            )
        if used is not None:
            used.append(str(value))
        return str(value)

    text = _ENV_REF.sub(from_run, text)

    def value(found: re.Match[str]) -> str:
        name = SECRET_ENV_PREFIX + found.group(1)
        secret = environ.get(name)
        if not secret:
            raise NodeFailed(
                f"{where} uses the secret {found.group(1)!r}, which is not set: the operator sets it "
                f"as {name} (environment or .env)",
                node_id=node_id,
                reason="missing_secret",
            )
        return secret

    return SECRET_REF.sub(value, text)


def mcp_risk(annotations: Any) -> Risk | None:
    """The risk level of a listed tool from its annotations: ``read`` when ``readOnlyHint``
    (and not ``destructiveHint``), ``write`` when ``destructiveHint``, else None (unknown:
    the gate treats it as write, as the MCP spec's defaults assume a tool may destroy)."""
    if annotations is None:
        return None
    if getattr(annotations, "destructive_hint", None) is True:
        return "write"
    if getattr(annotations, "read_only_hint", None) is True:
        return "read"
    return None


def render_result(result: Any) -> str:
    """The text the model gets for a ``CallToolResult``: its content blocks joined by
    blank lines (text as is; other blocks as a short note), else its structured
    content as JSON."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind} {getattr(block, 'mime_type', '')}, {len(getattr(block, 'data', '') or '')} "
                "base64 characters]"
            )
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n\n".join(parts)


#: the SDK's stand-in messages for a non-2xx answer whose body is not a JSON-RPC error
_SDK_STAND_INS = frozenset({"Server returned an error response", "Not Found", "Session terminated"})
_REFUSAL_CHARS = 300


def http_refusal(status: int, reason: str, body: bytes, content_type: str) -> str:
    """``401 unauthorized: invalid or missing API key``: the status and what the server
    said, from a JSON error (``{"error": {"type", "message"}}`` as Flowloom's API answers,
    ``{"error": "..."}``, ``{"message"|"detail": "..."}``) or the body's first line, else
    the status's reason phrase. At most ``_REFUSAL_CHARS`` characters of the body's words."""
    text = body.decode("utf-8", errors="replace").strip()
    said = ""
    if "json" in content_type.lower():
        with contextlib.suppress(ValueError):
            found = json.loads(text)
            if isinstance(found, dict):
                error = found.get("error")
                if isinstance(error, dict):
                    kind, message = error.get("type") or error.get("code"), error.get("message")
                    said = ": ".join(str(v) for v in (kind, message) if v)
                else:
                    said = next(
                        (
                            str(v)
                            for v in (error, found.get("message"), found.get("detail"))
                            if isinstance(v, str) and v
                        ),
                        "",
                    )
    elif text and not text.lstrip().startswith("<"):  # an HTML error page says nothing a line could
        said = text.splitlines()[0]
    said = said.strip()[:_REFUSAL_CHARS] or reason or "error"
    return f"{status} {said}"


def _refusal_of(response: httpx2.Response, body: bytes) -> str:
    return http_refusal(
        response.status_code, response.reason_phrase, body, response.headers.get("content-type", "")
    )


def _closed(exc: BaseException) -> bool:
    """True when ``exc`` says the connection to the server is gone (not a tool's error)."""
    if isinstance(exc, MCPError):
        return exc.code == -32000 or "connection closed" in str(exc).lower()
    return isinstance(
        exc, (httpx2.TransportError, httpcore2.NetworkError, httpcore.NetworkError, OSError, EOFError)
    )


def _cause(exc: BaseException) -> str:
    """One line saying why, from an exception or the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class _Inner(httpcore2.AnyIOBackend):
    """``httpcore2``'s backend with its connect errors as ``httpcore``'s, which the guard's
    loop over the resolved addresses expects (so ``localhost`` falls back from ``::1`` to
    ``127.0.0.1`` as it does for the HTTP node)."""

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().connect_tcp(*args, **kwargs)
        except httpcore2.ConnectTimeout as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except httpcore2.ConnectError as exc:
            raise httpcore.ConnectError(str(exc)) from exc


def _guarded_http_client(
    policy: AddressPolicy, headers: dict[str, str], node_id: str, on_response: Any = None
) -> httpx2.AsyncClient:
    """An ``httpx2`` client (the transport library of the SDK) whose every connection
    passes the HTTP node's address guard (:class:`GuardedBackend`, duck-typed onto
    ``httpcore2``'s pool: same backend protocol). Proxies from the environment are
    ignored, as the HTTP node ignores them. ``on_response``: an async hook given every
    response before the SDK reads it."""
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    if not hasattr(transport, "_pool"):
        # Fail closed: a client without the guard would reach any address.
        raise NodeFailed("unsupported httpx2 version: cannot install the address guard", node_id=node_id)
    # httpcore's backend protocol, duck-typed onto httpcore2's (same methods, other classes)
    backend: Any = GuardedBackend(policy, node_id=node_id, inner=_Inner())  # type: ignore[arg-type]  # httpcore2's backend
    transport._pool = httpcore2.AsyncConnectionPool(network_backend=backend)
    hooks: dict[str, list[Any]] = {"request": [_send_trace_context]}
    if on_response:
        hooks["response"] = [on_response]
    return httpx2.AsyncClient(
        transport=transport,
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        trust_env=False,
        event_hooks=hooks,
    )


async def _send_trace_context(request: Any) -> None:
    """Send the current trace context (``traceparent``) with a request to an MCP server, so
    the server's spans join the run's trace (httpx2 is not covered by httpx's instrumentation)."""
    carrier = telemetry().trace_context()
    if carrier:
        request.headers.update(carrier)


@dataclass
class McpConnection:
    """One open MCP server of a node: its client, the tools it listed and the calls in flight.

    ``stderr`` holds a stdio server's error output (its last lines explain a crash);
    ``refused`` the last error status of an HTTP server and its message (:func:`http_refusal`).
    """

    server: McpServer
    node_id: str
    client: Client | None = None
    listed: list[Any] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    stderr: Any = None
    connected: bool = False
    secrets: list[str] = field(default_factory=list, repr=False)
    refused: str | None = None
    #: the run's environment variables (``{{ env.NAME }}`` in headers and env values)
    run_env: Mapping[str, Any] = field(default_factory=dict, repr=False)

    async def _on_response(self, response: httpx2.Response) -> None:
        """Record the error status of a POST (the requests that carry messages) and the
        server's message: the SDK keeps neither. The body read here stays readable for
        the SDK (which looks for a JSON-RPC error in it)."""
        if response.status_code < 400 or response.request.method != "POST":
            return
        try:
            body = await response.aread()
        except (httpx2.HTTPError, httpx2.StreamError):
            body = b""
        self.refused = self.redact(_refusal_of(response, body))

    def refusal(self, exc: BaseException) -> str | None:
        """What the server said when ``exc`` (or an exception group's first leaf) is the
        SDK's stand-in for a recorded error status, or an HTTP status error; else None."""
        leaf = _first(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(leaf, httpx2.HTTPStatusError):
            return self.redact(_refusal_of(leaf.response, b""))
        if self.refused is not None and isinstance(leaf, MCPError) and leaf.error.message in _SDK_STAND_INS:
            return self.refused
        return None

    def redact(self, text: str) -> str:
        """``text`` without the secret values this server was given (a server's error output
        or message may echo them, and messages are recorded)."""
        for value in self.secrets:
            text = text.replace(value, "***")
        return text

    def describe(self) -> str:
        """``MCP server 'name' (url or command)`` for messages (no header or env values)."""
        where = self.server.url if self.server.url is not None else self.server.command
        return f"MCP server {self.server.name!r} ({where})"

    def failure(self, exc: BaseException, tool: str | None = None) -> ToolSourceFailed:
        """The node error for a server that went away during ``tool`` (or while connecting)."""
        during = f" during a call of tool {tool!r}" if tool else ""
        tail = ""
        if self.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                self.stderr.seek(0)
                text = self.stderr.read()[-_STDERR_TAIL:].strip()
                tail = f"; its last error output: {text.splitlines()[-1]}" if text else ""
        refused = self.refusal(exc)
        what = "stopped answering" if self.connected else "could not be reached"
        why = f"refused the request{during}: {refused}" if refused else f"{what}{during}: {_cause(exc)}{tail}"
        return ToolSourceFailed(
            self.redact(f"{self.describe()} {why}"), node_id=self.node_id, reason="mcp_server_failed"
        )

    def transport(self, settings: Settings) -> tuple[Any, httpx2.AsyncClient | None]:
        """``(SDK transport, its HTTP client or None)`` for this server: the transport is an
        async context manager of the message streams; the HTTP client (HTTP servers only)
        must be open while it is used.

        Raises:
            NodeFailed: stdio servers are not enabled; a secret is missing.
        """
        server, environ = self.server, settings.environ()
        self.secrets = [
            value for name in server.secrets() if (value := environ.get(SECRET_ENV_PREFIX + name))
        ]
        if server.url is not None:
            headers = {
                key: resolve_secrets(
                    value,
                    environ,
                    where=f"MCP server {server.name!r} header {key!r}",
                    node_id=self.node_id,
                    run_env=self.run_env,
                    used=self.secrets,
                )
                for key, value in server.headers.items()
            }
            headers.setdefault("User-Agent", settings.http_user_agent)
            client = _guarded_http_client(
                AddressPolicy.from_settings(settings), headers, self.node_id, self._on_response
            )
            return streamable_http_client(server.url, http_client=client), client
        if not settings.mcp_allow_stdio:
            raise NodeFailed(
                f"MCP server {server.name!r} is a stdio server (command {server.command!r}), and stdio "
                "servers are not enabled here: the operator enables them with FLOWLOOM_MCP_ALLOW_STDIO=1",
                node_id=self.node_id,
                reason="mcp_stdio_disabled",
            )
        env = {
            key: resolve_secrets(
                value,
                environ,
                where=f"MCP server {server.name!r} env {key!r}",
                node_id=self.node_id,
                run_env=self.run_env,
                used=self.secrets,
            )
            for key, value in server.env.items()
        }
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command=server.command or "", args=list(server.args), env=env or None)
        return stdio_client(params, errlog=self.stderr), None

    def specs(self, default_timeout: float | None) -> list[ToolSpec]:
        """The listed tools the node offers, as tool specs.

        Raises:
            NodeFailed: (``mcp_tool_missing``) a tool ``tools`` names is not listed.
        """
        by_name = {tool.name: tool for tool in self.listed}
        wanted = self.server.tools if self.server.tools is not None else list(by_name)
        missing = [name for name in wanted if name not in by_name]
        if missing:
            raise NodeFailed(
                f"{self.describe()} has no tool {', '.join(map(repr, missing))} (it lists: "
                f"{', '.join(sorted(by_name)) or 'no tools'}); update the node's mcp_servers.tools",
                node_id=self.node_id,
                reason="mcp_tool_missing",
            )
        return [self._spec(by_name[name], default_timeout) for name in wanted]

    def _spec(self, tool: Any, default_timeout: float | None) -> ToolSpec:
        exposed = _UNSAFE.sub("_", self.server.tool_name(tool.name))[:64]
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)

        async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
            return await self.call(tool.name, args)

        return ToolSpec(
            exposed,
            tool.description or tool.title or tool.name,
            schema,
            run,
            risk=mcp_risk(tool.annotations),
            timeout=self.server.timeout or default_timeout,
            meta={
                "kind": "mcp",
                "server": self.server.name,
                "tool": tool.name,
                "transport": self.server.transport,
            },
        )

    async def call(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call tool ``name``: its result, or an error result for the model.

        Raises:
            ToolSourceFailed: the server went away (the node fails; the model cannot fix it).
        """
        assert self.client is not None, "the connection is open while its tools are offered"
        self.in_flight.append(name)
        self.refused = None
        try:
            # the call's span (MCP semantic conventions); its HTTP request carries its traceparent
            with telemetry().span(
                f"tools/call {name}",
                {
                    "mcp.method.name": "tools/call",
                    "gen_ai.tool.name": name,
                    "flowloom.mcp.server": self.server.name,
                    "flowloom.mcp.transport": self.server.transport,
                },
            ) as span:
                result = await self.client.call_tool(name, args)
                if result.is_error:
                    span.fail("tool_error")
        except MCPError as exc:
            self.in_flight.remove(name)
            if _closed(exc):
                raise self.failure(exc, name) from None
            refused = self.refusal(exc)
            said = f"refused the request: {refused}" if refused else f"answered with an error: {exc}"
            return ToolOutcome(
                self.redact(f"MCP server {self.server.name} {said}"),
                is_error=True,
                data={"server": self.server.name, "tool": name, "code": exc.code},
            )
        except Exception as exc:
            self.in_flight.remove(name)
            if _closed(exc):
                raise self.failure(exc, name) from None
            raise
        # A cancellation leaves the name in flight on purpose: when the transport's failure
        # cancelled the call, the node error names it.
        self.in_flight.remove(name)
        return ToolOutcome(
            self.redact(render_result(result)),
            is_error=bool(result.is_error),
            data={"server": self.server.name, "tool": name},
        )


@contextlib.asynccontextmanager
async def _session(conn: McpConnection, settings: Settings) -> AsyncIterator[McpConnection]:
    """``conn`` connected and listed while the block runs; the server's failures, when
    the block ends, as the node error naming the server (and the call in flight)."""
    transport, http_client = conn.transport(settings)
    async with contextlib.AsyncExitStack() as stack:
        if http_client is not None:
            await stack.enter_async_context(http_client)
        if conn.stderr is not None:
            stack.callback(conn.stderr.close)
        try:
            async with Client(transport, cache=None) as client:
                conn.client = client
                conn.listed = await _list_all(client)
                conn.connected = True
                yield conn
        except _OURS:
            raise
        except BaseExceptionGroup as group:
            # The SDK's task groups wrap what leaves the block: the node's own signals
            # (a pause, a cancel, a node error) go on unwrapped; anything else is the
            # transport failing (an HTTP server that went away), which cancelled the
            # block: say which server and which call.
            ours = group.subgroup(lambda e: isinstance(e, _OURS))
            if ours is not None:
                raise _first(ours) from None
            if group.subgroup(lambda e: not isinstance(e, Exception)) is not None:
                raise
            raise conn.failure(group, conn.in_flight[-1] if conn.in_flight else None) from None
        except Exception as exc:
            if _closed(exc) or isinstance(exc, (MCPError, httpx2.HTTPError, TimeoutError)):
                raise conn.failure(exc, conn.in_flight[-1] if conn.in_flight else None) from None
            raise
        finally:
            conn.client = None


#: Exceptions of the engine and the node that pass through a session unchanged.
_OURS = (FlowloomError, InterruptRequested)


def _first(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_all(client: Client) -> list[Any]:
    """Every tool the server lists (all pages)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang the node
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@contextlib.asynccontextmanager
async def open_mcp_tools(
    ctx: NodeContext, servers: Sequence[McpServer], default_timeout: float | None, taken: Collection[str] = ()
) -> AsyncIterator[list[ToolSpec]]:
    """The tools of ``servers``, connected for as long as the block runs (module docstring).

    Each server must connect and list its tools within its ``connect_timeout``. Leaving the
    block closes every session (a stdio server's process ends). ``taken``: the names of the
    node's other tools, which a listed tool may not take.

    Raises:
        NodeFailed: a server is refused (``blocked_address``, ``mcp_stdio_disabled``,
            ``missing_secret``), cannot be reached or listed in time (``mcp_server_failed``),
            lacks a tool the config names (``mcp_tool_missing``), lists a tool whose name
            another tool of the node has (``mcp_tool_name_taken``), or went away during a
            call (``mcp_server_failed``).
    """
    settings = ctx.deps.settings
    specs: list[ToolSpec] = []
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            conn = McpConnection(server, ctx.node_id, run_env=ctx.state.env)
            try:
                async with asyncio.timeout(server.connect_timeout):
                    await stack.enter_async_context(_session(conn, settings))
            except TimeoutError:
                raise conn.failure(
                    TimeoutError(f"no answer within {server.connect_timeout:g}s (connect_timeout)")
                ) from None
            except BlockedAddress as exc:
                raise NodeFailed(
                    f"{conn.describe()}: {exc}", node_id=ctx.node_id, reason="blocked_address"
                ) from None
            specs += _unique(conn.specs(default_timeout), specs, taken, ctx.node_id)
        ctx.node_run.data["mcp_servers"] = [
            McpServerRecord(
                name=s.name,
                transport=s.transport,
                tools=[t.meta["tool"] for t in specs if t.meta.get("server") == s.name],
            )
            for s in servers
        ]
        yield specs


def _unique(
    new: list[ToolSpec], have: list[ToolSpec], taken: Collection[str], node_id: str
) -> list[ToolSpec]:
    """``new``, when none of its names is one of ``have`` (earlier servers) or ``taken``.

    Raises:
        NodeFailed: (``mcp_tool_name_taken``) naming the tool, both owners and the way out.
    """
    owners = {spec.name: f"MCP server {spec.meta['server']!r}" for spec in have}
    owners.update({name: "another tool of the node" for name in taken})
    for spec in new:
        if spec.name in owners:
            raise NodeFailed(
                f"MCP server {spec.meta['server']!r} lists a tool {spec.name!r}, a name "
                f"{owners[spec.name]} already has; give the server a prefix (mcp_servers.prefix) or "
                "name the tools to offer (mcp_servers.tools)",
                node_id=node_id,
                reason="mcp_tool_name_taken",
            )
    return new


async def list_server_tools(server: McpServer, settings: Settings) -> list[Any]:
    """The tools ``server`` lists (``mcp.types.Tool``), for the ``flowloom mcp tools`` command.

    Raises:
        NodeFailed: as :func:`open_mcp_tools` when connecting.
    """
    conn = McpConnection(server, "mcp")
    try:
        async with asyncio.timeout(server.connect_timeout):
            async with _session(conn, settings) as open_conn:
                return list(open_conn.listed)
    except TimeoutError:
        raise conn.failure(TimeoutError(f"no answer within {server.connect_timeout:g}s")) from None
    except BlockedAddress as exc:
        raise NodeFailed(f"{conn.describe()}: {exc}", reason="blocked_address") from None
