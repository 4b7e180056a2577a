"""SqlStore against SQLite and PostgreSQL: runs and checkpoints, leases, tenants."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.ports import CheckpointDelta, LeaseLost, RunExists, RunNotFound, RunOwned, StoreError
from schemas.records import OwnerInfo, RunCommand
from schemas.run import Interrupt, NodeError, NodeRun, Usage
from workers.sql import SqlStore

from .conftest import new_state, owner


def node(node_id: str, run_id: str | None = None, **fields) -> NodeRun:
    return NodeRun(id=run_id or f"{node_id}-r1", node_id=node_id, kind="template", **fields)


async def test_create_checkpoint_load_roundtrip(store):
    state = new_state(inputs={"q": "hi"}, sys={"chat_id": "c1", "user_id": "u1"}, variables={"count": 0})
    await store.create_run(state, owner=owner())
    state.node_runs["start"] = node("start", status="succeeded", outputs={"q": "hi"}, handles=["out"], started_at=1.0)
    state.node_runs["llm"] = node("llm", status="succeeded", outputs={"answer": "yo"}, started_at=2.0,
                                  usage=Usage(model="m", tokens_in=3, tokens_out=4, cost=0.5),
                                  data={"rounds": [{"tool_calls": [{"name": "t", "args": {"x": 1}}]}]})
    state.variables["count"] = 2
    state.seq, state.node_executions = 7, 2
    await store.checkpoint(state, CheckpointDelta(["start", "llm"]), owner_id="owner-1")

    loaded = await store.load_run("default", state.run_id)
    assert list(loaded.node_runs) == ["start", "llm"]
    assert loaded.node_runs["llm"] == state.node_runs["llm"]
    assert loaded.variables == {"count": 2} and loaded.inputs == {"q": "hi"} and loaded.sys["chat_id"] == "c1"
    assert (loaded.seq, loaded.node_executions, loaded.history, loaded.edges, loaded.ready) == (7, 2, [], {}, [])
    summary = await store.get_run("default", state.run_id)
    assert (summary.chat_id, summary.user_id, summary.status.value) == ("c1", "u1", "running")
    assert summary.tokens_in == 0  # usage totals are written once the run stops running

    state.status, state.finished_at, state.outputs, state.answer = "succeeded", time.time(), {"a": 1}, "yo"
    await store.checkpoint(state, CheckpointDelta([]), owner_id="owner-1")
    summary = await store.get_run("default", state.run_id)
    assert (summary.tokens_in, summary.tokens_out, summary.cost) == (3, 4, 0.5)
    assert (await store.load_run("default", state.run_id)).outputs == {"a": 1}


async def test_loop_rounds_replace_latest_run_and_fill_history(store):
    state = new_state()
    await store.create_run(state)
    for round_no in range(3):
        run = node("body", f"body-r{round_no}", status="succeeded", loop_id="loop", iteration=round_no,
                   started_at=10.0 + round_no)
        previous = state.node_runs.get("body")
        history_from = len(state.history)
        if previous is not None and round_no == 2:
            state.history.append(previous)  # round 2: history written in the same checkpoint
        state.node_runs["body"] = run
        await store.checkpoint(state, CheckpointDelta(["body"], history_from), owner_id=None)
    # round 1 replaced round 0 without history in the delta: the old row stopped being current
    loaded = await store.load_run("default", state.run_id)
    assert loaded.node_runs["body"].id == "body-r2"
    assert [run.id for run in loaded.history] == ["body-r0", "body-r1"]
    assert [run.id for run in await store.list_node_runs("default", state.run_id)] == ["body-r0", "body-r1",
                                                                                        "body-r2"]
    summary, detailed, every = await store.load_detail("default", state.run_id)
    assert summary == await store.get_run("default", state.run_id) and detailed == loaded
    assert [run.id for run in every] == ["body-r0", "body-r1", "body-r2"]
    # a fresh store (another process) continues the run: it learns the latest runs from the rows
    other = SqlStore.from_url(store.url)
    try:
        state.history.append(state.node_runs["body"])
        state.node_runs["body"] = node("body", "body-r3", loop_id="loop", iteration=3, started_at=13.0)
        await other.checkpoint(state, CheckpointDelta(["body"], 1), owner_id=None)
        loaded = await other.load_run("default", state.run_id)
        assert loaded.node_runs["body"].id == "body-r3"
        assert [run.id for run in loaded.history] == ["body-r0", "body-r1", "body-r2"]
    finally:
        await other.close()


async def test_interrupts_errors_and_summary(store):
    state = new_state(sys={"chat_id": "chat-9"})
    await store.create_run(state)
    state.status, state.paused_at = "paused", time.time()
    state.interrupts = {
        "i1": Interrupt(id="i1", node_id="ask", node_run_id="ask-r1", kind="user_select",
                        payload={"description": "?", "options": [{"id": "y", "label": "Yes"}]}),
        "i2": Interrupt(id="i2", node_id="ask", node_run_id="ask-r1", kind="form_input",
                        payload={"fields": []}, answered=True, answer=1),
    }
    state.node_runs["ask"] = node("ask", status="waiting")
    await store.checkpoint(state, CheckpointDelta(["ask"]), owner_id=None)
    loaded = await store.load_run("default", state.run_id)
    assert loaded.interrupts == state.interrupts and loaded.paused_at == pytest.approx(state.paused_at)
    summary = await store.get_run("default", state.run_id)
    assert [i.model_dump(mode="json") for i in summary.pending_interrupts] == [{"id": "i1", "node_id": "ask", "kind": "user_select",
                                           "payload": {"description": "?", "options": [{"id": "y", "label": "Yes"}],
                                                       "error": None}}]
    state.status, state.error = "failed", NodeError(type="NodeFailed", message="boom", node_id="ask")
    await store.checkpoint(state, CheckpointDelta([]), owner_id=None)
    assert (await store.get_run("default", state.run_id)).error.message == "boom"
    assert (await store.load_run("default", state.run_id)).error == state.error
    assert [s.run_id for s in await store.list_runs("default", chat_id="chat-9")] == [state.run_id]
    assert [s.run_id for s in await store.list_runs("default", status="failed", chat_id="chat-9")] == [state.run_id]
    assert await store.list_runs("default", status="running", chat_id="chat-9") == []


async def test_create_twice_raises_run_exists(store):
    state = new_state()
    await store.create_run(state)
    with pytest.raises(RunExists):
        await store.create_run(state)


async def test_checkpoint_with_lost_lease_raises(store):
    state = new_state()
    await store.create_run(state, owner=owner("owner-1", seconds=-1))
    await store.claim("default", state.run_id, owner("owner-2"))
    state.node_runs["a"] = node("a", status="succeeded")
    with pytest.raises(LeaseLost):
        await store.checkpoint(state, CheckpointDelta(["a"]), owner_id="owner-1")
    assert (await store.load_run("default", state.run_id)).node_runs == {}  # nothing of it was written
    await store.checkpoint(state, CheckpointDelta(["a"]), owner_id="owner-2")
    with pytest.raises(RunNotFound):
        await store.checkpoint(new_state(), CheckpointDelta([]), owner_id=None)


async def test_claim_renew_release_take_from(store):
    state = new_state()
    await store.create_run(state)
    with pytest.raises(RunNotFound):
        await store.claim("default", "no-such-run", owner())
    first = owner("owner-1")
    await store.claim("default", state.run_id, first)
    await store.claim("default", state.run_id, first)  # the owner claims again
    with pytest.raises(RunOwned) as raised:
        await store.claim("default", state.run_id, owner("owner-2"))
    assert raised.value.owner == first
    for part in ("owner-1", "host-a", "4242"):
        assert part in str(raised.value)
    await store.claim("default", state.run_id, owner("owner-2"), take_from="owner-1")
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-2"
    with pytest.raises(LeaseLost):
        await store.renew(state.run_id, "owner-1", time.time() + 60)
    await store.renew(state.run_id, "owner-2", 12345.0)
    assert (await store.get_run("default", state.run_id)).owner.lease_until == 12345.0  # expired: anyone claims
    await store.release(state.run_id, "owner-1")  # not the owner: no-op
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-2"
    await store.release(state.run_id, "owner-2")
    assert (await store.get_run("default", state.run_id)).owner is None
    await store.claim("default", state.run_id, owner("owner-3"))


async def test_claim_and_load_then_a_last_checkpoint_that_releases(store):
    state = new_state()
    await store.create_run(state)
    with pytest.raises(RunNotFound):
        await store.claim_and_load("other-tenant", state.run_id, owner("owner-1"))
    loaded = await store.claim_and_load("default", state.run_id, owner("owner-1"))
    assert loaded.run_id == state.run_id and loaded.status == state.status
    with pytest.raises(RunOwned):
        await store.claim_and_load("default", state.run_id, owner("owner-2"))
    loaded.node_runs["a"] = node("a", "a-1", status="succeeded")
    loaded.status = "succeeded"
    with pytest.raises(LeaseLost):  # another owner's release-checkpoint writes nothing
        await store.checkpoint(loaded, CheckpointDelta(["a"]), owner_id="owner-2", release=True)
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-1"
    await store.checkpoint(loaded, CheckpointDelta(["a"]), owner_id="owner-1", release=True)
    summary = await store.get_run("default", state.run_id)
    assert summary.owner is None and summary.status == "succeeded"
    assert (await store.load_run("default", state.run_id)).node_runs["a"].id == "a-1"


async def test_claim_and_load_takes_an_expired_lease_with_the_checkpointed_state(store):
    state = new_state(inputs={"q": "hi"}, variables={"count": 1})
    await store.create_run(state, owner=OwnerInfo(id="dead", host="host-a", pid=4242, lease_until=time.time() - 1))
    state.node_runs["a"] = node("a", status="succeeded", outputs={"answer": "yo"}, data={"k": [1]}, started_at=1.0)
    state.seq = 3
    await store.checkpoint(state, CheckpointDelta(["a"]), owner_id="dead")
    loaded = await store.claim_and_load("default", state.run_id, owner("owner-1"))
    assert loaded.node_runs == state.node_runs and loaded.inputs == {"q": "hi"} and loaded.seq == 3
    assert loaded.variables == {"count": 1}
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-1"
    with pytest.raises(RunOwned) as raised:  # a live lease: nothing changes
        await store.claim_and_load("default", state.run_id, owner("owner-2"))
    assert raised.value.owner.id == "owner-1"
    taken = await store.claim_and_load("default", state.run_id, owner("owner-2"), take_from="owner-1")
    assert taken.node_runs == state.node_runs
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-2"


async def test_claim_if_pending_only_claims_a_pending_unowned_run(store):
    state = new_state(status="pending")
    await store.create_run(state)
    assert not await store.claim_if_pending("other-tenant", state.run_id, owner("owner-1"))
    assert await store.claim_if_pending("default", state.run_id, owner("owner-1"))
    assert not await store.claim_if_pending("default", state.run_id, owner("owner-2"))  # owned
    assert (await store.get_run("default", state.run_id)).owner.id == "owner-1"
    await store.release(state.run_id, "owner-1")
    running = new_state()
    await store.create_run(running)
    assert not await store.claim_if_pending("default", running.run_id, owner("owner-1"))  # not pending
    assert (await store.get_run("default", running.run_id)).owner is None


async def test_two_concurrent_claims_one_wins(store):
    state = new_state()
    await store.create_run(state)
    stores = [SqlStore.from_url(store.url), SqlStore.from_url(store.url)]
    try:
        results = await asyncio.gather(*(s.claim("default", state.run_id, owner(f"racer-{i}"))
                                         for i, s in enumerate(stores)), return_exceptions=True)
    finally:
        for s in stores:
            await s.close()
    assert sorted(type(r).__name__ for r in results) == ["NoneType", "RunOwned"]
    winner = f"racer-{results.index(None)}"
    assert (await store.get_run("default", state.run_id)).owner.id == winner


async def test_tenant_isolation(store):
    state = new_state(tenant="tenant-a")
    await store.create_run(state)
    await store.append("tenant-a", state.run_id, [{"type": "run_started", "seq": 1, "run_id": state.run_id, "ts": 1.0}])
    for call in (store.get_run("tenant-b", state.run_id), store.load_run("tenant-b", state.run_id),
                 store.load_detail("tenant-b", state.run_id), store.claim("tenant-b", state.run_id, owner())):
        with pytest.raises(RunNotFound):
            await call
    with pytest.raises(RunNotFound):
        await store.send("tenant-b", RunCommand(run_id=state.run_id, kind="cancel"))
    assert await store.list_runs("tenant-b") == []
    assert await store.read("tenant-b", state.run_id) == []
    assert await store.list_node_runs("tenant-b", state.run_id) == []
    state_b = state.model_copy(update={"tenant_id": "tenant-b"})
    with pytest.raises(RunNotFound):
        await store.checkpoint(state_b, CheckpointDelta([]), owner_id=None)
    assert [s.run_id for s in await store.list_runs("tenant-a")] == [state.run_id]
    assert await store.prune("tenant-b", time.time() + 10) == 0


async def test_workflow_documents(store):
    doc = {"id": "wf", "nodes": [{"id": "start", "type": "start"}], "edges": []}
    digest = await store.put_workflow("tenant-a", doc)
    assert await store.put_workflow("tenant-a", doc) == digest
    assert await store.get_workflow("tenant-a", digest) == doc
    with pytest.raises(RunNotFound):
        await store.get_workflow("tenant-b", digest)


async def test_unreachable_database_is_a_store_error_with_masked_password():
    store = SqlStore.from_url("postgresql://flowloom:s3cret-pw@127.0.0.1:1/nowhere")
    with pytest.raises(StoreError) as raised:
        await store.get_run("default", "r")
    await store.close()
    assert "s3cret-pw" not in str(raised.value) and "***" in str(raised.value)
    assert "127.0.0.1:1/nowhere" in str(raised.value)


async def test_sqlite_file_and_parents_created_with_wal(tmp_path):
    path = tmp_path / "a" / "b" / "flowloom.db"
    store = await SqlStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        async with store._tx() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
            fks = (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar()
        assert path.exists() and mode == "wal" and fks == 1
    finally:
        await store.close()


def test_owner_info_roundtrip_type():
    assert OwnerInfo(id="x").lease_until == 0.0
