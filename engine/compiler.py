"""The compiler: workflow document -> :class:`CompiledPlan`, or every problem at once.

It runs small passes, each named for what it checks; all passes run even when an
earlier one found problems (as far as their input allows), so the builder sees the
whole list at once. Rules, with the ``Problem.code`` each one reports:

1. ``invalid_document``: the top level (id, inputs, edges, limits) does not validate.
2. ``unknown_kind``: a node's ``type`` is not in the catalog.
3. ``missing_config`` / ``invalid_config``: a node's fields fail validation
   (``path`` is the field path, e.g. ``config.cases[0].conditions[0].right``);
   ``empty_required``: a required config field (no default) holds an empty or
   whitespace-only string (an answer with no text, a request with no URL).
4. ``duplicate_node_id`` / ``duplicate_edge_id`` / ``reserved_node_id``
   (``inputs``, ``sys``, ``vars``, ``nodes`` are reference scopes).
5. ``no_start`` / ``multiple_start`` / ``edge_into_start``.
6. ``dangling_edge``: an edge's source or target is not a node.
7. ``unknown_handle``: an edge leaves a handle its source does not have
   (if-else: case ids + ``else``; ``error`` only under the error-branch strategy).
8. ``cycle``: a strongly connected component that is not a valid loop region
   (engine/loops.py: one entry, back-edges to it, a conditional exit);
   ``unknown_parent`` / ``edge_crosses_container`` / ``loop_break_outside_loop`` /
   ``interrupt_in_loop`` for loop bodies.
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
import gc
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Mapping, Union

import jinja2
import networkx as nx
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from schemas.nodes import NodeConfig
from schemas.types import RESERVED_SCOPES, SYS_VARIABLES, VarType
from schemas.values import walk_refs
from schemas.workflow import ErrorStrategy, NodeBase, Workflow

from .answers import StreamPlan, stream_plan
from .catalog import NodeCatalog, NodeExecutor
from .errors import CompileError, Problem
from .plain_errors import did_you_mean, fields_at, plain_message
from .loops import REGION_SUFFIX, CycleRegion, RegionExecutor, check_scopes, find_cycle_regions, region_node
from .documents import as_document
from .references import template_names, template_selectors

if TYPE_CHECKING:  # a protocol, for annotations: the storage ports and run records are not needed to compile
    from .ports import ModelCatalog

__all__ = ["CompiledPlan", "NodePlan", "check_workflow", "compile_workflow", "content_hash"]


@dataclass(slots=True)  # not frozen: frozen dataclasses pay per field on every construction
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
    graph: nx.DiGraph
    nodes: dict[str, NodePlan]
    start_id: str
    order: tuple[str, ...]
    warnings: tuple[Problem, ...]
    roots: tuple[str, ...] = ()
    #: the node catalog the plan was compiled with (the scheduler reads kind traits from it)
    catalog: NodeCatalog | None = None
    #: the scope's answer stream (engine/answers.py); None when nothing in it is streamed
    stream: StreamPlan | None = None


_CACHE: OrderedDict[str, CompiledPlan] = OrderedDict()
_CACHE_SIZE = 256


def content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, compact) of ``doc``."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    # surrogatepass: a lone surrogate (valid in JSON, not in UTF-8) must not crash hashing
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def compile_workflow(
    source: Workflow | Mapping[str, Any] | str | bytes, *, catalog: NodeCatalog, models: ModelCatalog | None = None,
    use_cache: bool = True,
) -> CompiledPlan:
    """Compile a workflow (model, dict or JSON text) against ``catalog``'s node kinds.

    ``models``: the model names ``model`` fields are checked against (None: not
    checked - the caller then owns that check). The plan cache is keyed by the
    document hash, the catalog and the model registry's fingerprint.

    Raises:
        CompileError: with every problem found (warnings included in ``problems``).
    """
    doc = as_document(source)
    key = content_hash(doc)
    cache_key = f"{key}:{catalog.fingerprint}:{models.fingerprint if models is not None else '-'}"
    if use_cache and cache_key in _CACHE:
        _CACHE.move_to_end(cache_key)
        return _CACHE[cache_key]
    plan, problems = _compile(doc, key, catalog, models)
    if plan is None:
        raise CompileError(problems)
    if use_cache:
        _CACHE[cache_key] = plan
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return plan


def check_workflow(source: Workflow | Mapping[str, Any] | str | bytes, *, catalog: NodeCatalog,
                   models: ModelCatalog | None = None) -> list[Problem]:
    """All problems (errors and warnings) of a workflow; empty when it is clean.

    Builds no plan, so no executor module is imported (checking stays fast).
    """
    try:
        doc = as_document(source)
    except CompileError as exc:
        return exc.problems
    return _compile(doc, content_hash(doc), catalog, models, build=False)[1]


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
def _nodes_adapter(catalog: NodeCatalog, kinds: tuple[str, ...]) -> TypeAdapter[list[NodeBase]]:
    """A validator for a list of nodes of ``kinds`` of ``catalog``."""
    models = tuple(catalog.node_model(kind) for kind in kinds)
    if not models:  # every node was of an unknown kind (already reported)
        return TypeAdapter(list[NodeBase])
    if len(models) == 1:
        return TypeAdapter(list[Annotated[models[0], Tag(kinds[0])]])  # type: ignore[valid-type]
    union = Annotated[Union[tuple(Annotated[m, Tag(k)] for m, k in zip(models, kinds))],  # type: ignore[misc]
                      Discriminator("type")]
    return TypeAdapter(list[union])  # type: ignore[valid-type]


def _parse_document(doc: dict[str, Any], problems: list[Problem], invalid: set[str],
                    catalog: NodeCatalog) -> Workflow | None:
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
            fields = fields_at(Workflow, err["loc"]) if err["type"] == "extra_forbidden" else ()
            problems.append(Problem("invalid_document", plain_message(err, fields), edge_id=edge_id, path=loc))
        shell = None
    known: list[tuple[str, dict[str, Any]]] = []  # (node id for messages, raw node) of known kinds
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            problems.append(Problem("invalid_document", "a node must be an object", path=f"nodes[{index}]"))
            continue
        node_id = raw.get("id") if isinstance(raw.get("id"), str) else f"nodes[{index}]"
        kind = raw.get("type")
        if kind not in catalog:
            names = ", ".join(catalog.kinds())
            problems.append(Problem("unknown_kind", f"unknown node kind {kind!r}{did_you_mean(kind, catalog.kinds())} "
                                    f"(known: {names})", node_id=node_id, path="type"))
            invalid.add(node_id)
            continue
        known.append((node_id, raw))
    # One validation call for all nodes (the per-node Python overhead dominates otherwise);
    # error locations are (index, kind tag, *field path).
    kinds = tuple(sorted({raw["type"] for _, raw in known}))
    adapter, skip = _nodes_adapter(catalog, kinds), (2 if len(kinds) > 1 else 1)
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
            fields = (fields_at(catalog.node_model(known[index][1]["type"]), path)  # type: ignore[index]
                      if err["type"] == "extra_forbidden" else ())
            msg = "required field is missing" if code == "missing_config" else plain_message(err, fields)
            problems.append(Problem(code, msg, node_id=node_id, path=_loc(path)))
        good = [raw for i, (_, raw) in enumerate(known) if i not in bad]
        nodes = adapter.validate_python(good)
    _check_empty_required(nodes, problems)
    if shell is None:
        return None
    return shell.model_copy(update={"nodes": nodes})


@functools.cache
def _required_fields(cls: type[NodeConfig]) -> tuple[tuple[str, str], ...]:
    """(attribute, name in the document) of the config fields of ``cls`` without a default."""
    return tuple((name, field.alias or name) for name, field in cls.model_fields.items() if field.is_required())


def _check_empty_required(nodes: list[NodeBase], problems: list[Problem]) -> None:
    """Rule 3 (``empty_required``): a field without a default is one the node cannot do
    without, yet its schema takes any string, so an answer with no text would pass and
    mislead only at run time. The node stays (its outputs and references are checked)."""
    for node in nodes:
        config = node.config
        for attr, name in _required_fields(type(config)):
            value = getattr(config, attr)
            if isinstance(value, str) and not value.strip():
                problems.append(Problem("empty_required", f"{name} is required and empty", node_id=node.id,
                                        path=f"config.{name}"))


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
        elif node.id.endswith(REGION_SUFFIX):
            problems.append(Problem("reserved_node_id", f"ids ending in {REGION_SUFFIX!r} name the engine's loop "
                                    "regions; rename the node", node_id=node.id))
    seen_edges: set[str] = set()
    for edge in wf.edges:
        if edge.id in seen_edges:
            problems.append(Problem("duplicate_edge_id", f"edge id {edge.id!r} is used more than once", edge_id=edge.id))
        seen_edges.add(edge.id)


def _build_graph(
    wf: Workflow, problems: list[Problem], invalid: set[str], invalid_start: bool, scope: dict[str, str | None],
    entry_kinds: frozenset[str],
) -> tuple[nx.DiGraph, str | None]:
    """Rules 5-7: the graph. One networkx edge per connected node pair; its ``edges``
    attribute lists the workflow edges between them as ``(edge id, source handle)``.

    Edges of nodes that failed validation, and edges from an unknown handle, stay in
    the graph: ancestry and reachability must not change because of one bad field, or
    every reference across that edge would be reported again (the plan is not built
    when there are errors, so such edges never run).
    """
    graph = nx.DiGraph()
    by_id = {n.id: n for n in wf.nodes}
    graph.add_nodes_from(by_id)
    graph.add_nodes_from(invalid)
    handles_of: dict[str, list[str]] = {}
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    starts = [n.id for n in wf.nodes if n.type in entry_kinds]
    if not starts and not invalid_start:
        kinds = " or ".join(repr(k) for k in sorted(entry_kinds))
        problems.append(Problem("no_start", f"the workflow has no start node; add one node of type {kinds}"))
    elif len(starts) > 1:
        problems.append(Problem("multiple_start", f"only one start node is allowed, found {starts}"))
    def keep(source: str, target: str, edge_id: str, handle: str) -> None:
        pair = pairs.get((source, target))
        if pair is None:
            pairs[(source, target)] = [(edge_id, handle)]
        else:
            pair.append((edge_id, handle))

    for edge in wf.edges:
        source, target = edge.source, edge.target
        if not invalid:  # fast path (5000-edge chains): a valid edge between valid nodes of one scope
            source_node, target_node = by_id.get(source), by_id.get(target)
            if (source_node is not None and target_node is not None and scope[source] == scope[target]
                    and target_node.type not in entry_kinds):
                handles = handles_of.get(source)
                if handles is None:
                    handles = handles_of[source] = source_node.handles()
                if edge.sourceHandle in handles:
                    pair = pairs.get((source, target))
                    if pair is None:
                        pairs[(source, target)] = [(edge.id, edge.sourceHandle)]
                    else:
                        pair.append((edge.id, edge.sourceHandle))
                    continue
        if source in invalid or target in invalid:
            if (source in by_id or source in invalid) and (target in by_id or target in invalid):
                keep(source, target, edge.id, edge.sourceHandle)  # the node's own problem is reported already
            continue
        if source not in by_id or target not in by_id:
            bad = [end for end in (source, target) if end not in by_id]
            named = ", ".join(f"{end!r}{did_you_mean(end, by_id)}" for end in bad)
            problems.append(
                Problem("dangling_edge", f"edge points to unknown node(s) {named}", edge_id=edge.id,
                        path="source" if source in bad else "target")
            )
            continue
        if scope[source] is not scope[target] and scope[source] != scope[target]:
            problems.append(Problem("edge_crosses_container",
                                    f"edge joins {edge.source!r} and {edge.target!r}, which are in different loop "
                                    "bodies; connect the loop node itself instead", edge_id=edge.id))
            continue
        handles = handles_of.get(source)
        if handles is None:
            handles = handles_of[source] = by_id[source].handles()
        if edge.sourceHandle not in handles:
            problems.append(
                Problem("unknown_handle",
                        f"node {edge.source!r} has no output handle {edge.sourceHandle!r}"
                        f"{did_you_mean(edge.sourceHandle, handles)} (handles: {', '.join(handles)})",
                        node_id=edge.source, edge_id=edge.id, path="sourceHandle")
            )
            keep(source, target, edge.id, edge.sourceHandle)
            continue
        if by_id[edge.target].type in entry_kinds:
            problems.append(Problem("edge_into_start", "the start node cannot have incoming edges",
                                    node_id=edge.target, edge_id=edge.id))
            continue
        keep(source, target, edge.id, edge.sourceHandle)
    graph.add_edges_from((u, v, {"edges": ids}) for (u, v), ids in pairs.items())
    return graph, (starts[0] if len(starts) == 1 else None)


def _ancestor_sets(graph: nx.DiGraph, order: list[str]) -> dict[str, int]:
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


class _LazyOutputs(dict):  # type: ignore[type-arg]
    """node id -> declared outputs, computed for the nodes that are actually referenced."""

    def __init__(self, wf: Workflow) -> None:
        super().__init__()
        self._wf = wf
        self._nodes = {n.id: n for n in wf.nodes}

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __missing__(self, node_id: str) -> dict[str, VarType]:
        outs = self[node_id] = self._nodes[node_id].outputs(self._wf)
        return outs

    def ids(self) -> list[str]:
        """Every node id (for "did you mean" suggestions)."""
        return list(self._nodes)


class _RefChecker:
    """Rule 9, for one workflow (outputs computed once)."""

    def __init__(self, wf: Workflow, graph: nx.DiGraph, order: list[str] | None, problems: list[Problem],
                 invalid: set[str], scope: dict[str, str | None]):
        self.wf = wf
        self.invalid = invalid
        self.scope = scope
        self.problems = problems
        self.outputs = _LazyOutputs(wf)
        self.inputs = {v.name: v.type for v in wf.inputs}
        self.variables = {v.name: v.type for v in wf.variables}
        self.order = order
        self.graph = graph
        self._anc: dict[str, int] | None = None
        if order is not None:
            self.index = {nid: i for i, nid in enumerate(order)}

    @property
    def anc(self) -> dict[str, int]:
        """Ancestor bitsets, built on first use (many workflows have no node references)."""
        if self._anc is None:
            assert self.order is not None
            self._anc = _ancestor_sets(self.graph, self.order)
        return self._anc

    def reachable_from(self, start: str) -> set[str]:
        """Nodes with a path from ``start`` (``start`` included): a depth-first walk of the
        successors (twice as fast as testing every node's predecessors in order)."""
        reach, todo, succ = {start}, [start], self.graph.adj
        while todo:
            for nid in succ[todo.pop()]:
                if nid not in reach:
                    reach.add(nid)
                    todo.append(nid)
        return reach

    def _inside(self, node_id: str, container: str) -> bool:
        parent = self.scope.get(node_id)
        while parent is not None:
            if parent == container:
                return True
            parent = self.scope.get(parent)
        return False

    def _target(self, reader: str, path: str, node_ref: str, field: str | None, body: bool = False) -> VarType | None:
        if node_ref in self.invalid:
            return None
        if node_ref not in self.outputs:
            self.problems.append(Problem("unknown_node", f"reference to unknown node {node_ref!r}"
                                         f"{did_you_mean(node_ref, self.outputs.ids())}", node_id=reader, path=path))
            return None
        if body and (node_ref == reader or self._inside(node_ref, reader)):
            pass  # a loop node's body-scoped field reads itself and its body (engine/loops.py)
        elif self.order is not None and node_ref != reader and not (self.anc[reader] >> self.index[node_ref]) & 1:
            self.problems.append(
                Problem("not_ancestor",
                        f"reference to node {node_ref!r}, which is not upstream of {reader!r}: it may never run first; "
                        "connect it upstream", node_id=reader, path=path)
            )
            return None
        elif node_ref == reader:
            self.problems.append(Problem("not_ancestor", "a node cannot reference its own outputs", node_id=reader, path=path))
            return None
        outs = self.outputs[node_ref]
        if field is not None and field not in outs:
            self.problems.append(
                Problem("unknown_output", f"node {node_ref!r} has no output {field!r}{did_you_mean(field, outs)} "
                        f"(outputs: {', '.join(sorted(outs)) or 'none'})",
                        node_id=reader, path=path)
            )
            return None
        return outs.get(field) if field is not None else None

    def _scoped(self, reader: str, path: str, scope: str, field: str | None) -> VarType | None:
        table = {"inputs": self.inputs, "vars": self.variables, "sys": SYS_VARIABLES}[scope]
        code = {"inputs": "unknown_input", "vars": "unknown_variable", "sys": "unknown_sys"}[scope]
        if field is not None and field not in table:
            self.problems.append(
                Problem(code, f"{scope}.{field} is not declared{did_you_mean(field, table)} "
                        f"(declared: {', '.join(sorted(table)) or 'none'})", node_id=reader, path=path)
            )
            return None
        return table.get(field) if field is not None else None

    def check_node(self, node: NodeBase) -> None:
        if _plain_config(type(node.config)):
            return
        body_fields = node.config.body_fields()
        for found in walk_refs(node.config, "config"):
            sel = found.ref.selector
            if sel.scope == "node":
                in_body = bool(body_fields) and found.path.split(".")[1].split("[")[0] in body_fields
                actual = self._target(node.id, found.path, sel.node or "", sel.field, in_body)
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
                                f"inputs/sys/vars/nodes{did_you_mean(name, [*self.outputs.ids(), *local_names])}",
                                node_id=node.id, path=path)
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


