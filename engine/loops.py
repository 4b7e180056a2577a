"""Loops: container scopes (iteration / loop nodes) and loops drawn with back-edges.

Two ways to repeat work (README "Loops"):

1. Containers. A node with ``parent: C`` belongs to the body of the ``iteration`` or
   ``loop`` node ``C``. Edges may not cross a container's boundary. The body is a
   sub-plan the container runs once per item / round, each time in a fresh child
   scope (:meth:`schemas.run.RunState.child`) whose references fall back to the
   enclosing run; inside the body ``C.item`` / ``C.index`` / ``C.<loop variable>``
   read the container's per-round values.
2. Back-edges, as FastGPT builders draw them: a strongly connected component of the
   graph becomes a *loop region* when it has exactly one entry (the only member with
   edges coming from outside - the node the back-edges return to), its other edges
   form a DAG once the back-edges are removed, and it has a conditional exit (an edge
   leaving the region from a branching node's handle that does not lead back in).
   The outside graph stays a DAG: the region is scheduled as one pseudo-node
   (``<entry>~loop``) whose out-edges are the exit edges. Each round runs the region's
   DAG from the entry; when a back-edge is taken another round starts, otherwise the
   exit edges taken in that last round are taken. Node runs of earlier rounds move to
   ``RunState.history``; the latest stay in ``node_runs`` for references downstream.

Every loop has an iteration limit: the node's ``max_iterations`` (for a region: the
entry node's) and the run's ``limits.max_loop_iterations``, the smaller wins.
Reaching it fails with reason ``max_iterations`` - never a silent stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

import networkx as nx

from schemas.nodes import NodeConfig
from schemas.types import NodeRunStatus
from schemas.workflow import ErrorStrategy, NodeBase, Workflow

from .catalog import NodeCatalog, NodeExecutor
from .errors import Problem, RunError
from .plain_errors import a_or_an

if TYPE_CHECKING:  # run-time types: compiling (flowloom validate) loads no run context
    from schemas.run import NodeRun, RunState

    from .context import NodeContext, NodeResult

__all__ = [
    "CycleRegion",
    "REGION_SUFFIX",
    "LoopLimitExceeded",
    "RegionExecutor",
    "check_scopes",
    "find_cycle_regions",
    "loop_limit",
    "move_round_runs",
    "region_node",
]

#: Suffix of a loop region's pseudo-node id (``<entry>~loop``); reserved in node ids.
REGION_SUFFIX = "~loop"


class LoopLimitExceeded(RunError):
    """A loop reached its iteration limit (node ``max_iterations`` or run ``max_loop_iterations``)."""

    reason = "max_iterations"


def loop_limit(node_limit: int | None, workflow: Workflow) -> int:
    """The effective round/item limit of a loop: the smaller of the node's and the run's."""
    run_limit = workflow.limits.max_loop_iterations
    return min(node_limit, run_limit) if node_limit is not None else run_limit


# ----------------------------------------------------------------- compile side


def check_scopes(
    wf: Workflow,
    problems: list[Problem],
    invalid: set[str],
    catalog: NodeCatalog,
    by_id: dict[str, NodeBase] | None = None,
) -> dict[str, str | None]:
    """Validate ``parent`` fields; returns node id -> scope (container id, or None at top level).

    ``by_id``: ``{n.id: n for n in wf.nodes}`` when the caller has it already.
    Problems: ``unknown_parent`` (no such node / not a container kind of ``catalog``),
    ``loop_break_outside_loop`` (a kind with ``inside`` kinds placed elsewhere),
    ``interrupt_in_loop`` (questions to a person cannot pause inside a loop body).
    """
    parents = set(map(_parent_of, wf.nodes))
    placed = {
        k for k in catalog if catalog[k].inside or catalog[k].interactive
    }  # kinds with a placement rule
    if parents <= {None} and placed.isdisjoint(map(_type_of, wf.nodes)):
        # No node has a parent nor a placement rule (most workflows): every node is at the
        # top level, screened in C-level loops; the loops below name each problem.
        return dict.fromkeys(map(_id_of, wf.nodes))
    if by_id is None:
        by_id = {n.id: n for n in wf.nodes}
    containers = catalog.containers
    scope: dict[str, str | None] = {}
    for node in wf.nodes:
        parent = node.parent
        if parent is not None and parent not in invalid:
            owner = by_id.get(parent)
            if owner is None or owner.type not in containers:
                problems.append(
                    Problem(
                        "unknown_parent",
                        f"parent {parent!r} is not a container node ({', '.join(sorted(containers))})",
                        node_id=node.id,
                        path="parent",
                    )
                )
                parent = None
        scope[node.id] = parent
    for node in wf.nodes:
        if node.type not in placed:
            continue
        spec = catalog[node.type]
        if spec.inside and not _inside(node.id, spec.inside, scope, by_id):
            where = " or ".join(sorted(spec.inside))
            problems.append(
                Problem(
                    "loop_break_outside_loop",
                    f"{a_or_an(node.type)} node must be inside {a_or_an(where)} node's body",
                    node_id=node.id,
                    path="parent",
                )
            )
        if spec.interactive and scope[node.id] is not None:
            problems.append(
                Problem(
                    "interrupt_in_loop",
                    "nodes that ask a person cannot be inside a loop body; ask before or after the loop",
                    node_id=node.id,
                    path="parent",
                )
            )
    return scope


_parent_of, _type_of, _id_of = attrgetter("parent"), attrgetter("type"), attrgetter("id")


def _inside(
    node_id: str, kinds: frozenset[str], scope: dict[str, str | None], by_id: dict[str, NodeBase]
) -> bool:
    parent = scope.get(node_id)
    return parent is not None and by_id[parent].type in kinds


@dataclass(frozen=True, slots=True)
class CycleRegion:
    """A loop drawn with back-edges (see module docstring, point 2)."""

    entry: str
    members: tuple[str, ...]
    back_edges: frozenset[str]
    exit_edges: tuple[str, ...]

    @property
    def id(self) -> str:
        """Id of the region's pseudo-node (node ids may not end in :data:`REGION_SUFFIX`,
        so no clash)."""
        return f"{self.entry}{REGION_SUFFIX}"


def _cycle_path(graph: nx.DiGraph, members: list[str], start: str) -> tuple[str, str | None]:
    """One cycle among ``members`` as ``a -> b -> c -> a`` in the order its edges run,
    beginning at ``start`` when the cycle passes through it, and the id of the edge
    that closes it (``c -> a``): that edge is usually the one to remove or to turn into
    a loop's back-edge, so the problem points at it."""
    sub = graph.subgraph(members)
    try:
        cycle = nx.find_cycle(sub, source=start)
    except nx.NetworkXNoCycle:
        return ", ".join(members), None
    nodes = [u for u, _v in cycle]
    if start in nodes:  # rotate so the path starts (and ends) at ``start``
        at = nodes.index(start)
        cycle = cycle[at:] + cycle[:at]
    path = " -> ".join([u for u, _v in cycle] + [cycle[-1][1]])
    last_u, last_v = cycle[-1][:2]
    ids = graph[last_u][last_v].get("edges") or []
    closing = ids[0][0] if ids else None
    return (f"{path} (closed by edge {closing!r})" if closing else path), closing


