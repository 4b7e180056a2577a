"""nodes/agent/plan.py: the plan model, atomic update batches, stop-gate rules, plan-request
patterns (CN/EN), ask_agent validation, and the pending context kept in the run state
"""

from __future__ import annotations

import json

import pytest

from nodes.agent.plan import (
    AskError,
    Plan,
    PlanUpdateError,
    StepStatus,
    apply_plan_updates,
    gate_feedback,
    parse_ask,
    plan_requested,
    resolve_answer,
    stop_gate,
)
from schemas.run import PendingContext


def make_plan(*titles: str, goal: str = "trip") -> Plan:
    return apply_plan_updates(None, {"updates": [{"operation": "set_plan", "goal": goal, "steps": list(titles)}]})


def statuses(plan: Plan) -> list[tuple[str, str]]:
    return [(s.id, s.status.value) for s in plan.steps]


# ----------------------------------------------------------------------- set / update / replace


def test_set_plan_numbers_steps_and_accepts_objects():
    plan = apply_plan_updates(None, json.dumps({"updates": [{"operation": "set_plan", "goal": "g", "steps": [
        "look up weather", {"id": "book", "title": "book hotel"},
        {"title": "write summary", "status": "in_progress"}]}]}))
    assert statuses(plan) == [("1", "pending"), ("book", "pending"), ("2", "in_progress")]
    assert plan.goal == "g" and plan.version == 1


def test_single_operation_object_is_accepted():
    plan = apply_plan_updates(None, {"operation": "set_plan", "steps": ["a"]})
    assert [s.title for s in plan.steps] == ["a"]


def test_update_step_changes_status_blocker_note_and_replan_flag():
    plan = make_plan("a", "b")
    plan2 = apply_plan_updates(plan, {"updates": [
        {"operation": "update_step", "step_id": "1", "status": "done", "note": "sunny"},
        {"operation": "update_step", "step_id": 2, "status": "blocked", "blocker": "no API key"},
    ]})
    assert statuses(plan2) == [("1", "done"), ("2", "blocked")]
    assert plan2.steps[0].note == "sunny" and plan2.steps[1].blocker == "no API key"
    assert plan2.version == 2
    plan3 = apply_plan_updates(plan2, {"updates": [
        {"operation": "update_step", "step_id": "2", "status": "in_progress", "needs_replan": True}]})
    assert plan3.steps[1].blocker is None, "leaving blocked clears the blocker"
    assert plan3.steps[1].needs_replan is True


def test_batch_is_atomic_when_a_later_update_fails():
    plan = make_plan("a", "b")
    before = plan.to_dict()
    with pytest.raises(PlanUpdateError, match=r"updates\[1\] \(update_step\): no step '9'"):
        apply_plan_updates(plan, {"updates": [
            {"operation": "update_step", "step_id": "1", "status": "done"},
            {"operation": "update_step", "step_id": "9", "status": "done"},
        ]})
    assert plan.to_dict() == before, "nothing of the batch was applied"


def test_set_plan_then_update_in_one_batch():
    plan = apply_plan_updates(None, {"updates": [
        {"operation": "set_plan", "steps": ["a", "b"]},
        {"operation": "update_step", "step_id": "1", "status": "in_progress"},
    ]})
    assert statuses(plan) == [("1", "in_progress"), ("2", "pending")]


@pytest.mark.parametrize("updates, message", [
    ([{"operation": "update_step", "step_id": "1", "status": "finished"}], "status must be one of"),
    ([{"operation": "update_step", "step_id": "1"}], "nothing to change"),
    ([{"operation": "update_step", "step_id": "1", "blocker": "x"}], "a blocker only goes with status 'blocked'"),
    ([{"operation": "update_step", "step_id": "1", "needs_replan": "yes"}], "needs_replan must be true or false"),
    ([{"operation": "set_plan", "steps": ["x"]}], "a plan already exists; use replace_plan"),
    ([{"operation": "explode"}], "operation must be one of"),
    ([{"operation": "update_step", "step_id": "1", "status": "done", "colour": "red"}], "unknown field"),
    ([], "expected"),
])
def test_invalid_updates_are_refused_with_a_message_for_the_model(updates, message):
    with pytest.raises(PlanUpdateError, match=message):
        apply_plan_updates(make_plan("a"), {"updates": updates})


