"""Loops: back-edge regions, iteration and loop containers, limits, scopes."""

from __future__ import annotations

import asyncio

import pytest

from engine import RunDeps, run_workflow
from tests.support import fake_nodes  # noqa: F401  (probe kind)
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.workflows import build, edge, node, run_sync

COUNT = [{"name": "count", "type": "number", "default": 0}]


def polling_flow(rounds_needed: int, entry_limit: int | None = None, run_limit: int | None = None):
    """start -> poll (count += 1) -> check (count >= N ?) -yes-> done ; -else-> back to poll."""
    poll = node("poll", "variable_update", {"updates": [{"variable": "count", "operation": "add", "value": 1}]})
    if entry_limit is not None:
        poll["max_iterations"] = entry_limit
    doc = build(
        [poll,
         node("check", "if_else", {"cases": [{"id": "ready", "conditions": [
             {"left": {"ref": "vars.count"}, "operator": "gte", "right": rounds_needed}]}]}),
         node("done", "answer", {"text": "ready after {{ vars.count }} polls ({{ poll.count }})"})],
        [edge("start", "poll"), edge("poll", "check"), edge("check", "done", "ready"),
         edge("check", "poll", "else", edge_id="back")],
        variables=COUNT,
    )
    if run_limit is not None:
        doc["limits"] = {"max_loop_iterations": run_limit}
    return doc


def test_loop_back_polling_150_rounds_within_limit_200():
    state, events = run_sync(polling_flow(150, entry_limit=200))
    assert state.status == "succeeded", state.error
    assert state.answer == "ready after 150 polls (150)"
    assert state.node_runs["poll~loop"].outputs == {"rounds": 150}
    assert state.node_runs["check"].iteration == 149 and state.node_runs["check"].loop_id == "poll~loop"
    assert len([r for r in state.history if r.node_id == "poll"]) == 149, "earlier rounds are kept"
    iterations = {e.iteration for e in events if e.type == "node_finished" and e.node_id == "poll"}
    assert iterations == set(range(150))


@pytest.mark.parametrize("entry_limit, run_limit", [(100, None), (None, 100)])
def test_loop_back_polling_fails_at_limit_100_with_reason(entry_limit, run_limit):
    state, events = run_sync(polling_flow(150, entry_limit=entry_limit, run_limit=run_limit))
    assert state.status == "failed"
    assert state.error.reason == "max_iterations"
    assert "reached its limit of 100 rounds" in state.error.message
    assert state.variables["count"] == 100
    assert events[-1].type == "run_failed" and events[-1].reason == "max_iterations"
    assert "done" not in state.node_runs


def test_skipped_loop_region_skips_its_nodes():
    doc = polling_flow(3)
    doc["nodes"].insert(1, node("gate", "if_else", {"cases": [{"id": "go", "conditions": [
        {"left": {"ref": "inputs.go"}, "operator": "equals", "right": True}]}]}))
    doc["edges"][0] = edge("start", "gate")
    doc["edges"] += [edge("gate", "poll", "go"), edge("gate", "skipped_end", "else")]
    doc["nodes"].append(node("skipped_end", "answer", {"text": "not polled"}))
    doc["inputs"] = [{"name": "go", "type": "boolean"}]
    state, _ = run_sync(doc, {"go": False})
    assert state.status == "succeeded" and state.answer == "not polled"
    assert {state.node_runs[n].status.value for n in ("poll~loop", "poll", "check", "done")} == {"skipped"}


def iteration_flow(item_error: str, concurrency: int = 5):
    items = [{"name": f"n{i}"} for i in range(100)]
    items[42] = {"nom": "missing name"}
    return build(
        [node("iter", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "shout.output"},
                                    "concurrency": concurrency, "item_error": item_error}),
         node("wait", "probe", {"sleep": 0.01, "value": {"ref": "iter.index"}}, parent="iter"),
         node("shout", "template", {"template": "{{ iter.item.name | upper }}#{{ wait.value }}"}, parent="iter"),
         node("after", "template", {"template": "{{ iter.count }}"})],
        [edge("start", "iter"), edge("wait", "shout"), edge("iter", "after")],
        inputs=[{"name": "items", "type": "array"}],
    ), items


