"""The commits of a run through the front door, counted by the database (no timing):
a blocking run of a published workflow of pure nodes (``start -> template -> answer``)
admitted under the quotas makes two - its start (admission, the run created already
claimed, the published version checked) and its end checkpoint - on SQLite and on
PostgreSQL. And a process that dies between its start and its execution leaves a run
that recovery finishes, with its one admission."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from api.inline import InlineLauncher
from api.quotas import Quotas
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes import builtin_catalog
from nodes.llm.model_registry import get_registry
from schemas.launch import Placement, Published, StartRun
from schemas.records import OwnerInfo
from schemas.types import RunStatus
from tests.engine.test_service import store  # noqa: F401  (fixtures)
from workers.sql import quotas as sql_quotas
from workers.sql.checkpoint import _raw_connection
from workers.sql.keys import SqlKeyStore
from workers.sql.quotas import SqlQuotaStore
from workers.sql.workflows import SqlWorkflowStore

PLUMBING = {"id": "plumbing", "name": "plumbing",
            "inputs": [{"name": "name", "type": "string", "required": False, "default": "Ada"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "greet", "type": "template", "config": {"template": "Hello, {{ who }}!", "variables": [
                          {"name": "who", "value": {"ref": "inputs.name"}, "type": "string"}]}},
                      {"id": "say", "type": "answer", "config": {"text": "{{ greet.output }}"}}],
            "edges": [{"id": "e1", "source": "start", "target": "greet"},
                      {"id": "e2", "source": "greet", "target": "say"}]}
INLINE = Placement(execution="inline")


def _service(store: Any, tmp_path: Path) -> RunService:
    settings = Settings(home=tmp_path)
    return RunService(catalog=builtin_catalog(), stores=Stores(store, store, store, store), settings=settings,
                      models=get_registry(), launcher=InlineLauncher(),
                      admission=Quotas(SqlQuotaStore(store), settings))


async def _run(service: RunService, repo: SqlWorkflowStore) -> str:
    """A blocking run of the published version, as ``POST /v1/workflows/{id}/runs`` makes it."""
    found = await repo.published("default", "plumbing", cached=True)
    ticket = await service.launch("default", StartRun(found.doc, {"name": "Lin"}, workflow_version=str(found.version),
                                                      published=Published("plumbing", found.version, found.doc_hash)),
                                  INLINE)
    async for _event in service.follow("default", ticket.run_id):
        pass
    _summary, state, _node_runs = await service.detail("default", ticket.run_id)
    assert state.status is RunStatus.succeeded and state.answer == "Hello, Lin!"
    return ticket.run_id


class _Commits:
    """Commits of the store's connection, as the database counts them: SQLite's COMMIT
    statements (its trace), PostgreSQL's ``xact_commit`` of the database (its only
    backend is the store's; the statistics flushed by ``pg_stat_force_next_flush``, which
    takes effect before the statement's answer, so reading them needs no waiting)."""

    def __init__(self, store: Any, database_url: str) -> None:
        self.store, self.url = store, make_url(database_url)
        self.seen: list[str] = []

    async def start(self) -> None:
        if self.store.backend == "sqlite":
            driver = (await _raw_connection(await self.store._connection())).driver_connection
            driver._conn.set_trace_callback(lambda sql: self.seen.append(sql) if sql.strip().upper() == "COMMIT"
                                            else None)

    async def count(self) -> int:
        if self.store.backend == "sqlite":
            return len(self.seen)
        import asyncpg

        await self.store._pg("SELECT pg_stat_force_next_flush()")  # a commit too, counted once per read
        url = self.url
        conn = await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password,
                                     database="postgres")
        try:
            return int(await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
                                           url.database))
        finally:
            await conn.close()


async def test_a_blocking_run_of_a_published_workflow_makes_two_commits(store, database_url, tmp_path, monkeypatch):
    # The quota limits are read once and remembered (for a second in production): here for
    # the whole test, so what is counted is the runs' own commits.
    monkeypatch.setattr(sql_quotas, "LIMITS_CACHE_TTL_S", 3600.0)
    await SqlKeyStore(store).ensure_tenant("default")
    repo = SqlWorkflowStore(store)
    await repo.create("default", PLUMBING)
    await repo.publish("default", "plumbing", PLUMBING)
    service = _service(store, tmp_path)
    await _run(service, repo)  # the first run reads the published version and the limits
    commits = _Commits(store, database_url)
    await commits.start()
    before = await commits.count()
    runs = [await _run(service, repo) for _ in range(5)]
    after = await commits.count()
    flushes = 1 if store.backend == "postgresql" else 0
    assert (after - before - flushes) / len(runs) == 2
    async with store._tx() as conn:
        admitted = (await conn.execute(sa.text("SELECT count(*) FROM quota_admissions WHERE tenant_id = 'default'"))
                    ).scalar_one()
    assert admitted == 6  # every run has its admission


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


async def test_a_run_whose_process_died_after_its_start_is_recovered(store, tmp_path):
    """The start's transaction committed, then the process died before executing it: the
    run is pending and held by a dead process of this host - recoverable at once, with
    nothing half-made (its admission is there, no node ran)."""
    await SqlKeyStore(store).ensure_tenant("default")
    service = _service(store, tmp_path)
    dead = OwnerInfo(id="dead-owner", host=service.new_owner().host, pid=_dead_pid(),
                     lease_until=service.new_owner().lease_until)
    state = await service.prepare(PLUMBING, {"name": "Kim"}, owner=dead, admission=service.admission)
    service._prepared.clear()  # what the dead process knew is gone with it
    stored = await service.get("default", state.run_id)
    assert stored.status is RunStatus.pending and stored.owner.id == "dead-owner"
    assert [s.run_id for s in await service.recoverable("default")] == [state.run_id]

    async for _event in service.recover("default", state.run_id):
        pass
    _summary, done, node_runs = await service.detail("default", state.run_id)
    assert done.status is RunStatus.succeeded and done.answer == "Hello, Kim!"
    assert [n.node_id for n in node_runs] == ["start", "greet", "say"]  # each node ran once
    async with store._tx() as conn:
        admitted = (await conn.execute(sa.text("SELECT count(*) FROM quota_admissions WHERE run_id = :r"),
                                       {"r": state.run_id})).scalar_one()
    assert admitted == 1


@pytest.mark.parametrize("placement", ["queued", "inline"])
async def test_only_a_run_executed_here_is_created_claimed(store, tmp_path, placement):
    """A queued run is created unclaimed (a worker claims it); one executed here is
    created held by this process, and its execution makes no claim of its own."""
    from tests.engine.test_frontdoor import _Queue

    await SqlKeyStore(store).ensure_tenant("default")
    service = _service(store, tmp_path)
    queue = service.queue = _Queue()
    ticket = await service.launch("default", StartRun(PLUMBING, {}), Placement(execution=placement))
    if placement == "queued":
        assert ticket.queued and (await service.get("default", ticket.run_id)).owner is None
        assert [job.run_id for job in queue.launched] == [ticket.run_id]
        return
    async for _event in service.follow("default", ticket.run_id):
        pass
    summary = await service.get("default", ticket.run_id)
    assert summary.status is RunStatus.succeeded and summary.owner is None  # released by its last checkpoint
