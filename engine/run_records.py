"""The records a run's scheduler writes beside running nodes: node run ids, error
records, the size of outputs against their caps, and the edge statuses a restored run
derives from its node runs (the scheduler's rules: engine/scheduler.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas.run import EdgeStatus, NodeError, RunState
from schemas.types import NodeRunStatus

from .errors import RunError

if TYPE_CHECKING:
    from .compiler import CompiledPlan

__all__ = ["derive_edges", "error_record", "id_part", "size_over", "wrap_error"]

_TAKEN, _SKIPPED, _PENDING = EdgeStatus.taken, EdgeStatus.skipped, EdgeStatus.pending


def size_over(value: Any, cap: int) -> int:
    """Approximate serialised size of ``value`` (string bytes, 8 per other scalar), walking
    no further than ``cap``: the returned size is exact up to ``cap`` and > ``cap`` beyond."""
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, dict):
            stack.extend(item.values())
            size += 8 + sum(len(k) if isinstance(k, str) else 8 for k in item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
            size += 8
        elif isinstance(item, (bytes, bytearray)):
            size += len(item)
        else:
            size += 8
        if size > cap:
            return size
    return size


_ESCAPES = str.maketrans({"%": "%25", ":": "%3A", "#": "%23"})


def id_part(node_id: str) -> str:
    """``node_id`` as a part of a node run id (escaped only when it holds ``%``, ``:`` or ``#``)."""
    if "%" in node_id or ":" in node_id or "#" in node_id:
        return node_id.translate(_ESCAPES)
    return node_id


def wrap_error(error: BaseException, node_id: str) -> RunError:
    wrapped = RunError(f"{type(error).__name__}: {error}", node_id=node_id)
    wrapped.__cause__ = error
    return wrapped


def error_record(error: BaseException, node_id: str | None) -> NodeError:
    if isinstance(error, RunError):
        return NodeError(
            type=type(error).__name__,
            message=str(error),
            node_id=error.node_id or node_id,
            reason=error.reason,
            details=error.details,
        )
    return NodeError(
        type=type(error).__name__,
        message=str(error) or type(error).__name__,
        node_id=node_id,
        reason="node_error",
    )


_RESOLVED = (NodeRunStatus.succeeded, NodeRunStatus.skipped)


def derive_edges(plan: CompiledPlan, state: RunState) -> None:
    """Rebuild ``state.edges`` of the top-level scope from its node runs.

    An edge is resolved exactly when its source node resolved: taken when the source
    succeeded (or failed into its error branch) with the edge's handle among the
    handles it took, skipped when it resolved otherwise (a skipped source skips all);
    pending while the source has not resolved (absent, running, waiting, or failed or
    cancelled without taking a handle). This is what the scheduler wrote while the run
    was live, so checkpoints need not store edges.
    """
    edges: dict[str, EdgeStatus] = {}
    runs = state.node_runs
    for nid, node_plan in plan.nodes.items():
        run = runs.get(nid)
        resolved = run is not None and (
            run.status in _RESOLVED or (run.status is NodeRunStatus.failed and run.handles)
        )
        for eid, handle, _target in node_plan.out_edges:
            if not resolved:
                edges[eid] = _PENDING
            else:
                assert run is not None
                edges[eid] = (
                    _TAKEN if run.status is not NodeRunStatus.skipped and handle in run.handles else _SKIPPED
                )
        for eid in node_plan.in_edges:
            edges.setdefault(eid, _PENDING)
    state.edges = edges
