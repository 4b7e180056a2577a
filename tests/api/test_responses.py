"""The run routes' JSON bodies (:mod:`api.responses`) are the documented models' dumps:
a run detail built from the records equals ``RunDetail.build(...)`` in JSON mode, for
node runs with errors, usage, loop rounds, a reused result, citations and big numbers."""

from __future__ import annotations

import json

from api.responses import JsonBody, run_detail_body
from schemas.api import RunDetail
from schemas.records import OwnerInfo, RunSummary
from schemas.run import NodeError, NodeRun, RunState, Usage
from schemas.types import NodeRunStatus, RunStatus

CITATION = {"citation_id": "1", "chunk_id": "c1", "dataset_id": "d", "document_id": "doc", "source_name": "a.md",
            "position": 0, "score": 0.5, "text": "quoted"}


def records() -> tuple[RunSummary, RunState, list[NodeRun]]:
    summary = RunSummary(run_id="r1", tenant_id="t", workflow_id="w", workflow_version="3", workflow_hash="h",
                         status=RunStatus.failed, created_at=1.0, started_at=2.0, finished_at=5.5, waited_s=1.0,
                         tokens_in=7, error={"type": "X", "message": "boom"},
                         owner=OwnerInfo(id="o", host="h", pid=1, lease_until=9.0),
                         pending_interrupts=[{"id": "i1", "node_id": "agent", "kind": "ask",
                                                          "payload": {"question": "which city?"}}])
    runs = [NodeRun(id="n1", node_id="llm", kind="chat", status=NodeRunStatus.succeeded, inputs={"q": "é ✓"},
                    outputs={"answer": "a", "citations": [CITATION, {"not": "a citation"}], "big": 10**20},
                    handles=["out"], attempts=2, retries=1, started_at=2.0, finished_at=3.0,
                    usage=Usage(model="m", tokens_in=7, cost=0.25), data={"raw": [1, None, 2.5]}),
            NodeRun(id="n2", node_id="body", kind="template", status=NodeRunStatus.failed, started_at=3.0,
                    error=NodeError(type="TemplateFailed", message="m", node_id="body", details={"k": 1}),
                    loop_id="loop", iteration=4, waited_s=0.5, finished_at=4.0,
                    data={"reused_from": {"node_run_id": "old", "run_id": "r0"}}),
            NodeRun(id="n3", node_id="wait", kind="ask", status=NodeRunStatus.pending)]
    state = RunState(run_id="r1", workflow_id="w", workflow_hash="h", inputs={"name": "Ada", "n": 10**19 + 1},
                     sys={"rerun_of": "r0", "rerun_from": "body"}, outputs={"x": [1.5, True, None]}, answer="ok",
                     node_runs={run.node_id: run for run in runs})
    return summary, state, runs


def test_a_run_detail_body_is_the_models_dump():
    summary, state, runs = records()
    body = run_detail_body(summary, state, runs)
    assert body == RunDetail.build(summary, state, runs).model_dump(mode="json")
    assert json.loads(JsonBody(body).body) == body  # big integers are written whole
    assert body["node_runs"][1]["reused_from"] == "old" and body["citations"][0]["citation_id"] == "1"
    assert "owner" not in body and "tenant_id" not in body and all("pending" not in n for n in body["node_runs"])


def test_a_run_without_node_runs():
    summary, state, _runs = records()
    state.node_runs, state.sys = {}, {}
    summary = summary.model_copy(update={"started_at": None, "finished_at": None, "error": None})
    assert run_detail_body(summary, state, []) == RunDetail.build(summary, state, []).model_dump(mode="json")
