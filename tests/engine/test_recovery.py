"""The recovery loop over the real SQL store (SQLite file and PostgreSQL): the cross-tenant
look for unfinished runs nobody holds, what counts as orphaned, two processes' loops
racing on the same orphans (each run continued exactly once), the concurrency bound, and
a watcher that reports the orphan it watches and then follows its recovered execution."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from typing import Any

from engine.leases import orphaned
from engine.ports import CheckpointDelta
from engine.recovery import OrphanRecovery
from schemas.records import OwnerInfo, RunSummary
from schemas.types import RunStatus
from tests.engine.test_service import drain, probe, service_of, store  # noqa: F401  (fixtures)
from tests.support.workflows import build, chain_edges
from workers.sql import SqlStore

QUICK = build([probe("a", value=1), probe("slow", sleep=0.3), probe("b", value=2)],
              chain_edges("start", "a", "slow", "b"))


def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


async def running_run(service: Any, store: SqlStore, tenant_id: str, owner: OwnerInfo | None) -> str:
    """A run stored ``running`` (as after its first checkpoint: started, with its deadline), held by ``owner``."""
    state = await service.prepare(QUICK, {}, tenant_id=tenant_id)
    state.status, state.started_at = RunStatus.running, time.time()
    state.deadline = state.started_at + 3600
    await store.checkpoint(state, CheckpointDelta([]), owner_id=None)
    if owner is not None:
        await store.claim(tenant_id, state.run_id, owner)
    return state.run_id


async def test_the_look_reads_unfinished_unheld_runs_of_every_tenant_oldest_first(store, tmp_path):
    service = service_of(store, tmp_path)
    here, now = socket.gethostname(), time.time()
    dead = await running_run(service, store, "t1", OwnerInfo(id="d", host=here, pid=dead_pid(), lease_until=now + 600))
    expired = await running_run(service, store, "t2", OwnerInfo(id="e", host="far", pid=7, lease_until=now - 1))
    await running_run(service, store, "t2", OwnerInfo(id="h", host="far", pid=7, lease_until=now + 600))  # held
    unheld = await running_run(service, store, "t1", None)
    fresh = (await service.prepare(QUICK, {}, tenant_id="t2")).run_id  # pending, just prepared
    paused = await running_run(service, store, "t1", None)
    state = await store.load_run("t1", paused)
    state.status = RunStatus.paused
    await store.checkpoint(state, CheckpointDelta([]), owner_id=None)

    found = await store.list_unfinished(now=time.time(), host=here)
    assert [s.run_id for s in found] == [dead, expired, unheld, fresh], "held and paused runs are left out"
    assert {s.run_id: s.tenant_id for s in found} == {dead: "t1", expired: "t2", unheld: "t1", fresh: "t2"}
    later = time.time()
    assert [s.run_id for s in found if orphaned(s, now=later, pending_grace_s=30)] == [dead, expired, unheld]
    assert [s.run_id for s in found if orphaned(s, now=later + 31, pending_grace_s=30)] == [dead, expired, unheld,
                                                                                            fresh]
    assert [s.run_id for s in await store.list_unfinished(now=time.time(), host=here, limit=2)] == [dead, expired]


async def test_two_loops_racing_on_the_same_orphans_continue_each_exactly_once_within_their_bound(
        store, database_url, tmp_path):
    other_store = await SqlStore.open(database_url)  # a second process's store on the same database
    try:
        services = [service_of(store, tmp_path), service_of(other_store, tmp_path)]
        gone = OwnerInfo(id="crashed", host="lost-host", pid=1, lease_until=time.time() - 1)
        orphans = [await running_run(services[0], store, f"t{i % 2}", gone) for i in range(6)]
        executed: list[str] = []
        active, peak = [0, 0], [0, 0]

        def recover_with(index: int) -> Any:
            async def recover_one(summary: RunSummary) -> None:
                active[index] += 1
                peak[index] = max(peak[index], active[index])
                try:
                    events = await drain(services[index].recover(summary.tenant_id, summary.run_id))
                    executed.append(summary.run_id)
                    assert events[-1].type == "run_finished"
                finally:
                    active[index] -= 1
            return recover_one

        loops = [OrphanRecovery(services[i], recover_with(i), concurrency=2, interval_s=0.2) for i in (0, 1)]
        for loop in loops:
            await loop.start()
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while len(executed) < len(orphans):
            assert time.monotonic() < deadline, executed
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # further looks find nothing more to do
        for loop in loops:
            await loop.close()

        assert sorted(executed) == sorted(orphans), "each orphan continued exactly once, by one of the two"
        assert max(peak) <= 2
        for run_id, tenant in zip(orphans, [f"t{i % 2}" for i in range(6)], strict=True):
            summary = await store.get_run(tenant, run_id)
            assert summary.status is RunStatus.succeeded and summary.owner is None
            assert [n.attempts for n in await store.list_node_runs(tenant, run_id)] == [1, 1, 1, 1]
    finally:
        await other_store.close()


async def test_a_watcher_reports_the_orphan_it_watches_and_follows_its_recovered_execution(store, tmp_path):
    service = service_of(store, tmp_path, lease_ttl=60)
    loop = OrphanRecovery(service, lambda s: drain(service.recover(s.tenant_id, s.run_id)), interval_s=3600)
    await loop.start(settle_s=1)  # the look on start is done (nothing found); the next one is an hour away
    gone = OwnerInfo(id="crashed", host=socket.gethostname(), pid=dead_pid(), lease_until=time.time() + 600)
    run_id = await running_run(service, store, "default", gone)
    try:
        began = time.monotonic()
        seen = await asyncio.wait_for(drain(service.watch("default", run_id)), 10)
        assert time.monotonic() - began < 5, "recovered when the watcher reported it, not at the next look"
    finally:
        await loop.close()
    assert seen[-1]["type"] == "run_finished"
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert loop.recovered == [run_id]


async def test_a_run_this_process_executes_is_not_its_own_orphan_when_its_lease_lapses(store, tmp_path):
    """A loop stalled past the heartbeat lets the lease lapse; the run is still executing
    here, so this process's own look must leave it (taking it over would run its node in
    flight a second time)."""
    service = service_of(store, tmp_path, lease_ttl=60)
    slow = build([probe("slow", sleep=1.0), probe("b", value=2)], chain_edges("start", "slow", "b"))
    state = await service.prepare(slow, {}, tenant_id="default")
    running = asyncio.ensure_future(drain(service.execute("default", state.run_id)))
    deadline = time.monotonic() + 30
    while (summary := await store.get_run("default", state.run_id)).owner is None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    await store.renew(state.run_id, summary.owner.id, time.time() - 1)  # the lapse a stalled loop leaves
    lapsed = await store.list_unfinished(now=time.time(), host=socket.gethostname())
    assert state.run_id in [s.run_id for s in lapsed], "the store alone would call it orphaned"
    loop = OrphanRecovery(service, lambda s: drain(service.recover(s.tenant_id, s.run_id)), interval_s=3600)
    assert await loop.scan() == []
    events = await running
    assert events[-1].type == "run_finished"
    assert [n.attempts for n in await store.list_node_runs("default", state.run_id)] == [1, 1, 1]
