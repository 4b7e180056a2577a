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
   (``inputs``, ``sys``, ``vars``, ``conversation``, ``nodes`` are reference scopes).
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
   ``unknown_variable``, ``unknown_conversation_variable``, ``unknown_sys``, ``unknown_env`` (an ``env.NAME`` the workflow's
   ``environment`` does not declare; ``duplicate_env``: one name declared twice), ``type_mismatch``, ``template_syntax``,
   ``unknown_template_name``.
10. ``invalid_default_output`` / ``unknown_default_handle`` for the default-output strategy.
    ``unknown_model``: a node names a model the model registry does not have.
11. ``unreachable`` (warning): no path from the start node; such nodes are skipped.

Plans are cached by the SHA-256 of the canonical JSON of the document.

This module runs the passes in order and keeps the plan cache; the passes live in
:mod:`engine.graph_checks` (rules 1-8 and 10), :mod:`engine.ref_checks` (rule 9) and
:mod:`engine.loops` (cycles and loop bodies), and plans are built by :mod:`engine.plan`.
"""

from __future__ import annotations

import gc
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx

from schemas.workflow import NodeBase, Workflow

from .catalog import NodeCatalog
from .documents import DocumentCaps, canonical_document, canonical_json
from .errors import CompileError, Problem
from .graph_checks import build_graph, check_error_policy, check_ids, check_models, parse_document
from .loops import CycleRegion, check_scopes, find_cycle_regions
from .orders import topological_order
from .plan import CompiledPlan, NodePlan, PlanBuilder
from .ref_checks import RefChecker

if TYPE_CHECKING:  # a protocol, for annotations: the storage ports and run records are not needed to compile
    from .ports import ModelCatalog

__all__ = [
    "Analysis",
    "CompiledPlan",
    "NodePlan",
    "analyse",
    "check_workflow",
    "compile_workflow",
    "content_hash",
]

_CACHE: OrderedDict[str, CompiledPlan] = OrderedDict()
_CACHE_SIZE = 256


def content_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, compact) of ``doc``."""
    return _text_hash(canonical_json(doc))


def _text_hash(text: str) -> str:
    # surrogatepass: a lone surrogate (valid in JSON, not in UTF-8) must not crash hashing
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def compile_workflow(
    source: Workflow | Mapping[str, Any] | str | bytes,
    *,
    catalog: NodeCatalog,
    models: ModelCatalog | None = None,
    use_cache: bool = True,
    checked: tuple[str, DocumentCaps] | None = None,
) -> CompiledPlan:
    """Compile a workflow (model, dict or JSON text) against ``catalog``'s node kinds.

    ``models``: the model names ``model`` fields are checked against (None: not
    checked - the caller then owns that check). The plan cache is keyed by the
    document hash, the catalog and the model registry's fingerprint. ``checked``: the
    caller's caps check of ``source`` (:func:`~engine.documents.canonical_document`).

    Raises:
        CompileError: with every problem found (warnings included in ``problems``).
    """
    doc, text = canonical_document(source, checked)
    key = _text_hash(text)
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


def check_workflow(
    source: Workflow | Mapping[str, Any] | str | bytes,
    *,
    catalog: NodeCatalog,
    models: ModelCatalog | None = None,
) -> list[Problem]:
    """All problems (errors and warnings) of a workflow; empty when it is clean.

    Builds no plan, so no executor module is imported (checking stays fast).
    """
    try:
        doc, text = canonical_document(source)
    except CompileError as exc:
        return exc.problems
    return _compile(doc, _text_hash(text), catalog, models, build=False)[1]


def _compile(
    doc: dict[str, Any], key: str, catalog: NodeCatalog, models: ModelCatalog | None, build: bool = True
) -> tuple[CompiledPlan | None, list[Problem]]:
    # Compiling allocates many small containers and frees few: the cyclic GC would
    # walk the whole heap repeatedly for nothing (about half the time at 5000 nodes).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compile_passes(doc, key, catalog, models, build)
    finally:
        if enabled:
            gc.enable()