@functools.cache
def _plain_config(cls: type[NodeConfig]) -> bool:
    """True for config classes with no fields and no templates: nothing to check."""
    return not cls.model_fields and cls.templates is NodeConfig.templates


def _check_error_policy(wf: Workflow, problems: list[Problem]) -> None:
    """Rule 10."""
    for node in wf.nodes:
        if node.error_strategy is not ErrorStrategy.default_output:
            continue
        outs = node.outputs(wf)
        for key in sorted(set(node.default_output or {}) - set(outs)):
            problems.append(Problem("invalid_default_output", f"{key!r} is not an output of this node"
                                    f"{did_you_mean(key, outs)} (outputs: {', '.join(sorted(outs)) or 'none'})",
                                    node_id=node.id, path=f"default_output.{key}"))
        if node.default_output is None:
            problems.append(Problem("invalid_default_output", "the default_output strategy needs a default_output object",
                                    node_id=node.id, path="default_output"))
        if node.default_handle is not None and node.default_handle not in node.handles():
            problems.append(Problem("unknown_default_handle", f"no handle {node.default_handle!r}"
                                    f"{did_you_mean(node.default_handle, node.handles())} "
                                    f"(handles: {', '.join(node.handles())})",
                                    node_id=node.id, path="default_handle"))


def _check_models(wf: Workflow, problems: list[Problem], models: ModelCatalog | None) -> None:
    """Rule 10 (models); skipped without a model catalog."""
    refs = [(node, path, name) for node in wf.nodes for path, name in node.config.model_refs()]
    if not refs or models is None:
        return
    reported = {(p.node_id, p.path) for p in problems}  # a blank model is empty_required already
    for node, path, name in refs:
        kind = node.config.model_kind(path)
        if models.has(name, kind) or (node.id, f"config.{path}") in reported:
            continue
        known = sorted(models.names(kind))
        actual = next((t for t in _MODEL_TYPES if t != kind and models.has(name, t)), None)
        what = (f"model {name!r} is {_a(actual)} model, not {_a(kind)} model" if actual is not None
                else f"model {name!r} is not in the model registry{did_you_mean(name, known)}")
        problems.append(Problem("unknown_model", f"{what} (known{'' if kind == 'chat' else f' {kind} models'}: "
                                f"{', '.join(known) or 'none'})",
                                node_id=node.id, path=f"config.{path}"))


