"""A store that fails while runs execute, with the real stores: a SQLite database whose
disk fills up (``PRAGMA max_page_count`` on the store's own connection: every write that
needs a new page fails with SQLITE_FULL, "database or disk is full", as on a full disk)
and a PostgreSQL server stopped and started again (a private ``pgserver`` of this module).

Whatever happens, the run ends in a state that says so, a follower is told an end only
once it is stored (a run told failed is stored failed, and recovery leaves it so), and
the stored event log has each sequence number once, from 1 with no gap, holding the very
events the follower was told under those numbers."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.inline import InlineLauncher
from engine.execution import RunInterrupted
from engine.recovery import OrphanRecovery
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes.llm.model_registry import get_registry
from schemas.launch import Placement, StartRun
from schemas.types import RunStatus
from tests.support import fake_nodes
from tests.support.catalog import TEST_CATALOG
from tests.support.workflows import build, chain_edges, node
from workers.sql import SqlStore
from workers.sql.checkpoint import _raw_connection

#: a value whose node run and events need pages of their own: writing them needs the disk
BIG = "x" * 20_000
INLINE = Placement(execution="inline")


def _doc(sleep: float) -> dict[str, Any]:
    return build([node("a", "probe", {"value": 1}), node("slow", "probe", {"sleep": sleep, "value": BIG}),
                  node("b", "probe", {"value": BIG})], chain_edges("start", "a", "slow", "b"))


def _service(store: SqlStore, home: Path, **settings: Any) -> RunService:
    return RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                      settings=Settings(home=home, **settings), models=get_registry(), launcher=InlineLauncher())


async def _follow(service: RunService, run_id: str) -> tuple[list[Any], BaseException | None]:
    """What a client following the run is told: its events, and the error that ended the stream."""
    told: list[Any] = []
    try:
        async for event in service.follow("default", run_id):
            told.append(event)
    except Exception as error:
        return told, error
    return told, None


async def _start(service: RunService, sleep: float) -> tuple[str, asyncio.Task[Any]]:
    fake_nodes.CALLS.clear()
    ticket = await service.launch("default", StartRun(_doc(sleep)), INLINE)
    return ticket.run_id, asyncio.create_task(_follow(service, ticket.run_id))


async def _check_log(store: SqlStore, run_id: str, told: list[Any]) -> list[dict[str, Any]]:
    """The stored events: seqs 1..n, each once; every event the client was told under a
    stored seq is the stored one (no sequence number names two different events)."""
    stored = await store.read("default", run_id, 0, limit=10_000)
    seqs = [e["seq"] for e in stored]
    assert seqs == list(range(1, len(seqs) + 1)), f"stored seqs have a gap or a repeat: {seqs}"
    by_seq = {e["seq"]: (e["type"], e.get("node_id")) for e in stored}
    for event in told:
        if event.type != "node_delta" and event.seq in by_seq:
            assert by_seq[event.seq] == (event.type, getattr(event, "node_id", None)), \
                f"seq {event.seq} was told as {event.type} but stored as {by_seq[event.seq]}"
    return stored


async def _wait_until(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"not within {seconds}s: {what}"
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------------- SQLite, full disk


async def _on_connection(store: SqlStore, sql: str) -> list[Any]:
    """``sql`` on the store's own connection (a pragma is per connection)."""
    async with store._lock:
        driver = (await _raw_connection(await store._connection())).driver_connection
        return await driver._execute(lambda db: db.execute(sql).fetchall(), driver._conn)


async def _fill_disk(store: SqlStore) -> None:
    (pages,), = await _on_connection(store, "PRAGMA page_count")
    await _on_connection(store, f"PRAGMA max_page_count = {pages}")


async def _free_disk(store: SqlStore) -> None:
    await _on_connection(store, "PRAGMA max_page_count = 1073741823")


@pytest.fixture
async def sqlite_store(tmp_path) -> Any:
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    yield store
    await store.close()


async def test_a_disk_full_for_a_moment_pauses_the_run_which_then_succeeds_with_its_log_intact(sqlite_store, tmp_path):
    service = _service(sqlite_store, tmp_path, store_retry_s=30)
    run_id, following = await _start(service, sleep=0.4)
    await asyncio.sleep(0.1)  # in node "slow"
    await _fill_disk(sqlite_store)
    await asyncio.sleep(1.0)  # "slow" finished meanwhile: its checkpoint finds the disk full
    assert (await sqlite_store.get_run("default", run_id)).status is RunStatus.running
    await _free_disk(sqlite_store)
    told, error = await asyncio.wait_for(following, 30)

    assert error is None and told[-1].type == "run_finished"
    summary = await sqlite_store.get_run("default", run_id)
    assert summary.status is RunStatus.succeeded and summary.owner is None
    assert fake_nodes.CALLS == {"a": 1, "slow": 1, "b": 1}, "nothing ran twice"
    stored = await _check_log(sqlite_store, run_id, told)
    assert [e["seq"] for e in stored] == [e.seq for e in told]


