"""A run's start as one transaction (workers/sql/launch.py), on SQLite and PostgreSQL:
the quota admission, the run created already claimed, its document, and the condition
that the published version it was built from is still the published one - all written or
none of it."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from engine.ports import NewRun, RunExists, StalePublished
from schemas.launch import Published
from workers.sql import launch
from workers.sql.checkpoint import _raw_connection
from workers.sql.keys import SqlKeyStore
from workers.sql.quotas import QuotaCheck, QuotaRefusal, SqlQuotaStore
from workers.sql.workflows import SqlWorkflowStore

from .conftest import new_state, owner

DOC = {"id": "wf", "nodes": [{"id": "start", "type": "start"}], "edges": []}
DOC_2 = {"id": "wf", "name": "second", "nodes": [{"id": "start", "type": "start"}], "edges": []}


async def _count(store, sql: str, **params) -> int:
    async with store._tx() as conn:
        return int((await conn.execute(sa.text(sql), params)).scalar_one())


async def _tenant(store, tenant: str) -> None:
    await SqlKeyStore(store).ensure_tenant(tenant)


def _pending(tenant: str):
    return new_state(tenant, status="pending")


async def test_a_refused_admission_leaves_no_run(store):
    tenant = f"t-{time.time_ns()}"
    await _tenant(store, tenant)
    quotas = SqlQuotaStore(store)
    checks = [QuotaCheck(None, 1, 0)]
    now = time.time()
    first, second = _pending(tenant), _pending(tenant)
    admitted = await quotas.admit(tenant, "wf", first.run_id, checks, now=now, day_start=0, day_end=now + 60,
                                  run=NewRun(first, owner()))
    assert isinstance(admitted, int)
    refused = await quotas.admit(tenant, "wf", second.run_id, checks, now=now, day_start=0, day_end=now + 60,
                                 run=NewRun(second, owner()))
    assert isinstance(refused, QuotaRefusal) and refused.quota == "runs_per_minute"
    assert await _count(store, "SELECT count(*) FROM runs WHERE tenant_id = :t", t=tenant) == 1
    assert (await store.get_run(tenant, first.run_id)).owner.id == "owner-1"  # created claimed
    assert await _count(store, "SELECT count(*) FROM quota_admissions WHERE tenant_id = :t", t=tenant) == 1


@pytest.mark.parametrize("counting", [False, True], ids=["record", "counting"])
async def test_a_run_that_cannot_be_created_leaves_no_admission(store, counting):
    tenant = f"t-{time.time_ns()}"
    await _tenant(store, tenant)
    quotas = SqlQuotaStore(store)
    state = _pending(tenant)
    await store.create_run(state)
    again = _pending(tenant)
    again.run_id = state.run_id  # the same id: the creation fails after the admission was written
    now = time.time()
    with pytest.raises(RunExists):
        if counting:
            await quotas.admit(tenant, "wf", again.run_id, [QuotaCheck(None, 100, 0)], now=now, day_start=0,
                               day_end=now + 60, run=NewRun(again, owner()))
        else:
            await quotas.record(tenant, "wf", again.run_id, now=now, run=NewRun(again, owner()))
    assert await _count(store, "SELECT count(*) FROM quota_admissions WHERE tenant_id = :t", t=tenant) == 0
    assert (await store.get_run(tenant, state.run_id)).owner is None  # the first run is untouched


async def test_a_remembered_published_version_that_changed_starts_nothing(store):
    tenant = f"t-{time.time_ns()}"
    await _tenant(store, tenant)
    repo = SqlWorkflowStore(store)
    await repo.create(tenant, DOC)
    v1 = await repo.publish(tenant, "wf", DOC)
    assert (await repo.published(tenant, "wf", cached=True)).version == 1
    v2 = await repo.publish(tenant, "wf", DOC_2)
    # Another process published v2: this one still remembers v1 (its publish forgot nothing here).
    launch.remember(store._url, v1)
    stale = await repo.published(tenant, "wf", cached=True)
    assert stale.version == 1  # from memory, no read

    state = _pending(tenant)
    state.workflow_hash = v1.doc_hash
    with pytest.raises(StalePublished):
        await SqlQuotaStore(store).record(tenant, "wf", state.run_id, now=time.time(), run=NewRun(
            state, owner(), DOC, Published("wf", 1, v1.doc_hash)))
    assert await _count(store, "SELECT count(*) FROM runs WHERE tenant_id = :t", t=tenant) == 0
    assert await _count(store, "SELECT count(*) FROM quota_admissions WHERE tenant_id = :t", t=tenant) == 0
    assert launch.remembered(store._url, tenant, "wf") is None  # forgotten: the next start reads
    fresh = await repo.published(tenant, "wf", cached=True)
    assert (fresh.version, fresh.doc_hash) == (2, v2.doc_hash)

    state.workflow_hash = v2.doc_hash
    await store.create_run(state, owner=owner(), published=Published("wf", 2, v2.doc_hash))
    assert (await store.get_run(tenant, state.run_id)).workflow_hash == v2.doc_hash


async def test_a_publish_in_this_process_forgets_the_remembered_version(store):
    tenant = f"t-{time.time_ns()}"
    await _tenant(store, tenant)
    repo = SqlWorkflowStore(store)
    await repo.create(tenant, DOC)
    await repo.publish(tenant, "wf", DOC)
    assert (await repo.published(tenant, "wf", cached=True)).version == 1
    await repo.publish(tenant, "wf", DOC_2)
    assert (await repo.published(tenant, "wf", cached=True)).version == 2
    await repo.delete(tenant, "wf")
    assert launch.remembered(store._url, tenant, "wf") is None


async def _xmins(database_url: str, sql: str, *args) -> set[str]:
    import asyncpg

    url = make_url(database_url)
    conn = await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password,
                                 database=url.database)
    try:
        return {row[0] for row in await conn.fetch(sql, *args)}
    finally:
        await conn.close()


async def test_admission_document_and_run_are_one_commit(store, database_url):
    tenant = f"t-{time.time_ns()}"
    await _tenant(store, tenant)
    state = _pending(tenant)
    state.workflow_hash = f"hash-{time.time_ns()}"
    commits: list[str] = []
    if store.backend == "sqlite":
        driver = (await _raw_connection(await store._connection())).driver_connection
        driver._conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
    admission = await SqlQuotaStore(store).record(tenant, "wf", state.run_id, now=time.time(),
                                                  run=NewRun(state, owner(), DOC))
    if store.backend == "sqlite":
        driver._conn.set_trace_callback(None)
        assert len(commits) == 1, commits
    else:
        writers = await _xmins(database_url, "SELECT xmin::text FROM runs WHERE run_id = $1 UNION "
                                             "SELECT xmin::text FROM quota_admissions WHERE id = $2 UNION "
                                             "SELECT xmin::text FROM workflow_docs WHERE content_hash = $3",
                               state.run_id, admission, state.workflow_hash)
        assert len(writers) == 1, writers
    assert await store.get_workflow(tenant, state.workflow_hash) == DOC
    summary = await store.get_run(tenant, state.run_id)
    assert summary.owner.id == "owner-1" and summary.status.value == "pending"
    # Created claimed: nobody else may claim it while its lease runs.
    assert not await store.claim_if_pending(tenant, state.run_id, owner("owner-2"))


async def test_a_start_that_need_not_wait_for_the_disk_leaves_later_commits_waiting(store):
    """``durable=False`` relaxes the start's own commit only: the checkpoint that follows
    on the same connection waits for the disk again (PostgreSQL's ``synchronous_commit``
    is set for that one transaction)."""
    tenant = f"t-{time.time_ns()}"
    state = _pending(tenant)
    await store.create_run(state, owner=owner(), durable=False)
    assert (await store.get_run(tenant, state.run_id)).owner.id == "owner-1"
    if store.backend == "postgresql":
        async with store._lock:
            driver = (await _raw_connection(await store._connection())).driver_connection
            assert await driver.fetchval("SHOW synchronous_commit") == "on"
