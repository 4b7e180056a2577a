"""Dify documents: reading the graph, and resolving selectors and templates.

What :class:`DifyRefs` knows about a Dify DSL (``workflow.graph``): ``[node_id, var,
...path]`` selectors and ``{{#node_id.var#}}`` in text become Flowloom references
(``sys.*``, ``env.*`` -> inputs, ``conversation.*`` -> conversation variables, start variables ->
inputs, loop variables inside a loop body -> run variables). The mapping rules are
documented in :mod:`nodes.importers.dify`.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.types import VarType

from .base import BaseImporter, Planned, _Insert, dict_at
from .refs import Target, Unconvertible, interpolation, join_template, json_string_state, literal, var_type

__all__ = ["CONVERTERS", "DifyRefs", "handle_key", "looks_like_dify"]

SYS_VARS = {
    "query": ("query", VarType.string),
    "user_id": ("user_id", VarType.string),
    "conversation_id": ("chat_id", VarType.string),
    "app_id": ("workflow_id", VarType.string),
    "workflow_id": ("workflow_id", VarType.string),
    "workflow_run_id": ("run_id", VarType.string),
}
#: selectors whose text rendering is dropped (no files in Flowloom; empty when no file is sent)
FILE_SELECTORS = {("sys", "files"), ("userinput", "files")}
TEMPLATE_REF = re.compile(r"\{\{#([^#{}]+?)#\}\}")
#: Dify node kinds Flowloom converts -> the :class:`~nodes.importers.dify_nodes.DifyNodes` method converting them
CONVERTERS = {
    "start": "_start",
    "end": "_end",
    "answer": "_answer",
    "llm": "_llm",
    "question-classifier": "_question_classifier",
    "parameter-extractor": "_parameter_extractor",
    "if-else": "_if_else",
    "code": "_code",
    "template-transform": "_template_transform",
    "variable-aggregator": "_aggregator",
    "variable-assigner": "_variable_assigner",
    "assigner": "_assigner",
    "iteration": "_iteration",
    "loop": "_loop",
    "loop-end": "_loop_break",
    "http-request": "_http",
    "knowledge-retrieval": "_knowledge_retrieval",
}


def looks_like_dify(doc: Any) -> bool:
    """A Dify DSL: ``workflow.graph`` (app export) or a bare ``graph`` with ``data`` nodes."""
    if not isinstance(doc, dict):
        return False
    wf = doc.get("workflow")
    if isinstance(wf, dict) and isinstance(wf.get("graph"), dict):
        return True
    graph = doc.get("graph")
    return isinstance(graph, dict) and isinstance(graph.get("nodes"), list)


def handle_key(value: Any) -> str:
    out = re.sub(r"[^A-Za-z0-9_\-]+", "_", str(value)).strip("_") or "case"
    return "error_" if out == "error" else out


class DifyRefs(BaseImporter):
    """The document and its references; subclassed by the node converters and the importer."""

    source_format = "dify"

    def __init__(self, source: dict[str, Any], **kw: Any):
        super().__init__(source, **kw)
        self.app: dict[str, Any] = dict_at(source, "app")
        nested = source.get("workflow")
        self.wf: dict[str, Any] = nested if isinstance(nested, dict) else source
        graph = dict_at(self.wf, "graph")
        self.raw_nodes = [
            n for n in graph.get("nodes") or [] if isinstance(n, dict) and n.get("id") is not None
        ]
        self.raw_edges = [e for e in graph.get("edges") or [] if isinstance(e, dict)]
        self.src: dict[str, dict[str, Any]] = {str(n["id"]): n for n in self.raw_nodes}
        self.start_id: str | None = None
        self.start_vars: dict[str, VarType] = {}
        self.env: dict[str, str] = {}  # env var -> environment variable name
        self.env_types: dict[str, VarType] = {}  # environment variable name -> the type references have
        self.environment: list[dict[str, Any]] = []  # the workflow's ``environment``
        self.conversation: dict[str, str] = {}  # conversation var -> run variable name
        #: loop id -> {loop variable: run variable name (the live value inside the body)}
        self.loop_vars: dict[str, dict[str, str]] = {}
        self._files_input: str | None = None
        self._dialogue_node: str | None = None

    @staticmethod
    def data(node: dict[str, Any]) -> dict[str, Any]:
        return dict_at(node, "data")

    def kind_of(self, nid: str) -> str:
        return str(self.data(self.src[nid]).get("type") or "") if nid in self.src else ""

    def meta(self) -> dict[str, Any]:
        return {
            "name": str(self.app.get("name") or ""),
            "description": str(self.app.get("description") or ""),
        }

    # ------------------------------------------------------------------ references

    def selector(self, sel: Any, *, what: str = "") -> Target:
        """The target of a Dify value selector ``[node_id, var, ...path]``."""
        if not isinstance(sel, list) or len(sel) < 2 or not all(isinstance(s, (str, int)) for s in sel):
            raise Unconvertible(f"invalid variable selector {sel!r}", "unsupported_reference")
        head, var, path = str(sel[0]), str(sel[1]), tuple(sel[2:])
        if head == self.start_id and var not in self.start_vars:
            # legacy forms: [start node, "sys.query"], and {{#start.sys.query#}} in text
            if var.startswith("sys."):
                head, var = "sys", var[4:]
            elif var == "sys" and path and isinstance(path[0], str):
                head, var, path = "sys", path[0], path[1:]
        if head == "sys":
            return self.system_target(var, path)
        if head in ("env", "conversation") or head == self.start_id:
            return self._variable_target(head, var, path)
        if self.src.get(head) is None or head not in self.by_src:
            raise Unconvertible(
                f"it reads {'.'.join(map(str, sel))}: node {head!r} is not in the workflow",
                "unsupported_reference",
            )
        return self._node_output_target(head, var, path)

    def _variable_target(self, head: str, var: str, path: tuple[str | int, ...]) -> Target:
        """An environment, conversation or start variable. Raises Unconvertible when the
        workflow does not declare it."""
        if head == "env":
            if var in self.env:
                return Target(
                    "env", self.env[var], None, path, None if path else self.env_types[self.env[var]]
                )
            raise Unconvertible(f"environment variable {var!r} is not declared", "unsupported_reference")
        if head == "conversation":
            if var in self.conversation:
                return Target(
                    "conversation",
                    self.conversation[var],
                    None,
                    path,
                    None if path else self._declared(self.conversation_vars, self.conversation[var]),
                )
            raise Unconvertible(f"conversation variable {var!r} is not declared", "unsupported_reference")
        if var in self.start_vars:
            return Target("inputs", var, None, path, self.start_vars[var] if not path else None)
        raise Unconvertible(f"the start node has no variable {var!r}", "unsupported_reference")

    def _node_output_target(self, head: str, var: str, path: tuple[str | int, ...]) -> Target:
        """Output ``var`` of node ``head`` (a loop variable, an aggregator group, an
        iteration's output, an error output, or an ordinary output)."""
        kind, p = self.kind_of(head), self.by_src[head]
        data = self.data(self.src[head])
        if kind == "loop" and var in self.loop_vars.get(head, {}):
            reader = self.reader
            if reader is not None and reader != p.fid and self.inside(reader, p.fid):
                return Target("vars", self.loop_vars[head][var], None, path, None)
            return self.node_target(p.fid, var, path, None, what=var)
        if kind in ("variable-aggregator", "variable-assigner") and self._groups(data):
            groups = self._groups(data)
            if var in groups and path and path[0] == "output":
                return self.node_target(groups[var], "output", path[1:], None, what=f"{var}.output")
            raise Unconvertible(
                f"it reads {var!r} of grouped aggregator {head!r}; groups are read as [node, group, output]",
                "unsupported_reference",
            )
        if kind == "iteration" and var == "output":
            flat = self.flatten_id(p)
            if flat is not None:
                return self.node_target(
                    flat, "output", path, VarType.array if not path else None, what="output"
                )
        error_path = self.error_output(head, var)
        if error_path is not None:
            return self.node_target(
                p.fid, "error", error_path + path, VarType.string if not path else None, what=var
            )
        field, vtype = self.output_of(head, var)
        return self.node_target(p.fid, field, path, vtype if not path else None, what=var)

    def system_target(self, var: str, path: tuple[str | int, ...] = ()) -> Target:
        """Dify's ``sys.<var>`` in Flowloom terms.

        ``files`` is an optional workflow input (an empty list unless given: Flowloom runs
        take no uploads, so conditions on files take their no-files branch);
        ``dialogue_count`` is computed from ``sys.history`` by an inserted template node
        (:meth:`dialogue_count`); the others are Flowloom system variables.

        Raises:
            Unconvertible: a system variable with no equivalent.
        """
        if var in SYS_VARS:
            name, vtype = SYS_VARS[var]
            return Target("sys", name, None, path, vtype)
        if var == "files":
            return Target("inputs", self.files_input(), None, path, None if path else VarType.array)
        if var == "dialogue_count":
            return self.node_target(
                self.dialogue_count(), "output", path, VarType.string, what="sys.dialogue_count"
            )
        raise Unconvertible(f"system variable sys.{var} has no Flowloom equivalent", "unsupported_reference")

    def files_input(self) -> str:
        """The optional input standing for ``sys.files`` (declared once, reported)."""
        if self._files_input is None:
            taken = {v["name"] for v in self.inputs}
            self._files_input = "sys_files" if "sys_files" not in taken else f"sys_files_{len(taken)}"
            self.declare_input(
                self._files_input,
                VarType.array,
                default=[],
                description="files sent with the message (Dify sys.files); empty unless given",
            )
            self.warn(
                "behaviour_difference",
                f"sys.files is input {self._files_input!r}, an empty list unless the "
                "run is given one: Flowloom runs take no uploads, so conditions on files take their no-files "
                "branch",
            )
        return self._files_input

    def dialogue_count(self) -> str:
        """Id of the template node computing ``sys.dialogue_count`` (the number of this
        turn in the conversation: the user messages of ``sys.history`` plus one), inserted
        right after the start node the first time it is read."""
        if self._dialogue_node is None:
            start = self.by_src[self.start_id or ""]
            node_id = self.synthetic_id(f"{start.fid}-dialogue-count")
            self._dialogue_node = node_id
            self.anchor[node_id] = start.fid
            self.inserts.append(
                _Insert(
                    start.fid,
                    {
                        "id": node_id,
                        "type": "template",
                        "name": "sys.dialogue_count",
                        "position": {"x": start.position["x"] + 40, "y": start.position["y"] + 120},
                        "config": {
                            "template": "{{ sys.history | selectattr('role', 'equalto', 'user') | list | length + 1 }}"
                        },
                    },
                    start.src_id,
                )
            )
            self.warn(
                "behaviour_difference",
                f"sys.dialogue_count is computed by node {node_id!r} from the chat "
                "history (user turns + 1) as text",
                start,
            )
        return self._dialogue_node

    def error_output(self, nid: str, var: str) -> tuple[str, ...] | None:
        """The path in Flowloom's ``error`` output for Dify's ``error_message``/``error_type``."""
        if var not in ("error_message", "error_type"):
            return None
        if self.data(self.src[nid]).get("error_strategy") != "fail-branch":
            raise Unconvertible(
                f"it reads {var} of node {nid!r}, which has no fail branch", "unsupported_reference"
            )
        return ("message",) if var == "error_message" else ("type",)

    @staticmethod
    def _declared(declared: list[dict[str, Any]], name: str) -> VarType | None:
        found = next((v for v in declared if v["name"] == name), None)
        return VarType(found["type"]) if found is not None else None

    def output_of(self, nid: str, var: str) -> tuple[str, VarType | None]:
        """(Flowloom output, type) of output ``var`` of Dify node ``nid``."""
        kind = self.kind_of(nid)
        data = self.data(self.src[nid])
        static: dict[str, dict[str, tuple[str, VarType | None]]] = {
            "llm": {
                "text": ("answer", VarType.string),
                "reasoning_content": ("reasoning", VarType.string),
                "usage": ("usage", VarType.object),
            },
            "question-classifier": {
                "class_name": ("category_name", VarType.string),
                "class_id": ("category", VarType.string),
                "usage": ("usage", VarType.object),
            },
            "parameter-extractor": {
                "__is_success": ("success", VarType.boolean),
                "__usage": ("usage", VarType.object),
            },
            "template-transform": {"output": ("output", VarType.string)},
            "http-request": {
                "status_code": ("status_code", VarType.number),
                "body": ("body", VarType.string),
                "headers": ("headers", VarType.object),
            },
            "answer": {"answer": ("answer", VarType.string)},
            "iteration": {
                "output": ("results", VarType.array),
                "item": ("item", None),
                "index": ("index", VarType.number),
            },
            "loop": {"index": ("index", VarType.number)},
            "agent": {"text": ("answer", VarType.string)},
            "variable-aggregator": {"output": ("output", var_type(data.get("output_type")))},
            "variable-assigner": {"output": ("output", var_type(data.get("output_type")))},
            "knowledge-retrieval": {"result": ("chunks", VarType.array)},
        }
        if var in static.get(kind, {}):
            return static[kind][var]
        if kind == "parameter-extractor":
            names = {
                str(p.get("name")): str(p.get("name"))
                for p in data.get("parameters") or []
                if isinstance(p, dict)
            }
            if var in names:
                return names[var], None
        if kind == "code":
            outputs = data.get("outputs") or {}
            if var in outputs:
                spec = outputs[var] if isinstance(outputs[var], dict) else {}
                return var, var_type(spec.get("type"))
        if kind not in CONVERTERS:  # placeholders keep the names other nodes read
            return re.sub(r"[.\[\]]+", "_", var) or "output", None
        raise Unconvertible(
            f"it reads output {var!r} of node {nid!r} ({kind}), which has no Flowloom equivalent",
            "unsupported_reference",
        )

    def _groups(self, data: dict[str, Any]) -> dict[str, str]:
        """Group name -> Flowloom node id for a grouped variable aggregator (first group: the node itself)."""
        adv = dict_at(data, "advanced_settings")
        if not adv.get("group_enabled"):
            return {}
        out: dict[str, str] = {}
        owner = next((p for p in self.planned if self.data(p.raw) is data), None)
        if owner is None:
            return {}
        for index, group in enumerate(adv.get("groups") or []):
            if isinstance(group, dict) and group.get("group_name"):
                name = str(group["group_name"])
                out[name] = owner.fid if index == 0 else f"{owner.fid}-{handle_key(name)}"
        return out

    def flatten_id(self, p: Planned) -> str | None:
        """Id of the node flattening an iteration's results (Dify ``flatten_output``), or None."""
        data = self.data(p.raw)
        if data.get("flatten_output") is False:
            return None
        sel = data.get("output_selector")
        collected: VarType | None = None
        if isinstance(sel, list) and len(sel) >= 2 and str(sel[0]) in self.src and len(sel) == 2:
            try:
                collected = self.output_of(str(sel[0]), str(sel[1]))[1]
            except Unconvertible:
                collected = None
        if collected not in (None, VarType.any, VarType.array):
            return None
        return f"{p.fid}-flatten"

    def template(self, text: Any, *, local: dict[str, str] | None = None, json_body: bool = False) -> str:
        """Dify text with ``{{#node.var#}}`` references -> a Flowloom template."""
        if not isinstance(text, str):
            return join_template([literal("" if text is None else str(text))])
        local = local or {}
        pieces: list[tuple[str, str]] = []
        pos = 0
        in_string = json_string_state(text) if json_body else None
        for m in TEMPLATE_REF.finditer(text):
            pieces.append(literal(text[pos : m.start()]))
            pos = m.end()
            parts = m.group(1).split(".")
            if len(parts) == 1 and parts[0] in local:
                pieces.append(("expr", "{{ " + local[parts[0]] + " }}"))
                continue
            if tuple(parts[:2]) in FILE_SELECTORS:
                current = self.by_fid.get(self.reader or "")
                self.warn(
                    "behaviour_difference",
                    f"{{{{#{m.group(1)}#}}}} (uploaded files) is left out of the text: "
                    "Flowloom runs take no files",
                    current,
                )
                continue
            if len(parts) < 2:
                raise Unconvertible(
                    f"template reference {m.group(0)} has no Flowloom equivalent", "unsupported_reference"
                )
            target = self.selector([int(s) if s.isdigit() and i > 1 else s for i, s in enumerate(parts)])
            inside = bool(in_string and in_string(m.start()))
            pieces.append(("expr", interpolation(target, in_json_string=inside)))
        pieces.append(literal(text[pos:]))
        return join_template(pieces)

    def value(self, sel: Any) -> dict[str, str]:
        return self.selector(sel).as_ref()

    def text_value(self, sel: Any) -> Any:
        target = self.selector(sel)
        if target.type in (None, VarType.any, VarType.string) and target.scope != "local":
            return target.as_ref()
        return interpolation(target)
