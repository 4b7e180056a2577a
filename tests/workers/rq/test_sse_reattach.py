"""SSE of a queued run served by any API replica: a client reads part of a run's events
from one ``flowloom serve`` process, goes away, and re-attaches with ``Last-Event-ID`` to
another one: no gap, no duplicate, text deltas included, ids equal to the durable seqs."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import delay, finish, reply, text, usage
from tests.workers.rq.conftest import FLOWLOOM, ROOT

TOKENS = [f"t{i} " for i in range(24)]


async def read_sse(client: httpx.AsyncClient, url: str, headers: dict[str, str],
                   stop_after: int | None = None) -> list[dict[str, Any]]:
    """The messages ``{"event", "id", "data"}`` of an SSE response (comments skipped);
    with ``stop_after``, the connection is closed after that many messages with an id."""
    messages: list[dict[str, Any]] = []
    buffer = ""
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                message: dict[str, Any] = {"event": None, "id": None, "data": None}
                for line in block.split("\n"):
                    name, _, value = line.partition(": ")
                    if name == "event":
                        message["event"] = value
                    elif name == "id":
                        message["id"] = int(value)
                    elif name == "data":
                        message["data"] = json.loads(value)
                if message["event"] is None:
                    continue  # a keep-alive comment
                messages.append(message)
                if stop_after is not None and sum(m["id"] is not None for m in messages) >= stop_after:
                    return messages
    return messages


async def test_client_reattaches_to_a_second_api_process_with_no_gap_and_no_duplicate(deployment, openai_server):
    deployment.env.update(FLOWLOOM_LLM_BASE_URL=openai_server.base_url, FLOWLOOM_LLM_API_KEY="test",
                          FLOWLOOM_LLM_MODEL="scripted-upstream")
    steps = [step for token in TOKENS for step in (text(token), delay(0.05))]
    openai_server.script(reply(*steps, finish("stop"), usage(5, len(TOKENS))))
    first_api, second_api = deployment.start_server(), deployment.start_server()
    deployment.start_worker("w1")
    key = subprocess.run([*FLOWLOOM, "keys", "create", "--admin", "--name", "t"], env=deployment.env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert key.returncode == 0, key.stderr
    auth = {"Authorization": f"Bearer {key.stdout.strip().split()[-1]}"}
    deployment.wait_server(first_api)
    deployment.wait_server(second_api)

    async with httpx.AsyncClient(timeout=30) as client:
        started = await client.post(f"{first_api}/v1/runs", headers=auth,
                                    json={"workflow": chat_flow(), "message": "hi", "response_mode": "async"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        before = await read_sse(client, f"{first_api}/v1/runs/{run_id}/events", auth, stop_after=8)
        last = [m["id"] for m in before if m["id"] is not None][-1]
        after = await read_sse(client, f"{second_api}/v1/runs/{run_id}/events",
                               {**auth, "Last-Event-ID": str(last)})
        stored = (await client.get(f"{second_api}/v1/runs/{run_id}", headers=auth)).json()

    ids = [m["id"] for m in before + after if m["id"] is not None]
    assert ids == list(range(1, len(ids) + 1)), f"ids with a gap or a duplicate: {ids}"
    assert after[-1]["event"] == "done" and after[-1]["data"]["status"] == "succeeded"
    deltas = [m["data"]["text"] for m in before + after if m["event"] == "node_delta"]
    assert stored["answer"].startswith("t0 t1 ") and "".join(deltas) == stored["answer"]
    assert any(m["event"] == "node_delta" for m in after), "the second replica streams live deltas too"
    assert stored["status"] == "succeeded"
    by_id = {m["id"]: m["event"] for m in before + after if m["id"] is not None}
    durable = await _durable_events(deployment, run_id)
    assert durable and all(by_id[e["seq"]] == e["type"] for e in durable), "ids are the durable event seqs"


async def _durable_events(deployment, run_id: str) -> list[dict[str, Any]]:
    from workers.sql import SqlStore

    store = await SqlStore.open(deployment.database_url)
    try:
        return await store.read("default", run_id)
    finally:
        await store.close()
