"""Dify tool and agent nodes -> Flowloom (mixed into :class:`~.dify_nodes.DifyNodes`).

- **Tool nodes** (``type: tool``) of a builtin Flowloom provides (:mod:`nodes.agent.builtin_tools`:
  ``time``, ``json_process``, ``maths``, ``regex``, also as Dify's own plugins
  ``langgenius/<provider>/<provider>``) become ``code`` nodes running that tool.
  Parameters (constant, variable, a lone ``{{#x.y#}}``) become the node's inputs.
- **Agent nodes** (``type: agent``, Dify's agent-strategy node) of the strategies
  ``function_calling`` and ``ReAct`` (Dify's ``langgenius/agent`` plugin, and MCP agent
  plugins that add an MCP server parameter to the same strategies) become ``tool_call``
  nodes: ``model``, ``instruction`` -> ``system_prompt``, ``query`` -> ``user_prompt``,
  ``maximum_iterations`` + 1 -> ``max_rounds`` (the last round answers), ``memory`` ->
  ``history``; ReAct (a prompted reasoning format) -> ``mode: json`` (Flowloom's prompted
  tool protocol), function calling -> ``mode: auto``. Tools: builtins -> ``builtin_tools``
  (preset settings and parameters the user fixed -> ``arguments``), workflow tools ->
  ``workflow_tools`` (the other app must be imported under the id the report names), the
  MCP server parameter (``mcp_server``: one URL or a JSON list/object of servers;
  ``mcp_servers_config``) and MCP tools that carry their URL -> ``mcp_servers``.

What cannot come over is reported, naming the tool: builtins that need the internet or an
account (search, scraping, vendor APIs), marketplace plugins and custom API tools are
errors that offer the way back (an ``http_request`` node, ``http_tools``/``openapi``, or
an MCP server offering the tool); a masked MCP URL or a credential the export leaves out
is a ``missing_setting`` warning naming what to fill in (the server entry to add, or the
``FLOWLOOM_SECRET_*`` variable a header reads).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .base import Planned, dict_at, number
from .dify_refs import TEMPLATE_REF
from .fastgpt_refs import enum_value
from .mcp import fastgpt_server, merge_servers
from .refs import Target, Unconvertible, identifier

__all__ = ["DifyTools", "tool_reason"]

#: agent strategies converted, by Dify's strategy name -> the tool_call ``mode``
STRATEGIES = {"function_calling": "auto", "ReAct": "json"}
#: agent parameters that hold MCP servers (plugins adding MCP to Dify's strategies)
MCP_PARAMETERS = ("mcp_server", "mcp_servers", "mcp_servers_config")
_MASKED = re.compile(r"\*{3,}|\[__HIDDEN__\]")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_WAY_BACK = (
    "to bring it back, call the service with an http_request node (or http_tools/openapi of a "
    "tool_call node), or give a tool_call node an mcp_servers entry for an MCP server that offers it"
)


def item_kind(item: dict[str, Any]) -> str:
    """The provider type of an agent's tool item (``type``; older files ``provider_type``)."""
    return str(enum_value(item.get("type") or item.get("provider_type")) or "builtin")


def tool_reason(data: dict[str, Any], kind: str | None = None) -> str:
    """Why a Dify tool (a tool node's data, or an agent's tool item of provider type
    ``kind``) is not converted, naming it, where it comes from and the way back."""
    provider = str(data.get("provider_id") or data.get("provider_name") or "?")
    tool = str(data.get("tool_name") or data.get("tool_label") or "?")
    kind = kind if kind is not None else str(enum_value(data.get("provider_type")) or "")
    if kind == "mcp":
        return (
            f"tool {tool} of MCP server {provider}: the Dify file names the server but not its URL (Dify keeps "
            "it in its database); give the tool_call node an mcp_servers entry with the server's URL and "
            f"tools [{tool}]"
        )
    if kind in ("builtin", "") and provider.count("/") < 2:
        return (
            f"builtin tool {provider}/{tool} is not provided by Flowloom (it needs the internet or an account); "
            + _WAY_BACK
        )
    if kind in ("builtin", "plugin") or provider.count("/") >= 2:
        return f"tool {tool} of marketplace plugin {provider} is not available in Flowloom; " + _WAY_BACK
    if kind == "api":
        return (
            f"custom API tool {provider}/{tool} is not part of the file (its OpenAPI schema is not exported); "
            "give a tool_call node that schema as openapi, or call the API with an http_request node"
        )
    if kind == "workflow":
        return f"workflow tool {provider}/{tool} calls another Dify app, which is not part of the file"
    return f"tool {provider}/{tool} ({kind or 'unknown provider type'}) has no Flowloom equivalent"


