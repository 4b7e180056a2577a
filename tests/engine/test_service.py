"""The run service over the real SQL store (SQLite file and PostgreSQL): leases and their
expiry, the heartbeat, watching a run (replay, then live), cancelling runs nobody executes,
chats, recovery listing and retention."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from engine.ports import RunOwned
from engine.service import RunNotResumable, RunService, Stores
from engine.settings import Settings
from nodes.llm.model_registry import get_registry
from schemas.records import OwnerInfo
from schemas.types import RunStatus
from tests.support.catalog import TEST_CATALOG
from tests.support.workflows import build, chain_edges, node
from workers.sql import SqlStore


@pytest.fixture
async def store(database_url) -> Any:
    opened = await SqlStore.open(database_url)
    yield opened
    await opened.close()


def service_of(store: SqlStore, tmp_path: Path, **settings: Any) -> RunService:
    return RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                      settings=Settings(home=tmp_path, **settings), models=get_registry())


def probe(node_id: str, **config: Any) -> dict[str, Any]:
    return node(node_id, "probe", config)


SLOW = build([probe("a", value=1), probe("slow", sleep=1.2), probe("b", value=2)], chain_edges("start", "a", "slow", "b"))


async def drain(events: Any) -> list[Any]:
    return [event async for event in events]


async def test_a_lease_held_by_another_host_expires_then_the_run_is_recoverable(store, tmp_path):
    service = service_of(store, tmp_path)
    state = await service.prepare(SLOW, {})
    stranger = OwnerInfo(id="other", host="another-host", pid=1, lease_until=time.time() + 0.6)
    await store.claim("default", state.run_id, stranger)
    with pytest.raises(RunOwned) as owned:
        await drain(service.recover("default", state.run_id))
    assert owned.value.owner is not None and owned.value.owner.host == "another-host"
    assert "another-host" in str(owned.value)
    assert [s.run_id for s in await service.recoverable()] == []
    await asyncio.sleep(0.7)
    assert [s.run_id for s in await service.recoverable()] == [state.run_id]
    events = await drain(service.recover("default", state.run_id))
    assert events[-1].type == "run_finished"


async def test_a_dead_process_of_this_host_is_taken_over_at_once(store, tmp_path):
    import os
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    service = service_of(store, tmp_path)
    state = await service.prepare(SLOW, {})
    await store.claim("default", state.run_id, OwnerInfo(id="dead", host=socket.gethostname(),
                                                         pid=int(gone.stdout), lease_until=time.time() + 600))
    assert os.getpid() != int(gone.stdout)
    events = await drain(service.recover("default", state.run_id))
    assert events[-1].type == "run_finished"


async def test_the_heartbeat_keeps_a_long_node_owned_past_the_lease_length(store, tmp_path):
    service = service_of(store, tmp_path, lease_ttl=0.3)
    state = await service.prepare(SLOW, {})
    events = await drain(service.execute("default", state.run_id))
    assert events[-1].type == "run_finished", events[-1]
    summary = await service.get("default", state.run_id)
    assert summary.status is RunStatus.succeeded and summary.owner is None, "released at the end"


async def test_watch_replays_what_was_missed_then_follows_live(store, tmp_path):
    service = service_of(store, tmp_path)
    state = await service.prepare(SLOW, {})
    running = asyncio.ensure_future(drain(service.execute("default", state.run_id)))
    await asyncio.sleep(0.6)  # a finished, slow running
    seen = [event async for event in service.watch("default", state.run_id, after_seq=2)]
    produced = await running
    assert [e["seq"] for e in seen] == [e.seq for e in produced if e.seq > 2]
    assert seen[-1]["type"] == "run_finished"
    later = [event async for event in service.watch("default", state.run_id)]  # after the end: the durable log
    assert [e["seq"] for e in later] == [e.seq for e in produced if e.type != "node_delta"]


async def test_cancel_ends_a_pending_run_and_refuses_an_ended_one(store, tmp_path):
    service = service_of(store, tmp_path)
    state = await service.prepare(SLOW, {})
    summary = await service.cancel("default", state.run_id)
    assert summary.status is RunStatus.cancelled and summary.error.reason == "cancelled"
    events = [e async for e in service.watch("default", state.run_id)]
    assert [e["type"] for e in events] == ["run_cancelled"], "the log ends with the run's end"
    with pytest.raises(RunNotResumable, match="already ended"):
        await service.cancel("default", state.run_id)
    with pytest.raises(RunNotResumable):
        await drain(service.execute("default", state.run_id))


async def test_cancel_reaches_a_run_executing_elsewhere_through_the_command_channel(store, tmp_path):
    runner, other = service_of(store, tmp_path), service_of(store, tmp_path)
    state = await runner.prepare(build([probe("wait", sleep=30)], chain_edges("start", "wait")), {})
    running = asyncio.ensure_future(drain(runner.execute("default", state.run_id)))
    await asyncio.sleep(0.3)
    other._live.clear()  # the other service knows the run only through the store
    sent = time.monotonic()
    await other.cancel("default", state.run_id, "stop from elsewhere")
    events = await running
    assert time.monotonic() - sent < 1.0
    assert [e.type for e in events][-1] == "run_cancelled"
    runs = {r.node_id: r.status.value for r in await other.node_runs("default", state.run_id)}
    assert runs["wait"] == "cancelled"


async def test_runs_of_another_tenant_are_invisible(store, tmp_path):
    service = service_of(store, tmp_path)
    state = await service.prepare(SLOW, {}, tenant_id="acme")
    from engine.ports import RunNotFound

    with pytest.raises(RunNotFound):
        await service.get("default", state.run_id)
    with pytest.raises(RunNotFound):
        await service.cancel("default", state.run_id)
    assert await service.list("default") == []
    assert [s.run_id for s in await service.list("acme")] == [state.run_id]


async def test_prune_deletes_only_ended_runs_older_than_the_cut(store, tmp_path):
    service = service_of(store, tmp_path)
    ended = await service.prepare(build([probe("a", value=1)], chain_edges("start", "a")), {})
    await drain(service.execute("default", ended.run_id))
    waiting = await service.prepare(SLOW, {})
    assert await service.prune("default", older_than_days=1) == 0
    assert await service.prune("default", older_than_days=0) == 1
    assert [s.run_id for s in await service.list("default")] == [waiting.run_id]


async def test_cancelling_a_paused_run_ends_its_event_log_with_run_cancelled(store, tmp_path):
    import json

    service = service_of(store, tmp_path)
    doc = json.loads((Path(__file__).resolve().parents[2] / "examples" / "order_confirm.json").read_text())
    state = await service.prepare(doc, {"item": "tea"})
    events = await drain(service.execute("default", state.run_id))
    assert events[-1].type == "run_paused"
    await asyncio.sleep(0.3)  # the person does not answer for a while
    await service.cancel("default", state.run_id, "changed my mind")
    logged = [e async for e in service.watch("default", state.run_id)]
    assert logged[-1]["type"] == "run_cancelled" and logged[-1]["seq"] == events[-1].seq + 1
    assert "changed my mind" in logged[-1]["reason"]
    node_runs = await service.node_runs("default", state.run_id)
    runs = {r.node_id: r.status.value for r in node_runs}
    assert "cancelled" in runs.values() and "waiting" not in runs.values()
    asked = next(r for r in node_runs if r.status.value == "cancelled")
    assert asked.waited_s >= 0.3, "the wait until the stop is waiting time"
    ended = await service.state("default", state.run_id)
    assert ended.waited_s >= 0.3 and ended.paused_at is None
    assert logged[-1]["elapsed_ms"] < 300, "the wait is not run time"


def test_answer_text_renders_options_forms_and_lists_as_a_chat_message():
    from engine.turns import answer_text

    assert answer_text({"i1": "confirm"}) == "confirm"
    assert answer_text({"i1": {"name": "Ada", "tags": ["a", "b"], "note": None}}) == "name: Ada\ntags: a, b\nnote: "
    assert answer_text({"i1": "yes", "i2": 3}) == "yes\n3"


class _FaultyStore:
    """The real store, except that writing a checkpoint that carries node ``b`` finished fails
    ``times`` times, as a fault of the engine or of the database would (not a node's error)."""

    def __init__(self, store: SqlStore, times: int) -> None:
        self._store, self.left = store, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def checkpoint(self, state: Any, delta: Any, **kwargs: Any) -> None:
        if "b" in delta.node_ids and state.node_runs["b"].finished_at is not None and self.left > 0:
            self.left -= 1
            raise KeyError("b")
        await self._store.checkpoint(state, delta, **kwargs)


def _faulty_service(store: SqlStore, tmp_path: Path, times: int) -> tuple[RunService, _FaultyStore]:
    faulty = _FaultyStore(store, times)
    return RunService(catalog=TEST_CATALOG, stores=Stores(faulty, store, store, store),
                      settings=Settings(home=tmp_path), models=get_registry()), faulty


TWO = build([probe("a", value=1), probe("b", value=2)], chain_edges("start", "a", "b"))


async def _stored_failure(store: SqlStore, run_id: str) -> tuple[Any, list[Any], list[dict[str, Any]]]:
    summary, stored, node_runs = await store.load_detail("default", run_id)
    assert summary.status is RunStatus.failed and summary.owner is None, "ended, and nobody holds it"
    assert stored.error is not None and stored.error.reason == "engine_error"
    assert "KeyError" in stored.error.message and "the log has the details" in stored.error.message
    events = await store.read("default", run_id)
    assert events[-1]["type"] == "run_failed" and events[-1]["reason"] == "engine_error"
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events}), "no seq twice"
    return stored, node_runs, events