def test_invalid_set_plan_payloads():
    with pytest.raises(PlanUpdateError, match="non-empty array"):
        apply_plan_updates(None, {"updates": [{"operation": "set_plan", "steps": []}]})
    with pytest.raises(PlanUpdateError, match="unique"):
        apply_plan_updates(None, {"updates": [{"operation": "set_plan", "steps": [{"id": "a", "title": "x"},
                                                                                  {"id": "a", "title": "y"}]}]})
    with pytest.raises(PlanUpdateError, match="no plan yet"):
        apply_plan_updates(None, {"updates": [{"operation": "update_step", "step_id": "1", "status": "done"}]})
    with pytest.raises(PlanUpdateError, match="no plan to replace"):
        apply_plan_updates(None, {"updates": [{"operation": "replace_plan", "steps": ["a"]}]})
    with pytest.raises(PlanUpdateError, match="not valid JSON"):
        apply_plan_updates(None, "{nope")


def test_replace_plan_keeps_stable_done_steps():
    plan = apply_plan_updates(make_plan("weather", "hotel", "summary"), {"updates": [
        {"operation": "update_step", "step_id": "1", "status": "done", "note": "sunny"},
        {"operation": "update_step", "step_id": "2", "status": "done", "note": "booked"},
        {"operation": "update_step", "step_id": "3", "needs_replan": True},
    ]})
    new = apply_plan_updates(plan, {"updates": [{"operation": "replace_plan", "steps": [
        {"id": "2", "title": "hotel (confirmed)", "status": "pending"}, "train tickets", "summary"]}]})
    # step 1 (done, not named) is carried first; step 2 (done, named) stays done with its note
    assert [(s.id, s.title, s.status.value, s.note) for s in new.steps] == [
        ("1", "weather", "done", "sunny"),
        ("2", "hotel (confirmed)", "done", "booked"),
        ("3", "train tickets", "pending", None),
        ("4", "summary", "pending", None),
    ]
    assert not any(s.needs_replan for s in new.steps)
    assert new.goal == "trip"
    assert plan.steps[2].needs_replan, "the old plan is untouched"


def test_plan_round_trips_through_its_dict():
    plan = apply_plan_updates(make_plan("a", "b"), {"updates": [
        {"operation": "update_step", "step_id": "2", "status": "blocked", "blocker": "b?"}]})
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    with pytest.raises(ValueError):
        Plan.from_dict({"steps": [{"title": "no id"}]})


# ----------------------------------------------------------------------- stop gate


def gate_codes(plan, *, required=False, tool=False) -> list[str]:
    return [p.code for p in stop_gate(plan, plan_required=required, tool_since_update=tool)]


def test_gate_passes_without_plan_when_none_was_required():
    assert gate_codes(None) == []
    assert gate_codes(None, tool=True) == [], "an agent that never planned has no results to record"


def test_gate_refuses_each_reason():
    assert gate_codes(None, required=True) == ["plan_missing"]
    plan = make_plan("a", "b")
    assert gate_codes(plan) == ["steps_open"]
    done = apply_plan_updates(plan, {"updates": [
        {"operation": "update_step", "step_id": "1", "status": "done"},
        {"operation": "update_step", "step_id": "2", "status": "skipped"}]})
    assert gate_codes(done) == []
    assert gate_codes(done, tool=True) == ["results_unrecorded"]
    blocked = apply_plan_updates(done, {"updates": [{"operation": "update_step", "step_id": "2", "status": "blocked"}]})
    assert gate_codes(blocked) == ["blocker_missing"]
    replan = apply_plan_updates(done, {"updates": [{"operation": "update_step", "step_id": "1", "needs_replan": True}]})
    assert gate_codes(replan) == ["needs_replan"]


def test_gate_feedback_lists_problems_and_the_plan():
    plan = make_plan("look up weather")
    text = gate_feedback(stop_gate(plan, plan_required=True, tool_since_update=True), plan)
    assert text.startswith("<stop_gate_feedback>") and text.endswith("</stop_gate_feedback>")
    assert "1 (pending): look up weather" in text and "[pending] 1. look up weather" in text
    assert "Tools ran since the last plan update" in text


# ----------------------------------------------------------------------- plan requests


