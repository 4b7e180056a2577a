"""Group commit (workers/sql/group.py): checkpoints of concurrent runs share one
transaction on SQLite and PostgreSQL, and each run's write stays all or nothing."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.engine import make_url

from engine.ports import CheckpointDelta, LeaseLost
from schemas.run import NodeRun
from workers.sql.checkpoint import _raw_connection

from .conftest import new_state, owner


def done(node_id: str, run_id: str) -> NodeRun:
    return NodeRun(id=f"{run_id}:{node_id}", node_id=node_id, kind="http_request", status="succeeded",
                   outputs={"status": 200}, started_at=1.0, finished_at=2.0)


async def _writers_of(store, database_url: str, run_ids: list[str]) -> int:
    """How many transactions wrote the ``runs`` rows of ``run_ids`` (PostgreSQL: distinct
    ``xmin``, the id of the transaction that wrote each row version)."""
    import asyncpg

    url = make_url(database_url)
    conn = await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password,
                                 database=url.database)
    try:
        return await conn.fetchval("SELECT count(DISTINCT xmin::text) FROM runs WHERE run_id = ANY($1::text[])",
                                   run_ids)
    finally:
        await conn.close()


async def _sqlite_commits(store) -> list[str]:
    """The COMMIT statements the store's SQLite connection runs from now on (its trace)."""
    driver = (await _raw_connection(await store._connection())).driver_connection
    seen: list[str] = []
    driver._conn.set_trace_callback(lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None)
    return seen


async def test_concurrent_checkpoints_of_many_runs_commit_together(store, database_url):
    states = [new_state() for _ in range(8)]
    for state in states:
        await store.create_run(state, owner=owner())
        state.node_runs["call"] = done("call", state.run_id)
    commits = await _sqlite_commits(store) if store.backend == "sqlite" else None
    await asyncio.gather(*(store.checkpoint(s, CheckpointDelta(["call"]), owner_id="owner-1") for s in states))
    if commits is not None:
        assert len(commits) == 1, commits
    else:
        assert await _writers_of(store, database_url, [s.run_id for s in states]) == 1
    for state in states:
        loaded = await store.load_run("default", state.run_id)
        assert loaded.node_runs["call"].outputs == {"status": 200}


async def test_a_lost_lease_in_a_batch_fails_only_its_own_run(store):
    states = [new_state() for _ in range(3)]
    for state in states:
        await store.create_run(state, owner=owner())
        state.node_runs["call"] = done("call", state.run_id)
    owners = ["owner-1", "someone-else", "owner-1"]
    results = await asyncio.gather(*(store.checkpoint(s, CheckpointDelta(["call"]), owner_id=o)
                                     for s, o in zip(states, owners, strict=True)), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], LeaseLost)
    stored = [await store.load_run("default", s.run_id) for s in states]
    assert [list(s.node_runs) for s in stored] == [["call"], [], ["call"]]


async def test_a_write_that_fails_in_a_batch_is_retried_alone_and_fails_only_its_run(store):
    states = [new_state() for _ in range(3)]
    for state in states:
        await store.create_run(state, owner=owner())
        state.node_runs["call"] = done("call", state.run_id)
    states[1].seq = 2 ** 70  # fits no integer column: this run's write fails in the database
    results = await asyncio.gather(*(store.checkpoint(s, CheckpointDelta(["call"]), owner_id="owner-1")
                                     for s in states), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], Exception)
    stored = [await store.load_run("default", s.run_id) for s in states]
    assert [list(s.node_runs) for s in stored] == [["call"], [], ["call"]]
    states[1].seq = 3  # the store is usable again for that run
    await store.checkpoint(states[1], CheckpointDelta(["call"]), owner_id="owner-1")
    assert list((await store.load_run("default", states[1].run_id)).node_runs) == ["call"]


async def test_two_checkpoints_of_one_run_sent_together_are_written_in_order(store):
    state = new_state()
    await store.create_run(state, owner=owner())
    first = state.model_copy(deep=True)
    first.node_runs["a"] = done("a", state.run_id)
    second = first.model_copy(deep=True)
    second.node_runs["b"] = done("b", state.run_id)
    second.seq = 5
    await asyncio.gather(store.checkpoint(first, CheckpointDelta(["a"]), owner_id="owner-1"),
                         store.checkpoint(second, CheckpointDelta(["b"]), owner_id="owner-1"))
    loaded = await store.load_run("default", state.run_id)
    assert list(loaded.node_runs) == ["a", "b"] and loaded.seq == 5


async def test_a_caller_cancelled_while_its_checkpoint_waits_writes_nothing(store):
    busy, waiting = new_state(), new_state()
    for state in (busy, waiting):
        await store.create_run(state, owner=owner())
        state.node_runs["call"] = done("call", state.run_id)
    async with store._lock:  # the writer cannot write yet: both checkpoints wait
        first = asyncio.ensure_future(store.checkpoint(busy, CheckpointDelta(["call"]), owner_id="owner-1"))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(store.checkpoint(waiting, CheckpointDelta(["call"]), owner_id="owner-1"))
        await asyncio.sleep(0)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
    await first
    assert list((await store.load_run("default", busy.run_id)).node_runs) == ["call"]
    assert (await store.load_run("default", waiting.run_id)).node_runs == {}
