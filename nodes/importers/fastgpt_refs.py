"""FastGPT documents: reading nodes, inputs and outputs, and resolving references.

What :class:`FastGPTRefs` knows about a FastGPT workflow (``{nodes, edges, chatConfig}``,
optionally wrapped in ``workflow``): ``[nodeId, outputId]`` pairs and
``{{$nodeId.outputId$}}`` in text become Flowloom references, ``{{key}}`` reads a node's own
dynamic inputs or a global variable (``chatConfig.variables``, read through
``VARIABLE_NODE_ID``), FastGPT's system variables become ``sys`` names. The mapping rules
are documented in :mod:`nodes.importers.fastgpt`.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from schemas.nodes import OUTPUT_NAME
from schemas.nodes_flow import jsonpath_expression
from schemas.types import VarType

from .base import BaseImporter, first
from .refs import (
    IDENT,
    Target,
    Unconvertible,
    identifier,
    interpolation,
    join_template,
    json_string_state,
    literal,
    var_type,
)

__all__ = ["FastGPTRefs", "is_ref_list", "looks_like_fastgpt"]

VARIABLE_NODE_ID = "VARIABLE_NODE_ID"
#: stands for "the tool call's arguments" in the inputs of a node used as a tool
TOOL_ARGS = "\x00tool-args"
#: FastGPT system variables -> Flowloom ``sys`` names
SYSTEM_VARS = {
    "userId": "user_id",
    "appId": "workflow_id",
    "chatId": "chat_id",
    "cTime": "now",
    "histories": "history",
    "responseChatItemId": "run_id",
}
_ENUM_PREFIX = re.compile(r"^[A-Za-z]+Enum\.")
NODE_VAR = r"\{\{\$([^{}$]+?\.[^{}$]+?)\$\}\}"
_ANY_VAR = re.compile(NODE_VAR + r"|\{\{([^{}\s]+?)\}\}")


def enum_value(value: Any) -> Any:
    """``FlowNodeInputTypeEnum.reference`` -> ``reference`` (unresolved enum names in some templates)."""
    return _ENUM_PREFIX.sub("", value) if isinstance(value, str) else value


def looks_like_fastgpt(doc: Any) -> bool:
    """A FastGPT export or template: nodes carrying ``flowNodeType``."""
    if not isinstance(doc, dict):
        return False
    nested = doc.get("workflow")
    wf = nested if isinstance(nested, dict) else doc
    nodes = wf.get("nodes")
    return isinstance(nodes, list) and any(isinstance(n, dict) and "flowNodeType" in n for n in nodes)


def node_inputs(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        enum_value(i.get("key")): i for i in node.get("inputs") or [] if isinstance(i, dict) and i.get("key")
    }


def input_value(node: dict[str, Any], key: str, default: Any = None) -> Any:
    inp = node_inputs(node).get(key)
    if inp is None or inp.get("value") is None:
        return default
    return inp["value"]


def node_outputs(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            **o,
            "id": enum_value(o.get("id")),
            "key": enum_value(o.get("key")),
            "type": enum_value(o.get("type")),
        }
        for o in node.get("outputs") or []
        if isinstance(o, dict)
    ]


def find_output(node: dict[str, Any], oid: str) -> dict[str, Any] | None:
    outs = node_outputs(node)
    return next((o for o in outs if o["id"] == oid), None) or next((o for o in outs if o["key"] == oid), None)


def is_ref(value: Any) -> TypeGuard[list[str]]:
    """A reference: ``[nodeId, outputId]``, two non-empty strings."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
        and bool(value[0])
        and bool(value[1])
    )


def is_ref_list(value: Any) -> bool:
    """A list of references (``[[nodeId, outputId], ...]``): list-of-reference inputs,
    e.g. a batch loop's input array in recent FastGPT versions."""
    return isinstance(value, list) and bool(value) and all(is_ref(v) for v in value)


def _field_names(items: Any, taken: set[str]) -> dict[str, str]:
    """Item key -> a Flowloom field name: the key when it is an identifier not ``taken``."""
    names: dict[str, str] = {}
    for item in items or []:
        if isinstance(item, dict) and item.get("key"):
            key = str(item["key"])
            names[key] = key if IDENT.match(key) and key not in taken else identifier(key, taken, "field")
            taken.add(names[key])
    return names


