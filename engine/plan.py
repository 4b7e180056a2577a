"""Compiled plans: :class:`CompiledPlan` (one scope of a workflow, ready to run and
shared by every run) and :class:`NodePlan` (a node with its executor and edge lists),
and :class:`PlanBuilder`, which builds them from a checked workflow: the top level,
each loop body and each loop region drawn with back-edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
import networkx as nx

from schemas.values import walk_refs
from schemas.workflow import NodeBase, Workflow

from .answers import StreamPlan, stream_plan
from .catalog import NodeCatalog, NodeExecutor
from .errors import Problem
from .loops import CycleRegion, RegionExecutor, region_node
from .orders import lexicographical_order
from .references import template_selectors

__all__ = ["CompiledPlan", "NodePlan", "PlanBuilder"]


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
    body: CompiledPlan | None = None
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


class PlanBuilder:
    """Builds the plan of each scope: the top level, each loop body, each loop region."""

    def __init__(
        self,
        wf: Workflow,
        key: str,
        graph: nx.DiGraph,
        order: list[str],
        regions: list[CycleRegion],
        scope: dict[str, str | None],
        warnings: tuple[Problem, ...],
        catalog: NodeCatalog,
        by_id: dict[str, NodeBase] | None = None,
    ):
        """``by_id``: ``{n.id: n for n in wf.nodes}`` when the caller has it already."""
        self.wf, self.key, self.graph, self.order, self.warnings = wf, key, graph, order, warnings
        self.catalog = catalog
        self.containers = catalog.containers
        # One executor class lookup per kind, not per node (5000-node plans).
        kinds = self.kinds = {n.type for n in wf.nodes}
        self.executors = {k: catalog[k].executor_class() for k in kinds}
        self.scope = scope
        self.by_id = by_id if by_id is not None else {n.id: n for n in wf.nodes}
        # Kinds that make a unit of the answer stream (engine/answers.py), and whether any
        # node collects the answer (then output bindings are not streamed).
        self.streaming = frozenset(k for k in catalog if catalog[k].collects is not None)
        self.has_answers = any(catalog[k].collects == "answer" for k in kinds if k in catalog)
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
            # adjacency(): networkx's own dicts, without a view object per edge
            for source, targets in graph.adjacency():
                for target, data in targets.items():
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

    def _node_plan(
        self, node: NodeBase, in_edges: list[str], out_edges: list[tuple[str, str, str]]
    ) -> NodePlan:
        body = None
        if node.type in self.containers:
            body = self.scope_plan(node.id, ())  # roots: the body nodes with no incoming edge
        return NodePlan(node, self.executors[node.type](node), tuple(in_edges), tuple(out_edges), body)

    def _region_plan(self, region: CycleRegion) -> NodePlan:
        members = {
            m: self._node_plan(self.by_id[m], self.inner_in.get(m, []), self.inner_out.get(m, []))
            for m in region.members
        }
        body = CompiledPlan(
            self.wf,
            self.key,
            self.graph,
            members,
            "",
            region.members,
            (),
            roots=(region.entry,),
            catalog=self.catalog,
            stream=self._stream(members, list(region.members)),
        )
        pseudo = region_node(region, self.by_id[region.entry])
        executor = RegionExecutor(pseudo, region, self.ends)
        return NodePlan(
            pseudo,
            executor,
            tuple(self.in_edges.get(region.id, [])),
            tuple(self.out_edges.get(region.id, [])),
            body,
            region.members,
        )

    def scope_plan(self, scope_id: str | None, roots: tuple[str, ...]) -> CompiledPlan:
        plans: dict[str, NodePlan] = {}
        order: list[str] = []
        by_id, scope, region_of = self.by_id, self.scope, self.region_of
        in_edges, out_edges, empty = self.in_edges, self.out_edges, ()
        containers, executors = self.containers, self.executors
        if not region_of and self.kinds.isdisjoint(containers):
            # Every node of the scope is an ordinary node (5000-node chains): one comprehension.
            # Plans are built only for workflows without errors, where a parent is always a
            # container: without containers every node is at the top level, and the order
            # holds only nodes of the workflow when it is as long as the node map.
            if scope_id is None and len(self.order) == len(by_id):
                order = list(self.order)
            else:
                order = [nid for nid in self.order if nid in by_id and scope[nid] == scope_id]
            nodes = list(map(by_id.__getitem__, order))
            plans = {
                nid: NodePlan(
                    node,
                    executors[node.type](node),
                    tuple(in_edges.get(nid, empty)),
                    tuple(out_edges.get(nid, empty)),
                )
                for nid, node in zip(order, nodes, strict=True)
            }
            return self._scope(scope_id, roots, plans, order)
        for nid in self.order:
            node = by_id.get(nid)
            if node is None or scope[nid] != scope_id:
                continue
            if not region_of and node.type not in containers:  # fast path: an ordinary node
                plans[nid] = NodePlan(
                    node,
                    executors[node.type](node),
                    tuple(in_edges.get(nid, empty)),
                    tuple(out_edges.get(nid, empty)),
                )
                order.append(nid)
                continue
            region = region_of.get(nid)
            if region is not None:
                if nid == region.entry:
                    plans[region.id] = self._region_plan(region)
                    order.append(region.id)
                continue
            plans[nid] = self._node_plan(
                self.by_id[nid], self.in_edges.get(nid, []), self.out_edges.get(nid, [])
            )
            order.append(nid)
        return self._scope(scope_id, roots, plans, order)

    def _scope(
        self, scope_id: str | None, roots: tuple[str, ...], plans: dict[str, NodePlan], order: list[str]
    ) -> CompiledPlan:
        """The plan of one scope from its node plans (``order``: topological)."""
        if scope_id is not None:
            roots = tuple(nid for nid in order if not plans[nid].in_edges)
        start = roots[0] if scope_id is None else ""
        return CompiledPlan(
            self.wf,
            self.key,
            self.graph,
            plans,
            start,
            tuple(order),
            self.warnings if scope_id is None else (),
            roots=roots,
            catalog=self.catalog,
            stream=self._stream(plans, order),
        )

    def _stream(self, plans: dict[str, NodePlan], order: list[str]) -> StreamPlan | None:
        """The answer stream of one scope (engine/answers.py), units in stream order."""
        streaming = self.streaming
        shown = self._shown()
        if (
            not (shown or self.regions)
            and self.kinds.isdisjoint(streaming)
            and self.kinds.isdisjoint(self.containers)
        ):
            return None  # no unit can exist: no streamed body, no streaming kind, nothing shown (decided per kind)

        def stream_of(nid: str) -> StreamPlan | None:
            body = plans[nid].body
            return body.stream if body is not None else None

        # A unit: a node with a streamed body, of a streaming kind, or shown on its own.
        units = [
            nid
            for nid, plan in zip(order, map(plans.__getitem__, order), strict=True)
            if (plan.body is not None and plan.body.stream is not None)
            or plan.node.type in streaming
            or nid in shown
        ]
        if not units:
            return None
        rank = self._rank()
        entry = {r.id: r.entry for r in self.regions}

        def stream_rank(nid: str) -> int:  # a node of a loop region takes its entry's rank
            return rank[entry.get(nid, nid)]

        units.sort(key=stream_rank)
        candidates = [(nid, self.by_id.get(nid), stream_of(nid)) for nid in units]

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

        return stream_plan(
            candidates,
            catalog=self.catalog,
            kind_of=kind_of,
            gates_of=gates_of,
            answers=self.has_answers,
            local=set(plans),
            own=shown,
        )

    def _shown(self) -> frozenset[str]:
        """Nodes that stream to the person on their own: of a kind with a ``streams`` output
        that no answer template (nor, without answers, an output binding) reads - as an
        LLM node answers directly in FastGPT. Their live deltas only (none when the node's
        streaming is off) form a unit of their own. None in a workflow with End nodes: its
        result is what they output (only their bindings stream, as in Dify)."""
        # Kind traits are read once per kind of the workflow, not per node (5000-node plans).
        if self.own is None and any(
            self.catalog[kind].collects == "outputs" for kind in self.kinds if kind in self.catalog
        ):
            self.own = frozenset()
        if self.own is None:
            catalog = self.catalog
            streams = {k: catalog[k].streams for k in catalog if catalog[k].streams}
            read: set[str] = set()
            collecting = {k for k in catalog if catalog[k].collects is not None}
            for node in self.wf.nodes:
                if node.type not in collecting:
                    continue
                for _path, source in node.config.templates():
                    try:
                        read.update(
                            h[6:] if h.startswith("nodes.") else h for h, _f in template_selectors(source)
                        )
                    except jinja2.TemplateSyntaxError:
                        continue
                read.update(f.ref.selector.node or "" for f in walk_refs(node.config, "config"))
            self.own = (
                frozenset(n.id for n in self.wf.nodes if n.type in streams and n.id not in read)
                if not self.kinds.isdisjoint(streams)
                else frozenset()
            )
        return self.own

    def _rank(self) -> dict[str, int]:
        """Stream order of nodes: topological, the earlier node of the document first."""
        if self.rank is None:
            index = {n.id: i for i, n in enumerate(self.wf.nodes)}
            self.rank = {
                nid: i
                for i, nid in enumerate(lexicographical_order(self.graph, key=lambda n: index.get(n, -1)))
            }
        return self.rank
