"""The bench-only node kind ``noop`` and the no-op chain the engine and durable benches run.

Import after ``_checkout`` (which makes ``engine``, ``nodes`` and ``schemas`` this checkout's).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from engine import KindSpec, NodeCatalog, NodeExecutor, NodeResult
from nodes import builtin_catalog
from schemas.nodes import NodeConfig, node_kind

__all__ = ["BENCH_CATALOG", "NoopConfig", "NoopNode", "chain_ids", "flowloom_chain"]


@node_kind("noop", "No-op")
class NoopConfig(NodeConfig):
    """Bench-only node kind: no fields, no outputs."""


class NoopNode(NodeExecutor[NoopConfig], kind="noop"):
    """Does nothing; takes the ``out`` handle."""

    async def run(self, ctx: Any) -> NodeResult:
        """Return no outputs (the ``out`` handle is taken)."""
        return NodeResult({})


#: The built-in kinds plus the bench-only ``noop`` kind; every bench plan compiles against it.
BENCH_CATALOG: NodeCatalog = builtin_catalog().with_kinds(KindSpec("noop", NoopConfig, NoopNode))


def chain_ids(n: int) -> list[str]:
    """``start, n1, ..., n{n-1}``: n nodes."""
    return ["start"] + [f"n{i}" for i in range(1, n)]


def flowloom_chain(n: int) -> dict[str, Any]:
    """The n-node chain ``start -> n1 -> ... -> n{n-1}`` as a Flowloom workflow document."""
    ids = chain_ids(n)
    nodes = [{"id": "start", "type": "start"}] + [{"id": nid, "type": "noop"} for nid in ids[1:]]
    edges = [{"id": f"e{i}", "source": a, "target": b} for i, (a, b) in enumerate(pairwise(ids))]
    return {"id": f"chain{n}", "name": "bench chain", "nodes": nodes, "edges": edges}
