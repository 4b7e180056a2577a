"""Interrupts: pause, resume with an answer bound to one interrupt id, used once."""

from __future__ import annotations

import asyncio

import pytest

from engine import RunDeps, resume_run, run_workflow
from schemas.run import RunState
from tests.support import fake_nodes
from tests.support.catalog import compile_workflow
from tests.support.workflows import build, edge, node


def select_flow():
    return build(
        [node("ask", "user_select", {"description": "Ship to {{ inputs.city }}?",
                                     "options": [{"id": "yes", "label": "Yes, ship it"}, {"id": "no", "label": "No"}]}),
         node("shipped", "answer", {"text": "shipping to {{ inputs.city }}"}),
         node("held", "answer", {"text": "held"}),
         node("side", "probe", {"value": "side work"})],
        [edge("start", "ask"), edge("ask", "shipped", "yes"), edge("ask", "held", "no"), edge("start", "side")],
        inputs=[{"name": "city"}],
    )


def run(plan, inputs_or_state, answers=None):
    events: list = []
    deps = RunDeps(on_event=events.append)
    if isinstance(inputs_or_state, RunState):
        state = asyncio.run(resume_run(plan, inputs_or_state, answers=answers, deps=deps))
    else:
        state = asyncio.run(run_workflow(plan, inputs_or_state, deps=deps))
    return state, events


def test_user_select_pauses_then_resumes_from_a_restored_state():
    plan = compile_workflow(select_flow())
    fake_nodes.CALLS.clear()
    state, events = run(plan, {"city": "Lyon"})
    assert state.status == "paused"
    assert state.node_runs["side"].status == "succeeded", "other branches keep running"
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "user_select" and interrupt.payload.description == "Ship to Lyon?"
    assert [e.type for e in events][-2:] == ["node_finished", "run_paused"] or events[-1].type == "run_paused"
    assert any(e.type == "interrupt" and e.interrupt_id == interrupt.id for e in events)
    assert state.node_runs["ask"].status == "waiting"

    restored = RunState.model_validate_json(state.model_dump_json())  # e.g. another process
    node_run_id = restored.node_runs["ask"].id
    final, events2 = run(plan, restored, {interrupt.id: "yes, SHIP it"})
    assert final.status == "succeeded"
    assert final.answer == "shipping to Lyon"
    assert final.node_runs["ask"].outputs == {"selected": "yes", "label": "Yes, ship it"}
    assert final.node_runs["ask"].id == node_run_id, "the resumed node run is the same node run"
    assert final.node_runs["held"].status == "skipped"
    assert final.interrupts == {}
    assert fake_nodes.CALLS == {"side": 1}, "finished nodes are not run again"
    assert events2[0].type == "run_resumed" and events2[0].answered == [interrupt.id]
    assert events2[0].seq == state.seq + 1


def test_invalid_choice_asks_again_with_the_reason():
    plan = compile_workflow(select_flow())
    state, _ = run(plan, {"city": "Lyon"})
    (first,) = state.interrupts
    state, _ = run(plan, state, {first: "maybe"})
    assert state.status == "paused"
    (second,) = state.interrupts.values()
    assert second.id != first
    assert "'maybe' is not one of: yes (Yes, ship it), no (No)" == second.payload.error


def test_answer_is_used_once_and_unknown_ids_are_refused():
    plan = compile_workflow(select_flow())
    state, _ = run(plan, {"city": "Lyon"})
    (iid,) = state.interrupts
    with pytest.raises(ValueError, match="no pending interrupt"):
        asyncio.run(resume_run(plan, state, answers={"bogus": "yes"}))
    final, _ = run(plan, state, {iid: "no"})
    assert final.status == "succeeded"
    with pytest.raises(ValueError, match="no pending interrupt"):
        asyncio.run(resume_run(plan, final, answers={iid: "yes"}))


def test_two_interrupts_resuming_one_leaves_the_run_waiting():
    doc = build([node("a", "user_select", {"description": "A?", "options": [{"id": "x", "label": "X"}]}),
                 node("b", "form_input", {"fields": [{"name": "n", "type": "number"}]}),
                 node("j", "template", {"template": "{{ a.selected }} {{ b.n }}"})],
                [edge("start", "a"), edge("start", "b"), edge("a", "j", "x"), edge("b", "j")])
    plan = compile_workflow(doc)
    state, _ = run(plan, {})
    assert len(state.interrupts) == 2
    ia = next(i.id for i in state.interrupts.values() if i.node_id == "a")
    state, events = run(plan, state, {ia: "x"})
    assert state.status == "paused" and [i.node_id for i in state.interrupts.values()] == ["b"]
    assert state.node_runs["a"].status == "succeeded" and "j" not in state.node_runs
    assert events[-1].type == "run_paused"
    (ib,) = state.interrupts
    state, _ = run(plan, state, {ib: {"n": "41.5"}})
    assert state.status == "succeeded"
    assert state.node_runs["j"].outputs == {"output": "x 41.5"}


def test_form_input_validates_types_required_and_enum():
    doc = build([node("f", "form_input", {"description": "Details for {{ inputs.who }}", "fields": [
        {"name": "age", "type": "number"}, {"name": "plan", "enum": ["free", "pro"]},
        {"name": "note", "required": False, "default": "none"}]})],
        [edge("start", "f")], inputs=[{"name": "who"}])
    plan = compile_workflow(doc)
    state, _ = run(plan, {"who": "Ada"})
    (iid, interrupt), = state.interrupts.items()
    assert interrupt.payload.description == "Details for Ada"
    state, _ = run(plan, state, {iid: {"age": "old", "plan": "gold", "extra": 1}})
    (interrupt,) = state.interrupts.values()
    assert interrupt.payload.errors == ["age: 'old' is not a number", "plan: 'gold' is not one of ['free', 'pro']",
                                           "unknown field(s): ['extra']"]
    state, _ = run(plan, state, {interrupt.id: '{"age": "36", "plan": "pro"}'})
    assert state.status == "succeeded"
    assert state.node_runs["f"].outputs == {"age": 36, "plan": "pro", "note": "none",
                                            "form": {"age": 36, "plan": "pro", "note": "none"}}


def test_waiting_time_does_not_count_against_wall_time():
    doc = select_flow()
    doc["limits"] = {"max_wall_time": 0.5}
    plan = compile_workflow(doc)
    state, _ = run(plan, {"city": "x"})
    assert state.status == "paused" and state.wall_time_left > 0
    asyncio.run(asyncio.sleep(0.6))
    (iid,) = state.interrupts
    final, _ = run(plan, state, {iid: "no"})
    assert final.status == "succeeded"
