"""FastGPT workflow JSON -> Flowloom (app exports ``{nodes, edges, chatConfig}`` and
marketplace templates wrapping them in ``workflow``).

References: ``[nodeId, outputId]`` pairs in input values, ``{{$nodeId.outputId$}}`` in
text, ``{{key}}`` for a node's own dynamic inputs, the global variables
(``chatConfig.variables``, read through ``VARIABLE_NODE_ID``) and FastGPT's system
variables. Handles: ``<id>-source-right`` (``out``), ``<id>-source-IF`` /
``-source-ELSE IF n`` / ``-source-ELSE`` (if-else cases), ``<id>-source-<key>``
(classify categories, user-select options), ``<id>-source_catch-right`` (``error``),
``selectedTools`` (tools attached to a tool call).

The mapping table is in the README ("Importing from FastGPT or Dify").
"""

from __future__ import annotations

import ast
import re
from typing import Any, Iterator

from schemas.types import VarType

from .base import BaseImporter, Planned, first, flowloom_ids, number
from .refs import (Target, Unconvertible, identifier, interpolation, join_template, json_string_state,
                   literal, var_type)
from .report import ImportFailed, ImportIssue

__all__ = ["FastGPTImporter", "looks_like_fastgpt"]

VARIABLE_NODE_ID = "VARIABLE_NODE_ID"
#: stands for "the tool call's arguments" in the inputs of a node used as a tool
_TOOL_ARGS = "\x00tool-args"
#: FastGPT system variables -> Flowloom ``sys`` names
SYSTEM_VARS = {"userId": "user_id", "appId": "workflow_id", "chatId": "chat_id", "cTime": "now",
               "histories": "history", "responseChatItemId": "run_id"}
