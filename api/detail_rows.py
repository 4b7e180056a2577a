"""A run's detail answer (``RunDetail``) built straight from its stored rows.

The answer of a blocking run start and of ``GET /v1/runs/{id}`` is the run's row and its
node-run rows made into models (a ``RunSummary``, a ``RunState`` and a ``NodeRun`` per
row, each validated: :meth:`~workers.sql.run_reads.RunReads.detail_of_rows`) only to be
dumped again in JSON mode (:func:`api.responses.run_detail_body`). For a plumbing run that
is about a tenth of the server's instructions per run. Validating then dumping gives back
unchanged a value that is already what both would make of it: a string, an exact ``int``
(not a bool) where the model has an ``int``, an exact ``float`` where it has a ``float``,
None where it allows None, and the JSON-decoded containers of fields typed ``Any`` (the
rows' JSON columns went through JSON, so their keys are strings and their values JSON's).

:func:`detail_body_of_rows` takes such values as they are and answers None as soon as a
value the answer shows or the models check is of another kind (an ``int`` in a ``float``
field, an error, a pending question, citations...): the caller then goes through the
models, which also raise what they raised before for a row they refuse. A node run with
an error, a usage, records in ``data`` or a continuation is made from its model, the
others straight from their row. ``tests/api/test_detail_rows.py`` holds the two ways
equal, byte for byte once encoded, and the fallback taken wherever the models differ.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.types import NodeRunStatus, RunStatus
from workers.sql.rows import listed_fields, node_run_from_row

from .responses import node_run_body

__all__ = ["detail_body_of_rows"]

_RUN_STATUSES = frozenset(status.value for status in RunStatus)
_NODE_STATUSES = frozenset(status.value for status in NodeRunStatus)
_NONE = type(None)
_STR = (str,)
_STR_OR_NONE = (str, _NONE)
_INT = (int,)
_INT_OR_NONE = (int, _NONE)
_FLOAT = (float,)
_FLOAT_OR_NONE = (float, _NONE)
_DICT_OR_NONE = (dict, _NONE)

#: the run row's columns that ``RunSummary`` and ``RunState`` validate -> the exact types
#: they keep as they are
_RUN_COLUMNS: tuple[tuple[str, tuple[type, ...]], ...] = (
    *((c, _STR) for c in ("run_id", "tenant_id", "workflow_id", "workflow_hash", "status", "answer")),
    *((c, _STR_OR_NONE) for c in ("workflow_version", "chat_id", "user_id")),
    *((c, _FLOAT) for c in ("created_at", "waited_s", "cost")),
    *((c, _FLOAT_OR_NONE) for c in ("started_at", "finished_at", "deadline", "wall_time_left", "paused_at")),
    *((c, _INT) for c in ("tokens_in", "tokens_out", "node_executions", "seq")),
    *((c, _DICT_OR_NONE) for c in ("interrupts", "inputs", "sys", "variables", "conversation", "outputs")),
)
#: the same for a node run's row and ``NodeRun``
_NODE_COLUMNS: tuple[tuple[str, tuple[type, ...]], ...] = (
    *((c, _STR) for c in ("node_run_id", "node_id", "kind", "status")),
    *((c, _DICT_OR_NONE) for c in ("inputs", "outputs")),
    *((c, _INT) for c in ("attempts", "retries")),
    *((c, _FLOAT_OR_NONE) for c in ("started_at", "finished_at")),
    ("waited_s", _FLOAT),
    ("loop_id", _STR_OR_NONE),
    ("iteration", _INT_OR_NONE),
)


def _typed(row: Mapping[str, Any], columns: tuple[tuple[str, tuple[type, ...]], ...]) -> bool:
    """Every column of ``columns`` holds a value of exactly one of its types
    (``type(value) in ...``: a bool is no ``int``, an ``int`` no ``float``)."""
    return all(type(row[column]) in kinds for column, kinds in columns)


def _run_row_plain(row: Mapping[str, Any]) -> bool:
    """Every value of the run's row that ``RunSummary`` and ``RunState`` validate is one
    they keep as it is; no error, no unanswered question; an owner that validates."""
    return (
        _typed(row, _RUN_COLUMNS)
        and row["status"] in _RUN_STATUSES
        and row["error"] is None
        and not row["interrupts"]
        and (row["owner_id"] is None or _owner_valid(row))
    )


def _owner_valid(row: Mapping[str, Any]) -> bool:
    """The run's owner is one whose ``OwnerInfo`` validates (it is not shown)."""
    return (
        type(row["owner_id"]) is str
        and type(row["owner_host"]) in _STR_OR_NONE
        and type(row["owner_pid"]) in _INT_OR_NONE
        and type(row["lease_until"]) in (float, int, _NONE)
    )


