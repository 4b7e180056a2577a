"""Dify DSL (YAML app exports, ``workflow.graph``) -> Flowloom.

References: ``[node_id, var, ...path]`` selectors and ``{{#node_id.var#}}`` in text;
``sys.*``, ``env.*`` (environment variables -> inputs with their default),
``conversation.*`` (conversation variables, kept per chat). Handles: ``source``
(``out``), if-else case ids and ``false`` (``else``), question-classifier class ids,
``fail-branch`` (``error``). Iteration/loop bodies are the nodes with ``parentId``;
the ``iteration-start``/``loop-start`` nodes are dropped (the body's first nodes are
the ones without incoming edges).

The mapping table is in the README ("Importing from FastGPT or Dify").

The conversion is split in three modules: :mod:`.dify_refs` reads the graph and resolves
selectors and templates, :mod:`.dify_nodes` converts each node kind, and this module
plans the nodes (ids, containers, start/environment/conversation/loop variables), maps
the edges and dispatches the conversion (with each node's retry and error policy).
"""

from __future__ import annotations

from typing import Any

from schemas.types import VarType

from .base import Planned, dict_at, first, number, xy
from .dify_nodes import DifyNodes
from .dify_refs import CONVERTERS, handle_key, looks_like_dify
from .refs import IDENT, Unconvertible, identifier, var_type
from .report import ImportFailed, ImportIssue

__all__ = ["DifyImporter", "looks_like_dify"]

UNSUPPORTED = {
    "document-extractor": "document extraction: Flowloom does not handle uploaded files",
    "list-operator": "list operations (filter/sort/slice of files and arrays) are not supported",
    "datasource": "Dify data sources are not supported",
    "knowledge-index": "Dify knowledge indexing is not supported",
    "trigger-webhook": "Dify triggers are not supported",
    "trigger-schedule": "Dify triggers are not supported",
    "trigger-plugin": "Dify triggers are not supported",
}


