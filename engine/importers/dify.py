"""Dify DSL (YAML app exports, ``workflow.graph``) -> Flowloom.

References: ``[node_id, var, ...path]`` selectors and ``{{#node_id.var#}}`` in text;
``sys.*``, ``env.*`` (environment variables -> inputs with their default),
``conversation.*`` (conversation variables -> run variables). Handles: ``source``
(``out``), if-else case ids and ``false`` (``else``), question-classifier class ids,
``fail-branch`` (``error``). Iteration/loop bodies are the nodes with ``parentId``;
the ``iteration-start``/``loop-start`` nodes are dropped (the body's first nodes are
the ones without incoming edges).

The mapping table is in the README ("Importing from FastGPT or Dify").
"""

from __future__ import annotations

import re
from typing import Any

from schemas.types import VarType

from .base import BaseImporter, Planned, first, flowloom_ids, number
from .refs import (Target, Unconvertible, identifier, interpolation, join_template, json_string_state,
                   literal, var_type)
from .report import ImportFailed, ImportIssue

__all__ = ["DifyImporter", "looks_like_dify"]

SYS_VARS = {"query": ("query", VarType.string), "user_id": ("user_id", VarType.string),
            "conversation_id": ("chat_id", VarType.string), "app_id": ("workflow_id", VarType.string),
            "workflow_id": ("workflow_id", VarType.string), "workflow_run_id": ("run_id", VarType.string)}
#: selectors whose text rendering is dropped (no files in Flowloom; empty when no file is sent)
FILE_SELECTORS = {("sys", "files"), ("userinput", "files")}
UNSUPPORTED = {
    "knowledge-retrieval": "knowledge retrieval needs Dify's datasets; Flowloom has no knowledge-base search node",
    "tool": "a Dify plugin/marketplace tool; Flowloom has no equivalent",
    "agent": "Dify agent strategies (plugins) are not supported",
    "document-extractor": "document extraction: Flowloom does not handle uploaded files",
    "list-operator": "list operations (filter/sort/slice of files and arrays) are not supported",
    "datasource": "Dify data sources are not supported",
    "knowledge-index": "Dify knowledge indexing is not supported",
    "trigger-webhook": "Dify triggers are not supported",
    "trigger-schedule": "Dify triggers are not supported",
    "trigger-plugin": "Dify triggers are not supported",
}
_TEMPLATE_REF = re.compile(r"\{\{#([^#{}]+?)#\}\}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLATTEN_CODE = (
    "def main(results):\n"
    "    # Dify's flatten_output: when every item's result is a list, concatenate them\n"
    "    if all(isinstance(r, list) for r in results):\n"
    "        return {\"output\": [x for r in results for x in r]}\n"
    "    return {\"output\": results}\n"
)


def looks_like_dify(doc: Any) -> bool:
    """A Dify DSL: ``workflow.graph`` (app export) or a bare ``graph`` with ``data`` nodes."""
    if not isinstance(doc, dict):
        return False
    wf = doc.get("workflow")
    if isinstance(wf, dict) and isinstance(wf.get("graph"), dict):
        return True
    graph = doc.get("graph")
    return isinstance(graph, dict) and isinstance(graph.get("nodes"), list)


def _key(value: Any) -> str:
    out = re.sub(r"[^A-Za-z0-9_\-]+", "_", str(value)).strip("_") or "case"
    return "error_" if out == "error" else out