#: the model registry's types (a model named where another type is needed says which it is)
_MODEL_TYPES = ("chat", "embedding", "rerank")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _compile(doc: dict[str, Any], key: str, catalog: NodeCatalog, models: ModelCatalog | None,
             build: bool = True) -> tuple[CompiledPlan | None, list[Problem]]:
    # Compiling allocates many small containers and frees few: the cyclic GC would
    # walk the whole heap repeatedly for nothing (about half the time at 5000 nodes).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compile_passes(doc, key, catalog, models, build)
    finally:
        if enabled:
            gc.enable()


def _compile_passes(doc: dict[str, Any], key: str, catalog: NodeCatalog, models: ModelCatalog | None,
                    build: bool) -> tuple[CompiledPlan | None, list[Problem]]:
    problems: list[Problem] = []
    invalid: set[str] = set()
    wf = _parse_document(doc, problems, invalid, catalog)
    if wf is None:
        # Top level invalid: still check node configs (done above); nothing else is safe.
        return None, problems
    _check_ids(wf, problems)
    raw_nodes = doc.get("nodes") if isinstance(doc.get("nodes"), list) else []
    entry_kinds = frozenset(k for k in catalog if catalog[k].entry)
    invalid_start = any(isinstance(n, dict) and n.get("type") in entry_kinds and n.get("id") in invalid
                        for n in raw_nodes)
    scope = check_scopes(wf, problems, invalid, catalog)
    graph, start_id = _build_graph(wf, problems, invalid, invalid_start, scope, entry_kinds)
    # A body runs after its container starts: for ancestry, the container precedes its body.
    graph.add_edges_from((parent, nid, {"edges": []}) for nid, parent in scope.items() if parent is not None)
    try:
        order: list[str] | None = list(nx.topological_sort(graph))
        regions: list[CycleRegion] = []
    except nx.NetworkXUnfeasible:  # cycles: loop regions, or problems (engine/loops.py)
        regions = find_cycle_regions(graph, wf, problems)
        for region in regions:  # without its back-edges the graph around a region is a DAG
            for source in list(graph.predecessors(region.entry)):
                kept = [(e, h) for e, h in graph[source][region.entry]["edges"] if e not in region.back_edges]
                if kept:
                    graph[source][region.entry]["edges"] = kept
                else:
                    graph.remove_edge(source, region.entry)
        try:
            order = list(nx.topological_sort(graph))
        except nx.NetworkXUnfeasible:  # a cycle that is not a loop region: reported by find_cycle_regions
            order = None
    acyclic = order is not None
    checker = _RefChecker(wf, graph, order, problems, invalid, scope)
    for node in wf.nodes:
        checker.check_node(node)
    _check_error_policy(wf, problems)
    _check_models(wf, problems, models)
    if start_id is not None and acyclic:
        reachable = checker.reachable_from(start_id)
        for node in wf.nodes:
            if node.id not in reachable:
                problems.append(Problem("unreachable", "no path from the start node; this node will be skipped",
                                        node_id=node.id, severity="warning"))
    if any(p.severity == "error" for p in problems) or start_id is None or order is None or not build:
        return None, problems
    warnings = tuple(p for p in problems if p.severity == "warning")
    plan = _PlanBuilder(wf, key, graph, order, regions, scope, warnings, catalog).scope_plan(None, (start_id,))
    return plan, problems


