"""The tools an agent node may be given, besides MCP servers: parameters, graph
(sub-workflow) tools, HTTP tools and OpenAPI operations, built-in tools and datasets.
Re-exported by :mod:`schemas.nodes_agent`, whose node configurations use them."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .nodes_knowledge import DatasetSearchOptions
from .values import Value

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "ToolParam",
    "GraphTool",
    "HttpToolParam",
    "HttpTool",
    "WorkflowTool",
    "BuiltinToolRef",
    "DatasetTool",
    "openapi_operations",
]

TOOL_NAME = r"^[A-Za-z0-9_\-]{1,64}$"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_PATH_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_\-]*)\}")


class ToolParam(BaseModel):
    """One parameter of a graph tool; ``items`` is the JSON Schema of an array's items."""

    # defer_build (here and on the other tool models of this module): the validator is
    # built on first use, so checking a workflow that has none of these pays nothing
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: Literal["string", "number", "integer", "boolean", "object", "array"] = "string"
    description: str = ""
    required: bool = False
    enum: list[str | int | float | bool] | None = Field(default=None, min_length=1)
    items: dict[str, Any] | None = None

    def json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON Schema property."""
        schema: dict[str, Any] = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        if self.items is not None and self.type == "array":
            schema["items"] = self.items
        return schema


def params_schema(params: list[ToolParam]) -> dict[str, Any]:
    """The JSON Schema object of a parameter list (no extra properties)."""
    return {
        "type": "object",
        "properties": {p.name: p.json_schema() for p in params},
        "required": [p.name for p in params if p.required],
        "additionalProperties": False,
    }


class GraphTool(BaseModel):
    """A tool that runs a body root node and its descendants (module docstring)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    node: str = Field(description="id of a body root node (parent = this node, no incoming edge)")
    name: str = Field(pattern=TOOL_NAME)
    description: str = ""
    parameters: list[ToolParam] = Field(default_factory=list)
    result: Value = Field(
        default=None,
        description="reference / object with references / Jinja2 template; "
        "None: the last node's outputs as JSON",
    )
    timeout: float | None = Field(
        default=None, gt=0, le=3600, description="seconds per call; None: the node's"
    )
    risk: Literal["read", "write"] | None = None

    def json_schema(self) -> dict[str, Any]:
        return params_schema(self.parameters)

    @model_validator(mode="after")
    def _unique_params(self) -> GraphTool:
        names = [p.name for p in self.parameters]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tool {self.name!r}: parameter names must be unique: {dupes}")
        return self


class HttpToolParam(BaseModel):
    """An OpenAPI parameter object (``in``: path / query / header)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    name: str = Field(min_length=1, max_length=128)
    in_: Literal["path", "query", "header"] = Field(alias="in")
    required: bool = False
    description: str = ""
    schema_: dict[str, Any] = Field(default_factory=lambda: {"type": "string"}, alias="schema")


class HttpTool(BaseModel):
    """An OpenAPI-style operation called through the guarded HTTP client."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    operationId: str = Field(pattern=TOOL_NAME)
    summary: str = ""
    description: str = ""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    base_url: str = Field(min_length=1, description="Jinja2 template, e.g. {{ inputs.api_base }}")
    path: str = Field(default="", description="appended to base_url; {name} segments are path parameters")
    parameters: list[HttpToolParam] = Field(default_factory=list)
    requestBody: dict[str, Any] | None = Field(
        default=None,
        description="{required, schema} or the OpenAPI "
        "{required, content: {application/json: {schema}}} form",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="templates sent on every call (credentials)"
    )
    timeout: float = Field(default=30.0, gt=0, le=600)
    max_response_bytes: int = Field(default=1024 * 1024, gt=0)
    risk: Literal["read", "write"] | None = Field(
        default=None, description="None: read for GET/HEAD/OPTIONS, else write"
    )

    @model_validator(mode="before")
    @classmethod
    def _upper_method(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("method"), str):
            data = {**data, "method": data["method"].upper()}
        return data

    @model_validator(mode="after")
    def _check(self) -> HttpTool:
        names = [(p.in_, p.name) for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"operation {self.operationId!r}: duplicate parameters")
        declared = {p.name for p in self.parameters if p.in_ == "path"}
        used = set(_PATH_PARAM.findall(self.path))
        if used - declared:
            raise ValueError(
                f"operation {self.operationId!r}: path parameters {sorted(used - declared)} are not "
                "declared in parameters (in: path)"
            )
        if declared - used:
            raise ValueError(
                f"operation {self.operationId!r}: parameters {sorted(declared - used)} are declared "
                f"in: path but {self.path!r} has no such {{segment}}"
            )
        if self.body_schema() is not None and "body" in {p.name for p in self.parameters}:
            raise ValueError(f"operation {self.operationId!r}: 'body' is reserved for the request body")
        return self

    @property
    def tool_risk(self) -> Literal["read", "write"]:
        return self.risk or ("read" if self.method in ("GET", "HEAD", "OPTIONS") else "write")

    def body_schema(self) -> dict[str, Any] | None:
        """The request body's JSON Schema (None: no body)."""
        body = self.requestBody
        if body is None:
            return None
        if isinstance(body.get("schema"), dict):
            return body["schema"]
        content = body.get("content")
        if isinstance(content, dict):
            for media, entry in content.items():
                if "json" in media and isinstance(entry, dict) and isinstance(entry.get("schema"), dict):
                    return entry["schema"]
        return {"type": "object"}

    def json_schema(self) -> dict[str, Any]:
        """The arguments the model fills: every parameter by name, plus ``body`` when there is one."""
        props: dict[str, Any] = {}
        required: list[str] = []
        for p in self.parameters:
            schema = dict(p.schema_)
            if p.description and "description" not in schema:
                schema["description"] = p.description
            props[p.name] = schema
            if p.required or p.in_ == "path":
                required.append(p.name)
        body = self.body_schema()
        if body is not None:
            props["body"] = body
            if (self.requestBody or {}).get("required"):
                required.append("body")
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def openapi_operations(doc: dict[str, Any]) -> list[HttpTool]:
    """One :class:`HttpTool` per operation of an OpenAPI-style document.

    Reads ``servers[0].url`` (a template; or ``x-base-url``), ``paths`` -> method ->
    ``operationId``, ``summary``, ``description``, ``parameters`` (path-level ones
    merged), ``requestBody``; ``x-headers`` (templates) go on every operation.

    Raises:
        ValueError: a missing ``operationId`` or server URL, or an invalid operation.
    """
    servers = doc.get("servers") or []
    base = doc.get("x-base-url") or (
        servers[0].get("url") if servers and isinstance(servers[0], dict) else None
    )
    if not base:
        raise ValueError("openapi: needs servers[0].url (a template such as {{ inputs.api_base }})")
    headers = doc.get("x-headers") or {}
    out: list[HttpTool] = []
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method, op in item.items():
            if method.upper() not in _METHODS or not isinstance(op, dict):
                continue
            if not op.get("operationId"):
                raise ValueError(f"openapi: {method.upper()} {path} has no operationId (the tool name)")
            out.append(
                HttpTool.model_validate(
                    {
                        "operationId": op["operationId"],
                        "summary": op.get("summary", ""),
                        "description": op.get("description", ""),
                        "method": method,
                        "base_url": base,
                        "path": path,
                        "parameters": list(shared) + list(op.get("parameters") or []),
                        "requestBody": op.get("requestBody"),
                        "headers": headers,
                        **({"risk": op["x-risk"]} if op.get("x-risk") else {}),
                    }
                )
            )
    return out


