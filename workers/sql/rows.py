"""Conversions between the engine's records and the store's rows.

Rows are plain dicts of column values: the hot path (checkpoints) passes them to Core
statements, so no ORM object is built per write. JSON columns receive Python values
(dicts, lists, pydantic models) and the engine's JSON serializer (pydantic's) encodes
each once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.records import ChatMessage, OwnerInfo, RunSummary
from schemas.run import NodeRun, RunState
from schemas.types import RunStatus

__all__ = [
    "ENDED",
    "RowData",
    "listed_fields",
    "node_run_from_row",
    "node_run_row",
    "owner_from_row",
    "pending_interrupts",
    "run_columns",
    "state_from_row",
    "summary_from_row",
    "message_row",
    "message_from_row",
]

#: A stored row as read (SQLAlchemy's RowMapping, keyed by column names or columns) or as
#: built by hand (a dict keyed by column names).
RowData = Mapping[Any, Any]

#: Statuses of runs that ended (what ``prune`` may delete).
ENDED = (RunStatus.succeeded.value, RunStatus.failed.value, RunStatus.cancelled.value)

#: ``runs`` columns read back into a ``RunState`` (besides the ids).
_STATE_COLUMNS = (
    "workflow_id",
    "workflow_hash",
    "workflow_version",
    "status",
    "inputs",
    "sys",
    "variables",
    "conversation",
    "node_executions",
    "seq",
    "started_at",
    "finished_at",
    "deadline",
    "wall_time_left",
    "paused_at",
    "waited_s",
    "outputs",
    "answer",
    "error",
    "interrupts",
)

#: ``node_runs`` columns that map one to one onto ``NodeRun`` fields.
_NODE_COLUMNS = (
    "node_id",
    "kind",
    "status",
    "inputs",
    "outputs",
    "handles",
    "error",
    "attempts",
    "retries",
    "started_at",
    "finished_at",
    "waited_s",
    "usage",
    "data",
    "loop_id",
    "iteration",
    "pending",
)


def run_columns(state: RunState) -> dict[str, Any]:
    """The ``runs`` columns a checkpoint writes: the state's scalar and JSON fields (not node
    runs, edges, ready or history), plus usage totals once the run is no longer running."""
    sys = state.sys
    values: dict[str, Any] = {
        "status": str(state.status),
        "chat_id": sys.get("chat_id"),
        "user_id": sys.get("user_id"),
        "inputs": state.inputs,
        "sys": sys,
        "variables": state.variables,
        "conversation": state.conversation,
        "interrupts": state.interrupts,
        "outputs": state.outputs,
        "answer": state.answer,
        "error": state.error,
        "node_executions": state.node_executions,
        "seq": state.seq,
        "started_at": state.started_at,
        "finished_at": state.finished_at,
        "deadline": state.deadline,
        "wall_time_left": state.wall_time_left,
        "paused_at": state.paused_at,
        "waited_s": state.waited_s,
    }
    if state.status != RunStatus.running:
        values["tokens_in"], values["tokens_out"], values["cost"] = state.usage_totals()
        spent = state.spent()
        values["usage_estimated"] = spent is not None and spent.estimated
    return values


def node_run_row(
    run_id: str, tenant_id: str, run: NodeRun, *, current: bool, position: int
) -> dict[str, Any]:
    """The ``node_runs`` row of ``run`` (``position`` orders rows of the same ``current`` group)."""
    return {
        "run_id": run_id,
        "node_run_id": run.id,
        "tenant_id": tenant_id,
        "node_id": run.node_id,
        "kind": run.kind,
        "status": str(run.status),
        "current": current,
        "seq": position,
        "inputs": run.inputs,
        "outputs": run.outputs,
        "handles": run.handles,
        "error": run.error,
        "attempts": run.attempts,
        "retries": run.retries,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "waited_s": run.waited_s,
        "usage": run.usage,
        "data": run.data,
        "loop_id": run.loop_id,
        "iteration": run.iteration,
        "pending": run.pending,
    }


def node_run_from_row(row: RowData) -> NodeRun:
    """The ``NodeRun`` of a ``node_runs`` row."""
    fields = {name: row[name] for name in _NODE_COLUMNS}
    fields["id"] = row["node_run_id"]
    fields["inputs"] = fields["inputs"] or {}
    fields["handles"] = fields["handles"] or []
    fields["data"] = fields["data"] or {}
    return NodeRun.model_validate(fields)


def state_from_row(
    row: RowData, node_rows: Sequence[RowData], built: Mapping[str, NodeRun] | None = None
) -> RunState:
    """A ``RunState`` from its ``runs`` row and node-run rows: current rows become
    ``node_runs`` (by node id), the others ``history`` (by position). Edges and the ready
    list stay empty: the scheduler rebuilds them from the plan. ``built``: the node runs
    of ``node_rows`` already made, by node run id (a caller that also lists them shares
    one object per row instead of validating each row twice)."""
    fields = {name: row[name] for name in _STATE_COLUMNS}
    for name in ("inputs", "sys", "variables", "conversation", "outputs", "interrupts"):
        fields[name] = fields[name] or {}
    state = RunState.model_validate({"run_id": row["run_id"], "tenant_id": row["tenant_id"], **fields})
    current = sorted((r for r in node_rows if r["current"]), key=lambda r: (r["seq"], r["node_run_id"]))
    earlier = sorted((r for r in node_rows if not r["current"]), key=lambda r: (r["seq"], r["node_run_id"]))
    if built is None:
        state.node_runs = {r["node_id"]: node_run_from_row(r) for r in current}
        state.history = [node_run_from_row(r) for r in earlier]
    else:
        state.node_runs = {r["node_id"]: built[r["node_run_id"]] for r in current}
        state.history = [built[r["node_run_id"]] for r in earlier]
    return state


def owner_from_row(row: RowData) -> OwnerInfo | None:
    """The run's owner, or None when nobody holds it."""
    if row["owner_id"] is None:
        return None
    return OwnerInfo(
        id=row["owner_id"],
        host=row["owner_host"] or "",
        pid=row["owner_pid"] or 0,
        lease_until=row["lease_until"] or 0.0,
    )


