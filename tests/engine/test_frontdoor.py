"""The run service's front door over the real SQL store: a resume placed on the queue
writes its answers into the stored run before it is queued (the answers are part of the
run: whichever process continues it reads them there), and a follower of a run executing
in this process gets every event, text deltas included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from api.inline import InlineLauncher
from engine.frontdoor import InvalidAnswer
from engine.ports import Launch, RunNotFound
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes import builtin_catalog
from nodes.llm.model_registry import get_registry
from schemas.launch import ContinueRun, Placement, ResumeRun, StartRun
from schemas.types import RunStatus
from tests.engine.test_service import store  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
QUEUED = Placement(execution="queued")


class _Queue:
    """A queue that keeps what it was given (a worker would continue those runs)."""

    def __init__(self) -> None:
        self.launched: list[Launch] = []

    async def launch(self, launch: Launch) -> None:
        self.launched.append(launch)


def _service(store: Any, tmp_path: Path, queue: _Queue) -> RunService:
    return RunService(catalog=builtin_catalog(), stores=Stores(store, store, store, store),
                      settings=Settings(home=tmp_path), models=get_registry(), launcher=InlineLauncher(), queue=queue)


def _order() -> dict[str, Any]:
    return json.loads((ROOT / "examples" / "order_confirm.json").read_text())


async def _follow(service: RunService, run_id: str, after: int = 0) -> list[Any]:
    return [event async for event in service.follow("default", run_id, after)]


async def test_a_queued_resume_stores_its_answers_in_the_run_and_any_process_continues_it(store, tmp_path):
    queue = _Queue()
    service = _service(store, tmp_path, queue)
    started = await service.launch("default", StartRun(_order(), {"item": "tea"}), Placement(execution="inline"))
    assert [e.type for e in await _follow(service, started.run_id)][-1] == "run_paused"

    with pytest.raises(InvalidAnswer) as refused:
        await service.launch("default", ResumeRun(started.run_id, answer="maybe"), QUEUED)
    assert "'maybe' is not one of: confirm (Confirm), change (Change quantity), cancel (Cancel)" in str(refused.value)
    assert queue.launched == [] and (await service.state("default", started.run_id)).interrupts[
        (await service.get("default", started.run_id)).pending_interrupts[0].id].answered is False

    ticket = await service.launch("default", ResumeRun(started.run_id, answer="cancel"), QUEUED)
    assert ticket.queued and ticket.continued and ticket.status is RunStatus.paused
    (job,) = queue.launched
    assert (job.run_id, job.first) == (started.run_id, False)
    stored = await service.state("default", started.run_id)
    assert stored.status is RunStatus.paused and [(i.answered, i.answer) for i in stored.interrupts.values()] == [
        (True, "cancel")]
    assert (await service.get("default", started.run_id)).pending_interrupts == []

    # Another process (a fresh service on the same store) continues the run from its state alone.
    worker = _service(store, tmp_path, _Queue())
    continued = await worker.launch("default", ContinueRun(started.run_id))
    events = await _follow(worker, started.run_id, continued.after_seq)
    assert events[0].type == "run_resumed" and events[0].seq == ticket.after_seq + 1
    assert events[-1].type == "run_finished"
    assert (await worker.state("default", started.run_id)).answer == "Order cancelled."


async def test_a_follower_of_a_run_launched_here_gets_its_text_deltas_then_its_end(store, tmp_path):
    service = _service(store, tmp_path, _Queue())
    hello = json.loads((ROOT / "examples" / "hello.json").read_text())
    ticket = await service.launch("default", StartRun(hello, {"name": "Ada"}))
    assert not ticket.queued, "a run the caller waits for, of no agent, executes here"
    events = await _follow(service, ticket.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "node_delta" in [e.type for e in events] and events[-1].type == "run_finished"
    replay = await _follow(service, ticket.run_id)
    assert [e.seq for e in replay] == [e.seq for e in events if e.type != "node_delta"], \
        "a replay after the end is the durable log's, wherever it is asked"


async def test_following_to_the_end_returns_when_the_run_ends_or_pauses_as_following_its_events_does(store, tmp_path):
    service = _service(store, tmp_path, _Queue())
    hello = json.loads((ROOT / "examples" / "hello.json").read_text())
    ticket = await service.launch("default", StartRun(hello, {"name": "Ada"}))
    live = service._live[ticket.run_id]
    assert not live.over, "followed while it executes here: waited for by the hub's end watcher"
    await service.follow_to_end("default", ticket.run_id)
    assert live.over and live.watchers == []
    assert (await service.get("default", ticket.run_id)).status is RunStatus.succeeded
    await service.follow_to_end("default", ticket.run_id)  # over: followed as before, at once

    paused = await service.launch("default", StartRun(_order(), {"item": "tea"}), Placement(execution="inline"))
    await service.follow_to_end("default", paused.run_id)
    assert (await service.get("default", paused.run_id)).status is RunStatus.paused


async def test_following_to_the_end_raises_what_following_raises(store, tmp_path):
    service = _service(store, tmp_path, _Queue())
    hello = json.loads((ROOT / "examples" / "hello.json").read_text())
    ticket = await service.launch("default", StartRun(hello, {"name": "Ada"}))
    with pytest.raises(RunNotFound):  # another tenant's run, executing here
        await service.follow_to_end("tenant-b", ticket.run_id)
    live = service._live[ticket.run_id]
    live.error = RuntimeError("the execution stopped on this")
    with pytest.raises(RuntimeError, match="the execution stopped on this"):
        await service.follow_to_end("default", ticket.run_id)
    with pytest.raises(RunNotFound):
        await service.follow_to_end("default", "no-such-run")
