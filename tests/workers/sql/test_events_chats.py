"""SqlStore against SQLite and PostgreSQL: events (appended, and committed with a checkpoint),
commands, chats and pruning."""

from __future__ import annotations

import time

import pytest

from engine.ports import CheckpointDelta, LeaseLost, RunNotFound, StoreError
from schemas.events import NodeDelta, NodeStarted, RunStarted
from schemas.records import ChatMessage, MessagePart, OwnerInfo, RunCommand
from schemas.run import NodeRun

from .conftest import new_state


async def test_events_append_read_after_seq_duplicates_and_deltas(store):
    state = new_state()
    await store.create_run(state)
    rid = state.run_id
    events = [RunStarted(seq=1, run_id=rid, ts=1.0, workflow_id="wf", inputs={"q": 1}),
              NodeStarted(seq=2, run_id=rid, ts=2.0, node_id="a", node_run_id="a-1", kind="template"),
              NodeDelta(seq=3, run_id=rid, ts=3.0, node_id="a", node_run_id="a-1", text="x")]
    await store.append("default", rid, events)  # the delta is skipped: deltas are broadcast only
    await store.append("default", rid, events[:1])  # duplicate: ignored
    read = await store.read("default", rid)
    assert [e["seq"] for e in read] == [1, 2] and read[0] == events[0].model_dump(mode="json")
    assert [e["type"] for e in await store.read("default", rid, after_seq=1)] == ["node_started"]
    assert await store.read("default", rid, limit=1) == read[:1]
    await store.append("default", rid, [])


async def test_commands_send_and_poll(store):
    state = new_state()
    await store.create_run(state)
    await store.send("default", RunCommand(run_id=state.run_id, kind="cancel", reason="user"))
    await store.send("default", RunCommand(run_id=state.run_id, kind="cancel", reason="again"))
    commands = await store.poll(state.run_id)
    assert [c.reason for c in commands] == ["user", "again"] and commands[0].created_at > 0
    assert [c.reason for c in await store.poll(state.run_id, after_id=commands[0].id)] == ["again"]
    assert await store.poll("no-such-run") == []


async def test_commands_polled_for_many_runs_at_once(store, monkeypatch):
    states = [new_state() for _ in range(3)]
    for state in states:
        await store.create_run(state)
    first, second, quiet = (s.run_id for s in states)
    await store.send("default", RunCommand(run_id=first, kind="cancel", reason="one"))
    await store.send("default", RunCommand(run_id=second, kind="cancel", reason="two"))
    await store.send("default", RunCommand(run_id=first, kind="cancel", reason="three"))
    seen = await store.poll_many({first: 0, second: 0, quiet: 0, "no-such-run": 0})
    assert {run: [c.reason for c in found] for run, found in seen.items()} == {
        first: ["one", "three"], second: ["two"]}
    assert seen[first] == await store.poll(first) and seen[second] == await store.poll(second)
    # each run from its own last seen id, whatever the others saw
    later = await store.poll_many({first: seen[first][0].id, second: seen[second][0].id})
    assert {run: [c.reason for c in found] for run, found in later.items()} == {first: ["three"]}
    monkeypatch.setattr("workers.sql.messages._POLL_CHUNK", 2)  # more runs than one read holds
    assert await store.poll_many({quiet: 0, second: 0, first: 0}) == seen


async def test_chats_add_update_messages(store):
    chat = f"chat-{time.time_ns()}"
    for i in range(4):
        await store.add_message(ChatMessage(id=f"{chat}-m{i}", chat_id=chat, role="user" if i % 2 == 0 else "assistant",
                                            parts=[MessagePart(type="text", text=f"t{i}")], created_at=100.0 + i))
    assistant = ChatMessage(id=f"{chat}-m5", chat_id=chat, role="assistant", run_id="r1", status="streaming",
                            created_at=200.0)
    await store.add_message(assistant)
    assistant.status, assistant.parts = "done", [MessagePart(type="text", text="final"),
                                                 MessagePart(type="tool_call", data={"name": "t"})]
    await store.update_message(assistant)
    last = await store.messages("default", chat, limit=3)
    assert [m.text for m in last] == ["t2", "t3", "final"]
    assert last[-1].status.value == "done" and last[-1].parts[1].data == {"name": "t"}
    assert await store.messages("other-tenant", chat) == []


