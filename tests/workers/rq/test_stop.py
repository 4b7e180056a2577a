"""Stopping queued runs: the stop travels over Redis to the worker, which ends the run
``cancelled`` within a second (the model stream is closed, a code node's process is
killed) and takes its next job at once."""

from __future__ import annotations

import asyncio
import json
import time

from redis import Redis

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import reply, stall, text, text_reply
from tests.workers.rq.conftest import chain


def stream_entries(redis_url: str, run_id: str) -> list[dict]:
    connection = Redis.from_url(redis_url, decode_responses=True)
    try:
        return [json.loads(fields["data"]) for _, fields in connection.xrange(f"flowloom:events:default:{run_id}")]
    finally:
        connection.close()


async def wait_for_entry(redis_url: str, run_id: str, kind: str, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        entries = stream_entries(redis_url, run_id)
        if any(e["type"] == kind for e in entries):
            return entries
        assert time.monotonic() < deadline, f"no {kind} on the run's stream: {[e['type'] for e in entries]}"
        await asyncio.sleep(0.05)


async def stop(api, run_id: str) -> tuple[float, dict]:
    """Stop the run through the API; (seconds until the database shows it cancelled, the
    answer). The worker sees the command within a tenth of a second; the rest is the
    request, the end of the run and the polling here."""
    sent = time.monotonic()
    answer = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth)
    assert answer.status_code == 200, answer.text
    await api.wait_status(run_id, {"cancelled"}, timeout=10)
    return time.monotonic() - sent, answer.json()


async def test_stop_while_a_worker_streams_from_the_model_closes_the_stream_and_frees_the_worker(
        deployment, api, openai_server):
    deployment.env.update(FLOWLOOM_LLM_BASE_URL=openai_server.base_url, FLOWLOOM_LLM_API_KEY="test",
                          FLOWLOOM_LLM_MODEL="scripted-upstream")
    openai_server.script(reply(text("Hel"), text("lo"), stall()), text_reply("Second run."))
    deployment.start_worker("w1")
    first = (await api.client.post("/v1/runs", headers=api.auth, json={
        "workflow": chat_flow(), "message": "hi", "response_mode": "async"})).json()["run_id"]
    entries = await wait_for_entry(deployment.redis_url, first, "node_delta")
    assert "".join(e["text"] for e in entries if e["type"] == "node_delta").startswith("Hel")

    took, answer = await stop(api, first)
    assert took < 2.0, f"the run ended {took:.2f}s after the stop request"
    assert answer["status"] == "cancelled"
    deadline = time.monotonic() + 5
    while openai_server.requests[0].client_closed_at is None:
        assert time.monotonic() < deadline, "the worker never closed the model stream"
        await asyncio.sleep(0.05)
    ended = await wait_for_entry(deployment.redis_url, first, "run_cancelled")
    assert [e["seq"] for e in ended] == sorted({e["seq"] for e in ended}), "stream seqs are unique and ordered"
    node_runs = {n.node_id: n.status.value for n in await api.service.node_runs("default", first)}
    assert node_runs["reply"] == "cancelled"

    second = (await api.client.post("/v1/runs", headers=api.auth, json={
        "workflow": chat_flow(), "message": "again", "response_mode": "async"})).json()["run_id"]
    assert await api.wait_status(second, {"succeeded", "failed", "cancelled"}, timeout=15) == "succeeded"
    assert (await api.service.state("default", second)).answer == "Second run."


async def test_stop_of_a_code_node_sleeping_thirty_seconds_frees_the_worker_within_seconds(deployment, api):
    sleeper = chain("sleeper", [{"id": "nap", "type": "code", "config": {
        "language": "python", "code": "import time\ndef main():\n    time.sleep(30)\n    return {}", "timeout": 60}}])
    quick = chain("quick", [{"id": "say", "type": "template", "config": {"template": "awake"}}], {"s": "say.output"})
    deployment.start_worker("w1")
    slow_id = (await api.start(sleeper)).json()["run_id"]
    await wait_for_entry(deployment.redis_url, slow_id, "node_started")
    quick_id = (await api.start(quick)).json()["run_id"]  # queued behind the sleeper on the one worker
    await asyncio.sleep(0.5)
    assert (await api.service.get("default", quick_id)).status.value == "pending"

    stopped_at = time.monotonic()
    took, _answer = await stop(api, slow_id)
    assert took < 2.0, f"the run ended {took:.2f}s after the stop request"
    assert await api.wait_status(quick_id, {"succeeded", "failed"}, timeout=10) == "succeeded"
    assert time.monotonic() - stopped_at < 5, "the worker took its next job within seconds of the stop"
    assert {n.node_id: n.status.value for n in await api.service.node_runs("default", slow_id)}["nap"] == "cancelled"
