"""Config models of the agent node kinds (the tool-call node; the planning agent is added below).

Behaviour lives in ``nodes/agent/tool_call.py`` on the shared loop kernel ``nodes/agent/loop.py``.

Tool-call node: a model loops over the tools it is given until it answers.
Tools are, in one namespace of unique names:

- **graph tools** (``tools``): the node's body. Nodes with ``parent: <this node>`` form
  the body (like an ``iteration`` node's); each tool names one body *root* (a body node
  with no incoming edge) and is that node plus its descendants in the body. Its
  ``parameters`` become the JSON Schema the model fills; inside the sub-graph the
  arguments are read as ``{"ref": "<this node>.args.<param>"}`` (also ``.call_id``).
  ``result`` (resolved in the tool run's scope, so it may reference the sub-graph's
  nodes) is what the model gets back: a reference, an object/array holding references,
  or a Jinja2 template string; default: the outputs of the last node that ran, as JSON.
- **HTTP tools** (``http_tools``, and ``openapi``): OpenAPI-style operations -
  ``operationId``, ``method``, ``path`` with ``{param}`` segments, ``parameters`` (``in``:
  ``path`` / ``query`` / ``header``, with a JSON ``schema``), ``requestBody`` (JSON schema)
  - called through the HTTP request node's SSRF-guarded client. ``base_url`` and
  ``headers`` are templates rendered with the run's values (credentials belong there,
  never in what the model fills). ``openapi`` takes a whole document (``servers`` and
  ``paths``) and adds one tool per operation.
- **workflow tools** (``workflow_tools``): another workflow of the tenant by id - in the
  server its published version (or the pinned ``version``), on the command line its
  file (:mod:`engine.workflow_files`) - run as a child run; its declared inputs are the
  parameters; its answer (else its outputs as JSON) is the result.
- **builtin tools** (``builtin_tools``): account-free utilities of :mod:`nodes.agent.builtin_tools`
  (current time, weekday, JSON parse/replace/insert/delete, arithmetic), run in-process,
  risk ``read``.
- **MCP tools** (``mcp_servers``): the tools of Model Context Protocol servers, over
  Streamable HTTP (``url`` + ``headers``) or stdio (``command`` + ``args``, only where the
  operator enabled stdio servers); listed when the node starts, all of them or the
  ``tools`` named (see :class:`McpServer`).
- **dataset tools** (``dataset_tools``): search the tenant's datasets (the knowledge
  retrieval node's options) for the query the model writes; the result is the numbered
  quote with sources, risk ``read``. ``relevance_model``: a chat model that keeps only the
  chunks relevant to the query before the model sees them (FastGPT's dataset tool).
- the **stop tool** (``stop_tool``): calling it ends the loop after that round.

**Risk gate** (both kinds, on by default): a write-level tool - declared ``risk:
write``, an HTTP operation other than GET/HEAD/OPTIONS without ``risk``, a workflow
tool without ``risk``, a graph tool whose sub-graph writes (see
:func:`nodes.agent.tool_call.graph_tool_risk`), an MCP tool not annotated ``readOnlyHint`` - runs only after a person confirms the call
(a ``confirm`` interrupt). ``allow_write_tools: true`` opts the node out, a list of
names allows those tools only. A model can be talked into calling a destructive tool by
text it reads (a tool result, a web page), so the node that runs tools asks first.

Tools run one after another. Outputs: ``answer``, ``messages`` (the
assistant/tool trail), ``usage`` (model tokens and cost, each call priced on its own),
``cost`` (model + tools), ``trace`` (one entry per round), ``stop_reason``, ``rounds``.

The tool models (graph, HTTP, workflow, built-in and dataset tools) live in
:mod:`schemas.nodes_agent_tools` and are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .nodes import Requirement, node_kind
from .nodes_agent_tools import (
    BUILTIN_TOOL_NAMES,
    TOOL_NAME,
    BuiltinToolRef,
    DatasetTool,
    GraphTool,
    HttpTool,
    HttpToolParam,
    ToolParam,
    WorkflowTool,
    openapi_operations,
)
from .nodes_llm_base import LLMNodeConfig, TextValue
from .types import VarType
from .values import Value

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = [
    "AgentConfig",
    "BUILTIN_TOOL_NAMES",
    "BuiltinToolRef",
    "DatasetTool",
    "FileReaderTool",
    "GraphTool",
    "HttpTool",
    "HttpToolParam",
    "McpServer",
    "ModelAgentTool",
    "StopTool",
    "ToolCallConfig",
    "ToolLoopConfig",
    "ToolParam",
    "WorkflowTool",
    "SECRET_REF",
    "openapi_operations",
    "secret_names",
]

SECRET_REF = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ANY_SECRET_REF = re.compile(r"\{\{\s*secret:(.*?)\}\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
#: ``{{ env.NAME }}``: a reference to an environment variable of the workflow (a secret one is stored encrypted)
_ENV_REF = re.compile(r"\{\{\s*env\.[A-Za-z_][A-Za-z0-9_]*\s*\}\}")
#: Header names that carry credentials: their value must come from a secret reference.
_CREDENTIAL_HEADER = re.compile(
    r"authorization|cookie|token|secret|password|passwd|credential|api[-_]?key|"
    r"(^|[-_])key($|[-_])",
    re.IGNORECASE,
)


def secret_names(text: str) -> list[str]:
    """The secret names ``text`` references (``{{secret:NAME}}``), in order.

    Raises:
        ValueError: a ``{{secret:...}}`` whose name is not a letter or ``_`` followed by
            letters, digits and ``_``.
    """
    for found in _ANY_SECRET_REF.finditer(text):
        if not SECRET_REF.fullmatch(found.group(0)):
            raise ValueError(
                f"{found.group(0)!r} is not a secret reference: write {{{{secret:NAME}}}} with NAME "
                "made of letters, digits and _"
            )
    return SECRET_REF.findall(text)


class McpServer(BaseModel):
    """A Model Context Protocol server whose tools the model may call.

    Transport: ``url`` (Streamable HTTP; reached through the HTTP node's address policy,
    so private and loopback addresses need ``FLOWLOOM_HTTP_ALLOW``) with ``headers``, or
    ``command`` + ``args`` (+ ``env``) started as a local process speaking stdio - only
    where the operator enabled stdio servers (``FLOWLOOM_MCP_ALLOW_STDIO``), since the
    workflow then chooses a program to run on the server's machine.

    Credentials never sit in the workflow: header and ``env`` values are literal text in
    which ``{{secret:NAME}}`` is replaced at run time by the operator's secret ``NAME``
    (``FLOWLOOM_SECRET_NAME`` in the environment or ``.env``); a header that carries
    credentials (``Authorization``, ``Cookie``, ``X-Api-Key``, ``*token*``...) must take
    its value from one. The URL may not carry user info for the same reason.

    ``tools``: the tools offered (None: every tool the server lists when the node
    starts); a named tool the server no longer has fails the node, naming both.
    ``prefix`` is put before each tool's name as the model sees it (two servers with a
    tool of the same name). ``timeout``: seconds per call (None: the node's
    ``tool_timeout``); ``connect_timeout``: seconds to connect and list the tools.
    Risk: a tool annotated ``readOnlyHint`` (and not ``destructiveHint``) is read-level,
    every other tool is write-level and asks for confirmation unless allowed by
    ``allow_write_tools`` (by the name the model sees).
    """

    # defer_build (here and on the other tool models of this module): the validator is
    # built on first use, so checking a workflow that has none of these pays nothing
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(
        pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="the server's label in messages and records"
    )
    url: str | None = Field(
        default=None, description="Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp"
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="sent with every request; values may hold "
        "{{ env.NAME }} and {{secret:NAME}} references (credentials must)",
    )
    command: str | None = Field(default=None, min_length=1, description="stdio server: the program to start")
    args: list[str] = Field(default_factory=list, description="stdio server: its arguments")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio server: environment variables; values may "
        "hold {{ env.NAME }} and {{secret:NAME}} references",
    )
    tools: list[str] | None = Field(default=None, description="the tools offered; None: every tool it lists")
    prefix: str = Field(
        default="", pattern=r"^[A-Za-z0-9_\-]{0,32}$", description="put before each tool name"
    )
    timeout: float | None = Field(
        default=None, gt=0, le=3600, description="seconds per call; None: the node's"
    )
    connect_timeout: float = Field(
        default=20.0, gt=0, le=300, description="seconds to connect and list the tools"
    )

    @property
    def transport(self) -> Literal["http", "stdio"]:
        """``http`` (``url``) or ``stdio`` (``command``)."""
        return "http" if self.url is not None else "stdio"

    def tool_name(self, tool: str) -> str:
        """The name the model sees for the server's tool ``tool``."""
        return self.prefix + tool

    def secrets(self) -> list[str]:
        """Every secret name the headers and environment reference."""
        return [
            name for value in (*self.headers.values(), *self.env.values()) for name in secret_names(value)
        ]

    @model_validator(mode="after")
    def _check(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError(
                f"MCP server {self.name!r}: give either url (Streamable HTTP) or command (stdio)"
            )
        if self.url is not None:
            self._check_url(self.url)
            if self.args or self.env:
                raise ValueError(f"MCP server {self.name!r}: args and env are for stdio servers (command)")
        elif self.headers:
            raise ValueError(f"MCP server {self.name!r}: headers are for HTTP servers (url)")
        for key, value in self.headers.items():
            if not _HEADER_NAME.match(key):
                raise ValueError(f"MCP server {self.name!r}: {key!r} is not a valid header name")
            if _CREDENTIAL_HEADER.search(key) and not secret_names(value) and not _ENV_REF.search(value):
                raise ValueError(
                    f"MCP server {self.name!r}: header {key!r} carries credentials, which must not be "
                    "stored in the workflow: write its value with a secret reference, e.g. "
                    "'Bearer {{ env.MY_TOKEN }}' (a secret environment variable of the workflow) or "
                    "'Bearer {{secret:MY_TOKEN}}' (the operator sets FLOWLOOM_SECRET_MY_TOKEN)"
                )
        self.secrets()  # a malformed reference is an error here, before any run
        if self.tools is not None:
            bad = [t for t in self.tools if not re.fullmatch(TOOL_NAME, self.tool_name(t))]
            if bad:
                raise ValueError(
                    f"MCP server {self.name!r}: tool names must be 1-64 letters, digits, _ or - "
                    f"(with the prefix): {bad}"
                )
            dupes = sorted({t for t in self.tools if self.tools.count(t) > 1})
            if dupes:
                raise ValueError(f"MCP server {self.name!r}: tools named twice: {dupes}")
        return self

    def _check_url(self, url: str) -> None:
        scheme, sep, rest = url.partition("://")
        host = rest.split("/", 1)[0].split("?", 1)[0]
        if not sep or scheme.lower() not in ("http", "https") or not host:
            raise ValueError(
                f"MCP server {self.name!r}: url must be an http:// or https:// URL with a host (got {url!r})"
            )
        if "@" in host:
            raise ValueError(
                f"MCP server {self.name!r}: the url must not carry credentials (user:password@); send "
                "them in a header with a secret reference"
            )
        if "{{" in url or "{%" in url:
            raise ValueError(f"MCP server {self.name!r}: the url is fixed text (no templates or secrets)")


class StopTool(BaseModel):
    """The stop tool: calling it ends the loop after the round (the tool itself does nothing)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(default="stop", pattern=TOOL_NAME)
    description: str = (
        "Call this when the task is finished and nothing more should be done; the run ends here."
    )


class ToolLoopConfig(LLMNodeConfig):
    """Fields and checks shared by the two kinds that run the tool loop (``tool_call``,
    ``agent``): prompts, business tool sources and the loop limits.

    Loop limits: ``max_rounds`` model calls (the last one may only answer); more than
    ``tool_only_cap`` rounds of tool calls in a row without answer text force an answer;
    ``repeat_limit`` identical calls in a row are a loop; tool results longer than
    ``max_result_chars`` are cut for the model (kept whole in the node run);
    ``tool_timeout`` seconds per call; ``mode``: ``auto`` (native tool calling when the
    model has it, else the JSON protocol), ``native``, ``json``; ``max_parse_retries``
    unreadable JSON-protocol replies in a row are tolerated. ``allow_write_tools``: the risk
    gate's opt-out (module docstring): ``false`` (default) asks before every write-level
    call, ``true`` runs them all, a list names the write tools that run without asking.
    """

    history: int = Field(
        default=6, ge=0, le=100, description="past turns of history_source put in the prompt"
    )
    system_prompt: str = Field(default="", description="Jinja2 template")
    user_prompt: TextValue = Field(default="{{ sys.query }}", description="the task: template or reference")
    tools: list[GraphTool] = Field(default_factory=list)
    http_tools: list[HttpTool] = Field(default_factory=list)
    openapi: dict[str, Any] | None = Field(
        default=None, description="OpenAPI-style document: one tool per operation"
    )
    workflow_tools: list[WorkflowTool] = Field(default_factory=list)
    builtin_tools: list[BuiltinToolRef] = Field(default_factory=list)
    dataset_tools: list[DatasetTool] = Field(
        default_factory=list, description="searches of the tenant's datasets"
    )
    mcp_servers: list[McpServer] = Field(
        default_factory=list, description="MCP servers whose tools are offered"
    )
    max_rounds: int = Field(default=50, ge=1, le=500)
    tool_only_cap: int = Field(default=5, ge=0, le=100, description="0: no cap")
    repeat_limit: int = Field(default=3, ge=0, le=100, description="0: no loop detection")
    max_result_chars: int = Field(default=8000, ge=100, le=1_000_000)
    tool_timeout: float | None = Field(default=60.0, gt=0, le=3600)
    max_parse_retries: int = Field(default=2, ge=0, le=10)
    mode: Literal["auto", "native", "json"] = "auto"
    stream: bool = Field(default=True, description="stream answer deltas (native tool calling only)")
    allow_write_tools: bool | list[str] = Field(
        default=False,
        description="risk gate opt-out: true, or names of "
        "write tools that run without a person's confirmation",
    )

    def declared_risks(self) -> dict[str, str | None]:
        """Tool name -> the risk its config declares: ``read``/``write``; an HTTP operation
        without ``risk`` is ``read`` for GET/HEAD/OPTIONS, else ``write``; None when only the
        run can tell (a graph tool without ``risk``: its sub-graph decides) or nothing is
        declared (a workflow tool without ``risk``: unknown, treated as write)."""
        risks: dict[str, str | None] = {t.name: t.risk for t in self.tools}
        risks.update({op.operationId: op.tool_risk for op in self.http_operations()})
        risks.update({t.tool_name: t.risk for t in self.workflow_tools})
        risks.update({t.tool_name: "read" for t in self.builtin_tools})
        risks.update({t.name: "read" for t in self.dataset_tools})
        risks.update({server.tool_name(t): None for server in self.mcp_servers for t in server.tools or ()})
        return risks

    def asks_confirmation(self) -> bool:
        """True when a tool known from the config alone may pause the node for a confirmation
        (a write-level or undeclared non-graph tool the node does not allow); such a node
        cannot sit inside a loop body. Graph tools without ``risk`` are judged at run time."""
        if self.allow_write_tools is True:
            return False
        allowed = set(self.allow_write_tools) if isinstance(self.allow_write_tools, list) else set()
        if any(server.tools is None for server in self.mcp_servers):
            return True  # its tools (and their annotations) are known only once the node runs
        graph = {t.name for t in self.tools}
        return any(
            name not in allowed and (risk == "write" or (risk is None and name not in graph))
            for name, risk in self.declared_risks().items()
        )

    def requirements(self) -> Iterator[Requirement]:
        """Stdio MCP servers need the operator's ``mcp_allow_stdio``; every
        ``{{secret:NAME}}`` of a server's headers or environment needs its secret."""
        for index, server in enumerate(self.mcp_servers):
            where = f"config.mcp_servers[{index}]"
            if server.transport == "stdio":
                yield Requirement(
                    kind="setting",
                    name="mcp_allow_stdio",
                    path=f"{where}.command",
                    why=f"MCP server {server.name!r} starts a local process (stdio)",
                )
            for name in dict.fromkeys(server.secrets()):
                yield Requirement(
                    kind="secret", name=name, path=where, why=f"MCP server {server.name!r} sends it"
                )

    @model_validator(mode="after")
    def _check_tools(self) -> ToolLoopConfig:
        if self.openapi is not None:
            try:
                openapi_operations(self.openapi)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        names = self.tool_names()
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tool names must be unique across all of this node's tools: {dupes}")
        servers = [server.name for server in self.mcp_servers]
        dupes = sorted({n for n in servers if servers.count(n) > 1})
        if dupes:
            raise ValueError(f"MCP server names must be unique: {dupes}")
        nodes = [t.node for t in self.tools]
        dupes = sorted({n for n in nodes if nodes.count(n) > 1})
        if dupes:
            raise ValueError(f"a body node can be the root of one tool only: {dupes}")
        return self

    def http_operations(self) -> list[HttpTool]:
        """``http_tools`` plus the operations of ``openapi``."""
        return list(self.http_tools) + (openapi_operations(self.openapi) if self.openapi else [])

    def tool_names(self) -> list[str]:
        """Every business tool name known from the config (an MCP server's tools only when
        ``tools`` names them; the others are known once the node lists them)."""
        names = [t.name for t in self.tools] + [t.operationId for t in self.http_operations()]
        names += [server.tool_name(t) for server in self.mcp_servers for t in server.tools or ()]
        names += [t.name for t in self.dataset_tools]
        return names + [t.tool_name for t in self.workflow_tools] + [t.tool_name for t in self.builtin_tools]

    def dataset_refs(self) -> Iterator[tuple[str, str]]:
        for i, tool in enumerate(self.dataset_tools):
            yield from tool.search_dataset_refs(f"dataset_tools[{i}].")

    def dataset_model_refs(self) -> Iterator[tuple[str, str]]:
        """The rerank and relevance models of the dataset tools."""
        for i, tool in enumerate(self.dataset_tools):
            yield from tool.search_model_refs(f"dataset_tools[{i}].")
            if tool.relevance_model:
                yield f"dataset_tools[{i}].relevance_model", tool.relevance_model

    def model_refs(self) -> Iterator[tuple[str, str]]:
        yield "model", self.model
        yield from self.dataset_model_refs()

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from self._text_templates("system_prompt", "user_prompt")
        for i, tool in enumerate(self.http_tools):
            yield f"http_tools[{i}].base_url", tool.base_url
            for key, value in tool.headers.items():
                yield f"http_tools[{i}].headers.{key}", value
        if self.openapi is not None:
            for op in openapi_operations(self.openapi)[:1]:  # base URL and headers are shared
                yield "openapi.servers[0].url", op.base_url
                for key, value in op.headers.items():
                    yield f"openapi.x-headers.{key}", value

    def body_fields(self) -> set[str]:
        return {"tools"}

    def body_outputs(self, workflow: Workflow) -> dict[str, VarType]:
        """A tool's body reads the current call: its arguments, id, tool name and round."""
        return {
            "args": VarType.object,
            "call_id": VarType.string,
            "tool": VarType.string,
            "round": VarType.number,
        }


@node_kind("tool_call", "Tool call")
class ToolCallConfig(ToolLoopConfig):
    """A model that calls tools in rounds until it answers, within its round and time limits; a
    stop tool can end the loop early.

    The loop limits are those of :class:`ToolLoopConfig` (see the module docstring);
    ``stop_tool`` offers the stop tool."""

    stop_tool: StopTool | None = None

    def tool_names(self) -> list[str]:
        names = super().tool_names()
        return names + [self.stop_tool.name] if self.stop_tool is not None else names

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            "answer": VarType.string,
            "messages": VarType.array,
            "usage": VarType.object,
            "cost": VarType.number,
            "trace": VarType.array,
            "stop_reason": VarType.string,
            "rounds": VarType.number,
            # read inside the body (the current call's scope), like an iteration's item
            "args": VarType.object,
            "call_id": VarType.string,
        }