def _run_part(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``run_body(summary_from_row(row))``: the ``RunOut`` fields in the summary's field
    order, ``duration_s`` last; None when a value is not plain (module docstring)."""
    if not _run_row_plain(row):
        return None
    listed = listed_fields(row)
    if type(listed["kind"]) is not str or type(listed["node_id"]) not in _STR_OR_NONE:
        return None
    started, finished, waited = row["started_at"], row["finished_at"], row["waited_s"]
    if started is None:
        duration = None
    else:
        duration = max(0.0, (finished if finished is not None else time.time()) - started - waited)
    return {
        "run_id": row["run_id"],
        "workflow_id": row["workflow_id"],
        "workflow_version": row["workflow_version"],
        "workflow_hash": row["workflow_hash"],
        "status": row["status"],
        "chat_id": row["chat_id"] if row["chat_id"] != row["run_id"] else None,
        "user_id": row["user_id"],
        "created_at": row["created_at"],
        "started_at": started,
        "finished_at": finished,
        "waited_s": waited,
        "tokens_in": row["tokens_in"],
        "tokens_out": row["tokens_out"],
        "cost": row["cost"],
        "usage_estimated": False,  # set from the node runs below, as run_detail_body does
        "error": None,
        "pending_interrupts": [],
        "kind": listed["kind"],
        "node_id": listed["node_id"],
        "preview": listed["preview"],
        "duration_s": duration,
    }


def _node_part(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``node_run_body(node_run_from_row(row))`` for a node run with no error, usage,
    records or continuation whose values are plain; None otherwise."""
    handles, data = row["handles"], row["data"]
    if not (
        _typed(row, _NODE_COLUMNS)
        and row["status"] in _NODE_STATUSES
        and (handles is None or (type(handles) is list and all(type(h) is str for h in handles)))
        and row["error"] is None
        and row["usage"] is None
        and row["pending"] is None
        and (data is None or (type(data) is dict and not data))
    ):
        return None
    started, finished, waited = row["started_at"], row["finished_at"], row["waited_s"]
    return {
        "id": row["node_run_id"],
        "node_id": row["node_id"],
        "kind": row["kind"],
        "status": row["status"],
        "inputs": row["inputs"] or {},
        "outputs": row["outputs"],
        "handles": handles or [],
        "error": None,
        "attempts": row["attempts"],
        "retries": row["retries"],
        "started_at": started,
        "finished_at": finished,
        "usage": None,
        "data": {},
        "loop_id": row["loop_id"],
        "iteration": row["iteration"],
        "waited_s": waited,
        "duration_s": max(0.0, finished - started - waited)
        if started is not None and finished is not None
        else None,
        "reused_from": None,
    }


def _cites(row: Mapping[str, Any]) -> bool:
    """The node run may hold citations (``run_citations`` reads a ``citations`` list)."""
    outputs = row["outputs"]
    return isinstance(outputs, dict) and isinstance(outputs.get("citations"), list)


def detail_body_of_rows(
    row: Mapping[str, Any], node_rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """``run_detail_body(*detail_of_rows(row, node_rows))`` - the same keys in the same
    order, the same values - made without the run's models; None when the run's row is
    not plain or a node run may cite (module docstring). ``node_rows``: in start order
    (``load_detail_rows``)."""
    body = _run_part(row)
    if body is None or any(_cites(node_row) for node_row in node_rows):
        return None
    nodes = []
    estimated = False
    for node_row in node_rows:
        part = _node_part(node_row)
        if part is None:  # its model, as the answer would make it
            run = node_run_from_row(node_row)
            estimated = estimated or (run.usage is not None and run.usage.estimated)
            part = node_run_body(run)
        nodes.append(part)
    sys = row["sys"] or {}
    body.update(
        inputs=row["inputs"] or {},
        outputs=row["outputs"] or {},
        answer=row["answer"],
        node_runs=nodes,
        rerun_of=sys.get("rerun_of"),
        rerun_from=sys.get("rerun_from"),
        citations=[],
        usage_estimated=estimated,
    )
    return body
