"""The first detail of a run that ended in this store is answered from what its last
checkpoint committed (no read), and is what a read of the database returns."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from engine.ports import CheckpointDelta, RunNotFound
from schemas.run import Interrupt, NodeError, NodeRun, Usage
from workers.sql import SqlStore
from workers.sql.checkpoint import _raw_connection

from .conftest import new_state, owner


async def _reads(store) -> list[str]:
    """The SELECTs the store's own connection sends from now on."""
    driver = (await _raw_connection(await store._connection())).driver_connection
    seen: list[str] = []
    if store.backend == "sqlite":
        driver._conn.set_trace_callback(lambda sql: seen.append(sql) if sql.lstrip().upper().startswith("SELECT")
                                        else None)
    else:  # PostgreSQL reads go through SQLAlchemy
        sa.event.listen(store._engine.sync_engine, "before_cursor_execute",
                        lambda _c, _k, sql, *_a: seen.append(sql) if sql.lstrip().upper().startswith("SELECT")
                        else None)
    return seen


async def _ended_run(store) -> str:
    state = new_state(inputs={"q": "hi"}, sys={"chat_id": "c9", "user_id": "u1"}, variables={"n": 1})
    await store.create_run(state, owner=owner())
    rid = state.run_id
    state.node_runs["start"] = NodeRun(id=f"{rid}:start", node_id="start", kind="start", status="succeeded",
                                       outputs={"q": "hi"}, handles=["out"], started_at=1.0, finished_at=1.5,
                                       attempts=1)
    state.node_runs["body"] = NodeRun(id=f"{rid}:L#0:body", node_id="body", kind="template", status="succeeded",
                                      outputs={"output": "round 0"}, started_at=2.0, finished_at=2.5, loop_id="L",
                                      iteration=0, attempts=1)
    await store.checkpoint(state, CheckpointDelta(["start", "body"]), owner_id="owner-1")
    state.history.append(state.node_runs["body"])
    state.node_runs["body"] = NodeRun(id=f"{rid}:L#1:body", node_id="body", kind="template", status="succeeded",
                                      outputs={"output": "round 1"}, started_at=3.0, finished_at=3.5, loop_id="L",
                                      iteration=1, attempts=1)
    state.node_runs["llm"] = NodeRun(id=f"{rid}:llm", node_id="llm", kind="chat", status="failed", attempts=2,
                                     retries=1, started_at=4.0, finished_at=5.0,
                                     error=NodeError(type="X", message="boom", reason="http_error"),
                                     usage=Usage(model="m", tokens_in=3, tokens_out=4, cost=0.5),
                                     data={"raw": [{"a": 1}]})
    state.interrupts["i1"] = Interrupt(id="i1", node_id="llm", node_run_id=f"{rid}:llm", kind="user_select",
                                       payload={"options": [{"id": "a", "label": "A"}]}, created_at=4.5, answered=True, answer="a")
    state.status, state.finished_at, state.seq, state.node_executions = "failed", time.time(), 9, 4
    state.error = NodeError(type="X", message="boom", reason="http_error", node_id="llm")
    state.outputs, state.answer = {"partial": [1, 2]}, "so far"
    await store.checkpoint(state, CheckpointDelta(["body", "llm"], 0), owner_id="owner-1", release=True)
    return rid


async def test_the_first_detail_of_a_run_that_ended_here_needs_no_read_and_equals_the_stored_rows(store,
                                                                                                 database_url):
    run_id = await _ended_run(store)
    reads = await _reads(store)
    kept = await store.load_detail("default", run_id)
    assert reads == [], "answered from the last checkpoint's rows"
    again = await store.load_detail("default", run_id)  # later ones read the database
    assert reads, "only the first detail comes from memory"
    other = await SqlStore.open(database_url)
    try:
        fresh = await other.load_detail("default", run_id)
    finally:
        await other.close()
    for read in (again, fresh):
        assert kept[0] == read[0]
        assert kept[1] == read[1]
        assert kept[2] == read[2]
    summary, state, node_runs = kept
    assert summary.owner is None and summary.status.value == "failed" and (summary.tokens_in, summary.cost) == (3, 0.5)
    assert [r.id.rsplit(":", 1)[-1] for r in node_runs] == ["start", "body", "body", "llm"]
    assert [r.iteration for r in state.history] == [0] and state.node_runs["body"].iteration == 1


async def test_a_pruned_run_is_not_answered_from_memory(store):
    run_id = await _ended_run(store)
    assert await store.prune("default", time.time() + 60) >= 1
    with pytest.raises(RunNotFound):
        await store.load_detail("default", run_id)