def find_cycle_regions(graph: nx.DiGraph, wf: Workflow, problems: list[Problem]) -> list[CycleRegion]:
    """Turn each strongly connected component into a :class:`CycleRegion`, or report why not.

    Every failure is a ``cycle`` problem naming the cycle's nodes in the order its edges
    run and, as ``edge_id``, the edge that closes it.
    """
    by_id = {n.id: n for n in wf.nodes}
    regions: list[CycleRegion] = []
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1:
            (only,) = component
            if not graph.has_edge(only, only):
                continue
        members = sorted(component)
        names = ", ".join(members)
        if any(m not in by_id for m in members):
            continue  # a member failed validation (reported); its handles are unknown
        # (source, target, edge id, handle) for every workflow edge inside the component
        inner = [
            (u, v, e, h)
            for u, v, d in graph.edges(members, data=True)
            if v in component
            for e, h in d["edges"]
        ]
        entries = sorted({v for u, v in graph.in_edges(members) if u not in component})
        if len(entries) != 1:
            why = (
                "nothing leads into it"
                if not entries
                else f"it is entered at several nodes ({', '.join(entries)})"
            )
            path, closing = _cycle_path(graph, members, entries[0] if entries else members[0])
            problems.append(
                Problem(
                    "cycle",
                    f"cycle {path}: {why}; a loop needs one entry node, the one its back-edges return to",
                    node_id=members[0],
                    edge_id=closing,
                )
            )
            continue
        entry = entries[0]
        back = frozenset(e for _u, v, e, _h in inner if v == entry)
        dag = nx.DiGraph((u, v) for u, v, e, _h in inner if e not in back)
        dag.add_nodes_from(members)
        if not nx.is_directed_acyclic_graph(dag):
            cycle = [u for u, _v in nx.find_cycle(dag)]
            path, closing = _cycle_path(graph.edge_subgraph(dag.edges), cycle, cycle[0])
            problems.append(
                Problem(
                    "cycle",
                    f"cycle through nodes {names} has an inner cycle {path} that does not "
                    f"return to the entry {entry!r}",
                    node_id=entry,
                    edge_id=closing,
                )
            )
            continue
        exits = [
            (u, e, h)
            for u, v, d in graph.out_edges(members, data=True)
            if v not in component
            for e, h in d["edges"]
        ]
        inner_handles = {(u, h) for u, _v, _e, h in inner}
        conditional = [
            k for u, k, handle in exits if len(by_id[u].handles()) > 1 and (u, handle) not in inner_handles
        ]
        if not conditional:
            path, closing = _cycle_path(graph, members, entry)
            problems.append(
                Problem(
                    "cycle",
                    f"cycle {path} has no conditional exit: add a branch (if-else, "
                    "classify, error branch) with a handle that leaves the loop",
                    node_id=entry,
                    edge_id=closing,
                )
            )
            continue
        order = [n for n in nx.topological_sort(dag)]
        regions.append(CycleRegion(entry, tuple(order), back, tuple(k for _u, k, _h in exits)))
    return regions


