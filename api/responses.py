"""JSON answers of the run routes, built once and encoded once.

A route that returns a pydantic model has FastAPI validate it against the route's
``response_model`` and serialize it again; for a run that is a model per node run built
from a dump of the engine's record, validated, then dumped once more. Here the body is
the engine's records dumped once (pydantic's JSON mode: the same values the models would
give) into the shape the route documents (``RunDetail``, ``RunAccepted``), and encoded by
orjson. ``tests/api/test_responses.py`` holds the shapes equal to the models'.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import pydantic_core
from starlette.responses import Response

from schemas.api import NodeRunOut, RunOut
from schemas.knowledge import run_citations
from schemas.records import RunSummary
from schemas.run import NodeRun, RunState

__all__ = ["JsonBody", "node_run_body", "run_body", "run_detail_body"]

#: the fields of a node run an answer shows (the model's, less what is computed here)
_NODE_FIELDS = set(NodeRunOut.model_fields) - {"duration_s", "reused_from"}
#: the fields of a run summary an answer shows
_RUN_FIELDS = set(RunOut.model_fields) - {"duration_s"}


class JsonBody(Response):
    """``application/json`` of a JSON-ready value (dicts, lists, strings, numbers, None),
    encoded by orjson; an integer past 64 bits (which orjson refuses) falls back to
    pydantic's encoder, which writes it whole, as the models would."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # orjson.JSONEncodeError: a big integer
            return pydantic_core.to_json(content)


def node_run_body(run: NodeRun) -> dict[str, Any]:
    """``NodeRunOut.of(run)`` as JSON-ready data."""
    body = run.model_dump(mode="json", include=_NODE_FIELDS)
    mark = run.data.get("reused_from")
    body["duration_s"] = (
        max(0.0, run.finished_at - run.started_at - run.waited_s)
        if run.started_at is not None and run.finished_at is not None
        else None
    )
    body["reused_from"] = mark.get("node_run_id") if isinstance(mark, dict) else None
    return body


def run_body(summary: RunSummary) -> dict[str, Any]:
    """``RunOut.of(summary)`` as JSON-ready data."""
    body = summary.model_dump(mode="json", include=_RUN_FIELDS)
    body["duration_s"] = summary.duration_s
    return body


def run_detail_body(summary: RunSummary, state: RunState, node_runs: Iterable[NodeRun]) -> dict[str, Any]:
    """``RunDetail.build(summary, state, node_runs)`` as JSON-ready data."""
    runs = list(node_runs)
    body = run_body(summary)
    body.update(
        inputs=pydantic_core.to_jsonable_python(state.inputs),
        outputs=pydantic_core.to_jsonable_python(state.outputs),
        answer=state.answer,
        node_runs=[node_run_body(run) for run in runs],
        rerun_of=state.sys.get("rerun_of"),
        rerun_from=state.sys.get("rerun_from"),
        citations=[piece.model_dump(mode="json") for piece in run_citations(runs)],
        usage_estimated=any(run.usage is not None and run.usage.estimated for run in runs),
    )
    return body
