"""Helpers to build small workflows inline in tests."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from typing import Any

from engine import RunDeps, run_workflow
from schemas.run import RunState
from tests.support.catalog import compile_workflow

__all__ = ["build", "chain_edges", "edge", "node", "run_sync"]


def node(node_id: str, kind: str, config: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A node dict: ``node("t", "template", {"template": "x"}, timeout=1)``."""
    out: dict[str, Any] = {"id": node_id, "type": kind, **fields}
    if config is not None:
        out["config"] = config
    return out


def edge(source: str, target: str, handle: str = "out", edge_id: str | None = None) -> dict[str, Any]:
    """An edge dict; the id defaults to ``source-handle-target``."""
    return {"id": edge_id or f"{source}-{handle}-{target}", "source": source, "sourceHandle": handle, "target": target}


def chain_edges(*ids: str) -> list[dict[str, Any]]:
    """Edges linking ``ids`` in a chain through their ``out`` handles."""
    return [edge(a, b) for a, b in pairwise(ids)]


def build(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """A workflow dict with a start node prepended when ``nodes`` has none."""
    if not any(n["type"] == "start" for n in nodes):
        nodes = [node("start", "start")] + nodes
    return {"id": top.pop("id", "wf"), "name": "test", "nodes": nodes, "edges": edges, **top}


def run_sync(doc: dict[str, Any], inputs: dict[str, Any] | None = None, **deps: Any) -> tuple[RunState, list[Any]]:
    """Compile and run ``doc``; returns the final state and every event."""
    events: list[Any] = []
    plan = compile_workflow(doc)
    state = asyncio.run(run_workflow(plan, inputs or {}, deps=RunDeps(on_event=events.append, **deps)))
    return state, events
