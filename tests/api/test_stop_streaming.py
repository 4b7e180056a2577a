"""Stopping a run while its model call streams, over real HTTP on SQLite and PostgreSQL: the
run ends ``cancelled`` within a second, the model stream is closed by the client (the
scripted server sees it), the chat keeps exactly one assistant message with the partial
text marked ``cancelled``, and nothing that arrives late changes any of it."""

from __future__ import annotations

import asyncio
import time

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import delay, finish, reply, text, usage

from .conftest import parse_sse

WORDS = [f"word{i} " for i in range(40)]


async def test_stop_during_a_streaming_model_call_cancels_within_a_second_and_keeps_one_partial_message(
        api, models_file, openai_server):
    steps = [step for word in WORDS for step in (text(word), delay(0.1))]
    openai_server.script(reply(*steps, finish("stop"), usage(10, 40)))
    http = await api.http()
    body = {"workflow": chat_flow(), "message": "Tell me a long story", "chat_id": "stop-1",
            "response_mode": "streaming"}
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
        messages: list[dict] = []
        chunks = response.aiter_text()
        buffer = ""
        while sum(1 for m in messages if m["event"] == "node_delta") < 3:
            buffer += await asyncio.wait_for(chunks.__anext__(), 10)
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                messages += [m for m in parse_sse(block + "\n\n") if "comment" not in m]
        run_id = messages[0]["data"]["run_id"]
        asked = time.monotonic()
        stopped = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())
        took = time.monotonic() - asked
        assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled", stopped.text
        assert took < 1.0, f"stop took {took:.2f}s"
        async for chunk in chunks:
            buffer += chunk
    rest = [m for m in parse_sse(buffer) if "comment" not in m]
    assert rest[-1]["event"] == "done" and rest[-1]["data"]["status"] == "cancelled"
    assert any(m["event"] == "run_cancelled" for m in rest)

    deadline = time.monotonic() + 3
    while openai_server.requests[-1].client_closed_at is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert openai_server.requests[-1].client_closed_at is not None, "the model stream was closed by the client"

    first = await _state(api, run_id)
    await asyncio.sleep(1.0)  # anything still in flight would arrive now
    later = await _state(api, run_id)
    assert later == first, "a late result changed nothing"
    run, chat = first
    assert run["status"] == "cancelled"
    reply_run = next(n for n in run["node_runs"] if n["node_id"] == "reply")
    assert reply_run["status"] == "cancelled"
    assistant = [m for m in chat if m["role"] == "assistant"]
    assert len(assistant) == 1, chat
    partial = assistant[0]["text"]
    full = "".join(WORDS)
    assert assistant[0]["status"] == "cancelled" and partial.strip(), assistant[0]
    assert full.startswith(partial) and len(partial) < len(full), partial
    assert [m["role"] for m in chat] == ["user", "assistant"]


async def _state(api, run_id: str) -> tuple[dict, list[dict]]:
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    chat = (await api.client.get("/v1/chats/stop-1/messages", headers=api.auth())).json()["messages"]
    events = (await api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth())).text
    assert events.rstrip().endswith('"status":"cancelled"}'), "the log ends with the cancellation"
    return run, chat
