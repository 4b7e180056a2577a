"""The compiler's graph is the one networkx's own calls build: same nodes, same successor
and predecessor order, one attribute dict per edge shared by both directions, and a graph
that networkx's methods then change as any other."""

from __future__ import annotations

from typing import Any

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.graph_checks import _digraph


def _layout(graph: nx.DiGraph) -> list[Any]:
    """Everything order- and identity-sensitive a caller can see of ``graph``."""
    return [
        list(graph.nodes(data=True)),
        [(u, list(nbrs.items())) for u, nbrs in graph.succ.items()],
        [(v, list(nbrs.items())) for v, nbrs in graph.pred.items()],
        [graph.succ[u][v] is graph.pred[v][u] for u, v in graph.edges],
    ]


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[str], dict[tuple[str, str], list[tuple[str, str]]]]:
    """Node ids (repeats included: the first occurrence counts) and pairs between them (self-loops included)."""
    names = [f"n{i}" for i in range(draw(st.integers(0, 10)))]
    if not names:
        return [], {}
    nodes = draw(st.lists(st.sampled_from(names), max_size=14)) + names
    keys = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names)), max_size=25, unique=True))
    return nodes, {key: [(f"e{i}", "out")] for i, key in enumerate(keys)}


@settings(max_examples=300, deadline=None)
@given(inputs())
def test_the_graph_is_the_one_networkx_builds(
    found: tuple[list[str], dict[tuple[str, str], list[tuple[str, str]]]],
) -> None:
    nodes, pairs = found
    expected: nx.DiGraph = nx.DiGraph()
    expected.add_nodes_from(nodes)
    expected.add_edges_from((u, v, {"edges": ids}) for (u, v), ids in pairs.items())
    graph = _digraph(nodes, pairs)
    assert _layout(graph) == _layout(expected)
    for (u, v), ids in pairs.items():
        assert graph[u][v]["edges"] is ids  # the list itself, as add_edges_from keeps it


def test_networkx_changes_the_graph_as_its_own() -> None:
    graph = _digraph(["a", "b", "c"], {("a", "b"): [("e1", "out")]})
    assert list(graph.edges) == [("a", "b")]  # a view made before the change must not go stale
    graph.add_edge("b", "c", edges=[])
    graph.remove_edge("a", "b")
    assert list(graph.edges) == [("b", "c")]
    assert list(graph.predecessors("c")) == ["b"] and not list(graph.predecessors("b"))
    assert list(nx.topological_sort(graph)) == ["a", "b", "c"]