#: canvas-only node kinds: not part of the run
DROPPED = {"userGuide", "systemConfig", "pluginConfig", "comment", "emptyNode", "globalVariable"}
UNSUPPORTED = {
    "datasetSearchNode": "knowledge-base search needs FastGPT's datasets; Flowloom has no knowledge-base search node",
    "datasetConcatNode": "merges knowledge-base search results; Flowloom has no knowledge-base search node",
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
_ENUM_PREFIX = re.compile(r"^[A-Za-z]+Enum\.")
_NODE_VAR = r"\{\{\$([^{}$]+?\.[^{}$]+?)\$\}\}"
_ANY_VAR = re.compile(_NODE_VAR + r"|\{\{([^{}\s]+?)\}\}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _enum(value: Any) -> Any:
    """``FlowNodeInputTypeEnum.reference`` -> ``reference`` (unresolved enum names in some templates)."""
    return _ENUM_PREFIX.sub("", value) if isinstance(value, str) else value


def looks_like_fastgpt(doc: Any) -> bool:
    """A FastGPT export or template: nodes carrying ``flowNodeType``."""
    if not isinstance(doc, dict):
        return False
    wf = doc.get("workflow") if isinstance(doc.get("workflow"), dict) else doc
    nodes = wf.get("nodes")
    return isinstance(nodes, list) and any(isinstance(n, dict) and "flowNodeType" in n for n in nodes)


def _inputs(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {_enum(i.get("key")): i for i in node.get("inputs") or [] if isinstance(i, dict) and i.get("key")}


def _val(node: dict[str, Any], key: str, default: Any = None) -> Any:
    inp = _inputs(node).get(key)
    if inp is None or inp.get("value") is None:
        return default
    return inp["value"]


def _outputs(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**o, "id": _enum(o.get("id")), "key": _enum(o.get("key")), "type": _enum(o.get("type"))}
            for o in node.get("outputs") or [] if isinstance(o, dict)]


def _find_output(node: dict[str, Any], oid: str) -> dict[str, Any] | None:
    outs = _outputs(node)
    return next((o for o in outs if o["id"] == oid), None) or next((o for o in outs if o["key"] == oid), None)


def _is_ref(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
            and bool(value[0]) and bool(value[1]))


def _json_literal(text: str) -> tuple[bool, Any]:
    """A JavaScript literal default (number, string, true/false/null, [], {}) -> (ok, value)."""
    text = text.strip()
    if text in ("true", "false", "null"):
        return True, {"true": True, "false": False, "null": None}[text]
    if text in ("[]", "{}"):
        return True, [] if text == "[]" else {}
    value = number(text)
    if value is not None:
        return True, value
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`" and "\\" not in text and text[0] not in text[1:-1]:
        return True, text[1:-1]
    return False, None


def signature_defaults(language: str, code: str) -> dict[str, Any]:
    """Literal parameter defaults of ``main`` (``function main({a, i = 0})`` / ``def main(a, i=0)``).

    FastGPT passes ``undefined`` for a reference to a node that has not run (a loop's
    first round) or was skipped, so the code's parameter default applies; a Flowloom
    binding ``default`` does the same for null. The code is parsed, never run.
    """
    if language == "python":
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "main":
                args = stmt.args
                out: dict[str, Any] = {}
                positional = args.posonlyargs + args.args
                for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                    try:
                        out[arg.arg] = ast.literal_eval(default)
                    except ValueError:
                        pass
                for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
                    if kw_default is not None:
                        try:
                            out[arg.arg] = ast.literal_eval(kw_default)
                        except ValueError:
                            pass
                return out
        return {}
    match = re.search(r"function\s+main\s*\(\s*\{([^}]*)\}", code) or \
        re.search(r"main\s*=\s*(?:async\s*)?\(\s*\{([^}]*)\}\s*\)\s*=>", code)
    if not match:
        return {}
    out = {}
    for part in match.group(1).split(","):
        name, sep, default = part.partition("=")
        name = name.strip()
        if sep and _IDENT.match(name):
            ok, value = _json_literal(default)
            if ok:
                out[name] = value
    return out


class FastGPTImporter(BaseImporter):
    """See the module docstring."""

    source_format = "fastgpt"

    def __init__(self, source: dict[str, Any], **kw: Any):
        super().__init__(source, **kw)
        wrapped = isinstance(source.get("workflow"), dict)
        self.wf: dict[str, Any] = source["workflow"] if wrapped else source
        self.raw_nodes = [n for n in self.wf.get("nodes") or [] if isinstance(n, dict) and n.get("nodeId")]
        self.raw_edges = [e for e in self.wf.get("edges") or [] if isinstance(e, dict)]
        self.chat_config: dict[str, Any] = self.wf.get("chatConfig") or source.get("chatConfig") or {}
        self.src: dict[str, dict[str, Any]] = {str(n["nodeId"]): n for n in self.raw_nodes}
        self.kind: dict[str, str] = {nid: str(_enum(n.get("flowNodeType") or "")) for nid, n in self.src.items()}
        #: global variable key -> (Flowloom name, type)
        self.globals: dict[str, tuple[str, VarType]] = {}
        self.updated_globals: set[str] = set()
        self.loop_of_start: dict[str, str] = {}  # loopStart id -> loop id
        self.loop_end: dict[str, dict[str, Any]] = {}  # loop id -> loopEnd node
        self.referenced: dict[str, set[str]] = {}  # node id -> output ids read anywhere
        self.tool_edges: list[tuple[str, str]] = []
        self.tool_owner: dict[str, str] = {}  # node id -> the tools node whose body holds it
        self.tool_roots: dict[str, list[str]] = {}  # tools node id -> its tools (body roots)
        self.stop_tools: dict[str, list[str]] = {}  # tools node id -> stopTool nodes in its body
        self._current: dict[str, Any] = {}

    def meta(self) -> dict[str, Any]:
        src = self.source
        return {"name": str(first(src, "name", "appName", default="") or ""),
                "description": str(first(src, "intro", "description", default="") or "")}

    # ------------------------------------------------------------------ planning

    def plan(self) -> None:
        if not self.raw_nodes:
            raise ImportFailed([ImportIssue("invalid_source", "the FastGPT workflow has no nodes")], self.source_format)
        self._plan_globals()
        self._scan_references()
        self._plan_tools()
        keep: list[dict[str, Any]] = []
        for node in self.raw_nodes:
            nid, kind = str(node["nodeId"]), self.kind[str(node["nodeId"])]
            if kind in DROPPED:
                if kind == "userGuide":
                    self.warn("dropped", "the app's system configuration (welcome text, question guide, voice, "
                              "variables panel) is chat-UI configuration, not part of the Flowloom workflow; its "
                              "global variables became workflow inputs",
                              Planned(nid, nid, kind, node))
                continue
            if kind == "loopStart":
                self.loop_of_start[nid] = str(node.get("parentNodeId") or "")
                continue
            if kind == "loopEnd":
                self.loop_end[str(node.get("parentNodeId") or "")] = node
                continue
            if kind == "stopTool":
                if nid not in self.tool_owner:
                    self.warn("dropped", "a stopTool node outside a tool call does nothing",
                              Planned(nid, nid, kind, node))
                continue
            keep.append(node)
        ids = flowloom_ids([str(n["nodeId"]) for n in keep])
        for node in keep:
            nid = str(node["nodeId"])
            pos = node.get("position") if isinstance(node.get("position"), dict) else {}
            p = Planned(nid, ids[nid], self.kind[nid], node, name=str(node.get("name") or ""),
                        description=str(node.get("intro") or "") if self.kind[nid] in ("httpRequest468", "code")
                        else "",
                        position={"x": float(number(pos.get("x")) or 0.0), "y": float(number(pos.get("y")) or 0.0)})
            self.add_planned(p)
            if p.fid != nid:
                self.warn("renamed_id", f"node id {nid!r} is not a valid Flowloom id; it is {p.fid!r}", p)
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
                    self.warn("dropped", f"parentNodeId {parent!r} is not a batch loop node; the node is placed at "
                              "the top level", p)
        starts = [p for p in self.planned if p.src_type in ("workflowStart", "pluginInput")]
        if not starts:
            raise ImportFailed([ImportIssue("invalid_source", "the FastGPT workflow has no workflowStart node")],
                               self.source_format)

    def _plan_globals(self) -> None:
        variables = self.chat_config.get("variables")
        if not isinstance(variables, list):
            guide = next((n for n in self.raw_nodes if _enum(n.get("flowNodeType")) == "userGuide"), None)
            variables = _val(guide, "variables", []) if guide else []
        for node in self.raw_nodes:
            if _enum(node.get("flowNodeType")) == "variableUpdate":
                for item in _val(node, "updateList", []) or []:
                    target = item.get("variable") if isinstance(item, dict) else None
                    if _is_ref(target) and target[0] == VARIABLE_NODE_ID:
                        self.updated_globals.add(target[1])
        taken: set[str] = set()
        for var in variables if isinstance(variables, list) else []:
            if not isinstance(var, dict) or not var.get("key"):
                continue
            key = str(var["key"])
            name = key if _IDENT.match(key) and key not in taken else identifier(key, taken, "var")
            taken.add(name)
            kind = str(var.get("type") or "")
            vtype = var_type(var.get("valueType")) or {"numberInput": VarType.number, "switch": VarType.boolean,
                                                       "JSONEditor": VarType.object}.get(kind, VarType.string)
            if vtype is VarType.any:
                vtype = VarType.string
            self.globals[key] = (name, vtype)
            options = [str(e.get("value")) for e in var.get("enums") or var.get("list") or []
                       if isinstance(e, dict) and e.get("value") not in (None, "")]
            label = str(var.get("label") or var.get("description") or "")
            desc = label + (f" (one of: {', '.join(options)})" if options else "")
            default = first(var, "defaultValue", "value")
            if default == "":
                default = None
            self.declare_input(name, vtype, required=bool(var.get("required")) and default is None,
                               default=default, description=desc)
            if name != key:
                self.warn("renamed_id", f"global variable {key!r} is input {name!r} (inputs need ASCII identifiers)")
            if key in self.updated_globals:
                self.declare_variable(name, vtype, description=f"global variable {key!r} (set from the input, "
                                      "then by variable updates)")

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
                if _is_ref(obj):
                    yield obj[0], _enum(obj[1])
                else:
                    for item in obj:
                        yield from walk(item)
            elif isinstance(obj, dict):
                for item in obj.values():
                    yield from walk(item)
            elif isinstance(obj, str) and "{{$" in obj:
                for m in re.finditer(_NODE_VAR, obj):
                    yield self.split_var(m.group(1))

        for node in self.raw_nodes:
            for nid, oid in walk(node.get("inputs") or []):
                if nid in self.src:
                    self.referenced.setdefault(nid, set()).add(oid)
                    out = _find_output(self.src[nid], oid)
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

    @staticmethod
    def key_id(key: str) -> str:
        """A classify category / user-select option key as a handle id."""
        out = re.sub(r"[^A-Za-z0-9_\-]+", "_", str(key)).strip("_") or "option"
        return "error_" if out == "error" else out

    def _handle(self, source_id: str, raw: str) -> str:
        kind = self.kind.get(source_id, "")
        text = raw[len(source_id) + 1:] if raw.startswith(source_id + "-") else raw
        if text.startswith("source_catch"):
            return "error"
        suffix = text[len("source-"):] if text.startswith("source-") else text[len("source"):] if \
            text.startswith("source") else text
        if kind == "ifElseNode":
            return self.case_id(suffix)
        if kind in ("classifyQuestion", "userSelect"):
            return self.key_id(suffix)
        return "out" if suffix in ("right", "left", "top", "bottom", "") else self.key_id(suffix)

    def map_edges(self) -> None:
        for raw in self.raw_edges:
            s, t = str(raw.get("source") or ""), str(raw.get("target") or "")
            handle = str(_enum(raw.get("sourceHandle")) or "")
            if handle == "selectedTools" or raw.get("targetHandle") == "selectedTools":
                self.tool_edges.append((s, t))
                continue
            if s not in self.by_src or t not in self.by_src:
                continue  # canvas-only or loop start/end pseudo-nodes
            mapped = self._handle(s, handle)
            if mapped == "error" and not self.src[s].get("catchError"):
                self.warn("dropped", f"the error edge to {t!r} is dropped: error capture is off on this node, so "
                          "FastGPT never takes it", self.by_src[s])
                continue
            self.add_edge(self.by_src[s].fid, mapped, self.by_src[t].fid)

    # ------------------------------------------------------------------ references

    def split_var(self, text: str) -> tuple[str, str]:
        """``nodeId.outputId`` of a ``{{$...$}}`` reference: the first split whose left side
        is a node of the file (ids may contain dots), else the first dot."""
        for i, ch in enumerate(text):
            if ch == "." and (text[:i] in self.src or text[:i] == VARIABLE_NODE_ID):
                return text[:i], text[i + 1:]
        head, _, tail = text.partition(".")
        return head, tail

    def global_target(self, key: str) -> Target:
        if key in self.globals:
            name, vtype = self.globals[key]
            return Target("vars" if key in self.updated_globals else "inputs", name, type=vtype)
        if key in SYSTEM_VARS:
            return Target("sys", SYSTEM_VARS[key], type=VarType.array if key == "histories" else VarType.string)
        raise Unconvertible(f"it reads global variable {key!r}, which the file does not declare",
                            "unsupported_reference")

    def ref(self, value: list[str]) -> Target:
        """The target of a ``[nodeId, outputId]`` reference."""
        nid, oid = str(value[0]), str(_enum(value[1]))
        if nid == VARIABLE_NODE_ID:
            return self.global_target(oid)
        if nid == _TOOL_ARGS:
            owner = self.by_src[self.tool_owner[str(self._current.get("nodeId"))]]
            param = next((i for i in self._current.get("inputs") or [] if _enum(i.get("key")) == oid), {})
            return self.node_target(owner.fid, "args", (oid,), type_=var_type(param.get("valueType")),
                                    what=f"tool argument {oid}")
        node = self.src.get(nid)
        if node is None:
            raise Unconvertible(f"it reads {oid!r} of node {nid!r}, which is not in the file", "unsupported_reference")
        kind = self.kind[nid]
        if kind in ("workflowStart", "pluginInput"):
            if oid == "userChatInput" and kind == "workflowStart":
                return Target("sys", "query", type=VarType.string)
            key = (_find_output(node, oid) or {}).get("key") or oid
            if kind == "pluginInput" and key in self.globals:
                return self.global_target(key)
            if key in self.globals:
                return self.global_target(key)
            raise Unconvertible(f"it reads {oid!r} of the start node; only the user question (userChatInput) and "
                                "global variables are supported (files are not)", "unsupported_reference")
        if kind == "loopStart":
            loop = self.by_src.get(self.loop_of_start.get(nid, ""))
            if loop is None:
                raise Unconvertible(f"loop start {nid!r} has no loop", "unsupported_reference")
            if oid == "loopStartIndex":
                return self.node_target(loop.fid, "index", type_=VarType.number, what="loopStartIndex")
            return self.node_target(loop.fid, "item", what="loopStartInput")
        if nid not in self.by_src:
            raise Unconvertible(f"it reads {oid!r} of node {nid!r} ({kind}), which is not part of the workflow",
                                "unsupported_reference")
        field, path, vtype = self.output_of(node, oid)
        return self.node_target(self.by_src[nid].fid, field, path, vtype, what=oid)

    def output_of(self, node: dict[str, Any], oid: str) -> tuple[str, tuple[str | int, ...], VarType | None]:
        """(Flowloom output, path, type) of a FastGPT output id of ``node``.

        Raises:
            Unconvertible: an output with no Flowloom equivalent.
        """
        nid, kind = str(node["nodeId"]), self.kind[str(node["nodeId"])]
        out = _find_output(node, oid) or {"id": oid, "key": oid}
        key = str(out.get("key") or oid)
        vtype = var_type(out.get("valueType"))
        if key in ("system_error_text", "error") or out.get("type") == "error":
            if not node.get("catchError"):
                raise Unconvertible(f"it reads the error output of node {nid!r}, whose error capture is off",
                                    "unsupported_reference")
            return "error", ("message",), VarType.string
        static = {
            "chatNode": {"answerText": ("answer", VarType.string), "history": ("history", VarType.array),
                         "reasoningText": ("reasoning", VarType.string)},
            "classifyQuestion": {"cqResult": ("category_name", VarType.string)},
            "contentExtract": {"success": ("success", VarType.boolean), "fields": ("fields", VarType.object)},
            "cfr": {"system_text": ("queries", VarType.array)},
            "queryExtension": {"system_text": ("queries", VarType.array)},
            "textEditor": {"system_text": ("output", VarType.string)},
            "ifElseNode": {"ifElseResult": ("case", VarType.string)},
            "userSelect": {"selectResult": ("label", VarType.string)},
            "formInput": {"formInputResult": ("form", VarType.object)},
            "loop": {"loopArray": ("results", VarType.array)},
            "httpRequest468": {"httpRawResponse": ("json", VarType.any)},
            "tools": {"answerText": ("answer", VarType.string)},
        }.get(kind, {})
        if key in static:
            return static[key][0], (), static[key][1]
        if kind == "contentExtract":
            names = self.extract_names(node)
            if key in names:
                return names[key], (), vtype
        if kind == "formInput":
            names = self.form_names(node)
            if key in names:
                return names[key], (), vtype
        if kind == "httpRequest468" and out.get("type") == "dynamic":
            return "json", self.json_path(key), vtype
        if kind == "code":
            if key == "system_rawResponse":
                raise Unconvertible(f"it reads the whole result (system_rawResponse) of code node {nid!r}; read the "
                                    "declared outputs instead", "unsupported_reference")
            if not _IDENT.match(key):
                raise Unconvertible(f"code output {key!r} of node {nid!r} is not an identifier",
                                    "unsupported_reference")
            return key, (), vtype
        if kind in ("chatNode", "classifyQuestion", "contentExtract", "cfr", "queryExtension", "textEditor",
                    "ifElseNode", "userSelect", "formInput", "loop", "httpRequest468", "tools", "answerNode",
                    "variableUpdate", "stopTool"):
            raise Unconvertible(f"it reads output {key!r} of node {nid!r} ({kind}), which has no Flowloom "
                                "equivalent", "unsupported_reference")
        # unsupported kinds keep their output names (the placeholder declares them)
        return re.sub(r"[.\[\]]+", "_", key) or "output", (), None

    @staticmethod
    def json_path(key: str) -> tuple[str | int, ...]:
        """``data.items[0].title`` / ``$.data.x`` -> a reference path."""
        key = key[2:] if key.startswith("$.") else key.lstrip("$")
        path: list[str | int] = []
        for part in re.finditer(r"([^.\[\]]+)|\[(\d+)\]", key):
            path.append(int(part.group(2)) if part.group(2) is not None else part.group(1))
        return tuple(path)

    def extract_names(self, node: dict[str, Any]) -> dict[str, str]:
        """Extract key -> Flowloom field name (identifiers; ``fields``/``success``/``usage`` are reserved)."""
        taken = {"fields", "success", "usage"}
        names: dict[str, str] = {}
        for item in _val(node, "extractKeys", []) or []:
            if isinstance(item, dict) and item.get("key"):
                key = str(item["key"])
                names[key] = key if _IDENT.match(key) and key not in taken else identifier(key, taken, "field")
                taken.add(names[key])
        return names

    def form_names(self, node: dict[str, Any]) -> dict[str, str]:
        taken = {"form"}
        names: dict[str, str] = {}
        for item in _val(node, "userInputForms", []) or []:
            if isinstance(item, dict) and item.get("key"):
                key = str(item["key"])
                names[key] = key if _IDENT.match(key) and key not in taken else identifier(key, taken, "field")
                taken.add(names[key])
        return names

    # ------------------------------------------------------------------ values and text

    def value(self, value: Any) -> Any:
        """A config value: a reference becomes ``{"ref": ...}``; literals stay."""
        if _is_ref(value):
            target = self.ref(value)
            if target.scope == "local":
                raise Unconvertible("a local name cannot be a value", "unsupported_reference")
            return target.as_ref()
        return value

    def template(self, text: Any, local: dict[str, Target | str] | None = None, *, json_body: bool = False) -> str:
        """FastGPT text -> a Flowloom template (``{{$id.out$}}``, ``{{key}}``; other text literal)."""
        if text is None:
            return ""
        if _is_ref(text):
            return interpolation(self.ref(text))
        if not isinstance(text, str):
            return join_template([literal(str(text))])
        local = local or {}
        local_names = {t.name for t in local.values() if isinstance(t, Target) and t.scope == "local"}
        in_string = json_string_state(text) if json_body else None
        pieces: list[tuple[str, str]] = []
        pos = 0
        current = str(self._current.get("nodeId", ""))
        for m in _ANY_VAR.finditer(text):
            pieces.append(literal(text[pos:m.start()]))
            pos = m.end()
            inside = bool(in_string and in_string(m.start()))
            target: Target | str | None
            if m.group(1):
                nid, oid = self.split_var(m.group(1))
                target = local.get(oid) if nid == current and oid in local else self.ref([nid, oid])
            else:
                key = m.group(2)
                target = local.get(key)
                if target is None:
                    try:
                        target = self.global_target(key)
                    except Unconvertible:
                        target = None  # FastGPT leaves unknown {{names}} as they are
            if target is None:
                pieces.append(literal(m.group(0)))
            elif isinstance(target, str):
                pieces.append(literal(target))
            else:
                pieces.append(("expr", interpolation(target, local_names, in_json_string=inside)))
        pieces.append(literal(text[pos:]))
        return join_template(pieces)

    def text_value(self, value: Any, default: str = "{{ sys.query }}") -> Any:
        """A text-or-reference config field (user prompt, question): a string reference
        stays a reference, anything else becomes a template."""
        if value is None or value == "":
            return default
        if _is_ref(value):
            target = self.ref(value)
            if target.scope != "local" and target.type in (None, VarType.any, VarType.string) and not target.path:
                return target.as_ref()
            return interpolation(target)
        return self.template(value)

    def dynamic_inputs(self, node: dict[str, Any], skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Inputs the user added (``system_*`` and the kind's own keys excluded)."""
        return [i for i in node.get("inputs") or [] if isinstance(i, dict) and i.get("key")
                and not str(i["key"]).startswith("system_") and _enum(i["key"]) not in skip
                and "addInputParam" not in [_enum(r) for r in i.get("renderTypeList") or []]]

    def policy(self, p: Planned) -> dict[str, Any]:
        return {"error_strategy": "error_branch"} if p.raw.get("catchError") else {}

    # ------------------------------------------------------------------ conversion

    def tool_params(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """Inputs with a tool description: what the model fills when it calls the node as a tool."""
        params = []
        for inp in node.get("inputs") or []:
            if isinstance(inp, dict) and inp.get("key") and inp.get("toolDescription"):
                key = str(_enum(inp["key"]))
                if not _IDENT.match(key):
                    raise Unconvertible(f"tool parameter {key!r} is not an identifier")
                vtype = var_type(inp.get("valueType"))
                ptype = vtype.value if vtype in (VarType.string, VarType.number, VarType.boolean, VarType.object,
                                                 VarType.array) else "string"
                params.append({"name": key, "type": ptype, "description": str(inp["toolDescription"]),
                               "required": bool(inp.get("required"))})
        return params

    def _is_tool_root(self, p: Planned) -> bool:
        owner = self.tool_owner.get(p.src_id)
        return owner is not None and p.src_id in self.tool_roots.get(owner, [])

    def convert(self, p: Planned) -> dict[str, Any]:
        self._current = p.raw
        if self._is_tool_root(p):
            # the model fills the inputs that have a tool description: read them from the call's args
            self._current = {**p.raw, "inputs": [
                {**i, "value": [_TOOL_ARGS, _enum(i["key"])]} if isinstance(i, dict) and i.get("toolDescription")
                else i for i in p.raw.get("inputs") or []]}
            p = Planned(p.src_id, p.fid, p.src_type, self._current, p.name, p.description, p.position, p.parent)
        kind = p.src_type
        if kind in UNSUPPORTED:
            raise Unconvertible(UNSUPPORTED[kind])
        handler = getattr(self, f"_node_{kind}", None)
        if handler is None:
            raise Unconvertible(f"FastGPT node kind {kind!r} is not supported")
        node = handler(p)
        node.update(self.policy(p))
        return node

    def _node_workflowStart(self, p: Planned) -> dict[str, Any]:
        if self.updated_globals:
            names = [self.globals[k][0] for k in sorted(self.updated_globals) if k in self.globals]
            if names:
                node_id = self.synthetic_id(f"{p.fid}-globals")
                self.insert_after(p.fid, {
                    "id": node_id, "type": "variable_update", "name": "global variables",
                    "position": {"x": p.position["x"] + 40, "y": p.position["y"] + 120},
                    "config": {"updates": [{"variable": n, "operation": "set", "value": {"ref": f"inputs.{n}"}}
                                           for n in names]}})
        return {"type": "start"}

    def _node_pluginInput(self, p: Planned) -> dict[str, Any]:
        for inp in p.raw.get("inputs") or []:
            key = str(inp.get("key") or "")
            if not key:
                continue
            name = key if _IDENT.match(key) else identifier(key, [v["name"] for v in self.inputs], "input")
            vtype = var_type(inp.get("valueType")) or VarType.string
            vtype = VarType.string if vtype is VarType.any else vtype
            self.globals.setdefault(key, (name, vtype))
            self.declare_input(name, vtype, required=bool(inp.get("required")), default=inp.get("defaultValue"),
                               description=str(inp.get("description") or inp.get("label") or ""))
        return {"type": "start"}

    def _node_pluginOutput(self, p: Planned) -> dict[str, Any]:
        outputs = []
        for inp in p.raw.get("inputs") or []:
            key = str(inp.get("key") or "")
            if key and _IDENT.match(key):
                outputs.append({"name": key, "value": self.value(inp.get("value"))})
            elif key:
                raise Unconvertible(f"plugin output {key!r} is not an identifier")
        return {"type": "end", "config": {"outputs": outputs}}

    def _history(self, p: Planned, cfg: dict[str, Any]) -> None:
        value = _val(p.raw, "history")
        if _is_ref(value):
            cfg["history_source"] = self.value(value)
            cfg["history"] = 100
        elif number(value) is not None:
            cfg["history"] = max(0, min(100, int(number(value) or 0)))

    def _model(self, p: Planned) -> str:
        value = _val(p.raw, "model")
        if _is_ref(value):
            raise Unconvertible("the model is chosen at run time (a reference); Flowloom checks models when it "
                                "compiles", "unsupported_feature")
        return self.model_name(value)

    def _node_chatNode(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        cfg: dict[str, Any] = {"model": self._model(p)}
        temperature = number(_val(raw, "temperature"))
        if temperature is not None:
            cfg["temperature"] = round(max(0.0, min(2.0, temperature / 10)), 3)
        max_tokens = number(_val(raw, "maxToken"))
        if max_tokens and max_tokens > 0:
            cfg["max_tokens"] = int(max_tokens)
        system = _val(raw, "systemPrompt")
        if system:
            cfg["system_prompt"] = self.template(system)
        cfg["user_prompt"] = self.text_value(_val(raw, "userChatInput"))
        self._history(p, cfg)
        cfg["stream"] = bool(_val(raw, "isResponseAnswerText", True))
        reasoning = _val(raw, "aiChatReasoning")
        if reasoning is not None:
            cfg["stream_reasoning"] = bool(reasoning)
        quote = _val(raw, "quoteQA")
        text_quote = _val(raw, "stringQuoteText")
        if _is_ref(quote):
            cfg["quote"] = self.value(quote)
        elif text_quote:
            cfg["quote"] = self.value(text_quote) if _is_ref(text_quote) else text_quote
        role = _val(raw, "aiChatQuoteRole")
        if role in ("system", "user"):
            cfg["quote_role"] = role
        if _val(raw, "quoteTemplate") or _val(raw, "quotePrompt"):
            self.warn("behaviour_difference", "the custom quote template/prompt uses FastGPT's quote variables; the "
                      "built-in Flowloom quote template is used instead", p)
        files = _val(raw, "fileUrlList")
        if files:
            raise Unconvertible("the chat reads files (fileUrlList); Flowloom chats take text only",
                                "unsupported_feature")
        return {"type": "chat", "config": cfg}

    def _node_classifyQuestion(self, p: Planned) -> dict[str, Any]:
        categories = []
        for agent in _val(p.raw, "agents", []) or []:
            if isinstance(agent, dict) and agent.get("key") is not None:
                name = str(agent.get("value") or "").strip() or str(agent["key"])
                categories.append({"id": self.key_id(agent["key"]), "name": name})
        if len(categories) < 2:
            raise Unconvertible("a question classifier needs at least two categories")
        cfg: dict[str, Any] = {"model": self._model(p), "question": self.text_value(_val(p.raw, "userChatInput")),
                               "categories": categories}
        system = _val(p.raw, "systemPrompt")
        if system:
            cfg["instructions"] = self.template(system)
        self._history(p, cfg)
        return {"type": "classify_question", "config": cfg}

    def _node_contentExtract(self, p: Planned) -> dict[str, Any]:
        names = self.extract_names(p.raw)
        fields = []
        for item in _val(p.raw, "extractKeys", []) or []:
            if not isinstance(item, dict) or not item.get("key"):
                continue
            key = str(item["key"])
            vtype = var_type(item.get("valueType")) or VarType.string
            ftype = vtype.value if vtype in (VarType.string, VarType.number, VarType.boolean, VarType.object,
                                             VarType.array) else "string"
            desc = str(item.get("desc") or "")
            if names[key] != key:
                desc = f"{key}: {desc}" if desc else key
            field: dict[str, Any] = {"name": names[key], "type": ftype, "required": bool(item.get("required"))}
            if desc:
                field["description"] = desc
            enum = [line.strip() for line in str(item.get("enum") or "").splitlines() if line.strip()]
            if enum and ftype == "string":
                field["enum"] = enum
            if item.get("defaultValue") not in (None, ""):
                self.warn("behaviour_difference", f"field {key!r}: the default value is not used (a missing field "
                          "is null)", p)
            fields.append(field)
        if not fields:
            raise Unconvertible("the content extractor has no fields")
        cfg: dict[str, Any] = {"model": self._model(p), "text": self.text_value(_val(p.raw, "content")),
                               "fields": fields}
        description = _val(p.raw, "description")
        if description:
            cfg["instructions"] = self.template(description)
        self._history(p, cfg)
        return {"type": "extract_fields", "config": cfg}

    def _node_cfr(self, p: Planned) -> dict[str, Any]:
        cfg: dict[str, Any] = {"model": self._model(p),
                               "question": self.text_value(_val(p.raw, "userChatInput"))}
        system = _val(p.raw, "systemPrompt")
        if system:
            cfg["instructions"] = self.template(system)
        self._history(p, cfg)
        return {"type": "query_extension", "config": cfg}

    _node_queryExtension = _node_cfr

    def _node_textEditor(self, p: Planned) -> dict[str, Any]:
        variables, local = self._bindings(p, self.dynamic_inputs(p.raw, skip=("system_textareaInput",)))
        return {"type": "template", "config": {"template": self.template(_val(p.raw, "system_textareaInput", ""),
                                                                         local),
                                               "variables": variables}}

    def _bindings(self, p: Planned, inputs: list[dict[str, Any]], *, exact: bool = False,
                  defaults: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Target | str]]:
        """Dynamic inputs as bindings; ``local`` maps each input key to the bound name."""
        variables: list[dict[str, Any]] = []
        local: dict[str, Target | str] = {}
        taken: set[str] = set()
        for inp in inputs:
            key = str(_enum(inp["key"]))
            if _IDENT.match(key) and key not in taken:
                name = key
            elif exact:
                raise Unconvertible(f"input {key!r} is not an identifier, and the code reads it by that name")
            else:
                name = identifier(key, taken, "var")
            taken.add(name)
            raw_value = inp.get("value")
            binding: dict[str, Any] = {"name": name, "value": self.value(raw_value)}
            if defaults and name in defaults and defaults[name] is not None:
                binding["default"] = defaults[name]
            variables.append(binding)
            vtype = self.ref(raw_value).type if _is_ref(raw_value) else None
            local[key] = Target("local", name, type=vtype)
        return variables, local

    def _node_answerNode(self, p: Planned) -> dict[str, Any]:
        return {"type": "answer", "config": {"text": self.template(_val(p.raw, "text", ""))}}

    def _node_httpRequest468(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        local: dict[str, Target | str] = {}
        for inp in self.dynamic_inputs(raw):
            key, value = str(_enum(inp["key"])), inp.get("value")
            if _is_ref(value):
                local[key] = self.ref(value)
            elif value is not None:
                local[key] = value if isinstance(value, str) else str(value)
            elif inp.get("toolDescription"):
                raise Unconvertible(f"input {key!r} is a tool parameter, but the request is not attached to a tool "
                                    "call", "unsupported_feature")
            else:
                local[key] = ""
        if _val(raw, "system_header_secret"):
            raise Unconvertible("secret headers are stored encrypted by FastGPT and are not in the export",
                                "unsupported_feature")
        method = str(_val(raw, "system_httpMethod", "GET") or "GET").upper()
        cfg: dict[str, Any] = {"method": method, "url": self.template(_val(raw, "system_httpReqUrl", ""), local),
                               "raise_for_status": True}

        def pairs(key: str) -> dict[str, str]:
            out: dict[str, str] = {}
            for item in _val(raw, key, []) or []:
                if isinstance(item, dict) and item.get("key"):
                    out[str(item["key"])] = self.template(item.get("value") or "", local)
            return out

        if pairs("system_httpHeader"):
            cfg["headers"] = pairs("system_httpHeader")
        if pairs("system_httpParams"):
            cfg["query"] = pairs("system_httpParams")
        content_type = str(_val(raw, "system_httpContentType", "") or "")
        body_text = _val(raw, "system_httpJsonBody", "")
        if content_type in ("form-data", "x-www-form-urlencoded"):
            cfg["body"] = {"type": "form", "form": pairs("system_httpFormBody")}
            if content_type == "form-data":
                self.warn("behaviour_difference", "the form-data body is sent URL-encoded "
                          "(application/x-www-form-urlencoded)", p)
        elif content_type in ("raw-text", "xml"):
            cfg["body"] = {"type": "raw", "raw": self.template(body_text, local),
                           "content_type": "application/xml" if content_type == "xml" else "text/plain"}
        elif content_type == "none" or not (isinstance(body_text, str) and body_text.strip()):
            pass
        else:
            cfg["body"] = {"type": "raw", "raw": self.template(body_text, local, json_body=True),
                           "content_type": "application/json"}
        timeout = number(_val(raw, "system_httpTimeout"))
        if timeout and timeout > 0:
            cfg["timeout"] = float(min(timeout, 600))
        if "httpRawResponse" in self.referenced.get(p.src_id, set()):
            self.warn("behaviour_difference", "httpRawResponse reads the parsed JSON response (`json`); a response "
                      "that is not JSON reads null there (its text is `body`)", p)
        return {"type": "http_request", "config": cfg}

    def _node_code(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        language = {"js": "javascript", "javascript": "javascript", "py": "python", "python": "python",
                    "python3": "python"}.get(str(_val(raw, "codeType", "js") or "js").lower())
        if language is None:
            raise Unconvertible(f"code type {_val(raw, 'codeType')!r} is not supported (JavaScript and Python are)")
        code = _val(raw, "code", "")
        if not isinstance(code, str) or not code.strip():
            raise Unconvertible("the code node has no code")
        defaults = signature_defaults(language, code)
        inputs, _local = self._bindings(p, self.dynamic_inputs(raw, skip=("codeType", "code")), exact=True,
                                        defaults=defaults)
        read = self.referenced.get(p.src_id, set())
        outputs, unused = [], []
        for out in _outputs(raw):
            if out.get("type") != "dynamic" or out["key"] == "system_addOutputParam":
                continue
            if out["id"] in read or out["key"] in read or p.src_id in self.tool_owner:
                if not _IDENT.match(out["key"]):
                    raise Unconvertible(f"code output {out['key']!r} is not an identifier")
                outputs.append({"name": out["key"], "type": (var_type(out.get("valueType")) or VarType.any).value})
            else:
                unused.append(out["key"])
        if unused:
            self.warn("dropped", f"outputs {', '.join(unused)} are read by no node and not declared (Flowloom "
                      "requires main() to return every declared output; FastGPT does not)", p)
        return {"type": "code", "config": {"language": language, "code": code, "inputs": inputs, "outputs": outputs}}

    _CONDITIONS = {
        "isEmpty": ("empty", None), "isNotEmpty": ("not_empty", None),
        "equalTo": ("equals", "string"), "notEqual": ("not_equals", "string"),
        "greaterThan": ("gt", "number"), "greaterThanOrEqualTo": ("gte", "number"),
        "lessThan": ("lt", "number"), "lessThanOrEqualTo": ("lte", "number"),
        "include": ("contains", None), "notInclude": ("not_contains", None),
        "startWith": ("starts_with", "string"), "endWith": ("ends_with", "string"), "reg": ("regex", "string"),
    }

    def _condition(self, item: dict[str, Any]) -> dict[str, Any]:
        variable = item.get("variable")
        if not _is_ref(variable):
            raise Unconvertible("a condition without a variable")
        op = str(item.get("condition") or "")
        if op not in self._CONDITIONS:
            raise Unconvertible(f"condition operator {op!r} has no Flowloom equivalent", "unsupported_feature")
        operator, coerce = self._CONDITIONS[op]
        cond: dict[str, Any] = {"left": self.value(variable), "operator": operator}
        if operator not in ("empty", "not_empty"):
            right = item.get("value")
            if item.get("valueType") == "reference" or _is_ref(right):
                cond["right"] = self.value(right)
            elif coerce == "number":
                cond["right"] = number(right) if number(right) is not None else str(right or "")
            else:
                cond["right"] = "" if right is None else str(right)
        if coerce is not None:
            cond["type"] = coerce
        return cond

    def _node_ifElseNode(self, p: Planned) -> dict[str, Any]:
        items = _val(p.raw, "ifElseList", []) or []
        if items and all(isinstance(i, dict) and "list" in i for i in items):
            groups = items
        else:
            groups = [{"condition": _val(p.raw, "condition", "AND"), "list": items}]
        cases = []
        for index, group in enumerate(groups):
            conditions = [self._condition(c) for c in group.get("list") or [] if isinstance(c, dict)]
            if not conditions:
                raise Unconvertible(f"branch {index + 1} has no condition")
            cases.append({"id": "IF" if index == 0 else f"ELSE_IF_{index}",
                          "logic": "or" if str(group.get("condition") or "AND").upper() == "OR" else "and",
                          "conditions": conditions})
        if not cases:
            raise Unconvertible("the if-else node has no condition")
        return {"type": "if_else", "config": {"cases": cases}}

    def _node_variableUpdate(self, p: Planned) -> dict[str, Any]:
        updates = []
        for item in _val(p.raw, "updateList", []) or []:
            if not isinstance(item, dict):
                continue
            target = item.get("variable")
            if not _is_ref(target):
                continue
            if target[0] != VARIABLE_NODE_ID:
                raise Unconvertible(f"it updates output {target[1]!r} of node {target[0]!r}; Flowloom updates run "
                                    "variables (global variables) only", "unsupported_feature")
            if target[1] not in self.globals:
                raise Unconvertible(f"it updates {target[1]!r}, which is not a declared global variable",
                                    "unsupported_feature")
            name, vtype = self.globals[target[1]]
            value = item.get("value")
            if item.get("renderType") == "reference" or (_is_ref(value) and value[0]):
                new = self.value(value)
            else:
                new = value[1] if isinstance(value, list) and len(value) == 2 else value
                if vtype is VarType.number and number(new) is not None:
                    new = number(new)
                elif vtype is VarType.boolean and isinstance(new, str):
                    new = new.strip().lower() in ("true", "1", "yes")
            updates.append({"variable": name, "operation": "set", "value": new})
        if not updates:
            raise Unconvertible("the variable update has no updates")
        return {"type": "variable_update", "config": {"updates": updates}}

    def _node_userSelect(self, p: Planned) -> dict[str, Any]:
        options = []
        for option in _val(p.raw, "userSelectOptions", []) or []:
            if isinstance(option, dict) and option.get("key") is not None:
                options.append({"id": self.key_id(option["key"]),
                                "label": str(option.get("value") or option["key"])})
        if not options:
            raise Unconvertible("the user select has no options")
        return {"type": "user_select", "config": {"description": self.template(_val(p.raw, "description", "")),
                                                  "options": options}}

    _FORM_TYPES = {"input": "string", "textarea": "string", "password": "string", "numberInput": "number",
                   "switch": "boolean", "select": "string", "multipleSelect": "array", "timePointSelect": "string",
                   "timeRangeSelect": "array", "selectLLMModel": "string", "JSONEditor": "object"}

    def _node_formInput(self, p: Planned) -> dict[str, Any]:
        names = self.form_names(p.raw)
        fields = []
        for item in _val(p.raw, "userInputForms", []) or []:
            if not isinstance(item, dict) or not item.get("key"):
                continue
            kind = str(item.get("type") or "input")
            if kind not in self._FORM_TYPES:
                raise Unconvertible(f"form field type {kind!r} is not supported (files are not)",
                                    "unsupported_feature")
            field: dict[str, Any] = {"name": names[str(item["key"])], "label": str(item.get("label") or item["key"]),
                                     "type": self._FORM_TYPES[kind], "required": bool(item.get("required"))}
            default = item.get("defaultValue")
            if default not in (None, "", []):
                field["default"] = default
            options = [o.get("value") for o in item.get("list") or [] if isinstance(o, dict)]
            if kind == "select" and options:
                field["enum"] = options
            if item.get("description"):
                field["description"] = str(item["description"])
            fields.append(field)
        if not fields:
            raise Unconvertible("the form has no fields")
        return {"type": "form_input", "config": {"description": self.template(_val(p.raw, "description", "")),
                                                 "fields": fields}}

    def _node_tools(self, p: Planned) -> dict[str, Any]:
        raw = p.raw
        cfg: dict[str, Any] = {"model": self._model(p)}
        temperature = number(_val(raw, "temperature"))
        if temperature is not None:
            cfg["temperature"] = round(max(0.0, min(2.0, temperature / 10)), 3)
        max_tokens = number(_val(raw, "maxToken"))
        if max_tokens and max_tokens > 0:
            cfg["max_tokens"] = int(max_tokens)
        system = _val(raw, "systemPrompt")
        if system:
            cfg["system_prompt"] = self.template(system)
        cfg["user_prompt"] = self.text_value(_val(raw, "userChatInput"))
        self._history(p, cfg)
        cfg["stream"] = bool(_val(raw, "isResponseAnswerText", True))
        tools = []
        for root in self.tool_roots.get(p.src_id, []):
            tool = self.by_src.get(root)
            if tool is None:
                continue
            description = str(tool.raw.get("toolDescription") or tool.raw.get("intro") or tool.name or tool.fid)
            tools.append({"node": tool.fid, "name": tool.fid[:64], "description": description,
                          "parameters": self.tool_params(tool.raw)})
        cfg["tools"] = tools
        if self.stop_tools.get(p.src_id):
            cfg["stop_tool"] = {}
            self.warn("behaviour_difference", "FastGPT ends the tool loop when a tool run reaches its stopTool node "
                      f"({', '.join(self.stop_tools[p.src_id])}); Flowloom gives the model a 'stop' tool to call "
                      "instead, and the stopTool node is left out", p)
        return {"type": "tool_call", "config": cfg}

    def _node_loop(self, p: Planned) -> dict[str, Any]:
        items = _val(p.raw, "loopInputArray")
        if not _is_ref(items):
            raise Unconvertible("the batch loop's input array is not a reference")
        end = self.loop_end.get(p.src_id)
        collect = _val(end, "loopEndInput") if end else None
        cfg: dict[str, Any] = {"items": self.value(items)}
        self.body_scope = p.fid
        try:
            cfg["collect"] = self.value(collect) if _is_ref(collect) else None
        finally:
            self.body_scope = None
        if end is None:
            self.warn("behaviour_difference", "the loop has no loop end node: every item's result is null", p)
        return {"type": "iteration", "config": cfg}