class DifyImporter(DifyNodes):
    """See the module docstring."""

    # ------------------------------------------------------------------ planning

    def plan(self) -> None:
        if not self.raw_nodes:
            raise ImportFailed(
                [ImportIssue("invalid_source", "the Dify graph has no nodes")], self.source_format
            )
        keep = []
        for node in self.raw_nodes:
            kind = self.kind_of(str(node["id"]))
            if node.get("type") == "custom-note" or not kind:
                continue
            if kind in ("iteration-start", "loop-start"):
                continue
            keep.append(node)
        self.place_nodes([(str(n["id"]), n) for n in keep], self._planned)
        for p in self.planned:
            data = self.data(p.raw)
            parent = str(
                first(p.raw, "parentId", default="") or data.get("iteration_id") or data.get("loop_id") or ""
            )
            if parent:
                owner = self.by_src.get(parent)
                if owner is not None and owner.src_type in ("iteration", "loop"):
                    p.parent = owner.fid
                else:
                    self.warn(
                        "dropped",
                        f"parent {parent!r} is not an iteration or loop node; the node is placed at "
                        "the top level",
                        p,
                    )
        starts = [p for p in self.planned if p.src_type == "start"]
        if not starts:
            raise ImportFailed(
                [ImportIssue("invalid_source", "the Dify graph has no start node")], self.source_format
            )
        self.start_id = starts[0].src_id
        self._plan_variables(starts[0])
        for p in self.planned:
            if p.src_type == "loop":
                self._plan_loop_variables(p)

    def _planned(self, nid: str, fid: str, node: dict[str, Any]) -> Planned:
        data = self.data(node)
        return Planned(
            nid,
            fid,
            self.kind_of(nid),
            node,
            name=str(data.get("title") or ""),
            description=str(data.get("desc") or ""),
            position=self._position(node),
        )

    def _position(self, node: dict[str, Any]) -> dict[str, float]:
        pos = node.get("positionAbsolute") if isinstance(node.get("positionAbsolute"), dict) else None
        if pos is None:
            pos = dict_at(node, "position")
            parent = self.src.get(str(node.get("parentId") or ""))
            if parent is not None:
                base, offset = self._position(parent), xy(pos)
                return {"x": base["x"] + offset["x"], "y": base["y"] + offset["y"]}
        return xy(pos)

    _INPUT_TYPES = {
        "text-input": VarType.string,
        "paragraph": VarType.string,
        "select": VarType.string,
        "number": VarType.number,
        "checkbox": VarType.boolean,
        "json_object": VarType.object,
        "file": VarType.file,
        "file-list": VarType.array,
    }

    def _plan_variables(self, start: Planned) -> None:
        for var in self.data(start.raw).get("variables") or []:
            if not isinstance(var, dict) or not var.get("variable"):
                continue
            name = str(var["variable"])
            vtype = self._INPUT_TYPES.get(str(var.get("type") or "text-input"), VarType.string)
            if not IDENT.match(name):
                raise ImportFailed(
                    [
                        ImportIssue(
                            "invalid_source",
                            f"start variable {name!r} is not an identifier",
                            start.src_id,
                            "start",
                        )
                    ],
                    self.source_format,
                )
            options = [str(o) for o in var.get("options") or []]
            desc = str(var.get("label") or "") + (f" (one of: {', '.join(options)})" if options else "")
            default = var.get("default")
            self.start_vars[name] = vtype
            self.declare_input(
                name,
                vtype,
                required=bool(var.get("required")) and default in (None, ""),
                default=None if default == "" else default,
                description=desc,
            )
            if vtype in (VarType.file, VarType.array) and str(var.get("type")).startswith("file"):
                self.warn(
                    "behaviour_difference",
                    f"input {name!r} is a file input in Dify; Flowloom passes it as a "
                    "plain value (nodes that read files are not supported)",
                    start,
                )
        self._plan_environment()
        for var in self.wf.get("conversation_variables") or []:
            if not isinstance(var, dict) or not var.get("name"):
                continue
            key = str(var["name"])
            name = identifier(key, {v["name"] for v in self.conversation_vars}, "var")
            self.renamed("conversation variable", key, name)
            self.conversation[key] = name
            self.declare_conversation(
                name,
                var_type(var.get("value_type")) or VarType.any,
                default=var.get("value"),
                description=str(var.get("description") or ""),
            )

    def _plan_environment(self) -> None:
        """Dify's ``environment_variables`` become the workflow's ``environment``
        (``env.NAME``): strings and numbers with their values, secrets by name only (a
        Dify export holds no secret value; the import asks for it)."""
        taken: set[str] = set()
        for var in self.wf.get("environment_variables") or []:
            if not isinstance(var, dict) or not var.get("name"):
                continue
            key = str(var["name"])
            name = identifier(key, taken, "env")
            self.renamed("environment variable", key, name)
            taken.add(name)
            kind = str(var.get("value_type") or "string")
            kind = kind if kind in ("string", "number", "secret") else "string"
            value = var.get("value")
            if kind == "secret" or value in ("", None):
                value = None
            elif kind == "number" and not isinstance(value, (int, float)):
                try:
                    value = float(value) if any(c in str(value) for c in ".eE") else int(value)
                except ValueError:
                    kind = "string"
                    self.warn(
                        "behaviour_difference",
                        f"environment variable {key!r} is a number in Dify but its "
                        f"value {value!r} is not: it is a string here",
                    )
            self.env[key] = name
            self.env_types[name] = VarType.number if kind == "number" else VarType.string
            self.environment.append(
                {"name": name, "type": kind, "value": value, "description": str(var.get("description") or "")}
            )

    def _plan_loop_variables(self, p: Planned) -> None:
        names: dict[str, str] = {}
        for var in self.data(p.raw).get("loop_variables") or []:
            if isinstance(var, dict) and var.get("label"):
                taken = {v["name"] for v in self.variables} | {v["name"] for v in self.inputs}
                name = identifier(f"loop_{p.fid}_{var['label']}", taken, "loop")
                names[str(var["label"])] = name
                self.declare_variable(
                    name,
                    var_type(var.get("var_type")) or VarType.any,
                    description=f"loop variable {var['label']!r} of loop {p.src_id!r} "
                    "(its live value inside the loop body)",
                )
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
                mapped = "else" if handle == "false" else handle_key(handle)
            else:
                mapped = handle_key(handle)
            eid = raw.get("id")
            self.add_edge(self.by_src[s].fid, mapped, self.by_src[t].fid, str(eid) if eid else None)

    # ------------------------------------------------------------------ conversion

    def convert(self, p: Planned) -> dict[str, Any]:
        kind = p.src_type
        if kind == "tool":
            node = self._tool(p)
            node.update(self.policy(p, node))
            return node
        if kind == "agent":
            node = self._agent(p)
            node.update(self.policy(p, node))
            return node
        if kind in UNSUPPORTED:
            raise Unconvertible(UNSUPPORTED[kind])
        handler = CONVERTERS.get(kind)
        if handler is None:
            raise Unconvertible(f"Dify node kind {kind!r} is not supported")
        node = getattr(self, handler)(p)
        node.update(self.policy(p, node))
        return node

    def policy(self, p: Planned, node: dict[str, Any]) -> dict[str, Any]:
        data = self.data(p.raw)
        out: dict[str, Any] = {}
        retry = dict_at(data, "retry_config")
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
