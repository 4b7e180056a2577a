"""The conversion pipeline every source format goes through.

1. :meth:`BaseImporter.plan` (per format): which source nodes become Flowloom nodes,
   their ids (valid, deterministic), containers (``parent``), global inputs and run
   variables. Pseudo-nodes (FastGPT ``loopStart``/``loopEnd``, Dify
   ``iteration-start``/``loop-start``) and canvas-only nodes are dropped here.
2. :meth:`BaseImporter.map_edges` (per format): source handles to Flowloom handles.
3. Graph analysis (here): ancestors in the graph without back-edges, so that a
   reference to a node that has not run yet is recognised. Inside a loop drawn with a
   back-edge (FastGPT) such a read means "the value of the previous round": it becomes
   a run variable (``vars.carry_...``) set by a ``variable_update`` node inserted right
   after the node it reads. Anywhere else it has no Flowloom meaning and fails the node.
4. :meth:`BaseImporter.convert` (per format) for every node. A node that cannot be
   converted raises :class:`~nodes.importers.refs.Unconvertible`; it is reported and,
   in a partial import, replaced by an ``unsupported`` placeholder with the outputs
   other nodes read and the handles its edges leave from.
5. The document is normalised (validated and dumped by the catalog models) and
   compiled; compile errors are reported (partial import: the node becomes a
   placeholder and the document is compiled again).

Nothing from the source file is executed: code stays text, templates are only parsed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx

from engine.catalog import NodeCatalog
from engine.code_packages import PackageEnv, PackageNeed
from engine.compiler import check_workflow
from schemas.types import RESERVED_SCOPES, VarType, value_matches
from schemas.workflow import Workflow

from .code_scan import package_summary
from .refs import Target, Unconvertible, identifier
from .report import CLI_MODEL_HINTS, ImportFailed, ImportIssue, ImportResult, ModelHints
from .values import coerce_literal, first, number, xy  # re-exported: the importers read them here

__all__ = [
    "BaseImporter",
    "Planned",
    "coerce_literal",
    "dict_at",
    "first",
    "flowloom_ids",
    "normalise_workflow",
    "number",
    "xy",
]

_VALID_ID = re.compile(r"^[A-Za-z0-9_\-]+$")
_MAX_FIX_ROUNDS = 6


def _sanitize_id(raw: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_\-]+", "_", raw).strip("_") or "node"
    return f"{base}_node" if base in RESERVED_SCOPES else base


def flowloom_ids(raw_ids: list[str], taken: set[str] | None = None) -> dict[str, str]:
    """Deterministic valid node ids: valid ids are kept, the others sanitised and
    suffixed (``_2``, ``_3``) on collision. Reference scopes are renamed (``inputs_node``)."""
    taken = set(taken or ())
    out: dict[str, str] = {}
    for raw in raw_ids:  # valid ids first, so a sanitised id never steals one
        if _VALID_ID.match(raw) and raw not in RESERVED_SCOPES and raw not in taken:
            out[raw] = raw
            taken.add(raw)
    for raw in raw_ids:
        if raw in out:
            continue
        base = _sanitize_id(raw)
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        out[raw] = candidate
        taken.add(candidate)
    return out


def normalise_workflow(doc: dict[str, Any], catalog: NodeCatalog) -> dict[str, Any]:
    """The canonical form of a workflow document: every node validated by its kind's
    model and dumped without default values; edges with explicit source handles.

    Idempotent, so importing an exported (imported) workflow gives the same document.
    Nodes of unknown kinds or invalid nodes are kept as they are (the compiler reports them).
    """
    top = {k: v for k, v in doc.items() if k not in ("nodes", "edges")}
    try:
        shell = Workflow.model_validate({**top, "nodes": [], "edges": doc.get("edges", [])})
    except Exception:
        out = {k: copy.deepcopy(v) for k, v in doc.items() if k != "nodes"}
    else:
        out = shell.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        out.update(id=shell.id, name=shell.name, version=shell.version)  # always written
        out["edges"] = [
            {
                "id": e.id,
                "source": e.source,
                "sourceHandle": e.sourceHandle,
                "target": e.target,
                **({"targetHandle": e.targetHandle} if e.targetHandle != "in" else {}),
            }
            for e in shell.edges
        ]
    nodes = []
    for raw in doc.get("nodes", []) if isinstance(doc.get("nodes"), list) else []:
        try:
            model = catalog.node_model(raw["type"])
            nodes.append(
                model.model_validate(raw).model_dump(mode="json", by_alias=True, exclude_defaults=True)
            )
        except Exception:
            nodes.append(copy.deepcopy(raw))
    ordered: dict[str, Any] = {
        k: out[k]
        for k in ("id", "name", "version", "description", "inputs", "variables", "conversation_variables")
        if k in out
    }
    ordered["nodes"] = nodes
    ordered["edges"] = out.get("edges", [])
    for key, value in out.items():
        ordered.setdefault(key, value)
    return ordered


def _with_default(var: dict[str, Any], default: Any, description: str) -> dict[str, Any]:
    """A declared input/variable with its ``default`` (unless None) and ``description`` (unless empty)."""
    if default is not None:
        var["default"] = default
    if description:
        var["description"] = description
    return var


@dataclass
class Planned:
    """A source node that becomes a Flowloom node."""

    src_id: str
    fid: str
    src_type: str
    raw: Any
    name: str = ""
    description: str = ""
    position: dict[str, float] = field(default_factory=lambda: {"x": 0.0, "y": 0.0})
    parent: str | None = None  # Flowloom id of the container


@dataclass
class _Insert:
    """A node inserted after ``after`` (its ``out`` edges now leave from the inserted
    node) or, with ``before``, on every edge into ``after``."""

    after: str
    node: dict[str, Any]
    origin: str  # source id the inserted node belongs to (for the report)
    before: bool = False


class BaseImporter:
    """Shared state and steps; subclasses implement :meth:`plan`, :meth:`map_edges`, :meth:`convert`."""

    source_format = ""

    def __init__(
        self,
        source: dict[str, Any],
        *,
        catalog: NodeCatalog,
        allow_partial: bool = False,
        registry: Any = None,
        model_map: Mapping[str, str] | None = None,
        workflow_id: str | None = None,
        hints: ModelHints = CLI_MODEL_HINTS,
        dataset_map: Mapping[str, str] | None = None,
        packages: PackageEnv | None = None,
    ):
        self.source = source
        #: the code sandbox's package environment code nodes are checked against (None: none)
        self.package_env = packages or PackageEnv()
        #: (source node id, need) of every package a code node imports (:mod:`.code_scan`)
        self.package_needs: list[tuple[str, PackageNeed]] = []
        #: how messages advise mapping a model (the CLI's flag or the API's field)
        self.hints = hints
        self.allow_partial = allow_partial
        self.registry = registry
        self.catalog = catalog
        self.model_map = dict(model_map or {})
        #: source dataset id (``"*"``: any unmapped one) -> Flowloom dataset id (:mod:`.datasets`)
        self.dataset_map = dict(dataset_map or {})
        self.workflow_id = workflow_id
        self.issues: list[ImportIssue] = []
        #: source model name -> registry model name, as chosen by :meth:`model_name`
        self.models: dict[str, str] = {}
        self.planned: list[Planned] = []
        self.by_src: dict[str, Planned] = {}
        self.by_fid: dict[str, Planned] = {}
        self.inputs: list[dict[str, Any]] = []
        self.variables: list[dict[str, Any]] = []
        self.conversation_vars: list[dict[str, Any]] = []
        #: (source fid, handle, target fid, source edge id or None)
        self.edges: list[tuple[str, str, str, str | None]] = []
        self.nodes: dict[str, dict[str, Any]] = {}
        #: fid -> (code, reason) of nodes replaced by a placeholder
        self.failed: dict[str, tuple[str, str]] = {}
        #: fid -> {output field: type} read by other nodes (placeholders declare these)
        self.reads: dict[str, dict[str, VarType | None]] = {}
        #: synthetic node id -> the node whose place (for ancestry) it takes
        self.anchor: dict[str, str] = {}
        self.origin: dict[str, str] = {}  # synthetic node id -> source id
        self.inserts: list[_Insert] = []
        self._pending: list[_Insert] = []
        self._deferred: list[Unconvertible] = []
        self._carries: dict[tuple[str, str], str] = {}
        self.reader: str | None = None
        self.body_scope: str | None = None
        self._ancestors: dict[str, set[str]] = {}
        self._scc: dict[str, int] = {}
        self._graph: nx.DiGraph[str] = nx.DiGraph()

    # ----------------------------------------------------------------- to implement

    def plan(self) -> None:
        raise NotImplementedError

    def map_edges(self) -> None:
        raise NotImplementedError

    def convert(self, p: Planned) -> dict[str, Any]:
        """The node's ``type``, ``config`` and policy fields (id, name, position, parent are added)."""
        raise NotImplementedError

    def meta(self) -> dict[str, Any]:
        """``name`` and ``description`` of the workflow."""
        return {}

    # ----------------------------------------------------------------- reporting

    def warn(self, code: str, message: str, p: Planned | None = None) -> None:
        self._issue(code, message, p, "warning")

    def error(self, code: str, message: str, p: Planned | None = None) -> None:
        self._issue(code, message, p, "error")

    def renamed(self, what: str, old: str, new: str, p: Planned | None = None) -> None:
        """Report that the key ``old`` (of ``what``: an input, a field, ...) is ``new`` in
        Flowloom, which needs ASCII identifiers there (code ``renamed_key``)."""
        if old != new:
            self.warn(
                "renamed_key", f"{what} {old!r} is {new!r} (Flowloom names here are ASCII identifiers)", p
            )

    def _issue(
        self, code: str, message: str, p: Planned | None, severity: Literal["error", "warning"]
    ) -> None:
        issue = ImportIssue(
            code,
            message,
            p.src_id if p else None,
            p.src_type if p else None,
            severity,
            p.fid if p and p.fid != p.src_id else None,
        )
        if issue not in self.issues:
            self.issues.append(issue)

    # ----------------------------------------------------------------- planning helpers

    def add_planned(self, p: Planned) -> None:
        self.planned.append(p)
        self.by_src[p.src_id] = p
        self.by_fid[p.fid] = p

    def place_nodes(self, keep: list[tuple[str, Any]], make: Callable[[str, str, Any], Planned]) -> None:
        """Plan the source nodes ``keep`` (``(source id, node)``) under valid Flowloom ids
        (:func:`flowloom_ids`); ``make(source id, Flowloom id, node)`` builds each one.
        A node whose id had to change is reported."""
        ids = flowloom_ids([nid for nid, _node in keep])
        for nid, node in keep:
            p = make(nid, ids[nid], node)
            self.add_planned(p)
            if p.fid != nid:
                self.warn("renamed_id", f"node id {nid!r} is not a valid Flowloom id; it is {p.fid!r}", p)

    def add_edge(self, source: str, handle: str, target: str, edge_id: str | None = None) -> None:
        if any(e[:3] == (source, handle, target) for e in self.edges):
            return
        self.edges.append((source, handle, target, edge_id))

    def declare_input(
        self,
        name: str,
        type_: VarType | None,
        *,
        required: bool = False,
        default: Any = None,
        description: str = "",
    ) -> None:
        if any(v["name"] == name for v in self.inputs):
            return
        var: dict[str, Any] = {"name": name, "type": (type_ or VarType.string).value, "required": required}
        self.inputs.append(_with_default(var, default, description))

    def declare_variable(
        self, name: str, type_: VarType | None, default: Any = None, description: str = ""
    ) -> None:
        if any(v["name"] == name for v in self.variables):
            return
        var: dict[str, Any] = {"name": name, "type": (type_ or VarType.any).value}
        self.variables.append(_with_default(var, default, description))

    def declare_conversation(
        self, name: str, type_: VarType | None, default: Any = None, description: str = ""
    ) -> None:
        """A conversation variable (kept per chat across turns); a default that does not
        fit the type is dropped (the variable starts empty) and reported."""
        if any(v["name"] == name for v in self.conversation_vars):
            return
        vtype = type_ or VarType.any
        if not value_matches(default, vtype):
            self.warn(
                "behaviour_difference",
                f"conversation variable {name!r}: its default {default!r} is not "
                f"{vtype.value}; it starts empty",
            )
            default = None
        self.conversation_vars.append(
            _with_default({"name": name, "type": vtype.value}, default, description)
        )

    def insert_after(self, after: str, node: dict[str, Any], origin: str | None = None) -> None:
        """Queue ``node`` to run right after ``after`` (its ``out`` edges move to ``node``).

        Applied only when the node being converted converts (see :meth:`_convert_all`).
        """
        self.anchor[node["id"]] = self.anchor.get(after, after)
        self._pending.append(_Insert(after, node, origin or self.by_fid[self.anchor[node["id"]]].src_id))

    def insert_before(self, target: str, node: dict[str, Any]) -> None:
        """Queue ``node`` to run right before ``target``: every edge into ``target`` goes
        into ``node``, then ``node`` -> ``target``. Applied like :meth:`insert_after`."""
        self.anchor[node["id"]] = target
        self._pending.append(_Insert(target, node, self.by_fid[target].src_id, before=True))

    def synthetic_id(self, base: str) -> str:
        """A node id derived from ``base`` that no planned or inserted node uses."""
        taken = set(self.by_fid) | set(self.anchor)
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        return candidate

    # ----------------------------------------------------------------- models

    def model_name(self, name: Any, where: str = "model") -> str:
        """The registry name for a source model name, recorded in :attr:`models` so the
        import report can say where each source model went (see :meth:`_model_name`)."""
        target = self._model_name(name, where)
        self.models[name.strip() if isinstance(name, str) else ""] = target
        return target

    def _model_name(self, name: Any, where: str = "model") -> str:
        """The registry name for a source model name.

        Order: ``model_map[name]``; the same name in the registry; a registry model
        whose name or upstream id equals it ignoring case; ``model_map["*"]``.
        Unknown: in a partial import the registry's ``default`` model (an error in the
        report); otherwise :class:`Unconvertible` (``unknown_model``).
        """
        reg = self.registry
        known = sorted(reg.names())
        text = name.strip() if isinstance(name, str) else ""
        if text and text in self.model_map:
            target = self.model_map[text]
            if not reg.has(target):
                raise Unconvertible(
                    f"{where}: model {text!r} is mapped to {target!r}, which is not in the model "
                    f"registry (known: {', '.join(known)})",
                    "unknown_model",
                )
            return target
        if text and reg.has(text):
            return text
        if text:
            folded = text.casefold()
            for known_name in known:
                spec = reg.get(known_name)
                if known_name.casefold() == folded or str(spec.model or "").casefold() == folded:
                    return known_name
        fallback = self.model_map.get("*")
        if fallback is not None:
            if reg.has(fallback):
                return fallback
            raise Unconvertible(
                f"{where}: {self.hints.mapping('*', fallback)} names {fallback!r}, which is not in "
                f"the model registry (known: {', '.join(known)})",
                "unknown_model",
            )
        what = f"model {text!r} is not in the model registry" if text else "no model is set"
        message = f"{where}: {what} (known: {', '.join(known)}); map it with {self.hints.map_unknown(text)}"
        if self.allow_partial and reg.has("default"):
            current = self.by_fid.get(self.reader or "")
            self.error("unknown_model", message + "; using 'default' instead", current)
            return "default"
        if self.reader is None:
            raise Unconvertible(message, "unknown_model")
        # the node fails, but the rest of it is still converted so every problem is listed
        self.defer(Unconvertible(message, "unknown_model"))
        return "default" if reg.has("default") else (known[0] if known else "default")

    def defer(self, problem: Unconvertible) -> None:
        """Record ``problem`` of the node being converted and go on converting it: the node
        fails at the end with every problem listed, instead of only the first."""
        self._deferred.append(problem)

    def each(self, items: Any, convert: Callable[[Any], Any]) -> list[Any]:
        """``convert(item)`` for each item; an item that raises :class:`Unconvertible` is
        deferred (:meth:`defer`) and left out, so the other items' problems are found too."""
        out = []
        for item in items:
            try:
                out.append(convert(item))
            except Unconvertible as exc:
                self.defer(exc)
        return out

    # ----------------------------------------------------------------- references

    def inside(self, fid: str, container: str) -> bool:
        parent = self.by_fid[fid].parent if fid in self.by_fid else None
        while parent is not None:
            if parent == container:
                return True
            parent = self.by_fid[parent].parent if parent in self.by_fid else None
        return False

    def node_target(
        self,
        fid: str,
        out: str,
        path: tuple[str | int, ...] = (),
        type_: VarType | None = None,
        *,
        what: str = "",
    ) -> Target:
        """A read of output ``out`` of node ``fid`` by the node being converted.

        Raises:
            Unconvertible: the read node never runs before the reader (outside a loop).
        """
        anchor = self.anchor.get(fid, fid)
        self.reads.setdefault(fid, {}).setdefault(out, type_ if not path else None)
        scope = self.body_scope
        if scope is not None and (anchor == scope or self.inside(anchor, scope)):
            return Target("node", fid, out, path, type_)
        reader = self.reader
        if reader is not None and (anchor == reader or anchor not in self.ancestors(reader)):
            component = self._scc.get(anchor)
            if component is not None and component == self._scc.get(reader):
                return Target("vars", self._carry(fid, out, type_ if not path else None), None, path, type_)
            name = self.by_fid[anchor].src_id if anchor in self.by_fid else anchor
            raise Unconvertible(
                f"it reads {what or out!r} of node {name!r}, which does not run before it "
                "(not upstream, or inside another loop body)",
                "unsupported_reference",
            )
        return Target("node", fid, out, path, type_)

    def _carry(self, fid: str, out: str, type_: VarType | None) -> str:
        key = (fid, out)
        if key not in self._carries:
            taken = {v["name"] for v in self.variables} | {v["name"] for v in self.inputs}
            name = identifier(f"carry_{fid}_{out}", taken, "carry")
            self.declare_variable(
                name,
                type_ or VarType.any,
                description=f"{fid}.{out} of the previous loop round (null in the first)",
            )
            self._carries[key] = name
        return self._carries[key]

    def ancestors(self, fid: str) -> set[str]:
        if fid not in self._ancestors:
            self._ancestors[fid] = nx.ancestors(self._graph, fid) if fid in self._graph else set()
        return self._ancestors[fid]

    def _analyse(self) -> None:
        graph: nx.DiGraph[str] = nx.DiGraph()
        graph.add_nodes_from(p.fid for p in self.planned)
        graph.add_edges_from((s, t) for s, _h, t, _e in self.edges if s in graph and t in graph)
        graph.add_edges_from(
            (p.parent, p.fid) for p in self.planned if p.parent is not None and p.parent in graph
        )
        for index, component in enumerate(nx.strongly_connected_components(graph)):
            if len(component) == 1:
                (only,) = component
                if not graph.has_edge(only, only):
                    continue
            for member in component:
                self._scc[member] = index
            entries = {v for u, v in graph.in_edges(component) if u not in component}
            if len(entries) == 1:
                (entry,) = entries
                graph.remove_edges_from(
                    [(u, entry) for u in list(graph.predecessors(entry)) if u in component]
                )
        self._graph = graph

    # ----------------------------------------------------------------- pipeline

    def run(self) -> ImportResult:
        self.plan()
        self.map_edges()
        self._analyse()
        self._convert_all()
        self._apply_carries()
        self._apply_inserts()
        self._warn_unmatched_datasets()
        return self._finish()

    def _warn_unmatched_datasets(self) -> None:
        """Warn (``unmatched_dataset``) of the ``dataset_map`` sources no search of the
        flow names: most likely a mistyped id, whose search then goes elsewhere."""
        mapped = getattr(self, "_datasets_mapped", {})
        unmatched = [s for s in self.dataset_map if s != "*" and s not in mapped]
        if unmatched:
            known = ", ".join(repr(s) for s in mapped if s != "*") or "none"
            self.warn(
                "unmatched_dataset",
                f"dataset mapping source(s) {', '.join(map(repr, unmatched))} match no "
                f"dataset of the flow, so they were not used (the flow's datasets: {known})",
            )

    def _convert_all(self) -> None:
        for p in self.planned:
            self.reader, self.body_scope, self._pending, self._deferred = p.fid, None, [], []
            try:
                node = self.convert(p)
            except Unconvertible as exc:
                self.defer(exc)
            finally:
                self.reader, self.body_scope = None, None
            if self._deferred:
                problems, self._deferred = self._deferred, []
                for problem in problems:
                    self.error(problem.code, problem.reason, p)
                self.failed[p.fid] = (problems[0].code, "; ".join(dict.fromkeys(x.reason for x in problems)))
                self.nodes.pop(p.fid, None)
                continue
            self.nodes[p.fid] = self._frame(p, node)
            self.inserts.extend(self._pending)
            self._pending = []

    def _frame(self, p: Planned, node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": p.fid, "type": node.pop("type")}
        if p.name:
            out["name"] = p.name
        if p.description:
            out["description"] = p.description
        out["position"] = p.position
        if p.parent is not None:
            out["parent"] = p.parent
        out.update(node)
        return out

    def fail(self, p: Planned, reason: str, code: str = "unsupported_node") -> None:
        """Report ``p`` as not converted; a partial import gets a placeholder."""
        self.failed[p.fid] = (code, reason)
        self.nodes.pop(p.fid, None)
        self.error(code, reason, p)

    def _apply_carries(self) -> None:
        by_node: dict[str, list[tuple[str, str]]] = {}
        for (fid, out), var in self._carries.items():
            by_node.setdefault(fid, []).append((out, var))
        for fid, pairs in by_node.items():
            anchor = self.by_fid[self.anchor.get(fid, fid)]
            node_id = self.synthetic_id(f"{anchor.fid}-carry")
            node: dict[str, Any] = {
                "id": node_id,
                "type": "variable_update",
                "name": f"keep {', '.join(o for o, _ in pairs)} for the next round",
                "position": {"x": anchor.position["x"] + 40, "y": anchor.position["y"] + 120},
                "config": {
                    "updates": [
                        {"variable": var, "operation": "set", "value": {"ref": f"{fid}.{out}"}}
                        for out, var in pairs
                    ]
                },
            }
            if anchor.parent is not None:
                node["parent"] = anchor.parent
            self.anchor[node_id] = anchor.fid
            self.inserts.append(_Insert(fid, node, anchor.src_id))
            self.warn(
                "behaviour_difference",
                f"reads {', '.join(o for o, _ in pairs)} of the previous loop round: node {node_id!r} keeps them "
                f"in run variables ({', '.join(v for _, v in pairs)}), which are null in the first round "
                "(the source reads undefined there, so parameter defaults apply the same way)",
                anchor,
            )

    def _apply_inserts(self) -> None:
        for ins in self.inserts:
            node_id = ins.node["id"]
            self.origin[node_id] = ins.origin
            if ins.before:
                self.edges = [(s, h, node_id if t == ins.after else t, e) for s, h, t, e in self.edges]
                self.edges.append((node_id, "out", ins.after, None))
            else:
                self.edges = [
                    (node_id, "out", t, e) if s == ins.after and h == "out" else (s, h, t, e)
                    for s, h, t, e in self.edges
                ]
                self.edges.append((ins.after, "out", node_id, None))
            self.nodes[node_id] = ins.node

    def _placeholder(self, p: Planned, code: str, reason: str) -> dict[str, Any]:
        handles: list[str] = []
        for s, h, _t, _e in self.edges:
            if s == p.fid and h not in handles:
                handles.append(h)
        branch = "error" in handles
        handles = [h for h in handles if h != "error"] or ["out"]
        outputs = {name: (t or VarType.any).value for name, t in sorted(self.reads.get(p.fid, {}).items())}
        if branch:
            outputs.pop("error", None)
        node = {
            "type": "unsupported",
            "config": {
                "original_type": p.src_type or "unknown",
                "reason": reason,
                "outputs": outputs,
                "handles": handles,
            },
        }
        if branch:
            node["error_strategy"] = "error_branch"
        return self._frame(p, node)

    def _edge_dicts(self) -> list[dict[str, Any]]:
        out, used = [], set()
        for s, h, t, e in self.edges:
            eid = e if e and _VALID_ID.match(e) and e not in used else None
            if eid is None:
                base = _sanitize_id(f"{s}-{h}-{t}")
                eid, n = base, 2
                while eid in used:
                    eid, n = f"{base}-{n}", n + 1
            used.add(eid)
            out.append({"id": eid, "source": s, "sourceHandle": h, "target": t})
        return out

    def _workflow_id(self) -> str:
        if self.workflow_id:
            return _sanitize_id(self.workflow_id)
        name = str(self.meta().get("name") or "")
        base = re.sub(r"[^A-Za-z0-9_\-]+", "-", name).strip("-_")
        if base:
            return base[:64]
        digest = hashlib.sha256(
            json.dumps(self.source, sort_keys=True, ensure_ascii=False, default=str).encode(
                "utf-8", "surrogatepass"
            )
        ).hexdigest()
        return f"imported-{digest[:10]}"

    def _in_failed_container(self, fid: str) -> str | None:
        """The failed container (placeholder) whose body holds ``fid``, if any."""
        parent = self.by_fid[fid].parent if fid in self.by_fid else self.nodes.get(fid, {}).get("parent")
        while parent is not None:
            if parent in self.failed:
                return parent
            parent = self.by_fid[parent].parent if parent in self.by_fid else None
        return None

    def _assemble(self) -> dict[str, Any]:
        skipped: set[str] = set()
        for fid in list(self.by_fid) + list(self.nodes):
            container = self._in_failed_container(fid)
            if container is not None:
                skipped.add(fid)
                if fid in self.by_fid:
                    self.warn(
                        "dropped",
                        f"left out with its container {self.by_fid[container].src_id!r}, which "
                        "was not converted",
                        self.by_fid[fid],
                    )
        nodes = []
        inserted_after: dict[str, list[str]] = {}
        inserted_before: dict[str, list[str]] = {}
        for ins in self.inserts:
            group = inserted_before if ins.before else inserted_after
            group.setdefault(self.anchor.get(ins.after, ins.after), []).append(ins.node["id"])
        for p in self.planned:
            for extra in inserted_before.get(p.fid, []):
                if extra in self.nodes and extra not in skipped:
                    nodes.append(self.nodes[extra])
            if p.fid in skipped:
                pass
            elif p.fid in self.failed:
                nodes.append(self._placeholder(p, *self.failed[p.fid]))
            elif p.fid in self.nodes:
                nodes.append(self.nodes[p.fid])
            for extra in inserted_after.get(p.fid, []):
                if extra in self.nodes and extra not in skipped:
                    nodes.append(self.nodes[extra])
        meta = self.meta()
        doc: dict[str, Any] = {"id": self._workflow_id(), "name": meta.get("name", ""), "version": 1}
        if meta.get("description"):
            doc["description"] = meta["description"]
        doc["inputs"] = self.inputs
        doc["variables"] = self.variables
        if self.conversation_vars:
            doc["conversation_variables"] = self.conversation_vars
        environment = getattr(self, "environment", None)  # the importers that read one set it
        if environment:
            doc["environment"] = environment
        doc["nodes"] = nodes
        doc["edges"] = [
            e for e in self._edge_dicts() if e["source"] not in skipped and e["target"] not in skipped
        ]
        return normalise_workflow(doc, self.catalog)

    #: compile problems of a node on its own; others (e.g. a reader of an invalid node seen
    #: as "not upstream") may only follow from them, so these are fixed first
    _PRIMARY = frozenset({"invalid_config", "missing_config", "unknown_kind", "unknown_model"})

    def _finish(self) -> ImportResult:
        """Compile; each node with an error becomes a placeholder and the document is
        compiled again, so the report lists every problem once and no follow-up errors.
        Without ``allow_partial`` any error fails the import at the end."""
        for _ in range(_MAX_FIX_ROUNDS):
            doc = self._assemble()
            problems = check_workflow(doc, catalog=self.catalog, models=self.registry)
            errors = [p for p in problems if p.severity == "error"]
            if not errors:
                for problem in problems:
                    self.warn(
                        f"compile_{problem.code}", problem.message, self.by_fid.get(problem.node_id or "")
                    )
                break
            primary = [p for p in errors if p.code in self._PRIMARY]
            fixable: dict[str, list[str]] = {}
            for problem in primary or errors:
                nid = problem.node_id or ""
                p = self.by_fid.get(nid) or self.by_src.get(self.origin.get(nid, ""))
                where = f" (path {problem.path})" if problem.path else ""
                self.error(f"compile_{problem.code}", problem.message + where, p)
                if p is not None and p.fid not in self.failed:
                    fixable.setdefault(p.fid, []).append(f"{problem.code}: {problem.message}")
            if not fixable:
                raise ImportFailed(self.issues, self.source_format, package_summary(self.package_needs))
            for fid, messages in fixable.items():
                self.failed[fid] = (
                    "compile_error",
                    "the converted node does not compile: " + "; ".join(messages),
                )
                self.nodes.pop(fid, None)
        else:  # pragma: no cover - each round replaces at least one node
            raise ImportFailed(self.issues, self.source_format, package_summary(self.package_needs))
        if any(i.severity == "error" for i in self.issues) and not self.allow_partial:
            raise ImportFailed(self.issues, self.source_format, package_summary(self.package_needs))
        return ImportResult(
            doc,
            list(self.issues),
            self.source_format,
            dict(self.models),
            dict(getattr(self, "_datasets_mapped", {})),
            package_summary(self.package_needs),
        )


def dict_at(mapping: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``mapping[key]`` when it is an object, else ``{}`` (a source's missing or malformed
    section reads as empty)."""
    value = mapping.get(key)
    return value if isinstance(value, dict) else {}