async def test_the_store_tells_a_full_disk_from_a_refused_write(sqlite_store):
    from engine.ports import CheckpointDelta, RunExists, StoreUnavailable
    from tests.workers.sql.conftest import new_state

    state = new_state()
    await sqlite_store.create_run(state)
    with pytest.raises(RunExists) as refused:  # the request is wrong: trying again cannot help
        await sqlite_store.create_run(state)
    assert not isinstance(refused.value, StoreUnavailable)
    await _fill_disk(sqlite_store)
    state.outputs = {"value": BIG}
    with pytest.raises(StoreUnavailable, match="database or disk is full"):  # the same write may pass later
        await sqlite_store.checkpoint(state, CheckpointDelta([]), owner_id=None)
    await _free_disk(sqlite_store)
    await sqlite_store.checkpoint(state, CheckpointDelta([]), owner_id=None)
    assert (await sqlite_store.load_run("default", state.run_id)).outputs == {"value": BIG}


@pytest.mark.slow
async def test_a_disk_that_stays_full_interrupts_the_run_without_telling_an_end_and_it_ends_failed_once_freed(
        sqlite_store, tmp_path):
    service = _service(sqlite_store, tmp_path, store_retry_s=0.5)
    recovery = OrphanRecovery(service, lambda s: _drain(service.recover(s.tenant_id, s.run_id)), interval_s=0.2)
    await recovery.start()
    try:
        run_id, following = await _start(service, sleep=0.3)
        await asyncio.sleep(0.1)
        await _fill_disk(sqlite_store)
        told, error = await asyncio.wait_for(following, 30)

        assert isinstance(error, RunInterrupted), error
        assert "database or disk is full" in str(error) and "follow the run again" in str(error)
        assert not [e for e in told if e.type in ("run_finished", "run_failed", "run_cancelled")], \
            "no end is told that the store does not hold"
        assert (await sqlite_store.get_run("default", run_id)).status is RunStatus.running
        await asyncio.sleep(0.5)  # the process's recovery looks meanwhile: the run is not continued
        await _free_disk(sqlite_store)

        async def ended() -> bool:
            return (await sqlite_store.get_run("default", run_id)).status is not RunStatus.running
        await _wait_until(ended, 10, "the interrupted run is stored as it ended")
        await asyncio.sleep(0.6)  # the recovery loop looks again: an ended run stays as it is
        summary = await sqlite_store.get_run("default", run_id)
        assert summary.status is RunStatus.failed and summary.owner is None
        assert summary.error.reason == "store_error" and "database or disk is full" in summary.error.message
        assert recovery.recovered == [] and fake_nodes.CALLS == {"a": 1, "slow": 1}
        stored = await _check_log(sqlite_store, run_id, told)
        assert stored[-1]["type"] == "run_failed"
        again, error = await _follow(service, run_id)
        assert error is None and [e.seq for e in again] == [e["seq"] for e in stored]
    finally:
        await recovery.close()


async def _drain(events: Any) -> None:
    async for _event in events:
        pass


# --------------------------------------------------------------- PostgreSQL, stopped and started


