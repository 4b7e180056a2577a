"""FastGPT workflow JSON -> Flowloom (app exports ``{nodes, edges, chatConfig}`` and
marketplace templates wrapping them in ``workflow``).

References: ``[nodeId, outputId]`` pairs in input values, ``{{$nodeId.outputId$}}`` in
text, ``{{key}}`` for a node's own dynamic inputs, the global variables
(``chatConfig.variables``, read through ``VARIABLE_NODE_ID``) and FastGPT's system
variables. Handles: ``<id>-source-right`` (``out``), ``<id>-source-IF`` /
``-source-ELSE IF n`` / ``-source-ELSE`` (if-else cases), ``<id>-source-<key>``
(classify categories, user-select options), ``<id>-source_catch-right`` (``error``),
``selectedTools`` (tools attached to a tool call; MCP tool sets and MCP tools attached
there become the tool call's ``mcp_servers``, :mod:`.mcp`).

The mapping table is in the README ("Importing from FastGPT or Dify").

The conversion is split in three modules: :mod:`.fastgpt_refs` reads the document and
resolves references and templates, :mod:`.fastgpt_nodes` converts each node kind, and
this module plans the nodes (ids, containers, global variables, tool bodies), maps the
edges and dispatches the conversion.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from schemas.types import VarType

from .base import Planned, first, xy
from .fastgpt_nodes import FastGPTNodes, signature_defaults  # noqa: F401 - signature_defaults: re-exported
from .fastgpt_refs import (
    NODE_VAR,
    TOOL_ARGS,
    VARIABLE_NODE_ID,
    enum_value,
    find_output,
    input_value,
    is_ref,
    looks_like_fastgpt,
)
from .mcp import fastgpt_mcp_kind, fastgpt_source
from .refs import IDENT, Unconvertible, identifier, var_type
from .report import ImportFailed, ImportIssue

__all__ = ["FastGPTImporter", "looks_like_fastgpt"]

#: canvas-only node kinds: not part of the run
DROPPED = {"userGuide", "systemConfig", "pluginConfig", "comment", "emptyNode", "globalVariable"}
UNSUPPORTED = {
    "pluginModule": "calls a FastGPT plugin by id; the plugin is not part of this file",
    "appModule": "calls another FastGPT app by id; the app is not part of this file",
    "runApp": "calls another FastGPT app by id; the app is not part of this file",
    "tool": "a FastGPT system/marketplace tool; Flowloom has no equivalent",
    "toolSet": "a FastGPT marketplace tool set; Flowloom has no equivalent",
    "toolParams": "custom tool parameters (toolParams) are not supported; give the tool's own inputs a tool "
    "description instead",
    "readFiles": "file parsing: Flowloom does not handle uploaded files",
    "customFeedback": "chat feedback markers are a FastGPT chat feature",
    "lafModule": "calls a Laf cloud function",
    "parallelRun": "parallel batch runs are not supported yet (a batch `loop` is)",
    "agent": "FastGPT agent nodes are not supported",
}


class FastGPTImporter(FastGPTNodes):
    """See the module docstring."""

    # ------------------------------------------------------------------ planning

    def plan(self) -> None:
        if not self.raw_nodes:
            raise ImportFailed(
                [ImportIssue("invalid_source", "the FastGPT workflow has no nodes")], self.source_format
            )
        self._plan_globals()
        self._scan_references()
        self._plan_tools()
        keep: list[dict[str, Any]] = []
        for node in self.raw_nodes:
            nid, kind = str(node["nodeId"]), self.kind[str(node["nodeId"])]
            if kind in DROPPED:
                if kind == "userGuide":
                    self.warn(
                        "dropped",
                        "the app's system configuration (welcome text, question guide, voice, "
                        "variables panel) is chat-UI configuration, not part of the Flowloom workflow; its "
                        "global variables became workflow inputs",
                        Planned(nid, nid, kind, node),
                    )
                continue
            if kind == "loopStart":
                self.loop_of_start[nid] = str(node.get("parentNodeId") or "")
                continue
            if kind == "loopEnd":
                self.loop_end[str(node.get("parentNodeId") or "")] = node
                continue
            if any(nid in roots for roots in self.mcp_roots.values()):
                continue  # an MCP server of its tool call's config, not a node
            if kind == "stopTool":
                if nid not in self.tool_owner:
                    self.warn(
                        "dropped",
                        "a stopTool node outside a tool call does nothing",
                        Planned(nid, nid, kind, node),
                    )
                continue
            keep.append(node)
        self.place_nodes([(str(n["nodeId"]), n) for n in keep], self._planned)
        self._plan_parents()
        starts = [p for p in self.planned if p.src_type in ("workflowStart", "pluginInput")]
        if not starts:
            raise ImportFailed(
                [ImportIssue("invalid_source", "the FastGPT workflow has no workflowStart node")],
                self.source_format,
            )

    def _planned(self, nid: str, fid: str, node: dict[str, Any]) -> Planned:
        kind = self.kind[nid]
        return Planned(
            nid,
            fid,
            kind,
            node,
            name=str(node.get("name") or ""),
            description=str(node.get("intro") or "") if kind in ("httpRequest468", "code") else "",
            position=xy(node.get("position")),
        )

    def _plan_parents(self) -> None:
        """Nodes of a tool call's body belong to the tool call; ``parentNodeId`` names a batch loop."""
        for p in self.planned:
            owner_id = self.tool_owner.get(p.src_id)
            if owner_id is not None and owner_id in self.by_src:
                p.parent = self.by_src[owner_id].fid
                continue
            parent = str(p.raw.get("parentNodeId") or "")
            if parent:
                owner = self.by_src.get(parent)
                if owner is not None and owner.src_type == "loop":
                    p.parent = owner.fid
                else:
                    self.warn(
                        "dropped",
                        f"parentNodeId {parent!r} is not a batch loop node; the node is placed at "
                        "the top level",
                        p,
                    )

    def _plan_globals(self) -> None:
        variables = self.chat_config.get("variables")
        if not isinstance(variables, list):
            guide = next(
                (n for n in self.raw_nodes if enum_value(n.get("flowNodeType")) == "userGuide"), None
            )
            variables = input_value(guide, "variables", []) if guide else []
        for node in self.raw_nodes:
            if enum_value(node.get("flowNodeType")) == "variableUpdate":
                for item in input_value(node, "updateList", []) or []:
                    target = item.get("variable") if isinstance(item, dict) else None
                    if is_ref(target) and target[0] == VARIABLE_NODE_ID:
                        self.updated_globals.add(target[1])
        taken: set[str] = set()
        for var in variables if isinstance(variables, list) else []:
            if not isinstance(var, dict) or not var.get("key"):
                continue
            key = str(var["key"])
            name = key if IDENT.match(key) and key not in taken else identifier(key, taken, "var")
            taken.add(name)
            kind = str(var.get("type") or "")
            vtype = var_type(var.get("valueType")) or {
                "numberInput": VarType.number,
                "switch": VarType.boolean,
                "JSONEditor": VarType.object,
            }.get(kind, VarType.string)
            if vtype is VarType.any:
                vtype = VarType.string
            self.globals[key] = (name, vtype)
            options = [
                str(e.get("value"))
                for e in var.get("enums") or var.get("list") or []
                if isinstance(e, dict) and e.get("value") not in (None, "")
            ]
            label = str(var.get("label") or var.get("description") or "")
            desc = label + (f" (one of: {', '.join(options)})" if options else "")
            default = first(var, "defaultValue", "value")
            if default == "":
                default = None
            self.declare_input(
                name,
                vtype,
                required=bool(var.get("required")) and default is None,
                default=default,
                description=desc,
            )
            self.renamed("global variable", key, name)
            if key in self.updated_globals:
                self.declare_variable(
                    name,
                    vtype,
                    description=f"global variable {key!r} (set from the input, then by variable updates)",
                )

    def _plan_tools(self) -> None:
        """Tools attached with ``selectedTools`` edges become the body of their tool call:
        each attached node is a tool (a body root) and the nodes after it run with it."""
        after: dict[str, list[str]] = {}
        for raw in self.raw_edges:
            s, t = str(raw.get("source") or ""), str(raw.get("target") or "")
            if raw.get("sourceHandle") == "selectedTools" or raw.get("targetHandle") == "selectedTools":
                if self.kind.get(s) == "tools" and t in self.src:
                    self.tool_roots.setdefault(s, []).append(t)
                continue
            after.setdefault(s, []).append(t)
        for owner, roots in self.tool_roots.items():
            mcp = [r for r in roots if fastgpt_source(self.src[r]) is not None]
            if mcp:  # servers of the tool call (their tools are listed at run time), not body nodes
                self.mcp_roots[owner] = mcp
                roots[:] = [r for r in roots if r not in mcp]
            todo = list(roots)
            while todo:
                nid = todo.pop()
                if nid in self.tool_owner or nid == owner or nid not in self.src:
                    continue
                self.tool_owner[nid] = owner
                if self.kind[nid] == "stopTool":
                    self.stop_tools.setdefault(owner, []).append(nid)
                todo.extend(after.get(nid, []))

    def _scan_references(self) -> None:
        def walk(obj: Any) -> Iterator[tuple[str, str]]:
            if isinstance(obj, list):
                if is_ref(obj):
                    yield obj[0], enum_value(obj[1])
                else:
                    for item in obj:
                        yield from walk(item)
            elif isinstance(obj, dict):
                for item in obj.values():
                    yield from walk(item)
            elif isinstance(obj, str) and "{{$" in obj:
                for m in re.finditer(NODE_VAR, obj):
                    yield self.split_var(m.group(1))

        for node in self.raw_nodes:
            for nid, oid in walk(node.get("inputs") or []):
                if nid in self.src:
                    self.referenced.setdefault(nid, set()).add(oid)
                    out = find_output(self.src[nid], oid)
                    if out is not None:
                        self.referenced[nid].add(out["id"])

    # ------------------------------------------------------------------ edges

    def case_id(self, suffix: str) -> str:
        """If-else case handles: ``IF``, ``ELSE IF 2`` -> ``ELSE_IF_2``, ``ELSE`` -> ``else``."""
        suffix = suffix.strip()
        if suffix.upper() == "ELSE":
            return "else"
        m = re.fullmatch(r"ELSE\s*IF\s*(\d+)", suffix, re.IGNORECASE)
        if m:
            return f"ELSE_IF_{m.group(1)}"
        return re.sub(r"[^A-Za-z0-9_\-]+", "_", suffix) or "IF"

    def _handle(self, source_id: str, raw: str) -> str:
        kind = self.kind.get(source_id, "")
        text = raw[len(source_id) + 1 :] if raw.startswith(source_id + "-") else raw
        if text.startswith("source_catch"):
            return "error"
        suffix = (
            text[len("source-") :]
            if text.startswith("source-")
            else text[len("source") :]
            if text.startswith("source")
            else text
        )
        if kind == "ifElseNode":
            return self.case_id(suffix)
        if kind in ("classifyQuestion", "userSelect"):
            return self.key_id(suffix)
        return "out" if suffix in ("right", "left", "top", "bottom", "") else self.key_id(suffix)

    def map_edges(self) -> None:
        for raw in self.raw_edges:
            s, t = str(raw.get("source") or ""), str(raw.get("target") or "")
            handle = str(enum_value(raw.get("sourceHandle")) or "")
            if handle == "selectedTools" or raw.get("targetHandle") == "selectedTools":
                self.tool_edges.append((s, t))
                continue
            if s not in self.by_src or t not in self.by_src:
                continue  # canvas-only or loop start/end pseudo-nodes
            mapped = self._handle(s, handle)
            if mapped == "error" and not self.src[s].get("catchError"):
                self.warn(
                    "dropped",
                    f"the error edge to {t!r} is dropped: error capture is off on this node, so "
                    "FastGPT never takes it",
                    self.by_src[s],
                )
                continue
            self.add_edge(self.by_src[s].fid, mapped, self.by_src[t].fid)

    # ------------------------------------------------------------------ conversion

    def policy(self, p: Planned) -> dict[str, Any]:
        return {"error_strategy": "error_branch"} if p.raw.get("catchError") else {}

    def _is_tool_root(self, p: Planned) -> bool:
        owner = self.tool_owner.get(p.src_id)
        return owner is not None and p.src_id in self.tool_roots.get(owner, [])

    def _mcp_reason(self, p: Planned) -> str:
        """Why a FastGPT MCP node that is not an attached server with its URL stays behind."""
        what = "MCP tool set" if p.src_type == "toolSet" else "MCP tool"
        if fastgpt_source(p.raw) is None:
            tool_id = ((p.raw.get("toolConfig") or {}).get("mcpTool") or {}).get("toolId") or p.raw.get(
                "pluginId"
            )
            where = f" (FastGPT MCP app {tool_id})" if tool_id else ""
            return (
                f"{what} {p.name or p.src_id!r}: the server's URL is not in the file{where}; give a tool_call "
                "node an mcp_servers entry with it"
            )
        return (
            f"{what} {p.name or p.src_id!r} is not attached to a tool call; Flowloom calls MCP tools from "
            "tool_call and agent nodes (mcp_servers)"
        )

    def convert(self, p: Planned) -> dict[str, Any]:
        self._current = p.raw
        if self._is_tool_root(p):
            # the model fills the inputs that have a tool description: read them from the call's args
            self._current = {
                **p.raw,
                "inputs": [
                    {**i, "value": [TOOL_ARGS, enum_value(i["key"])]}
                    if isinstance(i, dict) and i.get("toolDescription")
                    else i
                    for i in p.raw.get("inputs") or []
                ],
            }
            p = Planned(
                p.src_id, p.fid, p.src_type, self._current, p.name, p.description, p.position, p.parent
            )
        kind = p.src_type
        if kind in ("tool", "toolSet") and fastgpt_mcp_kind(p.raw):
            raise Unconvertible(self._mcp_reason(p))
        if kind in UNSUPPORTED:
            raise Unconvertible(UNSUPPORTED[kind])
        handler = getattr(self, f"_node_{kind}", None)
        if handler is None:
            raise Unconvertible(f"FastGPT node kind {kind!r} is not supported")
        node = handler(p)
        node.update(self.policy(p))
        return node