def _plain(spec: Any) -> Any:
    """``{value: X}`` / ``{type, value: X}`` -> X (Dify wraps parameter values both ways)."""
    while isinstance(spec, dict) and "value" in spec and set(spec) <= {"type", "value", "auto"}:
        spec = spec["value"]
    return spec


def _masked(url: str) -> bool:
    return bool(_MASKED.search(url)) or not re.match(r"^https?://[^/\s*]+", url)


class DifyTools:
    """Tool and agent node converters (see the module docstring). Uses the reading helpers
    of :class:`~.dify_refs.DifyRefs` and the reporting of the base importer."""

    if TYPE_CHECKING:  # the importer's own parts (DifyRefs, DifyNodes, the base importer)

        @staticmethod
        def data(node: dict[str, Any]) -> dict[str, Any]: ...
        def selector(self, sel: Any, *, what: str = "") -> Target: ...
        def template(
            self, text: Any, *, local: dict[str, str] | None = None, json_body: bool = False
        ) -> str: ...
        def value(self, sel: Any) -> dict[str, str]: ...
        def warn(self, code: str, message: str, p: Planned | None = None) -> None: ...
        def error(self, code: str, message: str, p: Planned | None = None) -> None: ...
        def _model(self, data: dict[str, Any], cfg: dict[str, Any]) -> None: ...
        def _memory(
            self, data: dict[str, Any], cfg: dict[str, Any], default: int
        ) -> dict[str, Any] | None: ...

    # ------------------------------------------------------------------ tool nodes

    @staticmethod
    def builtin_of(provider: str, tool: str) -> Any:
        """The Flowloom builtin tool for Dify's ``provider``/``tool`` (a builtin provider such
        as ``time``, or Dify's own plugin ``langgenius/time/time``), or None."""
        from nodes.agent.builtin_tools import dify_builtin

        if provider.count("/") and not provider.startswith("langgenius/"):
            return None  # another author's plugin, whatever its tool is called
        return dify_builtin(provider, tool)

    def _tool_value(self, name: str, spec: Any) -> Any:
        """A tool parameter (``{type: variable|constant|mixed, value}`` or a plain value) as a
        binding value: a selector -> a reference, ``{{#x.y#}}`` alone -> a reference."""
        kind, value = (
            (spec.get("type"), spec.get("value"))
            if isinstance(spec, dict) and "value" in spec
            else ("constant", spec)
        )
        if kind == "variable":
            return self.value(value)
        if kind == "mixed" and isinstance(value, str) and TEMPLATE_REF.search(value):
            whole = TEMPLATE_REF.fullmatch(value.strip())
            if whole is None:
                raise Unconvertible(
                    f"tool parameter {name!r} mixes text and references ({value!r}); pass the "
                    "value from one reference",
                    "unsupported_feature",
                )
            return self.selector(whole.group(1).split(".")).as_ref()
        return value

    def _tool(self, p: Planned) -> dict[str, Any]:
        """A Dify tool node of a provided builtin tool -> a ``code`` node running it (``tool``).

        Raises:
            Unconvertible: Flowloom does not provide the tool (:func:`tool_reason`).
        """
        data = self.data(p.raw)
        tool = self.builtin_of(
            str(data.get("provider_id") or data.get("provider_name") or ""), str(data.get("tool_name") or "")
        )
        if tool is None or str(data.get("provider_type") or "builtin") not in ("builtin", "plugin"):
            raise Unconvertible(tool_reason(data))
        params: dict[str, Any] = {}
        for source in ("tool_configurations", "tool_parameters"):
            for name, spec in (data.get(source) or {}).items():
                if spec not in (None, "") and not (
                    isinstance(spec, dict) and spec.get("value") in (None, "")
                ):
                    params[str(name)] = self._tool_value(str(name), spec)
        inputs = [{"name": name, "value": value} for name, value in params.items()]
        self.warn(
            "behaviour_difference",
            f"builtin tool {tool.provider}/{tool.name} runs as Flowloom's own implementation (a code node "
            "with tool), with Dify's parameters; text holds its text (JSON where Dify prints a Python "
            "list), result its value (the parsed object of json_parse)",
            p,
        )
        return {"type": "code", "config": {"tool": tool.name, "inputs": inputs}}

    # ------------------------------------------------------------------ agent nodes

    def _agent(self, p: Planned) -> dict[str, Any]:
        """A Dify agent node -> a ``tool_call`` node (module docstring).

        Raises:
            Unconvertible: a strategy other than function calling or ReAct.
        """
        data = self.data(p.raw)
        params = dict_at(data, "agent_parameters")

        def value(key: str) -> Any:
            item = params.get(key)
            return item.get("value") if isinstance(item, dict) and "value" in item else item

        strategy = str(data.get("agent_strategy_name") or "function_calling")
        if strategy not in STRATEGIES:
            plugin = str(data.get("agent_strategy_provider_name") or "?")
            raise Unconvertible(
                f"agent strategy {strategy} of plugin {plugin} is not converted (Flowloom converts the "
                f"function_calling and ReAct strategies); rebuild it with a tool_call node"
            )
        cfg: dict[str, Any] = {}
        model = value("model") if isinstance(value("model"), dict) else {}
        self._model({"model": {**model, "name": model.get("model") or model.get("name")}}, cfg)
        self._memory(data, cfg, 0)
        builtin, workflows = self._agent_tools(p, value("tools") or [])
        taken: set[str] = set()  # server names, unique within the node
        servers = self._agent_mcp_tools(p, value("tools") or [], taken)
        for key in MCP_PARAMETERS:
            if key in params:
                servers += self._mcp_parameter(p, key, params[key], taken)
        if value("instruction"):
            cfg["system_prompt"] = self.template(value("instruction"))
        cfg["user_prompt"] = self.template(value("query") or "{{#sys.query#}}")
        rounds = number(value("maximum_iterations"))
        if rounds:
            cfg["max_rounds"] = max(1, min(500, int(rounds) + 1))
        cfg.update(
            {k: v for k, v in (("builtin_tools", builtin), ("workflow_tools", workflows)) if v},
        )
        if servers:
            cfg["mcp_servers"] = merge_servers(servers)
            self.warn(
                "behaviour_difference",
                "a call of an MCP tool not annotated read-only asks a person first (Dify does not ask; "
                "allow_write_tools opts out)",
                p,
            )
        cfg["mode"] = STRATEGIES[strategy]
        cfg["stream"] = False
        self.warn(
            "behaviour_difference",
            f"the Dify agent ({strategy}) runs as a tool_call node: Flowloom's tool loop"
            + (" with its prompted JSON tool protocol" if strategy == "ReAct" else "")
            + ", not the agent strategy plugin",
            p,
        )
        return {"type": "tool_call", "config": cfg}

    def _agent_tools(self, p: Planned, items: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The agent's builtin and workflow tools (``builtin_tools``, ``workflow_tools``); each
        other enabled tool is an ``unsupported_tool`` error naming it (MCP tools:
        :meth:`_agent_mcp_tools`)."""
        builtin: list[dict[str, Any]] = []
        workflows: list[dict[str, Any]] = []
        for item in items:
            if not isinstance(item, dict) or item.get("enabled") is False:
                continue
            kind = item_kind(item)
            provider, name = (
                str(item.get("provider_name") or item.get("provider_id") or ""),
                str(item.get("tool_name") or ""),
            )
            if kind == "mcp":
                continue
            if kind == "workflow":
                workflows.append(self._workflow_tool(p, item, provider, name))
                continue
            found = self.builtin_of(provider, name) if kind in ("builtin", "plugin") else None
            if found is None:
                self.error("unsupported_tool", f"the agent uses {tool_reason(item, kind)}", p)
                continue
            preset = self._preset(p, found.name, item)
            ref: dict[str, Any] = {"name": found.name, **({"arguments": preset} if preset else {})}
            description = str((item.get("extra") or {}).get("description") or "")
            if description:
                ref["description"] = description
            builtin.append(ref)
        return builtin, workflows

    def _preset(self, p: Planned, tool: str, item: dict[str, Any]) -> dict[str, Any]:
        """The values fixed in Dify (settings, and parameters whose ``auto`` is off) -> the
        builtin tool's ``arguments``; a value read from a variable is left to the model."""
        preset: dict[str, Any] = {}
        for key, spec in (item.get("settings") or {}).items():
            plain = _plain(spec)
            if plain not in (None, "") and not isinstance(plain, dict):
                preset[str(key)] = plain
        for key, spec in (item.get("parameters") or {}).items():
            if not isinstance(spec, dict) or spec.get("auto", 1) != 0:
                continue
            inner = dict_at(spec, "value")
            plain = inner.get("value")
            if inner.get("type") == "variable" or (isinstance(plain, str) and TEMPLATE_REF.search(plain)):
                self.warn(
                    "behaviour_difference",
                    f"parameter {key!r} of tool {tool} reads a variable in Dify; here the model fills it "
                    "(builtin tool arguments are fixed values)",
                    p,
                )
            elif plain not in (None, ""):
                preset[str(key)] = plain
        return preset

    def _workflow_tool(self, p: Planned, item: dict[str, Any], provider: str, name: str) -> dict[str, Any]:
        """A Dify workflow tool (another app published as a tool) -> a ``workflow_tools`` entry;
        the app is not in the file, so the report names the id to import it under."""
        wid = identifier(name or provider, (), "workflow")
        entry: dict[str, Any] = {"workflow": wid}
        if name and _TOOL_NAME.match(name) and name != wid:
            entry["name"] = name
        description = str((item.get("extra") or {}).get("description") or item.get("tool_description") or "")
        if description:
            entry["description"] = description
        self.warn(
            "missing_setting",
            f"workflow tool {name or provider} calls another Dify app (tool provider {provider}), which is not "
            f"in this file: import that app too as workflow {wid!r} and publish it (for flowloom run: "
            f"flowloom import APP.yml --id {wid} -o {wid}.json, in a directory of FLOWLOOM_WORKFLOW_PATH) before "
            "running",
            p,
        )
        self.warn(
            "behaviour_difference",
            f"workflow tool {entry.get('name', wid)}: the agent asks a person before each call, since what the "
            "other app does is not known here (Dify does not ask); set its risk to read in workflow_tools, or "
            "list it in allow_write_tools, to call it without asking",
            p,
        )
        return entry

    # ------------------------------------------------------------------ MCP servers

    def _agent_mcp_tools(self, p: Planned, items: list[Any], taken: set[str]) -> list[dict[str, Any]]:
        """Dify MCP tools in the agent's tool list: those carrying their server's URL ->
        ``mcp_servers`` entries; a masked URL is a ``missing_setting`` warning, a missing
        one an ``unsupported_tool`` error (Dify keeps it in its database)."""
        servers: list[dict[str, Any]] = []
        for item in items:
            if not isinstance(item, dict) or item_kind(item) != "mcp" or item.get("enabled") is False:
                continue
            server = str(item.get("provider_name") or item.get("provider_id") or "mcp")
            tool = str(item.get("tool_name") or "")
            url = str(item.get("server_url") or (item.get("extra") or {}).get("server_url") or "")
            if not url:
                self.error("unsupported_tool", f"the agent uses {tool_reason(item, 'mcp')}", p)
                continue
            entry = self._mcp_entry(p, server, {"url": url, "headers": item.get("headers") or {}}, taken)
            if entry is not None:
                servers.append({**entry, "tools": [tool]} if tool else entry)
        return servers

    def _mcp_parameter(self, p: Planned, key: str, spec: Any, taken: set[str]) -> list[dict[str, Any]]:
        """An MCP agent plugin's server parameter -> ``mcp_servers`` entries. Forms: one URL;
        a JSON list of ``{url, headers}``; a JSON object ``{name: {url, headers, ...}}``,
        optionally under ``mcpServers``."""
        kind = spec.get("type") if isinstance(spec, dict) else "constant"
        raw = _plain(spec)
        if kind == "variable" or (isinstance(raw, str) and TEMPLATE_REF.search(raw)):
            self.warn(
                "missing_setting",
                f"the agent's {key} reads a variable, known only when Dify runs: give the tool_call node its "
                "mcp_servers (name and url) by hand",
                p,
            )
            return []
        if raw in (None, "", [], {}):
            return []
        parsed: Any = raw
        if isinstance(raw, str):
            text = raw.strip()
            if text.startswith(("{", "[")):
                try:
                    parsed = json.loads(text)
                except ValueError as exc:
                    self.error("invalid_source", f"the agent's {key} is not valid JSON: {exc}", p)
                    return []
            else:
                parsed = [{"url": text}]
        if isinstance(parsed, dict):
            parsed = parsed.get("mcpServers", parsed)
            parsed = [{"name": n, **s} for n, s in parsed.items() if isinstance(s, dict)]
        out: list[dict[str, Any]] = []
        for n, server in enumerate(parsed if isinstance(parsed, list) else []):
            if not isinstance(server, dict):
                continue
            name = str(server.get("name") or f"{p.fid}_mcp{'' if n == 0 else n + 1}")
            entry = self._mcp_entry(p, name, server, taken)
            if entry is not None:
                out.append(entry)
        return out

    def _mcp_entry(
        self, p: Planned, name: str, server: dict[str, Any], taken: set[str]
    ) -> dict[str, Any] | None:
        """One ``mcp_servers`` entry named after ``name``: header values become
        ``{{secret:NAME}}`` references (a ``missing_setting`` warning names each variable);
        a masked or missing URL -> None with a warning naming the entry to add."""
        url = str(server.get("url") or server.get("server_url") or "").strip()
        if not url or _masked(url):
            shown = f" ({url!r})" if url else ""
            self.warn(
                "missing_setting",
                f"MCP server {name}: its URL is masked or missing in the export{shown}; fill it in: add "
                f'{{"name": "{name}", "url": "<the server\'s URL>"}} to the mcp_servers of node {p.fid}',
                p,
            )
            return None
        headers = dict_at(server, "headers")
        entry, secrets = fastgpt_server(name, {"url": url, "tools": [], "headers": list(headers)}, taken)
        for header, variable in zip(headers, secrets, strict=True):
            self.warn(
                "missing_setting",
                f"MCP server {entry['name']}: header {header} is a credential kept out of the workflow; set "
                f"{variable} to its value",
                p,
            )
        if url.rstrip("/").endswith("/sse"):
            self.warn(
                "behaviour_difference",
                f"MCP server {entry['name']}: {url} is an SSE endpoint; Flowloom speaks Streamable HTTP, so "
                "point the url at the server's Streamable HTTP endpoint (often /mcp)",
                p,
            )
        return entry