def pending_interrupts(interrupts: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The unanswered interrupts of a ``runs.interrupts`` value, as ``{id, node_id, kind, payload}``."""
    return [
        {
            "id": item["id"],
            "node_id": item["node_id"],
            "kind": item["kind"],
            "payload": item.get("payload") or {},
        }
        for item in (interrupts or {}).values()
        if not item.get("answered")
    ]


def summary_from_row(row: RowData) -> RunSummary:
    """The ``RunSummary`` of a ``runs`` row. A run without a chat has ``chat_id`` None: inside
    the run ``sys.chat_id`` is the run id (so templates always have one), and the column
    keeps that, but what a record shows is whether the run belongs to a chat."""
    chat_id = row["chat_id"] if row["chat_id"] != row["run_id"] else None
    return RunSummary(
        run_id=row["run_id"],
        tenant_id=row["tenant_id"],
        workflow_id=row["workflow_id"],
        workflow_version=row["workflow_version"],
        workflow_hash=row["workflow_hash"],
        status=row["status"],
        chat_id=chat_id,
        user_id=row["user_id"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        waited_s=row["waited_s"],
        tokens_in=row["tokens_in"],
        tokens_out=row["tokens_out"],
        cost=row["cost"],
        error=row["error"],
        usage_estimated=bool(row["usage_estimated"]),
        owner=owner_from_row(row),
        pending_interrupts=pending_interrupts(row["interrupts"]),
        **listed_fields(row),
    )


#: characters of a run's preview (its message or first input) in a list
_PREVIEW_CHARS = 120


def listed_fields(row: RowData) -> dict[str, Any]:
    """``kind``, ``node_id`` and ``preview`` of a run row: from its ``sys`` value when the
    row has it (a whole row), else from the ``sys_*`` columns a list selects. The
    preview is the user's message, else the first input, as text, cut to 120 characters."""
    sys = row["sys"] if "sys" in row.keys() else None
    if isinstance(sys, Mapping):
        kind, node, query = sys.get("run_kind"), sys.get("single_node"), sys.get("query")
    else:
        kind, node, query = (row.get("sys_run_kind"), row.get("sys_single_node"), row.get("sys_query"))
    text = query if isinstance(query, str) and query.strip() else None
    inputs = row.get("inputs")
    if text is None and isinstance(inputs, Mapping):
        first = next((v for v in inputs.values() if v not in (None, "", [], {})), None)
        if first is not None:
            text = first if isinstance(first, str) else json.dumps(first, ensure_ascii=False)
    preview = (
        None if text is None else (text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…")
    )
    return {"kind": kind or "workflow", "node_id": node, "preview": preview}


def message_row(message: ChatMessage) -> dict[str, Any]:
    """The ``messages`` row of ``message``."""
    return {
        "id": message.id,
        "tenant_id": message.tenant_id,
        "chat_id": message.chat_id,
        "role": message.role,
        "run_id": message.run_id,
        "status": str(message.status),
        "parts": message.parts,
        "created_at": message.created_at,
        "updated_at": message.updated_at,
    }


def message_from_row(row: RowData) -> ChatMessage:
    """The ``ChatMessage`` of a ``messages`` row."""
    return ChatMessage.model_validate(
        {
            name: row[name]
            for name in (
                "id",
                "tenant_id",
                "chat_id",
                "role",
                "run_id",
                "status",
                "parts",
                "created_at",
                "updated_at",
            )
        }
    )
