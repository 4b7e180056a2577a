"""Scheduler contract (engine/scheduler.py docstring, README "Scheduling rules")."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from engine import CancelToken, RunDeps, resume_run, run_workflow
from schemas.run import RunState
from tests.support import fake_nodes
from tests.support.catalog import compile_workflow
from tests.support.workflows import build, chain_edges, edge, node, run_sync

S, F, K, C = "succeeded", "failed", "skipped", "cancelled"


def probe(node_id: str, **config):
    fields = {k: config.pop(k) for k in list(config) if k in ("timeout", "max_retries", "retry_interval",
                                                              "error_strategy", "default_output", "default_handle")}
    return node(node_id, "probe", config, **fields)


def if_gt(node_id: str, ref: str, value: float):
    return node(node_id, "if_else", {"cases": [{"id": "yes", "conditions": [
        {"left": {"ref": ref}, "operator": "gt", "right": value}]}]})


X_INPUT = [{"name": "x", "type": "number", "required": True}]

# ------------------------------------------------------------------ table-driven graphs
# Each case: nodes, edges, inputs, expected node statuses (others must be absent).
GRAPH_CASES = {
    "diamond_join": (
        [probe("a"), probe("b"), probe("c"), probe("d")],
        [edge("start", "a"), edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "d")],
        {},
        {"start": S, "a": S, "b": S, "c": S, "d": S},
    ),
    "exclusive_branches_rejoin_if_side": (
        [if_gt("if", "start.x", 10), probe("big"), probe("small"), probe("join")],
        [edge("start", "if"), edge("if", "big", "yes"), edge("if", "small", "else"),
         edge("big", "join"), edge("small", "join")],
        {"x": 50},
        {"start": S, "if": S, "big": S, "small": K, "join": S},
    ),
    "exclusive_branches_rejoin_else_side": (
        [if_gt("if", "start.x", 10), probe("big"), probe("small"), probe("join")],
        [edge("start", "if"), edge("if", "big", "yes"), edge("if", "small", "else"),
         edge("big", "join"), edge("small", "join")],
        {"x": 1},
        {"start": S, "if": S, "big": K, "small": S, "join": S},
    ),
    "skip_propagates_through_chain_and_join": (
        [if_gt("if", "start.x", 10), probe("a1"), probe("a2"), probe("a3"), probe("b1"), probe("j1"), probe("tail")],
        [edge("start", "if"), edge("if", "a1", "yes"), edge("a1", "a2"), edge("a2", "a3"),
         edge("if", "b1", "yes"), edge("a3", "j1"), edge("b1", "j1"), edge("j1", "tail"),
         edge("if", "tail", "else")],
        {"x": 1},
        {"start": S, "if": S, "a1": K, "a2": K, "a3": K, "b1": K, "j1": K, "tail": S},
    ),
    "all_inputs_skipped_skips_join": (
        [if_gt("if", "start.x", 10), probe("a"), probe("b"), probe("j")],
        [edge("start", "if"), edge("if", "a", "yes"), edge("if", "b", "yes"), edge("a", "j"), edge("b", "j")],
        {"x": 1},
        {"start": S, "if": S, "a": K, "b": K, "j": K},
    ),
    "nested_if_else": (
        [if_gt("outer", "start.x", 10), if_gt("inner", "start.x", 100), probe("huge"), probe("big"), probe("small"),
         probe("join")],
        [edge("start", "outer"), edge("outer", "inner", "yes"), edge("outer", "small", "else"),
         edge("inner", "huge", "yes"), edge("inner", "big", "else"),
         edge("huge", "join"), edge("big", "join"), edge("small", "join")],
        {"x": 50},
        {"start": S, "outer": S, "inner": S, "huge": K, "big": S, "small": K, "join": S},
    ),
    "multi_handle_fanout_takes_two": (
        [probe("m", handles=["p", "q", "r"], take=["p", "r"]), probe("p"), probe("q"), probe("r"), probe("j")],
        [edge("start", "m"), edge("m", "p", "p"), edge("m", "q", "q"), edge("m", "r", "r"),
         edge("p", "j"), edge("q", "j"), edge("r", "j")],
        {},
        {"start": S, "m": S, "p": S, "q": K, "r": S, "j": S},
    ),
    "unreachable_root_is_skipped": (
        [probe("a"), probe("orphan"), probe("after_orphan")],
        [edge("start", "a"), edge("orphan", "after_orphan")],
        {},
        {"start": S, "a": S, "orphan": K, "after_orphan": K},
    ),
}


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_graph_shapes_resolve_each_node_exactly_once(case):
    nodes, edges, inputs, expected = GRAPH_CASES[case]
    top = {"inputs": X_INPUT} if "x" in inputs else {}
    fake_nodes.CALLS.clear()
    state, events = run_sync(build(nodes, edges, **top), inputs)
    assert state.status == "succeeded", state.error
    assert {nid: run.status.value for nid, run in state.node_runs.items()} == expected
    finished = [e.node_id for e in events if e.type == "node_finished"]
    assert sorted(finished) == sorted(expected), "every node finishes exactly once"
    for nid, status in expected.items():
        if nid.startswith(("a", "b", "j", "p", "q", "r", "m", "h", "s", "t", "d", "c", "o")) and status == S \
                and nid not in ("start", "if", "outer", "inner"):
            assert fake_nodes.CALLS.get(nid) == 1, f"{nid} ran {fake_nodes.CALLS.get(nid)} times"
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(events) + 1))
    assert events[0].type == "run_started" and events[-1].type == "run_finished"


def test_fanout_of_200_parallel_nodes_runs_concurrently():
    workers = [probe(f"w{i}", sleep=0.2, value=i) for i in range(200)]
    nodes = workers + [node("join", "template", {"template": "{{ w0.value }}-{{ w199.value }}"})]
    edges = [edge("start", f"w{i}") for i in range(200)] + [edge(f"w{i}", "join") for i in range(200)]
    began = time.perf_counter()
    state, _ = run_sync(build(nodes, edges))
    elapsed = time.perf_counter() - began
    assert state.status == "succeeded"
    assert state.node_runs["join"].outputs == {"output": "0-199"}
    assert elapsed < 5.0, f"200 x 0.2 s nodes took {elapsed:.1f}s: not concurrent"


def test_max_concurrency_bounds_running_nodes():
    workers = [probe(f"w{i}", sleep=0.05) for i in range(12)]
    doc = build(workers + [probe("j")], [edge("start", f"w{i}") for i in range(12)] +
                [edge(f"w{i}", "j") for i in range(12)], limits={"max_concurrency": 3})
    running, peak = 0, 0

    def sink(event):
        nonlocal running, peak
        if event.type == "node_started":
            running += 1
            peak = max(peak, running)
        elif event.type == "node_finished" and event.status.value in ("succeeded", "failed", "cancelled"):
            running -= 1

    state = asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps(on_event=sink)))
    assert state.status == "succeeded"
    assert peak == 3


# ------------------------------------------------------------------- retries / timeouts


def test_retries_then_success_runs_exactly_until_success():
    fake_nodes.CALLS.clear()
    state, events = run_sync(build([probe("f", fail_times=2, max_retries=3, retry_interval=0.01)], [edge("start", "f")]))
    assert state.status == "succeeded"
    run = state.node_runs["f"]
    assert (run.attempts, run.retries, run.outputs["attempt"]) == (3, 2, 3)
    assert fake_nodes.CALLS["f"] == 3


def test_retries_exhausted_runs_one_plus_max_retries_times_and_fails_run():
    fake_nodes.CALLS.clear()
    state, events = run_sync(build([probe("f", fail_times=9, max_retries=2, retry_interval=0), probe("after")],
                                   chain_edges("start", "f", "after")))
    assert state.status == "failed"
    assert fake_nodes.CALLS["f"] == 3
    assert state.node_runs["f"].status == "failed"
    assert state.error.node_id == "f" and "probe failure (attempt 3)" in state.error.message
    assert "after" not in state.node_runs
    assert events[-1].type == "run_failed" and events[-1].error.node_id == "f"


def test_retry_wait_does_not_block_other_nodes():
    nodes = [probe("flaky", fail_times=1, max_retries=1, retry_interval=0.5), probe("other", sleep=0.1)]
    state, events = run_sync(build(nodes, [edge("start", "flaky"), edge("start", "other")]))
    assert state.status == "succeeded"
    assert state.node_runs["other"].finished_at < state.node_runs["flaky"].finished_at - 0.3


def test_timeout_fails_node_with_reason():
    state, events = run_sync(build([probe("slow", sleep=5, timeout=0.1)], [edge("start", "slow")]))
    assert state.status == "failed"
    assert state.error.reason == "node_timeout" and state.error.node_id == "slow"
    assert "timed out after 0.1s" in state.error.message


def test_timeout_cannot_be_swallowed_by_node_code():
    state, _ = run_sync(build([probe("slow", sleep=5, swallow_cancel=True, timeout=0.1)], [edge("start", "slow")]))
    assert state.status == "failed" and state.error.reason == "node_timeout"


def test_timeout_is_retried():
    fake_nodes.CALLS.clear()
    state, _ = run_sync(build([probe("slow", sleep=5, timeout=0.05, max_retries=2, retry_interval=0)],
                              [edge("start", "slow")]))
    assert fake_nodes.CALLS["slow"] == 3 and state.error.reason == "node_timeout"


# ------------------------------------------------------------------- error strategies


def test_error_strategy_fail_keeps_partial_outputs():
    nodes = [probe("ok", value="kept", sleep=0.05), probe("bad", fail_times=1), probe("slow", sleep=5)]
    state, events = run_sync(build(nodes, [edge("start", "ok"), edge("ok", "bad"), edge("start", "slow")]))
    assert state.status == "failed"
    assert state.node_runs["ok"].outputs["value"] == "kept"
    assert state.node_runs["bad"].status == "failed"
    assert state.node_runs["slow"].status == "cancelled", "running siblings are cancelled, and recorded"
    assert state.inputs == {} and state.node_runs["start"].status == "succeeded"


def test_a_failure_before_its_siblings_first_step_ends_the_run():
    # start's task runs f0 itself and spawns tasks for the rest: f0 fails before any of them has
    # taken a step, so they are cancelled without running their bodies (where a task leaves the run)
    nodes = [probe("f0", fail_times=1)] + [probe(f"w{i}") for i in range(50)]
    edges = [edge("start", "f0")] + [edge("start", f"w{i}") for i in range(50)]
    fake_nodes.CALLS.clear()
    state, events = run_sync(build(nodes, edges))
    assert state.status == "failed" and state.error.node_id == "f0"
    assert not any(nid.startswith("w") for nid in fake_nodes.CALLS), "no sibling ran"
    assert events[-1].type == "run_failed"


def test_error_strategy_error_branch_takes_error_handle():
    nodes = [probe("bad", fail_times=1, error_strategy="error_branch"), probe("normal"),
             node("handler", "template", {"template": "caught: {{ bad.error.message }}"})]
    edges = [edge("start", "bad"), edge("bad", "normal"), edge("bad", "handler", "error")]
    state, _ = run_sync(build(nodes, edges))
    assert state.status == "succeeded"
    assert state.node_runs["bad"].status == "failed"
    assert state.node_runs["bad"].handles == ["error"]
    assert state.node_runs["normal"].status == "skipped"
    assert state.node_runs["handler"].outputs["output"] == "caught: probe failure (attempt 1)"


def test_error_strategy_default_output_succeeds_with_configured_value():
    nodes = [probe("bad", fail_times=1, error_strategy="default_output", default_output={"value": "fallback"}),
             node("t", "template", {"template": "{{ bad.value }}"})]
    state, _ = run_sync(build(nodes, chain_edges("start", "bad", "t")))
    assert state.status == "succeeded"
    assert state.node_runs["bad"].status == "succeeded"
    assert state.node_runs["bad"].error.message.startswith("probe failure")
    assert state.node_runs["t"].outputs["output"] == "fallback"


# ------------------------------------------------------------------- run limits / cancel


def test_max_node_executions_fails_run_with_reason():
    nodes = [probe(f"n{i}") for i in range(10)]
    state, events = run_sync(build(nodes, chain_edges("start", *[f"n{i}" for i in range(10)]),
                                   limits={"max_node_executions": 5}))
    assert state.status == "failed"
    assert state.error.reason == "max_node_executions"
    assert events[-1].type == "run_failed" and events[-1].reason == "max_node_executions"
    assert sum(1 for r in state.node_runs.values() if r.status == "succeeded") == 5


def test_max_wall_time_is_enforced_inside_a_long_node():
    state, events = run_sync(build([probe("slow", sleep=30)], [edge("start", "slow")],
                                   limits={"max_wall_time": 0.3}))
    assert state.status == "failed" and state.error.reason == "max_wall_time"
    assert state.finished_at - state.started_at < 2.0
    assert state.node_runs["slow"].status in ("failed", "cancelled")


def test_max_wall_time_with_blocking_node_ends_run_on_time():
    state, _ = run_sync(build([probe("blocker", block=1.5)], [edge("start", "blocker")], limits={"max_wall_time": 0.2}))
    assert state.status == "failed" and state.error.reason == "max_wall_time"


def test_cancellation_mid_run_cancels_work_in_progress():
    doc = build([probe("slow", sleep=30), probe("after")], chain_edges("start", "slow", "after"))
    events: list = []

    async def main():
        token = CancelToken()
        asyncio.get_running_loop().call_later(0.2, token.cancel, "user pressed stop")
        began = time.perf_counter()
        state = await run_workflow(compile_workflow(doc), {}, deps=RunDeps(on_event=events.append), cancel=token)
        return state, time.perf_counter() - began

    state, elapsed = asyncio.run(main())
    assert elapsed < 2.0
    assert state.status == "cancelled"
    assert state.node_runs["slow"].status == "cancelled"
    assert "after" not in state.node_runs
    assert events[-1].type == "run_cancelled" and "user pressed stop" in events[-1].reason


def test_cancel_before_start_runs_nothing():
    token = CancelToken()
    token.cancel("early")
    state = asyncio.run(run_workflow(compile_workflow(build([probe("a")], [edge("start", "a")])), {}, cancel=token))
    assert state.status == "cancelled" and state.node_runs == {}


# ------------------------------------------------------------------- state / checkpoint


def test_state_checkpoints_after_each_node_and_resumes_in_fresh_scheduler():
    doc = build([probe("a", value=1), probe("b", sleep=30), probe("c", value={"ref": "a.value"})],
                chain_edges("start", "a", "b", "c"))
    plan = compile_workflow(doc)
    snapshots: list[str] = []

    async def first():
        token = CancelToken()

        def checkpoint(state: RunState, delta):
            assert delta.node_ids, "every checkpoint names the node runs it changed"
            snapshots.append(state.model_dump_json())
            if "a" in state.node_runs and state.node_runs["a"].status == "succeeded":
                asyncio.get_running_loop().call_later(0.05, token.cancel, "process stopping")
        await run_workflow(plan, {}, deps=RunDeps(checkpoint=checkpoint), cancel=token)

    asyncio.run(first())
    # Take the checkpoint made right after "a" (before the cancel) and continue it elsewhere.
    after_a = next(s for s in snapshots if json.loads(s)["node_runs"].get("a", {}).get("status") == "succeeded")
    restored = RunState.model_validate_json(after_a)
    assert restored.status == "running" and restored.edges["a-out-b"] == "taken" and restored.ready == ["b"]
    assert restored.node_runs["b"].status == "running", "b (with effects) is stored as started before it runs"
    fake_nodes.CALLS.clear()
    fast = compile_workflow(build([probe("a", value=1), probe("b"), probe("c", value={"ref": "a.value"})],
                                  chain_edges("start", "a", "b", "c")))
    with pytest.raises(ValueError, match="workflow version"):
        asyncio.run(resume_run(fast, restored))
    restored.workflow_hash = fast.content_hash  # same graph, b made fast for the test
    restored.edges = {}  # stores do not keep edges: the scheduler derives them from the node runs
    seq_before = restored.seq
    final = asyncio.run(resume_run(fast, restored))
    assert final.status == "succeeded"
    assert fake_nodes.CALLS == {"b": 1, "c": 1}, "finished nodes are not run again"
    assert final.node_runs["c"].outputs["value"] == 1
    assert final.seq > seq_before, "sequence numbers continue after a restore"


def test_pure_nodes_ride_on_the_next_checkpoint_and_are_recomputed_after_a_restore():
    """Rule 7: a template or an answer (pure kinds) takes no checkpoint of its own; a node
    with effects (the probe) is stored before its successors start (and, rule 9, as
    started before it runs, with the pure node runs before it); a run restored from its
    checkpoint recomputes only what came after."""
    greet = node("greet", "template", {"template": "Hello, {{ who }}!", "variables": [
        {"name": "who", "value": {"ref": "inputs.name"}, "type": "string"}]})
    shout = node("shout", "template", {"template": "{{ v }}!", "variables": [
        {"name": "v", "value": {"ref": "greet.output"}, "type": "string"}]})
    say = node("say", "answer", {"text": "{{ shout.output }}"})
    doc = {**build([greet, probe("effect", value=1), shout, say], chain_edges("start", "greet", "effect", "shout", "say")),
           "inputs": [{"name": "name", "type": "string", "required": False, "default": "Ada"}]}
    plan = compile_workflow(doc)
    taken: list[tuple[str, list[str], str]] = []

    def checkpoint(state: RunState, delta) -> None:
        taken.append((str(state.status), list(delta.node_ids), state.model_dump_json()))

    fake_nodes.CALLS.clear()
    final = asyncio.run(run_workflow(plan, {}, deps=RunDeps(checkpoint=checkpoint)))
    assert final.status == "succeeded" and final.answer == "Hello, Ada!!"
    # the probe's start (rule 9, with the pure node runs before it), its end, the run's end
    assert [(status, ids) for status, ids, _ in taken] == [
        ("running", ["start", "greet", "effect"]), ("running", ["effect"]), ("succeeded", ["shout", "say"])]
    restored = RunState.model_validate_json(taken[1][2])
    restored.edges = {}
    fake_nodes.CALLS.clear()
    again = asyncio.run(resume_run(plan, restored))
    assert again.status == "succeeded" and again.answer == "Hello, Ada!!"
    assert fake_nodes.CALLS == {}, "the stored node with effects is not run again"
    assert again.node_runs["shout"].outputs == {"output": "Hello, Ada!!"}


def test_run_state_round_trips_through_json():
    state, _ = run_sync(build([probe("a", value={"k": [1, 2]})], [edge("start", "a")]))
    again = RunState.model_validate_json(state.model_dump_json())
    assert again == state


def test_cancelling_the_task_running_the_run_stops_nodes_in_progress():
    doc = build([probe("slow", sleep=30), probe("after")], chain_edges("start", "slow", "after"))
    events: list = []

    async def main():
        task = asyncio.ensure_future(run_workflow(compile_workflow(doc), {}, deps=RunDeps(on_event=events.append)))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    began = time.perf_counter()
    asyncio.run(main())
    assert time.perf_counter() - began < 2.0
    slow = next(e for e in events if e.type == "node_finished" and e.node_id == "slow")
    assert slow.status == "cancelled"
    assert events[-1].type == "run_cancelled"


def test_max_wall_time_failure_names_the_running_node():
    state, events = run_sync(build([probe("slow", sleep=30)], [edge("start", "slow")], limits={"max_wall_time": 0.2}))
    assert state.error.node_id == "slow" and "'slow'" in state.error.message
    assert state.node_runs["slow"].status == "failed"
    assert events[-1].error.node_id == "slow"


def test_cancel_token_callbacks_do_not_pile_up():
    token = CancelToken()
    calls = []
    off = token.on_cancel(calls.append)
    off()
    off()
    doc = build([node("it", "iteration", {"items": list(range(20)), "collect": 1}),
                 node("inner", "probe", {}, parent="it")], [edge("start", "it")])
    state = asyncio.run(run_workflow(compile_workflow(doc), {}, cancel=token))
    assert state.status == "succeeded"
    assert token._callbacks == []  # every nested run unsubscribed when it ended
    token.cancel("late")
    assert calls == []


def test_edges_derived_from_node_runs_equal_the_live_edges_at_every_checkpoint():
    """Branches, skips, an error branch and a join: what a restored run derives is what
    the live scheduler had written when the checkpoint was taken."""
    from engine.scheduler import derive_edges

    nodes = [node("if", "if_else", {"cases": [{"id": "yes", "conditions": [
                 {"left": {"ref": "inputs.x"}, "operator": "gt", "right": 1}]}]}),
             probe("a", value=1), probe("b", value=2),
             {**probe("bad", fail_times=5), "error_strategy": "error_branch"},
             probe("rescue", value=3), probe("join", value=4), probe("after", value=5)]
    edges = [edge("start", "if"), edge("if", "a", "yes"), edge("if", "b", "else"), edge("a", "bad"),
             edge("bad", "rescue", "error"), edge("bad", "join"), edge("b", "join"), edge("rescue", "after")]
    doc = {**build(nodes, edges), "inputs": [{"name": "x", "type": "number"}]}
    plan = compile_workflow(doc)
    seen = 0

    def checkpoint(state: RunState, delta) -> None:
        nonlocal seen
        copy = RunState.model_validate_json(state.model_dump_json())
        copy.edges = {}
        derive_edges(plan, copy)
        assert copy.edges == state.edges
        seen += 1

    for x in (0, 5):
        final = asyncio.run(run_workflow(plan, {"x": x}, deps=RunDeps(checkpoint=checkpoint)))
        assert final.status == "succeeded"
    assert seen >= 8  # start and if_else are pure: their node runs ride on the next checkpoint


def test_built_in_pure_kinds_are_those_without_effects_outside_the_run():
    """Only kinds that change nothing outside the run skip their own checkpoint: a model,
    an HTTP request, code, a tool, a question to a person, a loop (its body may hold any
    of those) are stored before their successors start."""
    from nodes.catalog import builtin_catalog

    catalog = builtin_catalog()
    assert catalog.pure == {"start", "answer", "end", "if_else", "template", "variable_update", "variable_aggregator",
                            "loop_break", "unsupported"}
    for kind in ("chat", "classify_question", "extract_fields", "query_extension", "knowledge_retrieval", "code",
                 "http_request", "tool_call", "agent", "user_select", "form_input", "iteration", "loop"):
        assert kind not in catalog.pure, kind


def _stored_while_running(plan, state_or_inputs, node_id: str) -> RunState:
    """Run until node ``node_id`` is stored as started, then stop as a killed process
    would: the state is the one that checkpoint stored, whatever happened after it."""
    stored: list[str] = []

    async def go():
        token = CancelToken()

        def checkpoint(state: RunState, delta) -> None:
            run = state.node_runs.get(node_id)
            if not stored and run is not None and run.status == "running":
                stored.append(state.model_dump_json())
                token.cancel("process killed")

        deps = RunDeps(checkpoint=checkpoint)
        if isinstance(state_or_inputs, RunState):
            await resume_run(plan, state_or_inputs, deps=deps, cancel=token)
        else:
            await run_workflow(plan, state_or_inputs, deps=deps, cancel=token)

    asyncio.run(go())
    restored = RunState.model_validate_json(stored[0])
    restored.edges = {}  # stores keep no edges
    return restored


def test_a_node_run_again_after_crashes_counts_every_attempt_across_them():
    """Rule 9: a node with effects is stored as started before it runs, so a run restored
    after its process died mid-node shows the node ran twice (then three times), with the
    same node run id (the idempotency key of its requests)."""
    slow = compile_workflow(build([probe("a", value=1), probe("b", sleep=30), probe("c")],
                                  chain_edges("start", "a", "b", "c")))
    first = _stored_while_running(slow, {}, "b")
    assert first.node_runs["b"].attempts == 1
    second = _stored_while_running(slow, first, "b")
    assert second.node_runs["b"].attempts == 2 and second.node_runs["b"].id == first.node_runs["b"].id
    fast = compile_workflow(build([probe("a", value=1), probe("b"), probe("c")], chain_edges("start", "a", "b", "c")))
    second.workflow_hash = fast.content_hash
    fake_nodes.CALLS.clear()
    final = asyncio.run(resume_run(fast, second))
    assert final.status == "succeeded" and fake_nodes.CALLS == {"b": 1, "c": 1}
    assert {nid: run.attempts for nid, run in final.node_runs.items()} == {"start": 1, "a": 1, "b": 3, "c": 1}
    assert final.node_runs["b"].retries == 0, "no retry of the node's own: re-executions after crashes"


def test_spawning_a_batch_leaves_the_gc_as_it_found_it():
    import gc

    doc = build([probe(f"w{i}") for i in range(20)], [edge("start", f"w{i}") for i in range(20)])
    assert gc.isenabled()
    state, _ = run_sync(doc)
    assert state.status == "succeeded" and gc.isenabled()
    gc.disable()
    try:
        state, _ = run_sync(doc)
        assert state.status == "succeeded" and not gc.isenabled(), "a paused GC stays paused"
    finally:
        gc.enable()