#: FastGPT output key -> (Flowloom output, type), per node kind, for the outputs that
#: have a fixed equivalent
STATIC_OUTPUTS: dict[str, dict[str, tuple[str, VarType]]] = {
    "chatNode": {
        "answerText": ("answer", VarType.string),
        "history": ("history", VarType.array),
        "reasoningText": ("reasoning", VarType.string),
    },
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
    "datasetSearchNode": {"quoteQA": ("chunks", VarType.array)},
    "datasetConcatNode": {"quoteQA": ("chunks", VarType.array)},
}

#: kinds whose outputs are all known: any other output of theirs has no equivalent
KNOWN_OUTPUT_KINDS = frozenset(
    {
        "chatNode",
        "classifyQuestion",
        "contentExtract",
        "cfr",
        "queryExtension",
        "textEditor",
        "ifElseNode",
        "userSelect",
        "formInput",
        "loop",
        "httpRequest468",
        "tools",
        "answerNode",
        "variableUpdate",
        "stopTool",
    }
)


class FastGPTRefs(BaseImporter):
    """The document and its references; subclassed by the node converters and the importer."""

    source_format = "fastgpt"

    def __init__(self, source: dict[str, Any], **kw: Any):
        super().__init__(source, **kw)
        wrapped = isinstance(source.get("workflow"), dict)
        self.wf: dict[str, Any] = source["workflow"] if wrapped else source
        self.raw_nodes = [n for n in self.wf.get("nodes") or [] if isinstance(n, dict) and n.get("nodeId")]
        self.raw_edges = [e for e in self.wf.get("edges") or [] if isinstance(e, dict)]
        self.chat_config: dict[str, Any] = self.wf.get("chatConfig") or source.get("chatConfig") or {}
        self.src: dict[str, dict[str, Any]] = {str(n["nodeId"]): n for n in self.raw_nodes}
        for node in self.raw_nodes:
            self._unnest(node.get("inputs"))
        self.kind: dict[str, str] = {
            nid: str(enum_value(n.get("flowNodeType") or "")) for nid, n in self.src.items()
        }
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
        self.mcp_roots: dict[str, list[str]] = {}  # tools node id -> attached MCP nodes (its mcp_servers)
        self._current: dict[str, Any] = {}

    def _unnest(self, obj: Any) -> None:
        """Rewrite, in place, a one-item list of references ``[[nodeId, outputId]]`` (FastGPT's
        nested form) as the reference itself, where its node is in the file: FastGPT
        reads it as that one value."""
        if isinstance(obj, dict):
            for key, item in obj.items():
                if (
                    isinstance(item, list)
                    and len(item) == 1
                    and is_ref(item[0])
                    and (item[0][0] in self.src or item[0][0] == VARIABLE_NODE_ID)
                ):
                    obj[key] = list(item[0])
                else:
                    self._unnest(item)
        elif isinstance(obj, list):
            for item in obj:
                self._unnest(item)

    def meta(self) -> dict[str, Any]:
        src = self.source
        return {
            "name": str(first(src, "name", "appName", default="") or ""),
            "description": str(first(src, "intro", "description", default="") or ""),
        }

    @staticmethod
    def key_id(key: str) -> str:
        """A classify category / user-select option key as a handle id."""
        out = re.sub(r"[^A-Za-z0-9_\-]+", "_", str(key)).strip("_") or "option"
        return "error_" if out == "error" else out

    # ------------------------------------------------------------------ references

    def split_var(self, text: str) -> tuple[str, str]:
        """``nodeId.outputId`` of a ``{{$...$}}`` reference: the first split whose left side
        is a node of the file (ids may contain dots), else the first dot."""
        for i, ch in enumerate(text):
            if ch == "." and (text[:i] in self.src or text[:i] == VARIABLE_NODE_ID):
                return text[:i], text[i + 1 :]
        head, _, tail = text.partition(".")
        return head, tail

    def global_target(self, key: str) -> Target:
        if key in self.globals:
            name, vtype = self.globals[key]
            return Target("vars" if key in self.updated_globals else "inputs", name, type=vtype)
        if key in SYSTEM_VARS:
            return Target(
                "sys", SYSTEM_VARS[key], type=VarType.array if key == "histories" else VarType.string
            )
        raise Unconvertible(
            f"it reads global variable {key!r}, which the file does not declare", "unsupported_reference"
        )

    def ref(self, value: list[str]) -> Target:
        """The target of a ``[nodeId, outputId]`` reference."""
        nid, oid = str(value[0]), str(enum_value(value[1]))
        if nid == VARIABLE_NODE_ID:
            return self.global_target(oid)
        if nid == TOOL_ARGS:
            owner = self.by_src[self.tool_owner[str(self._current.get("nodeId"))]]
            param: dict[str, Any] = next(
                (i for i in self._current.get("inputs") or [] if enum_value(i.get("key")) == oid), {}
            )
            return self.node_target(
                owner.fid, "args", (oid,), type_=var_type(param.get("valueType")), what=f"tool argument {oid}"
            )
        node = self.src.get(nid)
        if node is None:
            raise Unconvertible(
                f"it reads {oid!r} of node {nid!r}, which is not in the file", "unsupported_reference"
            )
        kind = self.kind[nid]
        if kind in ("workflowStart", "pluginInput"):
            if oid == "userChatInput" and kind == "workflowStart":
                return Target("sys", "query", type=VarType.string)
            key = (find_output(node, oid) or {}).get("key") or oid
            if key == "userFiles" and kind == "workflowStart":
                return Target("inputs", self.files_input(), type=VarType.array)
            if kind == "pluginInput" and key in self.globals:
                return self.global_target(key)
            if key in self.globals:
                return self.global_target(key)
            raise Unconvertible(
                f"it reads {oid!r} of the start node; only the user question (userChatInput) and "
                "global variables are supported (files are not)",
                "unsupported_reference",
            )
        if kind == "loopStart":
            loop = self.by_src.get(self.loop_of_start.get(nid, ""))
            if loop is None:
                raise Unconvertible(f"loop start {nid!r} has no loop", "unsupported_reference")
            if oid == "loopStartIndex":
                return self.node_target(loop.fid, "index", type_=VarType.number, what="loopStartIndex")
            return self.node_target(loop.fid, "item", what="loopStartInput")
        if nid not in self.by_src:
            raise Unconvertible(
                f"it reads {oid!r} of node {nid!r} ({kind}), which is not part of the workflow",
                "unsupported_reference",
            )
        field, path, vtype = self.output_of(node, oid)
        return self.node_target(self.by_src[nid].fid, field, path, vtype, what=oid)

    def files_input(self) -> str:
        """The optional input standing for the start node's ``userFiles`` (declared once,
        reported): an empty list unless the run is given one, so conditions on files take
        their no-files branch (Flowloom runs take no uploads)."""
        taken = {v["name"] for v in self.inputs}
        if "userFiles" not in self.globals:
            name = identifier("userFiles", taken, "files")
            self.globals["userFiles"] = (name, VarType.array)
            self.declare_input(
                name,
                VarType.array,
                default=[],
                description="files sent with the message (FastGPT userFiles); empty unless given",
            )
            self.warn(
                "behaviour_difference",
                f"the start node's userFiles is input {name!r}, an empty list unless "
                "the run is given one: Flowloom runs take no uploads, so conditions on files take their "
                "no-files branch",
            )
        return self.globals["userFiles"][0]

    def output_of(self, node: dict[str, Any], oid: str) -> tuple[str, tuple[str | int, ...], VarType | None]:
        """(Flowloom output, path, type) of a FastGPT output id of ``node``.

        Raises:
            Unconvertible: an output with no Flowloom equivalent.
        """
        nid, kind = str(node["nodeId"]), self.kind[str(node["nodeId"])]
        out = find_output(node, oid) or {"id": oid, "key": oid}
        key = str(out.get("key") or oid)
        vtype = var_type(out.get("valueType"))
        if key in ("system_error_text", "error") or out.get("type") == "error":
            if not node.get("catchError"):
                raise Unconvertible(
                    f"it reads the error output of node {nid!r}, whose error capture is off",
                    "unsupported_reference",
                )
            return "error", ("message",), VarType.string
        static = STATIC_OUTPUTS.get(kind, {})
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
            return self.http_output_name(node, key), (), None
        if kind == "code":
            if key == "system_rawResponse":
                raise Unconvertible(
                    f"it reads the whole result (system_rawResponse) of code node {nid!r}; read the "
                    "declared outputs instead",
                    "unsupported_reference",
                )
            return key, (), None  # FastGPT does not check code outputs: any value may arrive
        if kind in KNOWN_OUTPUT_KINDS:
            raise Unconvertible(
                f"it reads output {key!r} of node {nid!r} ({kind}), which has no Flowloom equivalent",
                "unsupported_reference",
            )
        # unsupported kinds keep their output names (the placeholder declares them)
        return re.sub(r"[.\[\]]+", "_", key) or "output", (), None

    def http_outputs(self, node: dict[str, Any]) -> dict[str, str]:
        """JSONPath of each custom output of an HTTP node -> its Flowloom output name: the
        key itself (``data.items``, ``$.images[*].url``) unless it holds both quote kinds or
        is a built-in output name (then an identifier, reported as renamed)."""
        names: dict[str, str] = {}
        taken = {"status_code", "headers", "body", "json", "error"}
        for out in node_outputs(node):
            key = str(out.get("key") or "")
            if out.get("type") != "dynamic" or not key or key == "system_addOutputParam":
                continue
            name = (
                key
                if re.fullmatch(OUTPUT_NAME, key) and key not in taken
                else identifier(key, taken, "output")
            )
            names[key] = name
            taken.add(name)
        return names

    def http_output_name(self, node: dict[str, Any], key: str) -> str:
        """The Flowloom output of custom output ``key`` of an HTTP node (:meth:`http_outputs`).

        Raises:
            Unconvertible: the key's JSONPath does not parse or uses a feature jsonpath-ng
                does not evaluate (named in the message), found at import time instead of
                failing when the flow runs.
        """
        try:
            jsonpath_expression(key)
        except ValueError as exc:
            raise Unconvertible(f"HTTP output {key!r}: {exc}", "unsupported_feature") from None
        return self.http_outputs(node).get(key) or identifier(key, (), "output")

    def extract_names(self, node: dict[str, Any]) -> dict[str, str]:
        """Extract key -> Flowloom field name (identifiers; ``fields``/``success``/``usage`` are reserved)."""
        return _field_names(input_value(node, "extractKeys", []), {"fields", "success", "usage"})

    def form_names(self, node: dict[str, Any]) -> dict[str, str]:
        """Form field key -> Flowloom field name (identifiers; ``form`` is reserved)."""
        return _field_names(input_value(node, "userInputForms", []), {"form"})

    # ------------------------------------------------------------------ values and text

    def value(self, value: Any) -> Any:
        """A config value: a reference becomes ``{"ref": ...}``; literals stay."""
        if is_ref(value):
            target = self.ref(value)
            if target.scope == "local":
                raise Unconvertible("a local name cannot be a value", "unsupported_reference")
            return target.as_ref()
        if is_ref_list(value) and all(v[0] in self.src or v[0] == VARIABLE_NODE_ID for v in value):
            targets = [self.ref(v) for v in value]
            if any(t.type in (None, VarType.any, VarType.array) or t.scope == "local" for t in targets):
                raise Unconvertible(
                    "it joins several references into one list; FastGPT concatenates them when "
                    "they are lists, which Flowloom cannot express (read one list instead)",
                    "unsupported_reference",
                )
            return [t.as_ref() for t in targets]  # FastGPT's one-level flattening of single values
        return value

    def template(
        self, text: Any, local: dict[str, Target | str] | None = None, *, json_body: bool = False
    ) -> str:
        """FastGPT text -> a Flowloom template (``{{$id.out$}}``, ``{{key}}``; other text literal)."""
        if text is None:
            return ""
        if is_ref(text):
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
            pieces.append(literal(text[pos : m.start()]))
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
        if is_ref(value):
            target = self.ref(value)
            if (
                target.scope != "local"
                and target.type in (None, VarType.any, VarType.string)
                and not target.path
            ):
                return target.as_ref()
            return interpolation(target)
        return self.template(value)

    def dynamic_inputs(self, node: dict[str, Any], skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Inputs the user added (``system_*`` and the kind's own keys excluded)."""
        return [
            i
            for i in node.get("inputs") or []
            if isinstance(i, dict)
            and i.get("key")
            and not str(i["key"]).startswith("system_")
            and enum_value(i["key"]) not in skip
            and "addInputParam" not in [enum_value(r) for r in i.get("renderTypeList") or []]
        ]
