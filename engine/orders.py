"""Topological orders of a compiled workflow's networkx graph, node for node the orders
networkx's own sorts give, computed from the graph's adjacency dicts.

networkx's sorts are generators that look nodes and successors up through views: on a
5000-node chain they were the largest single step of the compile after validation and
the graph build. The graph stays networkx's; only the walk over it is ours, and it must
not differ, since plans, answer streams and node-run order follow these orders.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from itertools import chain
from typing import Any

import networkx as nx

__all__ = ["lexicographical_order", "topological_order"]

_CYCLE = "Graph contains a cycle or graph changed during iteration"


def _indegrees(succ: dict[Any, dict[Any, Any]]) -> dict[Any, int]:
    """Node -> number of predecessors, for the nodes that have any."""
    return dict(Counter(chain.from_iterable(succ.values())))


def topological_order(graph: nx.DiGraph) -> list[str]:
    """The nodes of ``graph`` in the order ``list(nx.topological_sort(graph))`` gives: its
    generations (Kahn's algorithm), each in the order networkx keeps nodes and successors.

    The same order, from networkx's own adjacency dicts without a generator per
    generation (a 5000-node chain has 5000 one-node generations). Plans, streams and
    node-run order follow it, so it must not differ from networkx's.

    Raises:
        networkx.NetworkXUnfeasible: the graph has a cycle.
    """
    succ = dict(graph.adjacency())
    indegree = _indegrees(succ)
    order = [node for node in graph if node not in indegree]
    for node in order:  # grows while it is read: each generation follows the one before
        for child in succ[node]:
            left = indegree[child] - 1
            if left:
                indegree[child] = left
            else:
                del indegree[child]
                order.append(child)
    if indegree:
        raise nx.NetworkXUnfeasible(_CYCLE)
    return order


def lexicographical_order(graph: nx.DiGraph, key: Callable[[Any], Any]) -> list[Any]:
    """The nodes of ``graph`` in the order ``list(nx.lexicographical_topological_sort(graph,
    key=key))`` gives: of the nodes ready at each step, the one with the smallest
    ``(key(node), position in the graph)`` first.

    Raises:
        networkx.NetworkXUnfeasible: the graph has a cycle.
    """
    succ = dict(graph.adjacency())
    indegree = _indegrees(succ)
    position = {node: i for i, node in enumerate(graph)}
    ready = [(key(node), position[node], node) for node in graph if node not in indegree]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)[2]
        order.append(node)
        for child in succ[node]:
            left = indegree[child] - 1
            if left:
                indegree[child] = left
            else:
                del indegree[child]
                heapq.heappush(ready, (key(child), position[child], child))
    if indegree:
        raise nx.NetworkXUnfeasible(_CYCLE)
    return order