class DifyImporter(BaseImporter):
    """See the module docstring."""

    source_format = "dify"

    def __init__(self, source: dict[str, Any], **kw: Any):
        super().__init__(source, **kw)
        self.app: dict[str, Any] = source.get("app") if isinstance(source.get("app"), dict) else {}
        self.wf: dict[str, Any] = source.get("workflow") if isinstance(source.get("workflow"), dict) else source
        graph = self.wf.get("graph") if isinstance(self.wf.get("graph"), dict) else {}
        self.raw_nodes = [n for n in graph.get("nodes") or [] if isinstance(n, dict) and n.get("id") is not None]
        self.raw_edges = [e for e in graph.get("edges") or [] if isinstance(e, dict)]
        self.src: dict[str, dict[str, Any]] = {str(n["id"]): n for n in self.raw_nodes}
        self.start_id: str | None = None
        self.start_vars: dict[str, VarType] = {}
        self.env: dict[str, str] = {}  # env var -> input name
        self.conversation: dict[str, str] = {}  # conversation var -> run variable name
        #: loop id -> {loop variable: run variable name (the live value inside the body)}
        self.loop_vars: dict[str, dict[str, str]] = {}

    @staticmethod
    def data(node: dict[str, Any]) -> dict[str, Any]:
        return node.get("data") if isinstance(node.get("data"), dict) else {}

    def kind_of(self, nid: str) -> str:
        return str(self.data(self.src[nid]).get("type") or "") if nid in self.src else ""

    def meta(self) -> dict[str, Any]:
        return {"name": str(self.app.get("name") or ""), "description": str(self.app.get("description") or "")}

    # ------------------------------------------------------------------ planning

    def plan(self) -> None:
        if not self.raw_nodes:
            raise ImportFailed([ImportIssue("invalid_source", "the Dify graph has no nodes")], self.source_format)
        keep = []
        for node in self.raw_nodes:
            nid, kind = str(node["id"]), self.kind_of(str(node["id"]))
            if node.get("type") == "custom-note" or not kind:
                continue
            if kind in ("iteration-start", "loop-start"):
                continue
            keep.append(node)
        ids = flowloom_ids([str(n["id"]) for n in keep])
        for node in keep:
            nid = str(node["id"])
            data = self.data(node)
            p = Planned(nid, ids[nid], self.kind_of(nid), node, name=str(data.get("title") or ""),
                        description=str(data.get("desc") or ""), position=self._position(node))
            self.add_planned(p)
            if p.fid != nid:
                self.warn("renamed_id", f"node id {nid!r} is not a valid Flowloom id; it is {p.fid!r}", p)
        for p in self.planned:
            data = self.data(p.raw)
            parent = str(first(p.raw, "parentId", default="") or data.get("iteration_id") or data.get("loop_id") or "")
            if parent:
                owner = self.by_src.get(parent)
                if owner is not None and owner.src_type in ("iteration", "loop"):
                    p.parent = owner.fid
                else:
                    self.warn("dropped", f"parent {parent!r} is not an iteration or loop node; the node is placed at "
                              "the top level", p)
        starts = [p for p in self.planned if p.src_type == "start"]
        if not starts:
            raise ImportFailed([ImportIssue("invalid_source", "the Dify graph has no start node")], self.source_format)
        self.start_id = starts[0].src_id
        self._plan_variables(starts[0])
        for p in self.planned:
            if p.src_type == "loop":
                self._plan_loop_variables(p)

    def _position(self, node: dict[str, Any]) -> dict[str, float]:
        pos = node.get("positionAbsolute") if isinstance(node.get("positionAbsolute"), dict) else None
        if pos is None:
            pos = node.get("position") if isinstance(node.get("position"), dict) else {}
            parent = self.src.get(str(node.get("parentId") or ""))
            if parent is not None:
                base = self._position(parent)
                return {"x": base["x"] + float(number(pos.get("x")) or 0), "y": base["y"] + float(number(pos.get("y")) or 0)}
        return {"x": float(number(pos.get("x")) or 0.0), "y": float(number(pos.get("y")) or 0.0)}

    _INPUT_TYPES = {"text-input": VarType.string, "paragraph": VarType.string, "select": VarType.string,
                    "number": VarType.number, "checkbox": VarType.boolean, "json_object": VarType.object,
                    "file": VarType.file, "file-list": VarType.array}

    def _plan_variables(self, start: Planned) -> None:
        for var in self.data(start.raw).get("variables") or []:
            if not isinstance(var, dict) or not var.get("variable"):
                continue
            name = str(var["variable"])
            vtype = self._INPUT_TYPES.get(str(var.get("type") or "text-input"), VarType.string)
            if not _IDENT.match(name):
                raise ImportFailed([ImportIssue("invalid_source", f"start variable {name!r} is not an identifier",
                                                start.src_id, "start")], self.source_format)
            options = [str(o) for o in var.get("options") or []]
            desc = str(var.get("label") or "") + (f" (one of: {', '.join(options)})" if options else "")
            default = var.get("default")
            self.start_vars[name] = vtype
            self.declare_input(name, vtype, required=bool(var.get("required")) and default in (None, ""),
                               default=None if default == "" else default, description=desc)
            if vtype in (VarType.file, VarType.array) and str(var.get("type")).startswith("file"):
                self.warn("behaviour_difference", f"input {name!r} is a file input in Dify; Flowloom passes it as a "
                          "plain value (nodes that read files are not supported)", start)
        taken = {v["name"] for v in self.inputs}
        for var in self.wf.get("environment_variables") or []:
            if not isinstance(var, dict) or not var.get("name"):
                continue
            key = str(var["name"])
            name = identifier(key if key not in taken else f"env_{key}", taken, "env")
            taken.add(name)
            self.env[key] = name
            secret = var.get("value_type") == "secret"
            vtype = var_type(var.get("value_type")) or VarType.string
            value = None if secret else var.get("value")
            self.declare_input(name, vtype, required=value is None, default=value,
                               description=f"environment variable {key}" + (" (secret: pass it at run time)"
                                                                            if secret else ""))
        for var in self.wf.get("conversation_variables") or []:
            if not isinstance(var, dict) or not var.get("name"):
                continue
            key = str(var["name"])
            name = identifier(key, {v["name"] for v in self.variables}, "var")
            self.conversation[key] = name
            self.declare_variable(name, var_type(var.get("value_type")) or VarType.any, default=var.get("value"),
                                  description=str(var.get("description") or ""))
            self.warn("behaviour_difference", f"conversation variable {key!r} is run variable {name!r}: it starts "
                      "from its default in every run (Flowloom keeps no per-conversation variables)")

    def _plan_loop_variables(self, p: Planned) -> None:
        names: dict[str, str] = {}
        for var in self.data(p.raw).get("loop_variables") or []:
            if isinstance(var, dict) and var.get("label"):
                taken = {v["name"] for v in self.variables} | {v["name"] for v in self.inputs}
                name = identifier(f"loop_{p.fid}_{var['label']}", taken, "loop")
                names[str(var["label"])] = name
                self.declare_variable(name, var_type(var.get("var_type")) or VarType.any,
                                      description=f"loop variable {var['label']!r} of loop {p.src_id!r} "
                                                  "(its live value inside the loop body)")
        self.loop_vars[p.src_id] = names

    # ------------------------------------------------------------------ edges

    def map_edges(self) -> None:
        for raw in self.raw_edges:
            s, t = str(raw.get("source") or ""), str(raw.get("target") or "")
            if s not in self.by_src or t not in self.by_src:
                continue  # iteration-start / loop-start and notes
            handle = str(raw.get("sourceHandle") or "source")
            kind = self.by_src[s].src_type
            if handle == "fail-branch":
                mapped = "error"
            elif handle in ("source", "success-branch"):
                mapped = "out"
            elif kind == "if-else":
                mapped = "else" if handle == "false" else _key(handle)
            else:
                mapped = _key(handle)
            eid = raw.get("id")
            self.add_edge(self.by_src[s].fid, mapped, self.by_src[t].fid, str(eid) if eid else None)

    # ------------------------------------------------------------------ references

    def selector(self, sel: Any, *, what: str = "") -> Target:
        """The target of a Dify value selector ``[node_id, var, ...path]``."""
        if not isinstance(sel, list) or len(sel) < 2 or not all(isinstance(s, (str, int)) for s in sel):
            raise Unconvertible(f"invalid variable selector {sel!r}", "unsupported_reference")
        head, var, path = str(sel[0]), str(sel[1]), tuple(sel[2:])
        if head == "sys":
            if var in SYS_VARS:
                name, vtype = SYS_VARS[var]
                return Target("sys", name, None, path, vtype)
            raise Unconvertible(f"system variable sys.{var} has no Flowloom equivalent", "unsupported_reference")
        if head == "env":
            if var in self.env:
                return Target("inputs", self.env[var], None, path, None if path else self._declared(
                    self.inputs, self.env[var]))
            raise Unconvertible(f"environment variable {var!r} is not declared", "unsupported_reference")
        if head == "conversation":
            if var in self.conversation:
                return Target("vars", self.conversation[var], None, path, None if path else self._declared(
                    self.variables, self.conversation[var]))
            raise Unconvertible(f"conversation variable {var!r} is not declared", "unsupported_reference")
        if head == self.start_id:
            if var in self.start_vars:
                return Target("inputs", var, None, path, self.start_vars[var] if not path else None)
            raise Unconvertible(f"the start node has no variable {var!r}", "unsupported_reference")
        node = self.src.get(head)
        if node is None or head not in self.by_src:
            raise Unconvertible(f"it reads {'.'.join(map(str, sel))}: node {head!r} is not in the workflow",
                                "unsupported_reference")
        kind, p = self.kind_of(head), self.by_src[head]
        data = self.data(node)
        if kind == "loop" and var in self.loop_vars.get(head, {}):
            reader = self.reader
            if reader is not None and reader != p.fid and self.inside(reader, p.fid):
                return Target("vars", self.loop_vars[head][var], None, path, None)
            return self.node_target(p.fid, var, path, None, what=var)
        if kind in ("variable-aggregator", "variable-assigner") and self._groups(data):
            groups = self._groups(data)
            if var in groups and path and path[0] == "output":
                return self.node_target(groups[var], "output", path[1:], None, what=f"{var}.output")
            raise Unconvertible(f"it reads {var!r} of grouped aggregator {head!r}; groups are read as "
                                "[node, group, output]", "unsupported_reference")
        if kind == "iteration" and var == "output":
            flat = self.flatten_id(p)
            if flat is not None:
                return self.node_target(flat, "output", path, VarType.array if not path else None, what="output")
        error_path = self.error_output(head, var)
        if error_path is not None:
            return self.node_target(p.fid, "error", error_path + path, VarType.string if not path else None,
                                    what=var)
        field, vtype = self.output_of(head, var)
        return self.node_target(p.fid, field, path, vtype if not path else None, what=var)

    def error_output(self, nid: str, var: str) -> tuple[str, ...] | None:
        """The path in Flowloom's ``error`` output for Dify's ``error_message``/``error_type``."""
        if var not in ("error_message", "error_type"):
            return None
        if self.data(self.src[nid]).get("error_strategy") != "fail-branch":
            raise Unconvertible(f"it reads {var} of node {nid!r}, which has no fail branch", "unsupported_reference")
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
            "llm": {"text": ("answer", VarType.string), "reasoning_content": ("reasoning", VarType.string),
                    "usage": ("usage", VarType.object)},
            "question-classifier": {"class_name": ("category_name", VarType.string),
                                    "class_id": ("category", VarType.string), "usage": ("usage", VarType.object)},
            "parameter-extractor": {"__is_success": ("success", VarType.boolean), "__usage": ("usage", VarType.object)},
            "template-transform": {"output": ("output", VarType.string)},
            "http-request": {"status_code": ("status_code", VarType.number), "body": ("body", VarType.string),
                             "headers": ("headers", VarType.object)},
            "answer": {"answer": ("answer", VarType.string)},
            "iteration": {"output": ("results", VarType.array), "item": ("item", None),
                          "index": ("index", VarType.number)},
            "loop": {"index": ("index", VarType.number)},
            "variable-aggregator": {"output": ("output", var_type(data.get("output_type")))},
            "variable-assigner": {"output": ("output", var_type(data.get("output_type")))},
        }
        if var in static.get(kind, {}):
            return static[kind][var]
        if kind == "parameter-extractor":
            names = {str(p.get("name")): str(p.get("name")) for p in data.get("parameters") or [] if isinstance(p, dict)}
            if var in names:
                return names[var], None
        if kind == "code":
            outputs = data.get("outputs") or {}
            if var in outputs:
                spec = outputs[var] if isinstance(outputs[var], dict) else {}
                return var, var_type(spec.get("type"))
        if kind not in _SUPPORTED:  # placeholders keep the names other nodes read
            return re.sub(r"[.\[\]]+", "_", var) or "output", None
        raise Unconvertible(f"it reads output {var!r} of node {nid!r} ({kind}), which has no Flowloom equivalent",
                            "unsupported_reference")

    def _groups(self, data: dict[str, Any]) -> dict[str, str]:
        """Group name -> Flowloom node id for a grouped variable aggregator (first group: the node itself)."""
        adv = data.get("advanced_settings") if isinstance(data.get("advanced_settings"), dict) else {}
        if not adv.get("group_enabled"):
            return {}
        out: dict[str, str] = {}
        owner = next((p for p in self.planned if self.data(p.raw) is data), None)
        if owner is None:
            return {}
        for index, group in enumerate(adv.get("groups") or []):
            if isinstance(group, dict) and group.get("group_name"):
                name = str(group["group_name"])
                out[name] = owner.fid if index == 0 else f"{owner.fid}-{_key(name)}"
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
        for m in _TEMPLATE_REF.finditer(text):
            pieces.append(literal(text[pos:m.start()]))
            pos = m.end()
            parts = m.group(1).split(".")
            if len(parts) == 1 and parts[0] in local:
                pieces.append(("expr", "{{ %s }}" % local[parts[0]]))
                continue
            if tuple(parts[:2]) in FILE_SELECTORS:
                current = self.by_fid.get(self.reader or "")
                self.warn("behaviour_difference", f"{{{{#{m.group(1)}#}}}} (uploaded files) is left out of the text: "
                          "Flowloom runs take no files", current)
                continue
            if len(parts) < 2:
                raise Unconvertible(f"template reference {m.group(0)} has no Flowloom equivalent",
                                    "unsupported_reference")
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

    # ------------------------------------------------------------------ conversion

    def convert(self, p: Planned) -> dict[str, Any]:
        kind = p.src_type
        if kind in UNSUPPORTED:
            raise Unconvertible(UNSUPPORTED[kind])
        handler = _SUPPORTED.get(kind)
        if handler is None:
            raise Unconvertible(f"Dify node kind {kind!r} is not supported")
        node = getattr(self, handler)(p)
        node.update(self.policy(p, node))
        return node

    def policy(self, p: Planned, node: dict[str, Any]) -> dict[str, Any]:
        data = self.data(p.raw)
        out: dict[str, Any] = {}
        retry = data.get("retry_config") if isinstance(data.get("retry_config"), dict) else {}
        if retry.get("retry_enabled"):
            out["max_retries"] = max(0, min(10, int(number(retry.get("max_retries")) or 0)))
            interval = number(retry.get("retry_interval"))
            if interval is not None:
                out["retry_interval"] = min(600.0, max(0.0, interval / 1000.0))
        strategy = data.get("error_strategy")
        if strategy == "fail-branch":
            out["error_strategy"] = "error_branch"
        elif strategy == "default-value":
            defaults: dict[str, Any] = {}
            for item in data.get("default_value") or []:
                if isinstance(item, dict) and item.get("key"):
                    try:
                        field, _ = self.output_of(p.src_id, str(item["key"]))
                    except Unconvertible:
                        continue
                    value = item.get("value")
                    if item.get("type") == "number" and number(value) is not None:
                        value = number(value)
                    defaults[field] = value
            out["error_strategy"] = "default_output"
            out["default_output"] = defaults
        return out

    def _start(self, p: Planned) -> dict[str, Any]:
        return {"type": "start"}

    def _end(self, p: Planned) -> dict[str, Any]:
        outputs = []
        for item in self.data(p.raw).get("outputs") or []:
            if isinstance(item, dict) and item.get("variable"):
                name = str(item["variable"])
                if not _IDENT.match(name):
                    raise Unconvertible(f"output name {name!r} is not an identifier")
                outputs.append({"name": name, "value": self.value(item.get("value_selector"))})
        return {"type": "end", "config": {"outputs": outputs}}

    def _answer(self, p: Planned) -> dict[str, Any]:
        return {"type": "answer", "config": {"text": self.template(self.data(p.raw).get("answer") or "")}}

    def _model(self, data: dict[str, Any], cfg: dict[str, Any]) -> None:
        model = data.get("model") if isinstance(data.get("model"), dict) else {}
        cfg["model"] = self.model_name(model.get("name"))
        params = model.get("completion_params") if isinstance(model.get("completion_params"), dict) else {}
        temperature = number(params.get("temperature"))
        if temperature is not None:
            cfg["temperature"] = max(0.0, min(2.0, float(temperature)))
        max_tokens = number(params.get("max_tokens"))
        if max_tokens and max_tokens > 0:
            cfg["max_tokens"] = int(max_tokens)

    def _memory(self, data: dict[str, Any], cfg: dict[str, Any], default: int) -> dict[str, Any] | None:
        memory = data.get("memory") if isinstance(data.get("memory"), dict) else None
        if memory is None:
            cfg["history"] = 0
            return None
        window = memory.get("window") if isinstance(memory.get("window"), dict) else {}
        size = number(window.get("size")) if window.get("enabled") else None
        cfg["history"] = max(0, min(100, int(size))) if size is not None else default
        return memory

    def _llm(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        if (data.get("structured_output_enabled") or data.get("structured_output")) and \
                data.get("structured_output_enabled") is not False:
            raise Unconvertible("structured output of an LLM node is not supported (use a parameter extractor)",
                                "unsupported_feature")
        context = data.get("context") if isinstance(data.get("context"), dict) else {}
        local: dict[str, str] = {}
        if context.get("enabled") and context.get("variable_selector"):
            cfg["quote"] = self.value(context["variable_selector"])
            local["context"] = "quote"
        prompts = data.get("prompt_template")
        messages = prompts if isinstance(prompts, list) else [prompts] if isinstance(prompts, dict) else []
        system, user = [], []
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            if msg.get("edition_type") == "jinja2":
                raise Unconvertible("Jinja2 prompt messages are not supported", "unsupported_feature")
            role = str(msg.get("role") or "user")
            text = self.template(msg.get("text") or "", local=local)
            if role == "system":
                system.append(text)
            elif role == "user":
                user.append(text)
            else:
                raise Unconvertible(f"prompt messages with role {role!r} (few-shot turns) are not supported",
                                    "unsupported_feature")
        memory = self._memory(data, cfg, 50)
        if memory is not None:
            query = memory.get("query_prompt_template")
            user.append(self.template(query if isinstance(query, str) and query.strip() else "{{#sys.query#}}",
                                      local=local))
        if len(user) > 1:
            self.warn("behaviour_difference", "several user messages are sent as one, separated by blank lines", p)
        if system and any(s for s in system):
            cfg["system_prompt"] = "\n\n".join(s for s in system if s)
        cfg["user_prompt"] = "\n\n".join(u for u in user if u) if user else ""
        if "context" in local:
            if any("quote" in s for s in system + user):
                cfg["quote_template"] = ""  # the prompt places the context itself
        if isinstance(data.get("vision"), dict) and data["vision"].get("enabled"):
            self.warn("behaviour_difference", "vision is on in Dify; Flowloom chats send text only", p)
        cfg["stream"] = False  # Dify shows an LLM's text through answer nodes
        return {"type": "chat", "config": cfg}

    def _question_classifier(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        cfg["question"] = self.text_value(data.get("query_variable_selector"))
        categories = [{"id": _key(c.get("id")), "name": str(c.get("name") or c.get("id"))}
                      for c in data.get("classes") or [] if isinstance(c, dict) and c.get("id") is not None]
        if len(categories) < 2:
            raise Unconvertible("a question classifier needs at least two classes")
        cfg["categories"] = categories
        if data.get("instruction"):
            cfg["instructions"] = self.template(data["instruction"])
        self._memory(data, cfg, 4)
        return {"type": "classify_question", "config": cfg}

    _PARAM_TYPES = {"string": "string", "number": "number", "bool": "boolean", "boolean": "boolean",
                    "select": "string", "object": "object"}

    def _parameter_extractor(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {}
        self._model(data, cfg)
        cfg["text"] = self.text_value(data.get("query"))
        fields = []
        for param in data.get("parameters") or []:
            if not isinstance(param, dict) or not param.get("name"):
                continue
            name, ptype = str(param["name"]), str(param.get("type") or "string")
            if not _IDENT.match(name) or name in ("fields", "success", "usage"):
                raise Unconvertible(f"parameter name {name!r} is not usable as a Flowloom field name")
            ftype = "array" if ptype.startswith("array") else self._PARAM_TYPES.get(ptype)
            if ftype is None:
                raise Unconvertible(f"parameter type {ptype!r} is not supported", "unsupported_feature")
            field: dict[str, Any] = {"name": name, "type": ftype, "required": bool(param.get("required"))}
            if param.get("description"):
                field["description"] = str(param["description"])
            if ptype == "select" and param.get("options"):
                field["enum"] = [str(o) for o in param["options"]]
            fields.append(field)
        if not fields:
            raise Unconvertible("the parameter extractor has no parameters")
        cfg["fields"] = fields
        if data.get("instruction"):
            cfg["instructions"] = self.template(data["instruction"])
        mode = {"function_call": "tool", "prompt": "prompt"}.get(str(data.get("reasoning_mode") or ""))
        if mode:
            cfg["mode"] = mode
        self._memory(data, cfg, 0)
        return {"type": "extract_fields", "config": cfg}

    _OPS = {"contains": ("contains", None), "not contains": ("not_contains", None),
            "start with": ("starts_with", "string"), "end with": ("ends_with", "string"),
            "is": ("equals", None), "is not": ("not_equals", None), "empty": ("empty", None),
            "not empty": ("not_empty", None), "in": ("in", None), "not in": ("not_in", None),
            "=": ("equals", "number"), "≠": ("not_equals", "number"), ">": ("gt", "number"), "<": ("lt", "number"),
            "≥": ("gte", "number"), "≤": ("lte", "number"), "null": ("empty", None), "not null": ("not_empty", None)}

    def _condition(self, item: dict[str, Any]) -> dict[str, Any]:
        op = str(item.get("comparison_operator") or "")
        if op not in self._OPS:
            raise Unconvertible(f"condition operator {op!r} has no Flowloom equivalent", "unsupported_feature")
        if item.get("sub_variable_condition"):
            raise Unconvertible("conditions on file attributes are not supported", "unsupported_feature")
        operator, coerce = self._OPS[op]
        var_kind = str(item.get("varType") or "")
        if coerce is None and operator in ("equals", "not_equals", "starts_with", "ends_with"):
            coerce = {"number": "number", "boolean": "boolean"}.get(var_kind, "string")
        cond: dict[str, Any] = {"left": self.value(item.get("variable_selector")), "operator": operator}
        if operator not in ("empty", "not_empty"):
            right = item.get("value")
            refs = _TEMPLATE_REF.findall(right) if isinstance(right, str) else []
            if refs and _TEMPLATE_REF.fullmatch(right.strip()):
                parts = refs[0].split(".")
                cond["right"] = self.selector(parts).as_ref()
            elif refs:
                raise Unconvertible(f"condition value {right!r} mixes text and references", "unsupported_feature")
            elif coerce == "number":
                cond["right"] = number(right) if number(right) is not None else right
            elif coerce == "boolean" and isinstance(right, str):
                cond["right"] = right.strip().lower() in ("true", "1", "yes")
            elif operator in ("in", "not_in"):
                cond["right"] = right if isinstance(right, list) else [v.strip() for v in str(right or "").split(",")]
            else:
                cond["right"] = "" if right is None else right
        if coerce is not None:
            cond["type"] = coerce
        return cond

    def _if_else(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        raw_cases = data.get("cases")
        if not raw_cases:
            raw_cases = [{"case_id": "true", "logical_operator": data.get("logical_operator") or "and",
                          "conditions": data.get("conditions") or []}]
        cases = []
        for case in raw_cases:
            if not isinstance(case, dict):
                continue
            conditions = [self._condition(c) for c in case.get("conditions") or [] if isinstance(c, dict)]
            if not conditions:
                raise Unconvertible(f"case {case.get('case_id')!r} has no condition")
            cases.append({"id": _key(first(case, "case_id", "id", default="true")),
                          "logic": "or" if str(case.get("logical_operator")).lower() == "or" else "and",
                          "conditions": conditions})
        return {"type": "if_else", "config": {"cases": cases}}

    def _code(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        language = {"python3": "python", "python": "python", "javascript": "javascript"}.get(
            str(data.get("code_language") or ""))
        if language is None:
            raise Unconvertible(f"code language {data.get('code_language')!r} is not supported")
        inputs = []
        for var in data.get("variables") or []:
            if isinstance(var, dict) and var.get("variable"):
                name = str(var["variable"])
                if not _IDENT.match(name):
                    raise Unconvertible(f"input {name!r} is not an identifier, and the code reads it by that name")
                inputs.append({"name": name, "value": self.value(var.get("value_selector"))})
        outputs = []
        for name, spec in (data.get("outputs") or {}).items():
            spec = spec if isinstance(spec, dict) else {}
            if not _IDENT.match(str(name)):
                raise Unconvertible(f"output {name!r} is not an identifier")
            outputs.append({"name": str(name), "type": (var_type(spec.get("type")) or VarType.any).value})
        code = data.get("code")
        if not isinstance(code, str) or not code.strip():
            raise Unconvertible("the code node has no code")
        return {"type": "code", "config": {"language": language, "code": code, "inputs": inputs, "outputs": outputs}}

    def _template_transform(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        variables = []
        for var in data.get("variables") or []:
            if isinstance(var, dict) and var.get("variable"):
                name = str(var["variable"])
                if not _IDENT.match(name):
                    raise Unconvertible(f"template variable {name!r} is not an identifier")
                variables.append({"name": name, "value": self.value(var.get("value_selector"))})
        template = data.get("template")
        return {"type": "template", "config": {"template": template if isinstance(template, str) else "",
                                               "variables": variables}}

    def _aggregator(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        groups = self._groups(data)
        if groups:
            adv = data["advanced_settings"]
            previous = p.fid
            first_node: dict[str, Any] | None = None
            for index, group in enumerate(adv.get("groups") or []):
                if not isinstance(group, dict) or not group.get("group_name"):
                    continue
                refs = [self.value(sel) for sel in group.get("variables") or []]
                if not refs:
                    raise Unconvertible(f"group {group['group_name']!r} has no variables")
                config = {"type": (var_type(group.get("output_type")) or VarType.any).value, "refs": refs}
                node_id = groups[str(group["group_name"])]
                if index == 0:
                    first_node = {"type": "variable_aggregator", "config": config}
                    continue
                self.insert_after(previous, {
                    "id": node_id, "type": "variable_aggregator", "name": f"{p.name} / {group['group_name']}",
                    "position": {"x": p.position["x"], "y": p.position["y"] + 80 * index}, "config": config,
                    **({"parent": p.parent} if p.parent else {})})
                previous = node_id
            if len(groups) > 1:
                self.warn("behaviour_difference", "each group of the aggregator is its own variable_aggregator node "
                          f"({', '.join(groups.values())}), run one after the other", p)
            assert first_node is not None
            return first_node
        refs = [self.value(sel) for sel in data.get("variables") or []]
        if not refs:
            raise Unconvertible("the variable aggregator has no variables")
        return {"type": "variable_aggregator",
                "config": {"type": (var_type(data.get("output_type")) or VarType.any).value, "refs": refs}}

    def _variable_assigner(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        if "items" not in data and "assigned_variable_selector" not in data:
            return self._aggregator(p)  # the legacy name of the aggregator
        return self._assigner(p)

    _ASSIGN_OPS = {"over-write": "set", "set": "set", "append": "append", "extend": "extend", "clear": "clear",
                   "+=": "add"}

    def _assign_target(self, sel: Any) -> str:
        if isinstance(sel, list) and len(sel) == 2:
            head, var = str(sel[0]), str(sel[1])
            if head == "conversation" and var in self.conversation:
                return self.conversation[var]
            if head in self.loop_vars and var in self.loop_vars[head]:
                return self.loop_vars[head][var]
        raise Unconvertible(f"it assigns {sel!r}; Flowloom updates conversation variables and loop variables only",
                            "unsupported_feature")

    def _assigner(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        updates = []
        if "items" in data:
            for item in data.get("items") or []:
                if not isinstance(item, dict):
                    continue
                name = self._assign_target(item.get("variable_selector"))
                op = str(item.get("operation") or "over-write")
                value = item.get("value")
                if item.get("input_type") == "variable" and op != "clear":
                    value = self.value(value)
                if op == "-=" and number(value) is not None:
                    op, value = "+=", -number(value)  # type: ignore[operator]
                if op not in self._ASSIGN_OPS:
                    raise Unconvertible(f"assignment operation {op!r} has no Flowloom equivalent",
                                        "unsupported_feature")
                update: dict[str, Any] = {"variable": name, "operation": self._ASSIGN_OPS[op]}
                if op != "clear":
                    update["value"] = value
                updates.append(update)
        else:
            name = self._assign_target(data.get("assigned_variable_selector"))
            mode = str(data.get("write_mode") or "over-write")
            update = {"variable": name, "operation": self._ASSIGN_OPS.get(mode, "set")}
            if mode != "clear":
                update["value"] = self.value(data.get("input_variable_selector"))
            updates.append(update)
        if not updates:
            raise Unconvertible("the variable assigner assigns nothing")
        return {"type": "variable_update", "config": {"updates": updates}}

    def _iteration(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {"items": self.value(data.get("iterator_selector"))}
        self.body_scope = p.fid
        try:
            cfg["collect"] = self.value(data.get("output_selector"))
        finally:
            self.body_scope = None
        if data.get("is_parallel"):
            cfg["concurrency"] = max(1, min(32, int(number(data.get("parallel_nums")) or 1)))
        mode = {"terminated": "fail", "continue-on-error": "continue", "remove-abnormal-output": "skip"}.get(
            str(data.get("error_handle_mode") or "terminated"), "fail")
        cfg["item_error"] = mode
        flat = self.flatten_id(p)
        if flat is not None:
            self.insert_after(p.fid, {
                "id": flat, "type": "code", "name": f"{p.name or p.fid}: flatten output",
                "position": {"x": p.position["x"] + 40, "y": p.position["y"] + 160},
                "config": {"language": "python", "code": _FLATTEN_CODE,
                           "inputs": [{"name": "results", "value": {"ref": f"{p.fid}.results"}}],
                           "outputs": [{"name": "output", "type": "array"}]},
                **({"parent": p.parent} if p.parent else {})})
            self.warn("behaviour_difference", f"flatten_output: node {flat!r} (Python, added by the importer) "
                      "concatenates the items' results when every result is a list", p)
        return {"type": "iteration", "config": cfg}

    def _loop(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        mirrors = self.loop_vars.get(p.src_id, {})
        variables, init, update = [], [], []
        for var in data.get("loop_variables") or []:
            if not isinstance(var, dict) or not var.get("label"):
                continue
            label = str(var["label"])
            if not _IDENT.match(label) or label in ("index", "rounds"):
                raise Unconvertible(f"loop variable {label!r} is not usable as a Flowloom loop variable name")
            vtype = var_type(var.get("var_type")) or VarType.any
            if var.get("value_type") == "variable":
                initial: Any = self.value(var.get("value"))
            else:
                initial = var.get("value")
                if vtype is VarType.number and number(initial) is not None:
                    initial = number(initial)
                elif vtype is VarType.boolean and isinstance(initial, str):
                    initial = initial.strip().lower() in ("true", "1", "yes")
            init.append({"variable": mirrors[label], "operation": "set", "value": initial})
            variables.append({"name": label, "value": {"ref": f"vars.{mirrors[label]}"}, "type": vtype.value})
            update.append({"variable": label, "value": {"ref": f"vars.{mirrors[label]}"}})
        cfg: dict[str, Any] = {"variables": variables, "update": update}
        self.body_scope = p.fid
        try:
            cfg["break_when"] = [self._condition(c) for c in data.get("break_conditions") or [] if isinstance(c, dict)]
        finally:
            self.body_scope = None
        cfg["logic"] = "or" if str(data.get("logical_operator")).lower() == "or" else "and"
        count = number(data.get("loop_count"))
        if count is not None and count >= 1:
            cfg["max_iterations"] = int(count)
        if init:
            self.insert_before(p.fid, {"id": self.synthetic_id(f"{p.fid}-init"), "type": "variable_update",
                                    "name": f"{p.name or p.fid}: initial values",
                                    "position": {"x": p.position["x"] - 40, "y": p.position["y"] - 120},
                                    "config": {"updates": init}, **({"parent": p.parent} if p.parent else {})})
        self.warn("behaviour_difference", f"the loop stops after its break conditions; reaching loop_count "
                  f"({cfg.get('max_iterations', 'the run limit')}) rounds fails the node with reason "
                  "max_iterations (Dify ends the loop there silently)", p)
        return {"type": "loop", "config": cfg}

    def _loop_break(self, p: Planned) -> dict[str, Any]:
        return {"type": "loop_break"}

    def _http(self, p: Planned) -> dict[str, Any]:
        data = self.data(p.raw)
        cfg: dict[str, Any] = {"method": str(data.get("method") or "get").upper(),
                               "url": self.template(data.get("url") or ""), "raise_for_status": False}

        def pairs(text: Any) -> dict[str, str]:
            out: dict[str, str] = {}
            if isinstance(text, str):
                for line in text.splitlines():
                    key, sep, value = line.partition(":")
                    if sep and key.strip():
                        out[key.strip()] = self.template(value.strip())
            return out

        headers = pairs(data.get("headers"))
        auth = data.get("authorization") if isinstance(data.get("authorization"), dict) else {}
        if auth.get("type") == "api-key":
            conf = auth.get("config") if isinstance(auth.get("config"), dict) else {}
            key = str(conf.get("api_key") or "")
            kind = str(conf.get("type") or "bearer")
            if kind == "custom":
                headers[str(conf.get("header") or "Authorization")] = self.template(key)
            else:
                headers["Authorization"] = self.template(("Basic " if kind == "basic" else "Bearer ") + key)
            self.warn("behaviour_difference", "the API key from the export is written into the request headers; "
                      "Dify exports usually leave it out, so set it before running", p)
        if headers:
            cfg["headers"] = headers
        query = pairs(data.get("params"))
        if query:
            cfg["query"] = query
        body = data.get("body") if isinstance(data.get("body"), dict) else {}
        btype = str(body.get("type") or "none")
        raw_data = body.get("data")
        items = [i for i in raw_data if isinstance(i, dict)] if isinstance(raw_data, list) else []
        if btype in ("form-data", "x-www-form-urlencoded"):
            form = {}
            for item in items:
                if item.get("type") == "file":
                    raise Unconvertible("the request sends a file", "unsupported_feature")
                if item.get("key"):
                    form[str(item["key"])] = self.template(item.get("value") or "")
            if not items and isinstance(raw_data, str):
                form = pairs(raw_data)
            cfg["body"] = {"type": "form", "form": form}
            if btype == "form-data":
                self.warn("behaviour_difference", "the form-data body is sent URL-encoded", p)
        elif btype in ("json", "raw-text"):
            text = items[0].get("value") if items else raw_data if isinstance(raw_data, str) else ""
            cfg["body"] = {"type": "raw", "raw": self.template(text or "", json_body=btype == "json"),
                           "content_type": "application/json" if btype == "json" else "text/plain"}
        elif btype == "binary":
            raise Unconvertible("the request sends a binary file", "unsupported_feature")
        timeout = data.get("timeout") if isinstance(data.get("timeout"), dict) else {}
        values = [number(v) for k, v in timeout.items() if k.startswith("max_") or k in ("connect", "read", "write")]
        values = [v for v in values if v]
        if values:
            cfg["timeout"] = float(min(600, max(values)))
        if data.get("ssl_verify") is False:
            self.warn("behaviour_difference", "TLS certificates are verified (Dify's ssl_verify: false is ignored)", p)
        return {"type": "http_request", "config": cfg}

_SUPPORTED = {
    "start": "_start", "end": "_end", "answer": "_answer", "llm": "_llm",
    "question-classifier": "_question_classifier", "parameter-extractor": "_parameter_extractor",
    "if-else": "_if_else", "code": "_code", "template-transform": "_template_transform",
    "variable-aggregator": "_aggregator", "variable-assigner": "_variable_assigner", "assigner": "_assigner",
    "iteration": "_iteration", "loop": "_loop", "loop-end": "_loop_break", "http-request": "_http",
}