def test_iteration_of_100_items_concurrency_5_with_one_failing_item_continues():
    doc, items = iteration_flow("continue")
    state, events = run_sync(doc, {"items": items})
    assert state.status == "succeeded", state.error
    out = state.node_runs["iter"].outputs
    assert out["count"] == 100
    assert out["results"][0] == "N0#0" and out["results"][99] == "N99#99" and out["results"][42] is None
    failed = [s for s in out["statuses"] if s["status"] == "failed"]
    assert [s["index"] for s in failed] == [42] and "undefined" in failed[0]["error"]
    running, peak = set(), 0
    for e in events:
        if e.type == "node_started" and e.node_id == "wait":
            running.add(e.iteration)
            peak = max(peak, len(running))
        elif e.type == "node_finished" and e.node_id == "shout":
            running.discard(e.iteration)
    assert peak == 5, f"items ran {peak} at a time"
    records = state.node_runs["iter"].data["items"]
    assert len(records) == 100 and records[42]["status"] == "failed"
    assert {r["node_id"] for r in records[7]["node_runs"]} == {"wait", "shout"}
    assert all(r["iteration"] == 7 for r in records[7]["node_runs"])
    assert state.node_runs["after"].outputs == {"output": "100"}


def test_iteration_item_failure_fails_node_under_fail_and_skip_drops_it():
    doc, items = iteration_flow("fail", concurrency=1)
    state, _ = run_sync(doc, {"items": items})
    assert state.status == "failed" and state.error.node_id == "iter"
    assert "item 42 failed at node 'shout'" in state.error.message
    doc, items = iteration_flow("skip")
    state, _ = run_sync(doc, {"items": items})
    assert len(state.node_runs["iter"].outputs["results"]) == 99


def test_iteration_items_do_not_share_node_outputs():
    doc = build([node("iter", "iteration", {"items": [1, 2, 3], "collect": {"ref": "mark.output"}}),
                 node("first", "if_else", {"cases": [{"id": "one", "conditions": [
                     {"left": {"ref": "iter.item"}, "operator": "equals", "right": 1}]}]}, parent="iter"),
                 node("tag", "probe", {"value": "only-for-1"}, parent="iter"),
                 node("mark", "template", {"template": "{{ iter.item }}:{{ tag.value }}"}, parent="iter")],
                [edge("start", "iter"), edge("first", "tag", "one"), edge("first", "mark", "else"),
                 edge("tag", "mark")])
    state, _ = run_sync(doc)
    assert state.node_runs["iter"].outputs["results"] == ["1:only-for-1", "2:", "3:"]


def test_loop_node_carries_variables_until_break_condition():
    # total = 0+1+2+3 = 6 after 4 rounds; n follows total; seen accumulates the indexes
    doc = build(
        [node("loop", "loop", {"variables": [{"name": "n", "type": "number", "value": 0},
                                             {"name": "seen", "type": "string", "value": ""}],
                               "update": [{"variable": "n", "value": {"ref": "bump.total"}},
                                          {"variable": "seen", "value": {"ref": "note.output"}}],
                               "break_when": [{"left": {"ref": "loop.n"}, "operator": "gte", "right": 6}]}),
         node("bump", "variable_update", {"updates": [{"variable": "total", "operation": "add",
                                                       "value": {"ref": "loop.index"}}]}, parent="loop"),
         node("note", "template", {"template": "{{ loop.seen }}{{ loop.index }}"}, parent="loop"),
         node("after", "template", {"template": "{{ loop.n }}|{{ loop.seen }}|{{ loop.rounds }}|{{ vars.total }}"})],
        [edge("start", "loop"), edge("bump", "note"), edge("loop", "after")],
        variables=[{"name": "total", "type": "number", "default": 0}],
    )
    state, _ = run_sync(doc)
    assert state.status == "succeeded", state.error
    assert state.node_runs["after"].outputs == {"output": "6|0123|4|6"}
    assert [r["index"] for r in state.node_runs["loop"].data["rounds"]] == [0, 1, 2, 3]