@pytest.mark.parametrize("text", [
    "请用计划模式完成这个任务", "先制定一个计划，再查天气", "创建计划并执行", "每一步都更新计划", "每步完成后更新计划",
    "按计划执行", "Use plan mode for this", "Please make a plan first, then book it",
    "Create a step-by-step plan and follow it", "plan it out first", "update the plan after each step",
])
def test_explicit_plan_requests_are_detected(text):
    assert plan_requested(text)


@pytest.mark.parametrize("text", [
    "", None, "巴黎明天天气怎么样？", "帮我做个旅行计划", "我计划下周去巴黎", "不需要计划，直接回答",
    "What's the weather in Paris?", "I plan to visit Paris", "make a travel plan for Rome",
    "no plan needed, just answer", "don't make a plan",
])
def test_other_messages_do_not_require_a_plan(text):
    assert not plan_requested(text)


# ----------------------------------------------------------------------- ask_agent


def test_parse_ask_accepts_a_hard_block_with_three_to_five_options():
    ask = parse_ask(json.dumps({"question": "Which city?", "options": ["Paris", "Oslo", "Tokyo"],
                                "reason": "missing_input"}))
    assert ask.payload() == {"question": "Which city?", "reason": "missing_input", "options": [
        {"id": "1", "label": "Paris"}, {"id": "2", "label": "Oslo"}, {"id": "3", "label": "Tokyo"}]}


@pytest.mark.parametrize("args, message", [
    ({"question": "", "options": ["a", "b", "c"], "reason": "goal_unclear"}, "non-empty 'question'"),
    ({"question": "q", "options": ["a", "b"], "reason": "goal_unclear"}, "3 to 5 options"),
    ({"question": "q", "options": list("abcdef"), "reason": "goal_unclear"}, "3 to 5 options"),
    ({"question": "q", "options": ["a", "A ", "b"], "reason": "goal_unclear"}, "different"),
    ({"question": "q", "options": ["a", "", "b"], "reason": "goal_unclear"}, r"options\[1\]"),
    ({"question": "q", "options": ["a", "b", "c"], "reason": "curious"}, "only for hard blocks"),
    ({"question": "q", "options": ["a", "b", "c"]}, "only for hard blocks"),
])
def test_parse_ask_refuses_soft_or_malformed_questions(args, message):
    with pytest.raises(AskError, match=message):
        parse_ask(args)


def test_resolve_answer_maps_option_ids_and_labels():
    options = [{"id": "1", "label": "Paris"}, {"id": "2", "label": "Oslo"}]
    assert resolve_answer("2", options) == "Oslo"
    assert resolve_answer(" paris ", options) == "Paris"
    assert resolve_answer("Lyon, actually", options) == "Lyon, actually"
    assert resolve_answer({"city": "Rome"}, options) == '{"city": "Rome"}'


def test_step_status_values():
    assert [s.value for s in StepStatus] == ["pending", "in_progress", "done", "skipped", "blocked"]


# ----------------------------------------------------------------------- pending context


def sample_pending(**changes) -> PendingContext:
    plan = make_plan("ask the city", "look up weather")
    fields = dict(kind="ask", pending_id="p1", node_run_id="run1:agent", call_id="call_ask",
                  tool="ask_agent", arguments='{"question": "Which city?"}',
                  payload={"question": "Which city?", "options": [{"id": "1", "label": "Paris"}]},
                  messages=[{"role": "user", "content": "天气?"},
                            {"role": "assistant", "content": None, "tool_calls": [
                                {"id": "call_ask", "type": "function",
                                 "function": {"name": "ask_agent", "arguments": "{}"}}]}],
                  loop_state={"round": 2, "pending_call_id": "call_ask"}, plan=plan.to_dict(),
                  counters={"gate_refusals": 1, "tool_since_update": True}, created_at=1.5)
    fields.update(changes)
    return PendingContext(**fields)


def test_pending_context_round_trips_inside_the_run_state_json():
    from schemas.run import NodeRun, RunState

    state = RunState(run_id="run1", workflow_id="wf", workflow_hash="h")
    state.node_runs["agent"] = NodeRun(id="run1:agent", node_id="agent", kind="agent", status="waiting",
                                       pending=sample_pending())
    loaded = RunState.model_validate_json(state.model_dump_json())
    assert loaded.node_runs["agent"].pending == sample_pending()
    assert Plan.from_dict(loaded.node_runs["agent"].pending.plan).steps[0].title == "ask the city"