class _PlanBuilder:
    """Builds the plan of each scope: the top level, each loop body, each loop region."""

    def __init__(self, wf: Workflow, key: str, graph: nx.DiGraph, order: list[str],
                 regions: list[CycleRegion], scope: dict[str, str | None], warnings: tuple[Problem, ...],
                 catalog: NodeCatalog):
        self.wf, self.key, self.graph, self.order, self.warnings = wf, key, graph, order, warnings
        self.catalog = catalog
        self.containers = catalog.containers
        # One executor class lookup per kind, not per node (5000-node plans).
        self.executors = {k: catalog[k].executor_class() for k in {n.type for n in wf.nodes}}
        self.scope = scope
        self.by_id = {n.id: n for n in wf.nodes}
        # Kinds that make a unit of the answer stream (engine/answers.py), and whether any
        # node collects the answer (then output bindings are not streamed).
        self.streaming = frozenset(k for k in catalog if catalog[k].collects is not None)
        self.has_answers = any(catalog[n.type].collects == "answer" for n in wf.nodes if n.type in catalog)
        self.rank: dict[str, int] | None = None
        self.own: frozenset[str] | None = None
        self.region_of = {m: r for r in regions for m in r.members}
        self.regions = regions
        back = {e for r in regions for e in r.back_edges}
        self.in_edges: dict[str, list[str]] = {}
        self.out_edges: dict[str, list[tuple[str, str, str]]] = {}
        self.inner_in: dict[str, list[str]] = {}
        self.inner_out: dict[str, list[tuple[str, str, str]]] = {}
        self.ends: dict[str, tuple[str, str]] = {}  # back/exit edge id -> (source, handle)
        if not regions:  # the common case: every edge is an ordinary edge of its scope
            in_edges, out_edges = self.in_edges, self.out_edges
            for source, target, data in graph.edges(data=True):
                for edge_id, handle in data["edges"]:
                    out_edges.setdefault(source, []).append((edge_id, handle, target))
                    in_edges.setdefault(target, []).append(edge_id)
            return
        for edge in wf.edges:
            if edge.source not in self.by_id or edge.target not in self.by_id:
                continue
            source_region, target_region = self.region_of.get(edge.source), self.region_of.get(edge.target)
            if edge.id in back:
                self.ends[edge.id] = (edge.source, edge.sourceHandle)
                continue
            if source_region is not None and source_region is target_region:
                self.inner_in.setdefault(edge.target, []).append(edge.id)
                self.inner_out.setdefault(edge.source, []).append((edge.id, edge.sourceHandle, edge.target))
                continue
            # Seen from outside a region, its exit edges leave the pseudo-node, keyed by edge id.
            source = source_region.id if source_region is not None else edge.source
            target = target_region.id if target_region is not None else edge.target
            handle = edge.id if source_region is not None else edge.sourceHandle
            if source_region is not None:
                self.ends[edge.id] = (edge.source, edge.sourceHandle)
            self.out_edges.setdefault(source, []).append((edge.id, handle, target))
            self.in_edges.setdefault(target, []).append(edge.id)

    def _node_plan(self, node: NodeBase, in_edges: list[str], out_edges: list[tuple[str, str, str]]) -> NodePlan:
        body = None
        if node.type in self.containers:
            body = self.scope_plan(node.id, ())  # roots: the body nodes with no incoming edge
        return NodePlan(node, self.executors[node.type](node), tuple(in_edges), tuple(out_edges), body)

    def _region_plan(self, region: CycleRegion) -> NodePlan:
        members = {m: self._node_plan(self.by_id[m], self.inner_in.get(m, []), self.inner_out.get(m, []))
                   for m in region.members}
        body = CompiledPlan(self.wf, self.key, self.graph, members, "", region.members, (), roots=(region.entry,),
                            catalog=self.catalog, stream=self._stream(members, list(region.members)))
        pseudo = region_node(region, self.by_id[region.entry])
        executor = RegionExecutor(pseudo, region, self.ends)
        return NodePlan(pseudo, executor, tuple(self.in_edges.get(region.id, [])),
                        tuple(self.out_edges.get(region.id, [])), body, region.members)

    def scope_plan(self, scope_id: str | None, roots: tuple[str, ...]) -> CompiledPlan:
        plans: dict[str, NodePlan] = {}
        order: list[str] = []
        by_id, scope, region_of = self.by_id, self.scope, self.region_of
        in_edges, out_edges, empty = self.in_edges, self.out_edges, ()
        containers, executors = self.containers, self.executors
        for nid in self.order:
            node = by_id.get(nid)
            if node is None or scope[nid] != scope_id:
                continue
            if not region_of and node.type not in containers:  # fast path: an ordinary node
                plans[nid] = NodePlan(node, executors[node.type](node), tuple(in_edges.get(nid, empty)),
                                      tuple(out_edges.get(nid, empty)))
                order.append(nid)
                continue
            region = region_of.get(nid)
            if region is not None:
                if nid == region.entry:
                    plans[region.id] = self._region_plan(region)
                    order.append(region.id)
                continue
            plans[nid] = self._node_plan(self.by_id[nid], self.in_edges.get(nid, []), self.out_edges.get(nid, []))
            order.append(nid)
        if scope_id is not None:
            roots = tuple(nid for nid in order if not plans[nid].in_edges)
        start = roots[0] if scope_id is None else ""
        return CompiledPlan(self.wf, self.key, self.graph, plans, start, tuple(order),
                            self.warnings if scope_id is None else (), roots=roots, catalog=self.catalog,
                            stream=self._stream(plans, order))

    def _stream(self, plans: dict[str, NodePlan], order: list[str]) -> StreamPlan | None:
        """The answer stream of one scope (engine/answers.py), units in stream order."""
        streaming = self.streaming
        shown = self._shown()
        units = [nid for nid in order
                 if (plans[nid].body is not None and plans[nid].body.stream is not None)
                 or (plans[nid].node.type in streaming) or nid in shown]
        if not units:
            return None
        rank = self._rank()
        entry = {r.id: r.entry for r in self.regions}
        units.sort(key=lambda nid: rank[entry.get(nid, nid)])
        candidates = [(nid, self.by_id.get(nid), plans[nid].body.stream if plans[nid].body is not None else None)
                      for nid in units]

        def kind_of(nid: str) -> str | None:
            node = self.by_id.get(nid)
            return node.type if node is not None else None

        def gates_of(nid: str) -> frozenset[str]:
            own = self.region_of.get(entry.get(nid, nid))
            gates: set[str] = set()
            for ancestor in nx.ancestors(self.graph, entry.get(nid, nid)):
                region = self.region_of.get(ancestor)
                if region is not None and region is not own and region.id in plans:
                    gates.add(region.id)  # a loop region leaves by a branch
                elif ancestor in plans and (len(self.by_id[ancestor].handles()) > 1 or asks(ancestor)):
                    gates.add(ancestor)
            return frozenset(gates)

        def asks(nid: str) -> bool:
            # A node that asks a person (a form) and streams nothing gates what follows it,
            # so no text after the question reaches the person before their answer; one
            # that streams (an agent) must not: its own live answer would be held back.
            spec = self.catalog.get(self.by_id[nid].type) if self.catalog is not None else None
            return spec is not None and spec.interactive and spec.streams is None

        return stream_plan(candidates, catalog=self.catalog, kind_of=kind_of, gates_of=gates_of,
                           answers=self.has_answers, local=set(plans), own=shown)

    def _shown(self) -> frozenset[str]:
        """Nodes that stream to the person on their own: of a kind with a ``streams`` output
        that no answer template (nor, without answers, an output binding) reads - as an
        LLM node answers directly in FastGPT. Their live deltas only (none when the node's
        streaming is off) form a unit of their own. None in a workflow with End nodes: its
        result is what they output (only their bindings stream, as in Dify)."""
        if self.own is None and any(self.catalog[n.type].collects == "outputs" for n in self.wf.nodes
                                    if n.type in self.catalog):
            self.own = frozenset()
        if self.own is None:
            catalog = self.catalog
            streams = {k: catalog[k].streams for k in catalog if catalog[k].streams}
            read: set[str] = set()
            for node in self.wf.nodes:
                spec = catalog.get(node.type)
                if spec is None or spec.collects is None:
                    continue
                for _path, source in node.config.templates():
                    try:
                        read.update(h[6:] if h.startswith("nodes.") else h for h, _f in template_selectors(source))
                    except jinja2.TemplateSyntaxError:
                        continue
                read.update(f.ref.selector.node or "" for f in walk_refs(node.config, "config"))
            self.own = frozenset(n.id for n in self.wf.nodes if n.type in streams and n.id not in read)
        return self.own

    def _rank(self) -> dict[str, int]:
        """Stream order of nodes: topological, the earlier node of the document first."""
        if self.rank is None:
            index = {n.id: i for i, n in enumerate(self.wf.nodes)}
            self.rank = {nid: i for i, nid in enumerate(
                nx.lexicographical_topological_sort(self.graph, key=lambda n: index.get(n, -1)))}
        return self.rank
