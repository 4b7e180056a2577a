"""What an API client is told when the run store fails mid-run (SQLite with a full disk,
as in ``tests/engine/test_store_failures.py``): the SSE stream ends with an ``error`` event
``run_interrupted`` and no end the store does not hold, the blocking answer is a 503 saying
so, and once the disk is freed the run is stored ``failed`` (reason ``store_error``) with
each event sequence number naming the event the stream told under it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.settings import Settings
from schemas.types import RunStatus
from tests.engine.test_store_failures import BIG, _fill_disk, _free_disk, _wait_until
from tests.support.workflows import build, chain_edges, node

from .conftest import open_api, read_messages


def _api_doc(delay_url: str) -> dict[str, Any]:
    """Waits in HTTP calls, then renders the (large) input: the last checkpoint needs the disk."""
    waits = [node(f"wait{i}", "http_request", {"method": "GET", "url": delay_url}) for i in range(3)]
    greet = node("greet", "template", {"template": "{{ who }}", "variables": [
        {"name": "who", "value": {"ref": "inputs.name"}, "type": "string", "required": True}]})
    doc = build([*waits, greet], chain_edges("start", "wait0", "wait1", "wait2", "greet"))
    doc["inputs"] = [{"name": "name", "type": "string", "required": True}]
    return doc


async def _run_in(api: Any, mode: str, doc: dict[str, Any]) -> tuple[str, Any]:
    """Start a run through the API in ``mode``; once it executes, fill the disk. Returns the
    run id and what the client got: the SSE messages, or the blocking answer."""
    store = api.service.stores.runs
    body = {"workflow": doc, "inputs": {"name": BIG}, "response_mode": mode}
    http = await api.http()

    async def request() -> Any:
        if mode == "blocking":
            return await http.post("/v1/runs", json=body, headers=api.auth())
        async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
            return await read_messages(response)

    answer = asyncio.create_task(request())

    async def executing() -> bool:
        return bool(await store.list_runs("default", status=RunStatus.running))
    await _wait_until(executing, 10, "the run executes")
    await _fill_disk(store)
    got = await asyncio.wait_for(answer, 30)
    (run,) = await store.list_runs("default", limit=1)
    return run.run_id, got


@pytest.mark.slow
async def test_an_api_client_is_told_the_run_was_interrupted_and_finds_it_failed_once_the_disk_is_freed(
        tmp_path, target):
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'api.db'}",
                        http_allow=["127.0.0.1"], store_retry_s=0.3)
    async with open_api(settings) as api:
        store = api.service.stores.runs
        doc = _api_doc(f"{target.url}/delay")
        run_id, messages = await _run_in(api, "streaming", doc)
        events = [m["event"] for m in messages]
        assert events[-1] == "error" and "run_finished" not in events and "run_failed" not in events, events
        error = messages[-1]["data"]["error"]
        assert error["type"] == "run_interrupted" and "follow the run again" in error["message"], error
        assert "api.db" not in error["message"], "the store's own words stay in the server log"
        await _free_disk(store)

        async def ended() -> bool:
            return (await store.get_run("default", run_id)).status is not RunStatus.running
        await _wait_until(ended, 10, "the interrupted run is stored as it ended")
        run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
        assert run["status"] == "failed" and run["error"]["reason"] == "store_error"
        told = [m for m in messages if m.get("id") is not None]
        stored = await store.read("default", run_id, 0, limit=10_000)
        assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
        assert all((e["type"], e.get("node_id")) == (m["event"], m["data"].get("node_id"))
                   for m in told for e in stored if e["seq"] == m["id"]), "a seq names one event"

        run_id, answer = await _run_in(api, "blocking", doc)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
        assert answer.json()["error"]["type"] == "run_interrupted"
        await _free_disk(store)
        await _wait_until(ended, 10, "the interrupted run is stored as it ended")
        assert (await store.get_run("default", run_id)).status is RunStatus.failed