async def test_a_checkpoint_that_fails_after_a_node_fails_the_run_and_keeps_the_node_run(store, tmp_path):
    service, faulty = _faulty_service(store, tmp_path, times=1)
    state = await service.prepare(TWO, {})
    events = await drain(service.execute("default", state.run_id))
    assert faulty.left == 0 and events[-1].type == "run_failed"
    _stored, node_runs, _events = await _stored_failure(store, state.run_id)
    # b's node run, not stored by the checkpoint that failed, went with the next one
    assert {r.node_id: r.status.value for r in node_runs} == {"start": "succeeded", "a": "succeeded",
                                                               "b": "succeeded"}


async def test_a_run_whose_last_checkpoint_keeps_failing_is_stored_failed_not_left_running(store, tmp_path):
    service, _faulty = _faulty_service(store, tmp_path, times=10)
    state = await service.prepare(TWO, {})
    with pytest.raises(KeyError):
        await drain(service.execute("default", state.run_id))
    _stored, node_runs, _events = await _stored_failure(store, state.run_id)
    assert [r.node_id for r in node_runs if r.status.value == "succeeded"] == ["start", "a"], "kept as checkpointed"


async def test_runs_of_a_known_document_share_its_plan_until_its_models_change(store, tmp_path):
    """Another process (a worker) executing runs of one stored document compiles it for
    its first run only; once the models it compiles under change, the next run's plan is
    compiled again under them."""
    doc = build([probe("a", value=1)], chain_edges("start", "a"))
    states = [await service_of(store, tmp_path).prepare(doc, {}) for _ in range(3)]
    worker = service_of(store, tmp_path)
    compiled: list[Any] = []
    compile_ = worker.compile

    def counted(*args: Any, **kwargs: Any) -> Any:
        compiled.append(worker.models.fingerprint)
        return compile_(*args, **kwargs)

    worker.compile = counted  # type: ignore[method-assign]  # counts the compiles of this test
    for state in states[:2]:
        assert (await drain(worker.recover("default", state.run_id)))[-1].type == "run_finished"
    assert compiled == [worker.models.fingerprint], "the second run took the first one's plan"
    default = worker.models.get("default")
    worker.models = worker.models.with_specs({"default": default.model_copy(update={"max_output_tokens": 7})})
    assert (await drain(worker.recover("default", states[2].run_id)))[-1].type == "run_finished"
    assert len(compiled) == 2 and compiled[1] == worker.models.fingerprint != compiled[0]
