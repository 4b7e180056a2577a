"""What a rerun and a run say: a branch that is skipped never speaks - in a rerun from a
node after a router (the reused router decides the branches, the stream must learn the
skips before it opens any answer), nor in a run whose answer no edge reaches. Through
the run service over the real SQL stores (SQLite file and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.service import RunService, Stores
from engine.settings import Settings
from nodes.llm.model_registry import get_registry
from schemas.types import NodeRunStatus, RunStatus
from tests.support.catalog import TEST_CATALOG
from tests.support.workflows import build, edge, node, run_sync
from workers.sql import SqlStore

GREETING = "Hello! How can I help you today?"


@pytest.fixture
async def service(database_url, tmp_path) -> Any:
    store = await SqlStore.open(database_url)
    yield RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                     settings=Settings(home=tmp_path), models=get_registry())
    await store.close()


def router(fail_times: int) -> dict[str, Any]:
    """start -> route: an empty city greets, else ``fetch`` (a probe failing
    ``fail_times`` attempts) -> the weather answer."""
    return build([node("route", "if_else", {"cases": [{"id": "greet", "conditions": [
                      {"left": {"ref": "inputs.city"}, "operator": "equals", "right": ""}]}]}),
                  node("hello", "answer", {"text": GREETING}),
                  node("fetch", "probe", {"fail_times": fail_times, "value": "sunny, 21 C"}),
                  node("say", "answer", {"text": "Weather in the city: {{ fetch.value }}."})],
                 [edge("start", "route"), edge("route", "hello", "greet"), edge("route", "fetch", "else"),
                  edge("fetch", "say")],
                 inputs=[{"name": "city", "type": "string", "default": ""}])


def said(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.node_id, e.text) for e in events if e.type == "node_delta" and e.channel == "answer"]


async def test_a_rerun_after_a_router_never_speaks_for_the_branch_it_skipped(service):
    first = [e async for e in service.start(router(fail_times=5), {"city": "Paris"})]
    assert first[-1].type == "run_failed" and first[-1].error.node_id == "fetch"
    old = await service.state("default", first[0].run_id)
    assert old.node_runs["hello"].status is NodeRunStatus.skipped
    assert old.answer == "Weather in the city: ", "the literal part before the failed node was sent"

    state, events = await service.rerun_from("default", old.run_id, "fetch", router(fail_times=0))
    events = [e async for e in events]

    rerun = await service.state("default", state.run_id)
    assert rerun.status is RunStatus.succeeded, rerun.error
    assert rerun.answer == "Weather in the city: sunny, 21 C." == events[-1].answer
    assert "".join(text for _n, text in said(events)) == rerun.answer
    assert all(node_id != "hello" for node_id, _t in said(events)), "the skipped greeting sent text"
    assert rerun.node_runs["hello"].status is NodeRunStatus.skipped
    assert rerun.node_runs["route"].data["reused_from"]["run_id"] == old.run_id
    fresh = [e async for e in service.start(router(fail_times=0), {"city": "Paris"})]
    assert fresh[-1].answer == rerun.answer, "a rerun answers what a fresh run answers"


async def test_a_rerun_after_a_router_keeps_the_branch_it_took_speaking(service):
    first = [e async for e in service.start(router(fail_times=0), {"city": ""})]
    assert first[-1].answer == GREETING
    state, events = await service.rerun_from("default", first[0].run_id, "hello", router(fail_times=0))
    events = [e async for e in events]
    rerun = await service.state("default", state.run_id)
    assert rerun.status is RunStatus.succeeded and rerun.answer == GREETING
    assert rerun.node_runs["fetch"].status is NodeRunStatus.skipped and rerun.node_runs["say"].status is NodeRunStatus.skipped


def test_an_answer_no_edge_reaches_never_speaks():
    doc = build([node("orphan", "answer", {"text": "I am not connected."}), node("say", "answer", {"text": "Hi."})],
                [edge("start", "say")])
    state, events = run_sync(doc)
    assert state.status is RunStatus.succeeded and state.answer == "Hi."
    assert state.node_runs["orphan"].status is NodeRunStatus.skipped
    assert said(events) == [("say", "Hi.")]


def test_a_run_restored_after_its_first_node_keeps_an_unreached_answer_silent(tmp_path: Path):
    # A restored run replays its resolved nodes silently, unreached answers among them.
    import asyncio

    from engine import RunDeps, resume_run
    from schemas.run import RunState
    from tests.support.catalog import compile_workflow

    doc = build([node("orphan", "answer", {"text": "I am not connected."}),
                 node("ask", "user_select", {"description": "Go?", "options": [{"id": "go", "label": "Go"}]}),
                 node("say", "answer", {"text": "Hi."})],
                [edge("start", "ask"), edge("ask", "say", "go")])
    plan = compile_workflow(doc)
    first: list[Any] = []
    from engine import run_workflow

    state = asyncio.run(run_workflow(plan, {}, deps=RunDeps(on_event=first.append)))
    assert state.status is RunStatus.paused and state.answer == ""
    restored = RunState.model_validate_json(state.model_dump_json())
    (iid,) = restored.interrupts
    second: list[Any] = []
    final = asyncio.run(resume_run(plan, restored, answers={iid: "go"}, deps=RunDeps(on_event=second.append)))
    assert final.status is RunStatus.succeeded and final.answer == "Hi."
    assert said(first) + said(second) == [("say", "Hi.")]


async def test_a_rerun_after_loops_whose_bodies_speak_answers_what_a_fresh_run_answers(service):
    doc = build([node("each", "iteration", {"items": [1, 2], "collect": {"ref": "say.answer"}}),
                 node("say", "answer", {"text": "item {{ each.item }}. "}, parent="each"),
                 node("again", "loop", {"variables": [{"name": "n", "type": "number", "value": 0}],
                                        "update": [{"variable": "n", "value": {"ref": "again.rounds"}}],
                                        "break_when": [{"left": {"ref": "again.n"}, "operator": "gte", "right": 2}]}),
                 node("tell", "answer", {"text": "round {{ again.index }}; "}, parent="again"),
                 node("after", "probe", {"value": "x"}),
                 node("bye", "answer", {"text": "bye"})],
                [edge("start", "each"), edge("each", "again"), edge("again", "after"), edge("after", "bye")])
    first = [e async for e in service.start(doc, {})]
    assert first[-1].answer == "item 1. item 2. round 0; round 1; round 2; bye"

    state, events = await service.rerun_from("default", first[0].run_id, "after", doc)
    events = [e async for e in events]

    rerun = await service.state("default", state.run_id)
    assert rerun.status is RunStatus.succeeded, rerun.error
    assert rerun.answer == first[-1].answer == events[-1].answer
    assert "".join(text for _n, text in said(events)) == rerun.answer
    assert rerun.node_runs["each"].data["reused_from"]["run_id"] == first[0].run_id