class _RegionConfig(NodeConfig):
    """Config of a loop region's pseudo-node (internal; not a catalog kind)."""


def region_node(region: CycleRegion, entry: NodeBase) -> NodeBase:
    """The pseudo-node scheduled in place of ``region`` in its scope."""
    return NodeBase.model_construct(
        id=region.id,
        type="loop_region",
        name=f"loop at {region.entry}",
        description="",
        position=entry.position,
        timeout=None,
        max_retries=0,
        retry_interval=0.0,
        error_strategy=ErrorStrategy.fail,
        default_output=None,
        default_handle=None,
        parent=entry.parent,
        max_iterations=entry.max_iterations,
        config=_RegionConfig(),
    )


# ------------------------------------------------------------------ run side


def move_round_runs(round_state: RunState, target: RunState) -> None:
    """Put a round's node runs into ``target`` (the latest per node); earlier ones go to history."""
    for nid, run in round_state.node_runs.items():
        previous = target.node_runs.get(nid)
        if previous is not None:
            target.history.append(previous)
        target.node_runs[nid] = run
    target.history.extend(round_state.history)


def took(run: NodeRun | None, handle: str) -> bool:
    """True when ``run`` ended taking ``handle`` (succeeded, or failed into its error branch)."""
    return (
        run is not None
        and run.status in (NodeRunStatus.succeeded, NodeRunStatus.failed)
        and handle in run.handles
    )


class RegionExecutor(NodeExecutor[_RegionConfig]):
    """Runs a :class:`CycleRegion` round after round (module docstring, point 2).

    Outputs ``rounds``; takes the exit edges (by id) taken in the last round.

    Raises:
        LoopLimitExceeded: the limit was reached while a back-edge still asked for more.
        RunError: whatever stopped a round (names the member node that failed).
    """

    def __init__(self, node: NodeBase, region: CycleRegion, edges: dict[str, tuple[str, str]]):
        super().__init__(node)
        self.region = region
        #: edge id -> (source node, source handle), for back and exit edges
        self.edges = edges

    async def run(self, ctx: NodeContext) -> NodeResult:
        from .context import NodeResult  # the run context is not loaded to compile

        region, body = self.region, ctx.plan.nodes[self.node.id].body
        assert body is not None
        limit = loop_limit(self.node.max_iterations, ctx.plan.workflow)
        for index in range(limit):
            round_state = ctx.state.child()
            nested = await ctx.scheduler.run_nested(body, round_state, region.id, index)
            move_round_runs(round_state, ctx.state)
            if nested.ending is not None:
                raise nested.ending
            again = any(
                took(round_state.node_runs.get(self.edges[e][0]), self.edges[e][1]) for e in region.back_edges
            )
            ctx.node_run.data["round_count"] = index + 1
            if not again:
                taken = tuple(
                    e
                    for e in region.exit_edges
                    if took(round_state.node_runs.get(self.edges[e][0]), self.edges[e][1])
                )
                return NodeResult({"rounds": index + 1}, handles=taken)
        raise LoopLimitExceeded(
            f"loop at {region.entry!r} reached its limit of {limit} rounds (nodes {', '.join(region.members)}); "
            "raise max_iterations on the entry node or limits.max_loop_iterations",
            node_id=region.entry,
        )
