"""The compiler: workflow document -> :class:`CompiledPlan`, or every problem at once.

It runs small passes, each named for what it checks; all passes run even when an
earlier one found problems (as far as their input allows), so the builder sees the
whole list at once. Rules, with the ``Problem.code`` each one reports:

1. ``invalid_document``: the top level (id, inputs, edges, limits) does not validate.
2. ``unknown_kind``: a node's ``type`` is not in the catalog.
3. ``missing_config`` / ``invalid_config``: a node's fields fail validation
   (``path`` is the field path, e.g. ``config.cases[0].conditions[0].right``).
4. ``duplicate_node_id`` / ``duplicate_edge_id`` / ``reserved_node_id``
   (``inputs``, ``sys``, ``vars``, ``nodes`` are reference scopes).
5. ``no_start`` / ``multiple_start`` / ``edge_into_start``.
6. ``dangling_edge``: an edge's source or target is not a node.
7. ``unknown_handle``: an edge leaves a handle its source does not have
   (if-else: case ids + ``else``; ``error`` only under the error-branch strategy).
8. ``cycle``: a strongly connected component (node ids listed in order).
9. References (structured and in templates): ``unknown_node``, ``unknown_output``,
   ``not_ancestor`` (the node could never be ready first), ``unknown_input``,
   ``unknown_variable``, ``unknown_sys``, ``type_mismatch``, ``template_syntax``,
   ``unknown_template_name``.
10. ``invalid_default_output`` / ``unknown_default_handle`` for the default-output strategy.
    ``unknown_model``: a node names a model the model registry does not have.
11. ``unreachable`` (warning): no path from the start node; such nodes are skipped.

Plans are cached by the SHA-256 of the canonical JSON of the document.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any, Iterable, Mapping, Union

import jinja2
import networkx as nx
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from nodes.base import EXECUTORS, NodeExecutor
from schemas.nodes import NODE_KINDS
from schemas.types import RESERVED_SCOPES, SYS_VARIABLES, VarType
from schemas.values import walk_refs
from schemas.workflow import ErrorStrategy, NodeBase, Workflow, node_model

from .errors import CompileError, Problem
from .references import template_names, template_selectors

__all__ = ["CompiledPlan", "NodePlan", "check_workflow", "compile_workflow", "content_hash"]


@dataclass(frozen=True, slots=True)
class NodePlan:
    """A node as the scheduler needs it: executor and edge lists, precomputed.

    ``body`` is the sub-plan a loop/iteration node runs per round/item, or, for a loop
    region drawn with back-edges, the region's nodes (then ``members`` lists them and
    the out-edges' "handles" are the exit edge ids).
    """

    node: NodeBase
    executor: NodeExecutor[Any]
    in_edges: tuple[str, ...]
    #: (edge id, source handle, target node id)
    out_edges: tuple[tuple[str, str, str], ...]
    body: "CompiledPlan | None" = None
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompiledPlan:
    """An immutable, validated workflow - or one scope of it (a loop body, a loop
    region) - ready to run, shared by every run. ``roots`` are the nodes ready when
    the scope starts (the start node at the top level)."""

    workflow: Workflow
    content_hash: str
    graph: nx.MultiDiGraph
    nodes: dict[str, NodePlan]
    start_id: str
    order: tuple[str, ...]
    warnings: tuple[Problem, ...]
    roots: tuple[str, ...] = ()


_CACHE: OrderedDict[str, CompiledPlan] = OrderedDict()
_CACHE_SIZE = 256


def content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, compact) of ``doc``."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _as_document(source: Workflow | Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(source, Workflow):
        return source.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(source, (str, bytes)):
        try:
            doc = json.loads(source)
        except json.JSONDecodeError as exc:
            raise CompileError([Problem("invalid_document", f"not valid JSON: {exc}")]) from exc
        if not isinstance(doc, dict):
            raise CompileError([Problem("invalid_document", "a workflow must be a JSON object")])
        return doc
    return dict(source)


def compile_workflow(
    source: Workflow | Mapping[str, Any] | str | bytes, *, use_cache: bool = True, models: Any = None
) -> CompiledPlan:
    """Compile a workflow (model, dict or JSON text).

    ``models`` is the model registry to check model names against (None: the process
    default); the cache is keyed by the document hash and the registry's fingerprint.

    Raises:
        CompileError: with every problem found (warnings included in ``problems``).
    """
    doc = _as_document(source)
    key = content_hash(doc)
    cache_key = key if models is None else f"{key}:{models.fingerprint}"
    if use_cache and cache_key in _CACHE:
        _CACHE.move_to_end(cache_key)
        return _CACHE[cache_key]
    plan, problems = _compile(doc, key, models)
    if plan is None:
        raise CompileError(problems)
    if use_cache:
        _CACHE[cache_key] = plan
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return plan


def check_workflow(source: Workflow | Mapping[str, Any] | str | bytes, *, models: Any = None) -> list[Problem]:
    """All problems (errors and warnings) of a workflow; empty when it is clean."""
    try:
        doc = _as_document(source)
    except CompileError as exc:
        return exc.problems
    return _compile(doc, content_hash(doc), models)[1]


# ------------------------------------------------------------------------ passes


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@functools.lru_cache(maxsize=64)
def _nodes_adapter(kinds: tuple[str, ...]) -> TypeAdapter[list[NodeBase]]:
    """A validator for a list of nodes of ``kinds`` (built from the catalog as it is now,
    so kinds registered at run time are included)."""
    models = tuple(node_model(kind) for kind in kinds)
    if len(models) == 1:
        return TypeAdapter(list[Annotated[models[0], Tag(kinds[0])]])  # type: ignore[valid-type]
    union = Annotated[Union[tuple(Annotated[m, Tag(k)] for m, k in zip(models, kinds))],  # type: ignore[misc]
                      Discriminator("type")]
    return TypeAdapter(list[union])  # type: ignore[valid-type]


def _parse_document(doc: dict[str, Any], problems: list[Problem], invalid: set[str]) -> Workflow | None:
    """Rules 1-3: validate the top level and each node on its own, so all errors surface.

    Ids of nodes that fail validation go to ``invalid``: later passes ignore edges and
    references to them instead of reporting the same node again as missing.
    """
    raw_nodes = doc.get("nodes", [])
    if not isinstance(raw_nodes, list):
        problems.append(Problem("invalid_document", "must be a list", path="nodes"))
        raw_nodes = []
    try:
        shell = Workflow.model_validate({**doc, "nodes": []})
    except ValidationError as exc:
        for err in exc.errors():
            loc = _loc(err["loc"])
            edge_id = None
            if err["loc"][:1] == ("edges",) and len(err["loc"]) > 1 and isinstance(err["loc"][1], int):
                raw_edge = (doc.get("edges") or [None])[err["loc"][1]] if err["loc"][1] < len(doc.get("edges") or []) else None
                edge_id = raw_edge.get("id") if isinstance(raw_edge, dict) else None
            problems.append(Problem("invalid_document", err["msg"], edge_id=edge_id, path=loc))
        shell = None
    known: list[tuple[str, dict[str, Any]]] = []  # (node id for messages, raw node) of known kinds
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            problems.append(Problem("invalid_document", "a node must be an object", path=f"nodes[{index}]"))
            continue
        node_id = raw.get("id") if isinstance(raw.get("id"), str) else f"nodes[{index}]"
        kind = raw.get("type")
        if kind not in NODE_KINDS:
            names = ", ".join(sorted(NODE_KINDS))
            problems.append(Problem("unknown_kind", f"unknown node kind {kind!r} (known: {names})", node_id=node_id, path="type"))
            invalid.add(node_id)
            continue
        known.append((node_id, raw))
    # One validation call for all nodes (the per-node Python overhead dominates otherwise);
    # error locations are (index, kind tag, *field path).
    kinds = tuple(sorted({raw["type"] for _, raw in known}))
    adapter, skip = _nodes_adapter(kinds), (2 if len(kinds) > 1 else 1)
    try:
        nodes: list[NodeBase] = adapter.validate_python([raw for _, raw in known])
    except ValidationError as exc:
        bad: set[int] = set()
        for err in exc.errors():
            index, path = err["loc"][0], err["loc"][skip:]
            node_id = known[index][0]  # type: ignore[index]
            bad.add(index)  # type: ignore[arg-type]
            invalid.add(node_id)
            code = "missing_config" if err["type"] == "missing" else "invalid_config"
            msg = "required field is missing" if code == "missing_config" else err["msg"]
            problems.append(Problem(code, msg, node_id=node_id, path=_loc(path)))
        good = [raw for i, (_, raw) in enumerate(known) if i not in bad]
        nodes = adapter.validate_python(good)
    if shell is None:
        return None
    return shell.model_copy(update={"nodes": nodes})


def _check_ids(wf: Workflow, problems: list[Problem]) -> None:
    """Rule 4."""
    seen: set[str] = set()
    for node in wf.nodes:
        if node.id in seen:
            problems.append(Problem("duplicate_node_id", f"node id {node.id!r} is used more than once", node_id=node.id))
        seen.add(node.id)
        if node.id in RESERVED_SCOPES:
            problems.append(
                Problem("reserved_node_id", f"{node.id!r} is a reference scope; rename the node", node_id=node.id)
            )
    seen_edges: set[str] = set()
    for edge in wf.edges:
        if edge.id in seen_edges:
            problems.append(Problem("duplicate_edge_id", f"edge id {edge.id!r} is used more than once", edge_id=edge.id))
        seen_edges.add(edge.id)


def _build_graph(
    wf: Workflow, problems: list[Problem], invalid: set[str], invalid_start: bool
) -> tuple[nx.MultiDiGraph, str | None]:
    """Rules 5-7: the graph (one networkx edge per workflow edge, keyed by edge id)."""
    graph = nx.MultiDiGraph()
    by_id = {n.id: n for n in wf.nodes}
    graph.add_nodes_from(by_id)
    handles_of: dict[str, list[str]] = {}
    graph_edges: list[tuple[str, str, str, dict[str, str]]] = []
    starts = [n.id for n in wf.nodes if n.type == "start"]
    if not starts and not invalid_start:
        problems.append(Problem("no_start", "the workflow has no start node; add one node of type 'start'"))
    elif len(starts) > 1:
        problems.append(Problem("multiple_start", f"only one start node is allowed, found {starts}"))
    for edge in wf.edges:
        if edge.source in invalid or edge.target in invalid:
            continue  # the node's own problem is reported already
        bad = [end for end in (edge.source, edge.target) if end not in by_id]
        if bad:
            problems.append(
                Problem("dangling_edge", f"edge points to unknown node(s) {bad}", edge_id=edge.id,
                        path="source" if edge.source in bad else "target")
            )
            continue
        handles = handles_of.get(edge.source)
        if handles is None:
            handles = handles_of[edge.source] = by_id[edge.source].handles()
        if edge.sourceHandle not in handles:
            problems.append(
                Problem("unknown_handle",
                        f"node {edge.source!r} has no output handle {edge.sourceHandle!r} (handles: {handles})",
                        node_id=edge.source, edge_id=edge.id, path="sourceHandle")
            )
            continue
        if by_id[edge.target].type == "start":
            problems.append(Problem("edge_into_start", "the start node cannot have incoming edges",
                                    node_id=edge.target, edge_id=edge.id))
            continue
        graph_edges.append((edge.source, edge.target, edge.id, {"handle": edge.sourceHandle}))
    graph.add_edges_from(graph_edges)
    return graph, (starts[0] if len(starts) == 1 else None)


def _check_cycles(graph: nx.MultiDiGraph, problems: list[Problem]) -> bool:
    """Rule 8. Returns True when the graph is a DAG."""
    acyclic = True
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1:
            (only,) = component
            if not graph.has_edge(only, only):
                continue
        acyclic = False
        sub = graph.subgraph(component)
        try:
            cycle = [u for u, _v, *_ in nx.find_cycle(sub)]
        except nx.NetworkXNoCycle:  # pragma: no cover - an SCC always has one
            cycle = sorted(component)
        problems.append(
            Problem("cycle", f"cycle through nodes {' -> '.join(cycle + cycle[:1])}; loops need a loop node",
                    node_id=cycle[0])
        )
    return acyclic


def _ancestor_sets(graph: nx.MultiDiGraph, order: list[str]) -> dict[str, int]:
    """Ancestors of every node as bitsets (int), in one pass over the topological order."""
    index = {nid: i for i, nid in enumerate(order)}
    anc: dict[str, int] = {}
    for nid in order:
        bits = 0
        for pred in graph.predecessors(nid):
            bits |= anc[pred] | (1 << index[pred])
        anc[nid] = bits
    return anc


def _types_compatible(actual: VarType | None, expected: VarType | None) -> bool:
    if actual is None or expected is None or VarType.any in (actual, expected):
        return True
    if expected is VarType.file:
        return actual in (VarType.file, VarType.object, VarType.string)
    return actual is expected


class _RefChecker:
    """Rule 9, for one workflow (outputs computed once)."""

    def __init__(self, wf: Workflow, graph: nx.MultiDiGraph, order: list[str] | None, problems: list[Problem],
                 invalid: set[str]):
        self.wf = wf
        self.invalid = invalid
        self.problems = problems
        self.outputs = {n.id: n.outputs(wf) for n in wf.nodes}
        self.inputs = {v.name: v.type for v in wf.inputs}
        self.variables = {v.name: v.type for v in wf.variables}
        self.order = order
        if order is not None:
            self.index = {nid: i for i, nid in enumerate(order)}
            self.anc = _ancestor_sets(graph, order)

    def _target(self, reader: str, path: str, node_ref: str, field: str | None) -> VarType | None:
        if node_ref in self.invalid:
            return None
        if node_ref not in self.outputs:
            self.problems.append(Problem("unknown_node", f"reference to unknown node {node_ref!r}", node_id=reader, path=path))
            return None
        if self.order is not None and node_ref != reader and not (self.anc[reader] >> self.index[node_ref]) & 1:
            self.problems.append(
                Problem("not_ancestor",
                        f"reference to node {node_ref!r}, which is not upstream of {reader!r}: it may never run first; "
                        "connect it upstream", node_id=reader, path=path)
            )
            return None
        if node_ref == reader:
            self.problems.append(Problem("not_ancestor", "a node cannot reference its own outputs", node_id=reader, path=path))
            return None
        outs = self.outputs[node_ref]
        if field is not None and field not in outs:
            self.problems.append(
                Problem("unknown_output", f"node {node_ref!r} has no output {field!r} (outputs: {sorted(outs)})",
                        node_id=reader, path=path)
            )
            return None
        return outs.get(field) if field is not None else None

    def _scoped(self, reader: str, path: str, scope: str, field: str | None) -> VarType | None:
        table = {"inputs": self.inputs, "vars": self.variables, "sys": SYS_VARIABLES}[scope]
        code = {"inputs": "unknown_input", "vars": "unknown_variable", "sys": "unknown_sys"}[scope]
        if field is not None and field not in table:
            self.problems.append(
                Problem(code, f"{scope}.{field} is not declared (declared: {sorted(table)})", node_id=reader, path=path)
            )
            return None
        return table.get(field) if field is not None else None

    def check_node(self, node: NodeBase) -> None:
        for found in walk_refs(node.config, "config"):
            sel = found.ref.selector
            if sel.scope == "node":
                actual = self._target(node.id, found.path, sel.node or "", sel.field)
            else:
                actual = self._scoped(node.id, found.path, sel.scope, sel.field)
            if not sel.path and not _types_compatible(actual, found.expected):
                self.problems.append(
                    Problem("type_mismatch",
                            f"reference {found.ref.ref!r} is {actual.value if actual else '?'} but "
                            f"{found.expected.value if found.expected else '?'} is expected", node_id=node.id, path=found.path)
                )
        local_names = node.config.template_locals()
        for field_path, source in node.config.templates():
            path = f"config.{field_path}"
            try:
                names = template_names(source)
                selectors = list(template_selectors(source))
            except jinja2.TemplateSyntaxError as exc:
                self.problems.append(
                    Problem("template_syntax", f"line {exc.lineno}: {exc.message}", node_id=node.id, path=path)
                )
                continue
            unknown = set()
            for name in sorted(names - local_names - RESERVED_SCOPES):
                if name not in self.outputs and name not in self.invalid:
                    unknown.add(name)
                    self.problems.append(
                        Problem("unknown_template_name",
                                f"template uses {name!r}, which is not a node id, a bound variable or "
                                "inputs/sys/vars/nodes", node_id=node.id, path=path)
                    )
            for head, field in selectors:
                if head in local_names or head in unknown:
                    continue
                if head in ("inputs", "sys", "vars"):
                    self._scoped(node.id, path, head, field)
                elif head.startswith("nodes."):
                    self._target(node.id, path, head[6:], field)
                elif head in self.outputs:
                    self._target(node.id, path, head, field)


def _check_error_policy(wf: Workflow, problems: list[Problem]) -> None:
    """Rule 10."""
    for node in wf.nodes:
        if node.error_strategy is not ErrorStrategy.default_output:
            continue
        outs = node.outputs(wf)
        for key in sorted(set(node.default_output or {}) - set(outs)):
            problems.append(Problem("invalid_default_output", f"{key!r} is not an output of this node (outputs: {sorted(outs)})",
                                    node_id=node.id, path=f"default_output.{key}"))
        if node.default_output is None:
            problems.append(Problem("invalid_default_output", "the default_output strategy needs a default_output object",
                                    node_id=node.id, path="default_output"))
        if node.default_handle is not None and node.default_handle not in node.handles():
            problems.append(Problem("unknown_default_handle", f"no handle {node.default_handle!r} (handles: {node.handles()})",
                                    node_id=node.id, path="default_handle"))


def _check_models(wf: Workflow, problems: list[Problem], models: Any) -> None:
    """Rule 10 (models). The registry is loaded only when a node names a model."""
    refs = [(node, path, name) for node in wf.nodes for path, name in node.config.model_refs()]
    if not refs:
        return
    if models is None:
        from nodes.model_registry import get_registry  # deferred: reads the model config file

        models = get_registry()
    for node, path, name in refs:
        if not models.has(name):
            problems.append(Problem("unknown_model", f"model {name!r} is not in the model registry "
                                    f"(known: {', '.join(sorted(models.names()))})", node_id=node.id,
                                    path=f"config.{path}"))


def _compile(doc: dict[str, Any], key: str, models: Any = None) -> tuple[CompiledPlan | None, list[Problem]]:
    import nodes  # noqa: F401  - registers every executor; deferred because node modules import the engine

    problems: list[Problem] = []
    invalid: set[str] = set()
    wf = _parse_document(doc, problems, invalid)
    if wf is None:
        # Top level invalid: still check node configs (done above); nothing else is safe.
        return None, problems
    _check_ids(wf, problems)
    raw_nodes = doc.get("nodes") if isinstance(doc.get("nodes"), list) else []
    invalid_start = any(isinstance(n, dict) and n.get("type") == "start" and n.get("id") in invalid for n in raw_nodes)
    graph, start_id = _build_graph(wf, problems, invalid, invalid_start)
    acyclic = _check_cycles(graph, problems)
    order = list(nx.topological_sort(graph)) if acyclic else None
    checker = _RefChecker(wf, graph, order, problems, invalid)
    for node in wf.nodes:
        checker.check_node(node)
    _check_error_policy(wf, problems)
    _check_models(wf, problems, models)
    if start_id is not None and acyclic:
        reachable = nx.descendants(graph, start_id) | {start_id}
        for node in wf.nodes:
            if node.id not in reachable:
                problems.append(Problem("unreachable", "no path from the start node; this node will be skipped",
                                        node_id=node.id, severity="warning"))
    if any(p.severity == "error" for p in problems) or start_id is None or order is None:
        return None, problems
    in_edges: dict[str, list[str]] = {n.id: [] for n in wf.nodes}
    out_edges: dict[str, list[tuple[str, str, str]]] = {n.id: [] for n in wf.nodes}
    for edge in wf.edges:
        in_edges[edge.target].append(edge.id)
        out_edges[edge.source].append((edge.id, edge.sourceHandle, edge.target))
    plans = {
        n.id: NodePlan(n, EXECUTORS[n.type](n), tuple(in_edges[n.id]), tuple(out_edges[n.id])) for n in wf.nodes
    }
    plan = CompiledPlan(wf, key, graph, plans, start_id, tuple(order), tuple(p for p in problems if p.severity == "warning"),
                        roots=(start_id,))
    return plan, problems