class WorkflowTool(BaseModel):
    """Another workflow of the same tenant, by id, as a tool (run as a child run): its
    published version, or ``version`` when pinned.

    Pinning keeps the tool's behaviour fixed while the other workflow is edited and
    published again. On the command line the workflow is a file, which has no versions."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    workflow: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    version: int | None = Field(
        default=None, ge=1, description="published version to run (default: the published one)"
    )
    name: str | None = Field(default=None, pattern=TOOL_NAME, description="default: the workflow id")
    description: str = Field(default="", description="default: the workflow's description or name")
    timeout: float | None = Field(default=None, gt=0, le=3600)
    risk: Literal["read", "write"] | None = None

    @property
    def tool_name(self) -> str:
        return self.name or self.workflow


#: The builtin tools (``nodes/agent/builtin_tools.py``, which checks it lists the same names):
#: checked here so that ``validate`` names an unknown tool before any run.
BUILTIN_TOOL_NAMES = frozenset(
    {
        "current_time",
        "weekday",
        "timezone_conversion",
        "timestamp_to_localtime",
        "localtime_to_timestamp",
        "json_parse",
        "json_replace",
        "json_insert",
        "json_delete",
        "eval_expression",
        "regex_extract",
    }
)


class BuiltinToolRef(BaseModel):
    """A builtin tool offered to the model (:mod:`nodes.agent.builtin_tools`): account-free
    utilities (time, JSON processing, arithmetic, regular expressions) run in-process, risk ``read``.

    ``name`` is the builtin tool; ``alias`` the name the model sees (default: ``name``);
    ``description`` replaces the tool's own; ``arguments`` are fixed values (templates are
    not rendered) merged into every call and left out of what the model fills - e.g. a
    Dify agent's preset ``timezone``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(description="the builtin tool, e.g. current_time")
    alias: str | None = Field(default=None, pattern=TOOL_NAME)
    description: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, le=3600)

    @model_validator(mode="after")
    def _known(self) -> BuiltinToolRef:
        if self.name not in BUILTIN_TOOL_NAMES:
            raise ValueError(
                f"{self.name!r} is not a builtin tool (builtin tools: {', '.join(sorted(BUILTIN_TOOL_NAMES))})"
            )
        return self

    @property
    def tool_name(self) -> str:
        """The name the model calls it by."""
        return self.alias or self.name


class DatasetTool(DatasetSearchOptions):
    """The tenant's datasets as a search tool: the model writes ``query``, the tool answers
    the chunks found as a numbered quote with their sources (the knowledge retrieval
    node's search options). ``relevance_model``: a chat model that keeps only the chunks
    relevant to the query (an LLM pass before the model sees them). Risk ``read``."""

    name: str = Field(default="search_knowledge", pattern=TOOL_NAME)
    description: str = Field(default="", description="default: names the datasets searched")
    relevance_model: str | None = Field(
        default=None, min_length=1, description="chat model of the relevance pass; None: no pass"
    )
    timeout: float | None = Field(default=None, gt=0, le=3600)


#: ``{{secret:NAME}}`` in an MCP server's header or environment value: replaced at run time
#: by the operator's secret ``NAME`` (``FLOWLOOM_SECRET_NAME``, :mod:`nodes.agent.mcp_tools`).
