"""Streams over real HTTP (uvicorn in the test's loop) on SQLite and PostgreSQL: a
streaming run with its text deltas, a client that drops and re-attaches with
``Last-Event-ID`` and gets exactly the rest, and a client that disconnects mid-stream
without cancelling the run."""

from __future__ import annotations

import asyncio
import time

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import delay, finish, reply, text, usage

from .conftest import http_chain, read_messages


async def _final(api, run_id: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
        if run["status"] in ("succeeded", "failed", "cancelled", "paused") or time.monotonic() > deadline:
            return run
        await asyncio.sleep(0.05)


async def test_a_streaming_run_sends_meta_then_live_events_with_deltas_then_done(api, openai_server, models_file):
    openai_server.script(reply(text("Hello"), delay(0.05), text(" there,"), delay(0.05), text(" Ada"),
                               finish("stop"), usage(12, 3)))
    http = await api.http()
    body = {"workflow": chat_flow(), "message": "Hi, I am Ada", "chat_id": "c-1",
            "response_mode": "streaming"}
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        messages = await read_messages(response)
    assert messages[0]["event"] == "meta" and messages[0]["id"] is None
    run_id = messages[0]["data"]["run_id"]
    assert messages[0]["data"]["chat_id"] == "c-1"
    assert messages[-1] == {"event": "done", "id": None, "data": {"run_id": run_id, "status": "succeeded"}}
    events = messages[1:-1]
    assert [m["id"] for m in events] == list(range(1, len(events) + 1)), "every event, in order, once"
    deltas = "".join(m["data"]["text"] for m in events if m["event"] == "node_delta" and m["data"]["node_id"] == "reply")
    assert deltas == "Hello there, Ada"
    assert events[-1]["event"] == "run_finished"
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert run["answer"] == "Hello there, Ada" and run["chat_id"] == "c-1" and run["tokens_in"] == 12
    assert "sk-scripted-test" not in str(messages)


async def test_a_client_that_drops_re_attaches_with_last_event_id_and_gets_exactly_the_rest(api, target):
    started = await api.client.post("/v1/runs", json={"workflow": http_chain(target.url, 6),
                                                      "response_mode": "async"}, headers=api.auth())
    run_id = started.json()["run_id"]
    http = await api.http()
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=api.auth()) as response:
        first = await read_messages(response, stop_after=4)
    last_id = [m["id"] for m in first if m["id"] is not None][-1]
    status = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()["status"]
    assert status == "running", "the client dropped while the run was going on"
    async with http.stream("GET", f"/v1/runs/{run_id}/events",
                           headers={**api.auth(), "Last-Event-ID": str(last_id)}) as response:
        rest = await read_messages(response)
    assert rest[-1]["event"] == "done" and rest[-1]["data"]["status"] == "succeeded"
    seen = [m["id"] for m in first + rest if m["id"] is not None]
    stored = [m for m in (await read_all(api, run_id)) if m["id"] is not None]
    durable_seen = [i for i in seen if i in {m["id"] for m in stored}]
    assert durable_seen == [m["id"] for m in stored], "no gap, no duplicate"
    assert len(seen) == len(set(seen))


async def read_all(api, run_id: str) -> list[dict]:
    http = await api.http()
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=api.auth()) as response:
        return await read_messages(response)


async def test_a_client_disconnect_during_streaming_does_not_cancel_the_run(api, target):
    http = await api.http()
    body = {"workflow": http_chain(target.url, 5), "response_mode": "streaming"}
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
        first = await read_messages(response, stop_after=3)
    run_id = first[0]["data"]["run_id"]
    run = await _final(api, run_id)
    assert run["status"] == "succeeded", run
    assert [n["status"] for n in run["node_runs"]].count("succeeded") == len(run["node_runs"])


async def test_an_idle_stream_sends_heartbeats_and_ends_when_the_run_is_stopped(api, target):
    started = await api.client.post("/v1/runs", json={"workflow": http_chain(target.url, 1, path="/slow"),
                                                      "response_mode": "async"}, headers=api.auth())
    run_id = started.json()["run_id"]
    http = await api.http()
    text = ""
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=api.auth()) as response:
        chunks = response.aiter_text()
        while ": keep-alive" not in text:
            text += await asyncio.wait_for(chunks.__anext__(), 5)
        stopped = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())
        assert stopped.json()["status"] == "cancelled"
        async for chunk in chunks:
            text += chunk
    assert "event: run_cancelled" in text and text.rstrip().endswith('"status":"cancelled"}')