def test_loop_break_node_ends_the_loop_after_its_round():
    doc = build(
        [node("loop", "loop", {"variables": [{"name": "i", "type": "number", "value": 0}],
                               "update": [{"variable": "i", "value": {"ref": "loop.index"}}]}),
         node("check", "if_else", {"cases": [{"id": "stop", "conditions": [
             {"left": {"ref": "loop.index"}, "operator": "gte", "right": 2}]}]}, parent="loop"),
         node("brk", "loop_break", {}, parent="loop"),
         node("after", "template", {"template": "{{ loop.rounds }}"})],
        [edge("start", "loop"), edge("check", "brk", "stop"), edge("loop", "after")],
    )
    state, _ = run_sync(doc)
    assert state.node_runs["after"].outputs == {"output": "3"}


def test_loop_node_limit_fails_with_reason():
    doc = build([node("loop", "loop", {"max_iterations": 5}), node("x", "probe", {}, parent="loop")],
                [edge("start", "loop")])
    state, _ = run_sync(doc)
    assert state.status == "failed" and state.error.reason == "max_iterations"
    assert "loop 'loop' reached its limit of 5 rounds" in state.error.message


@pytest.mark.parametrize("nodes, edges, expected", [
    ([node("a", "template", {"template": "x"}), node("b", "template", {"template": "y"})],
     [edge("start", "a"), edge("a", "b"), edge("b", "a", edge_id="back")],
     ("cycle", "a", "has no conditional exit")),
    ([node("a", "template", {"template": "x"}), node("b", "template", {"template": "y"}),
      node("gate", "if_else", {"cases": [{"id": "x", "conditions": [{"left": 1, "operator": "equals", "right": 1}]}]})],
     [edge("start", "gate"), edge("gate", "a", "x"), edge("gate", "b", "else"), edge("a", "b"), edge("b", "a")],
     ("cycle", "a", "entered at several nodes")),
    ([node("t", "template", {"template": "x"}, parent="nowhere")], [edge("start", "t")],
     ("unknown_parent", "t", "is not a container node")),
    ([node("it", "iteration", {"items": [1], "collect": 1}), node("in", "template", {"template": "x"}, parent="it")],
     [edge("start", "it"), edge("it", "in", edge_id="cross")],
     ("edge_crosses_container", None, "different loop bodies")),
    ([node("brk", "loop_break", {})], [edge("start", "brk")],
     ("loop_break_outside_loop", "brk", "inside a loop node")),
    ([node("it", "iteration", {"items": [1], "collect": 1}),
      node("ask", "user_select", {"description": "?", "options": [{"id": "a", "label": "A"}]}, parent="it")],
     [edge("start", "it")],
     ("interrupt_in_loop", "ask", "cannot be inside a loop body")),
    ([node("it", "iteration", {"items": [1], "collect": 1}), node("in", "template", {"template": "x"}, parent="it"),
      node("out", "template", {"template": "{{ in.output }}"})],
     [edge("start", "it"), edge("it", "out")],
     ("not_ancestor", "out", "not upstream")),
])
def test_loop_compile_errors(nodes, edges, expected):
    problems = [p for p in check_workflow(build(nodes, edges)) if p.severity == "error"]
    assert [(p.code, p.node_id) for p in problems] == [expected[:2]], problems
    assert expected[2] in problems[0].message


def test_a_run_without_an_event_sink_numbers_its_nested_events_as_one_with_a_sink():
    # A later execution of the run (a resume with a sink) numbers its events from the
    # stored sequence: every event a nested scope would have sent counts in the root's.
    doc, items = iteration_flow("continue")
    _state, events = run_sync(doc, {"items": items})
    plan = compile_workflow(doc)
    quiet = asyncio.run(run_workflow(plan, {"items": items}, deps=RunDeps()))
    assert quiet.seq == events[-1].seq == len(events)