@dataclass(slots=True)
class Analysis:
    """What rules 1-8 leave for the later passes: the parsed workflow (None when its top
    level is invalid), ids of nodes that failed validation, node -> container, the graph
    (containers precede their bodies; loop back-edges removed), its topological order
    (None: a cycle that is no loop region), the loop regions and the start node."""

    wf: Workflow | None
    problems: list[Problem]
    invalid: set[str]
    scope: dict[str, str | None] = field(default_factory=dict)
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    order: list[str] | None = None
    regions: list[CycleRegion] = field(default_factory=list)
    start_id: str | None = None
    #: node id -> validated node (the last of a repeated id), made once for every pass
    by_id: dict[str, NodeBase] = field(default_factory=dict)

    def ref_checker(self) -> RefChecker:
        """The reference pass (rule 9) over this analysis; it appends to ``problems``."""
        assert self.wf is not None
        return RefChecker(
            self.wf, self.graph, self.order, self.problems, self.invalid, self.scope, self.by_id
        )


def analyse(doc: dict[str, Any], catalog: NodeCatalog) -> Analysis:
    """Rules 1-8 on a canonical document (see :class:`Analysis`)."""
    problems: list[Problem] = []
    invalid: set[str] = set()
    wf = parse_document(doc, problems, invalid, catalog)
    if wf is None:
        # Top level invalid: still check node configs (done above); nothing else is safe.
        return Analysis(None, problems, invalid)
    by_id = {n.id: n for n in wf.nodes}
    check_ids(wf, problems, by_id)
    listed = doc.get("nodes")
    raw_nodes = listed if isinstance(listed, list) else []
    entry_kinds = frozenset(k for k in catalog if catalog[k].entry)
    invalid_start = bool(invalid) and any(
        isinstance(n, dict) and n.get("type") in entry_kinds and n.get("id") in invalid for n in raw_nodes
    )
    scope = check_scopes(wf, problems, invalid, catalog, by_id)
    graph, start_id = build_graph(wf, problems, invalid, invalid_start, scope, entry_kinds, by_id)
    # A body runs after its container starts: for ancestry, the container precedes its body.
    if not set(scope.values()) <= {None}:  # some node is in a body (a C-level screen)
        graph.add_edges_from(
            (parent, nid, {"edges": []}) for nid, parent in scope.items() if parent is not None
        )
    try:
        order: list[str] | None = topological_order(graph)
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
            order = topological_order(graph)
        except nx.NetworkXUnfeasible:  # a cycle that is not a loop region: reported by find_cycle_regions
            order = None
    return Analysis(wf, problems, invalid, scope, graph, order, regions, start_id, by_id)


def _compile_passes(
    doc: dict[str, Any], key: str, catalog: NodeCatalog, models: ModelCatalog | None, build: bool
) -> tuple[CompiledPlan | None, list[Problem]]:
    found = analyse(doc, catalog)
    wf, problems, order, start_id = found.wf, found.problems, found.order, found.start_id
    if wf is None:
        return None, problems
    graph, regions, scope = found.graph, found.regions, found.scope
    acyclic = order is not None
    checker = found.ref_checker()
    checker.check_nodes(wf.nodes)
    check_error_policy(wf, problems)
    check_models(wf, problems, models)
    if start_id is not None and acyclic:
        reachable = checker.reachable_from(start_id)
        if not reachable.issuperset(found.by_id):  # a C-level screen; the loop names each node
            for node in wf.nodes:
                if node.id not in reachable:
                    problems.append(
                        Problem(
                            "unreachable",
                            "no path from the start node; this node will be skipped",
                            node_id=node.id,
                            severity="warning",
                        )
                    )
    if any(p.severity == "error" for p in problems) or start_id is None or order is None or not build:
        return None, problems
    warnings = tuple(p for p in problems if p.severity == "warning")
    builder = PlanBuilder(wf, key, graph, order, regions, scope, warnings, catalog, found.by_id)
    plan = builder.scope_plan(None, (start_id,))
    return plan, problems