# =========================================================================== planning agent


class ModelAgentTool(BaseModel):
    """A sub-agent that is one model call (no loop, no tools): the task in, the text out."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(pattern=TOOL_NAME)
    description: str = ""
    model: str | None = Field(default=None, description="registry name; None: the agent's model")
    system_prompt: str = Field(default="", description="Jinja2 template")
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)


class FileReaderTool(BaseModel):
    """A sub-agent that reads the user's uploaded files (``file`` values ``{"name", "path"|"url"}``).

    Only local paths under the upload directory are read (``FLOWLOOM_UPLOAD_DIR``, else
    ``$FLOWLOOM_HOME/uploads``, else ``~/.flowloom/uploads``; relative paths are taken
    from there); text only, ``max_chars`` per call from ``offset``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(default="read_file", pattern=TOOL_NAME)
    description: str = "Read the text of a file the user uploaded."
    files: Value = Field(description='a file value or an array of them, e.g. {"ref": "inputs.report"}')
    max_chars: int = Field(default=20_000, ge=100, le=1_000_000)


@node_kind("agent", "Planning agent")
class AgentConfig(ToolLoopConfig):
    """A tool loop with a plan, questions to the user and a stop gate.

    Behaviour: ``nodes/agent/node.py``. Business tools are those of the tool-call node
    (``tools`` - body graph tools -, ``http_tools``, ``openapi``, ``workflow_tools``) plus
    single-call model sub-agents (``model_agents``) and the uploaded-file reader
    (``file_reader``); the agent adds ``update_plan`` and ``ask_agent`` (business tools
    with those names are dropped). ``plan``: ``auto`` requires a plan when the user's
    message asks for one explicitly, ``required`` always. ``allow_write_tools``: write-level
    tools (and tools of unknown level) run only after a ``confirm`` interrupt unless this
    is true or names them. ``parallel_tools``: read-level tools of one round run
    concurrently. ``ask``: offer ``ask_agent``. ``stream``: the accepted final
    answer is sent as a ``node_delta`` (refused answers never are). Loop limits as for
    ``tool_call``; at most 2 stop-gate refusals, then the node fails ("plan not complete").
    """

    model_agents: list[ModelAgentTool] = Field(default_factory=list)
    file_reader: FileReaderTool | None = None
    parallel_tools: bool = True
    plan: Literal["auto", "required"] = "auto"
    ask: bool = True
    max_rounds: int = Field(default=30, ge=2, le=500)
    tool_only_cap: int = Field(default=8, ge=0, le=100, description="0: no cap")
    stream: bool = Field(default=True, description="send the accepted final answer as a node_delta")

    def tool_names(self) -> list[str]:
        """Every business tool name (internal names included: they are dropped at run time)."""
        names = super().tool_names() + [a.name for a in self.model_agents]
        return names + [self.file_reader.name] if self.file_reader is not None else names

    def model_refs(self) -> Iterator[tuple[str, str]]:
        yield "model", self.model
        for i, agent in enumerate(self.model_agents):
            if agent.model is not None:
                yield f"model_agents[{i}].model", agent.model
        yield from self.dataset_model_refs()

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            "answer": VarType.string,
            "plan": VarType.object,
            "history": VarType.array,
            "asks": VarType.array,
            "messages": VarType.array,
            "usage": VarType.object,
            "cost": VarType.number,
            "trace": VarType.array,
            "stop_reason": VarType.string,
            "rounds": VarType.number,
            "args": VarType.object,
            "call_id": VarType.string,
        }

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from super().templates()
        for i, agent in enumerate(self.model_agents):
            if agent.system_prompt:
                yield f"model_agents[{i}].system_prompt", agent.system_prompt