class _Server:
    """A private PostgreSQL (``pgserver``) the tests stop and start again."""

    def __init__(self, folder: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
        self.server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()


@pytest.fixture(scope="module")
def pg_server() -> Iterator[_Server]:
    folder = Path(tempfile.mkdtemp(prefix="flowloom-storefail-"))
    server = _Server(folder)
    try:
        yield server
    finally:
        server.start()  # cleaned up as a running server (a test may fail while it is stopped)
        server.server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def pg_store(pg_server) -> Any:
    import uuid

    import asyncpg

    name = f"storefail_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(pg_server.url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    base, _, query = pg_server.url.partition("?")
    store = await SqlStore.open(f"{base.rsplit('/', 1)[0]}/{name}?{query}")
    yield store
    await store.close()


@pytest.mark.slow
async def test_postgresql_restarted_while_a_run_waits_in_a_node_the_run_succeeds_with_its_log_intact(
        pg_server, pg_store, tmp_path):
    service = _service(pg_store, tmp_path, store_retry_s=30)
    run_id, following = await _start(service, sleep=0.5)
    await asyncio.sleep(0.1)
    await asyncio.to_thread(pg_server.stop)
    await asyncio.sleep(1.0)
    await asyncio.to_thread(pg_server.start)
    told, error = await asyncio.wait_for(following, 30)

    assert error is None and told[-1].type == "run_finished"
    summary = await pg_store.get_run("default", run_id)
    assert summary.status is RunStatus.succeeded and summary.owner is None
    assert fake_nodes.CALLS == {"a": 1, "slow": 1, "b": 1}
    stored = await _check_log(pg_store, run_id, told)
    assert [e["seq"] for e in stored] == [e.seq for e in told]


@pytest.mark.slow
async def test_postgresql_down_longer_than_the_wait_interrupts_the_run_and_it_ends_failed_once_back(
        pg_server, pg_store, tmp_path):
    service = _service(pg_store, tmp_path, store_retry_s=0.5, lease_ttl=30)
    run_id, following = await _start(service, sleep=0.3)
    await asyncio.sleep(0.1)
    await asyncio.to_thread(pg_server.stop)
    try:
        told, error = await asyncio.wait_for(following, 30)
        assert isinstance(error, RunInterrupted), error
        assert not [e for e in told if e.type in ("run_finished", "run_failed", "run_cancelled")]
    finally:
        await asyncio.to_thread(pg_server.start)

    async def ended() -> bool:
        return (await pg_store.get_run("default", run_id)).status is not RunStatus.running
    await _wait_until(ended, 15, "the interrupted run is stored as it ended")
    summary = await pg_store.get_run("default", run_id)
    assert summary.status is RunStatus.failed and summary.owner is None
    assert summary.error.reason == "store_error"
    stored = await _check_log(pg_store, run_id, told)
    assert stored[-1]["type"] == "run_failed"
    with pytest.raises(Exception) as refused:  # ended: recovery has nothing to continue
        await _drain(service.recover("default", run_id))
    assert "failed" in str(refused.value)
    assert (await pg_store.get_run("default", run_id)).status is RunStatus.failed



@pytest.mark.slow
async def test_after_a_postgresql_restart_the_stores_next_checkpoint_reconnects(pg_server, pg_store):
    from engine.ports import CheckpointDelta
    from tests.workers.sql.conftest import new_state

    state = new_state()
    await pg_store.create_run(state)
    await pg_store.checkpoint(state, CheckpointDelta([]), owner_id=None)  # the connection is open and used
    await asyncio.to_thread(pg_server.stop)
    await asyncio.to_thread(pg_server.start)
    state.seq = 1
    await pg_store.checkpoint(state, CheckpointDelta([]), owner_id=None)  # on a new connection, not the dead one
    assert (await pg_store.load_run("default", state.run_id)).seq == 1


@pytest.mark.slow
async def test_an_end_reached_while_the_disk_is_full_is_told_only_once_stored_and_recovery_leaves_it(
        sqlite_store, tmp_path):
    service = _service(sqlite_store, tmp_path, store_retry_s=30)
    fake_nodes.CALLS.clear()
    doc = {**_doc(0.2), "limits": {"max_wall_time": 0.6}}  # the run's time ends while it waits for the disk
    ticket = await service.launch("default", StartRun(doc), INLINE)
    following = asyncio.create_task(_follow(service, ticket.run_id))
    await asyncio.sleep(0.05)
    await _fill_disk(sqlite_store)
    await asyncio.sleep(1.0)
    assert not following.done(), "no end told while the store cannot hold it"
    assert (await sqlite_store.get_run("default", ticket.run_id)).status is RunStatus.running
    await _free_disk(sqlite_store)
    told, error = await asyncio.wait_for(following, 30)

    assert error is None and told[-1].type == "run_failed" and told[-1].reason == "max_wall_time"
    summary = await sqlite_store.get_run("default", ticket.run_id)
    assert summary.status is RunStatus.failed and summary.owner is None
    with pytest.raises(Exception) as refused:  # what the client was told stays so
        await _drain(service.recover("default", ticket.run_id))
    assert "failed" in str(refused.value)
    assert (await sqlite_store.get_run("default", ticket.run_id)).status is RunStatus.failed
    stored = await _check_log(sqlite_store, ticket.run_id, told)
    assert [e["seq"] for e in stored] == [e.seq for e in told]
