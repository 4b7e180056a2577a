"""The compiler's topological orders are networkx's, node for node, and fail on a cycle as its sorts do."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.orders import lexicographical_order, topological_order


@st.composite
def graphs(draw: st.DrawFn) -> nx.DiGraph:
    """A digraph with nodes added in a shuffled order, edges in any order (cycles, self-loops included)."""
    n = draw(st.integers(0, 12))
    if not n:
        return nx.DiGraph()
    names = draw(st.permutations([f"n{i}" for i in range(n)]))
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(names[: draw(st.integers(0, n))])  # the rest arrive with their edges
    pairs = st.tuples(st.sampled_from(names), st.sampled_from(names))
    graph.add_edges_from(draw(st.lists(pairs, max_size=30)))
    graph.add_nodes_from(names)
    return graph


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_the_order_is_networkx_order_or_both_find_a_cycle(graph: nx.DiGraph) -> None:
    try:
        expected = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        with pytest.raises(nx.NetworkXUnfeasible):
            topological_order(graph)
    else:
        assert topological_order(graph) == expected


def test_a_diamond_keeps_insertion_order_within_a_generation() -> None:
    graph: nx.DiGraph = nx.DiGraph([("s", "b"), ("s", "a"), ("a", "j"), ("b", "j"), ("x", "j")])
    assert topological_order(graph) == ["s", "x", "b", "a", "j"] == list(nx.topological_sort(graph))


def test_a_cycle_raises_what_networkx_raises() -> None:
    graph: nx.DiGraph = nx.DiGraph([("s", "a"), ("a", "b"), ("b", "a")])
    with pytest.raises(nx.NetworkXUnfeasible, match="contains a cycle"):
        topological_order(graph)


@settings(max_examples=300, deadline=None)
@given(graphs(), st.data())
def test_the_lexicographical_order_is_networkx_order_or_both_find_a_cycle(
    graph: nx.DiGraph, data: st.DataObject
) -> None:
    ranks = {node: data.draw(st.integers(-1, 3)) for node in graph}  # ties: the graph's order decides
    try:
        expected = list(nx.lexicographical_topological_sort(graph, key=ranks.__getitem__))
    except nx.NetworkXUnfeasible:
        with pytest.raises(nx.NetworkXUnfeasible):
            lexicographical_order(graph, ranks.__getitem__)
    else:
        assert lexicographical_order(graph, ranks.__getitem__) == expected