async def test_prune_deletes_ended_runs_with_children(store):
    tenant = f"t-{time.time_ns()}"
    old, paused, recent = (new_state(tenant=tenant) for _ in range(3))
    for state in (old, paused, recent):
        await store.create_run(state)
        state.node_runs["a"] = NodeRun(id=f"{state.run_id}-a", node_id="a", kind="template")
        await store.checkpoint(state, CheckpointDelta(["a"]), owner_id=None)
        await store.append(tenant, state.run_id, [{"type": "run_started", "seq": 1, "run_id": state.run_id,
                                                   "ts": 1.0}])
        await store.send(tenant, RunCommand(run_id=state.run_id, kind="cancel"))
    old.status, old.finished_at = "succeeded", 1000.0
    paused.status, paused.paused_at = "paused", 1000.0
    recent.status, recent.finished_at = "failed", time.time()
    for state in (old, paused, recent):
        await store.checkpoint(state, CheckpointDelta([]), owner_id=None)
    assert await store.prune(tenant, finished_before=2000.0) == 1
    assert {s.run_id for s in await store.list_runs(tenant)} == {paused.run_id, recent.run_id}
    assert await store.list_node_runs(tenant, old.run_id) == []
    assert await store.read(tenant, old.run_id) == [] and await store.poll(old.run_id) == []
    assert len(await store.list_node_runs(tenant, paused.run_id)) == 1


async def test_checkpoint_commits_events_with_node_runs(store):
    state = new_state()
    await store.create_run(state)
    rid = state.run_id
    state.node_runs["a"] = NodeRun(id="a-1", node_id="a", kind="template", status="succeeded")
    events = [NodeStarted(seq=1, run_id=rid, ts=1.0, node_id="a", node_run_id="a-1", kind="template"),
              NodeDelta(seq=2, run_id=rid, ts=2.0, node_id="a", node_run_id="a-1", text="x"),
              {"type": "node_finished", "seq": 3, "run_id": rid, "ts": 3.0, "node_id": "a", "node_run_id": "a-1",
               "kind": "template", "status": "succeeded"}]
    await store.checkpoint(state, CheckpointDelta(["a"]), owner_id=None, events=events)
    read = await store.read("default", rid)
    assert [e["seq"] for e in read] == [1, 3]  # the delta is skipped, as by append
    assert read == [events[0].model_dump(mode="json"), events[2]]
    assert [r.id for r in await store.list_node_runs("default", rid)] == ["a-1"]
    # an event already stored is ignored, new ones are added; several node runs and events at once
    state.node_runs["b"] = NodeRun(id="b-1", node_id="b", kind="template")
    state.node_runs["c"] = NodeRun(id="c-1", node_id="c", kind="template")
    more = [RunStarted(seq=s, run_id=rid, ts=float(s), workflow_id="wf", inputs={"s": s}) for s in (3, 4, 5)]
    await store.checkpoint(state, CheckpointDelta(["b", "c"]), owner_id=None, events=more)
    read = await store.read("default", rid)
    assert [e["seq"] for e in read] == [1, 3, 4, 5] and read[1]["type"] == "node_finished"
    assert read[2]["inputs"] == {"s": 4}
    assert sorted(r.id for r in await store.list_node_runs("default", rid)) == ["a-1", "b-1", "c-1"]


async def test_checkpoint_events_roll_back_with_a_lost_lease(store):
    state = new_state()
    await store.create_run(state, owner=OwnerInfo(id="owner-1", host="h", pid=1, lease_until=time.time() - 1))
    await store.claim("default", state.run_id, OwnerInfo(id="owner-2", host="h", pid=2,
                                                         lease_until=time.time() + 60))
    rid = state.run_id
    state.node_runs["a"] = NodeRun(id="a-1", node_id="a", kind="template", status="succeeded")
    state.seq = 9
    events = [NodeStarted(seq=1, run_id=rid, ts=1.0, node_id="a", node_run_id="a-1", kind="template")]
    with pytest.raises(LeaseLost):
        await store.checkpoint(state, CheckpointDelta(["a"]), owner_id="owner-1", events=events)
    assert await store.read("default", rid) == []  # nothing of the checkpoint was written
    assert await store.list_node_runs("default", rid) == []
    assert (await store.load_run("default", rid)).seq == 0
    with pytest.raises(RunNotFound):
        await store.checkpoint(new_state(), CheckpointDelta([]), owner_id=None, events=events)
    await store.checkpoint(state, CheckpointDelta(["a"]), owner_id="owner-2", events=events)
    assert [e["seq"] for e in await store.read("default", rid)] == [1]
    assert (await store.load_run("default", rid)).seq == 9


async def test_checkpoint_failing_in_the_database_writes_nothing(store):
    state = new_state()
    await store.create_run(state)
    rid = state.run_id
    state.node_runs["a"] = NodeRun(id="a-1", node_id="a", kind="template", status="succeeded")
    bad = [{"type": "node_started", "seq": None, "run_id": rid, "ts": 1.0}]  # seq is NOT NULL
    with pytest.raises(StoreError):
        await store.checkpoint(state, CheckpointDelta(["a"]), owner_id=None, events=bad)
    assert await store.list_node_runs("default", rid) == []  # rolled back with the event
    await store.checkpoint(state, CheckpointDelta(["a"]), owner_id=None)  # the connection still works
    assert [r.id for r in await store.list_node_runs("default", rid)] == ["a-1"]
