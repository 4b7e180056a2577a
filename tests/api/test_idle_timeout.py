"""The run idle watchdog (``FLOWLOOM_RUN_IDLE_TIMEOUT_S``) on SQLite and PostgreSQL, with
the scripted model server made to hang after its headers: the run fails naming the
interval and the node, the SSE stream gets an ``error`` event and ends, the provider's
connection is closed; a slow stream that keeps producing is not idle, nor is a node that
streams nothing by nature (a code node computing); the CLI gets the same watchdog."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import delay, finish, reply, stall, text, usage

from .conftest import SCRIPTED_KEY_ENV, read_messages


@pytest.fixture
def idle_one_second(monkeypatch):
    """A one-second idle interval for the app the ``api`` fixture builds (read from the environment)."""
    monkeypatch.setenv("FLOWLOOM_RUN_IDLE_TIMEOUT_S", "1")


async def test_a_provider_that_hangs_after_its_headers_fails_the_run_and_ends_the_stream(
        idle_one_second, api, models_file, openai_server):
    assert api.settings.run_idle_timeout_s == 1
    openai_server.script(reply(text("Hel"), stall(), done=False))
    http = await api.http()
    body = {"workflow": chat_flow(), "message": "Hi", "chat_id": "idle-1", "response_mode": "streaming"}
    started = time.monotonic()
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as response:
        messages = await asyncio.wait_for(read_messages(response), 15)
    assert time.monotonic() - started < 8, "the stream was not held"
    run_id = messages[0]["data"]["run_id"]
    assert [m["event"] for m in messages[-2:]] == ["run_failed", "error"]
    failed = messages[-2]["data"]
    assert failed["reason"] == "idle_timeout" and failed["error"]["node_id"] == "reply"
    error = messages[-1]["data"]["error"]
    assert error["type"] == "run_idle_timeout"
    assert "no event for 1s" in error["message"] and "'reply'" in error["message"], error["message"]

    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert run["status"] == "failed" and run["error"]["reason"] == "idle_timeout"
    reply_run = next(n for n in run["node_runs"] if n["node_id"] == "reply")
    assert reply_run["status"] == "failed" and reply_run["error"]["reason"] == "idle_timeout"
    deadline = time.monotonic() + 5
    while openai_server.requests[-1].client_closed_at is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert openai_server.requests[-1].client_closed_at is not None, "the hung provider call was closed"

    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=api.auth()) as response:
        replay = await read_messages(response)
    assert replay[-2]["event"] == "run_failed" and replay[-1]["event"] == "error", "the stored log says the same"
    messages_of_chat = (await api.client.get("/v1/chats/idle-1/messages", headers=api.auth())).json()["messages"]
    assert [(m["role"], m["status"]) for m in messages_of_chat] == [("user", "done"), ("assistant", "failed")]
    assert messages_of_chat[1]["text"] == "Hel"


async def test_a_slow_stream_that_keeps_producing_is_not_idle(idle_one_second, api, models_file, openai_server):
    steps = [step for word in ("one ", "two ", "three ", "four ") for step in (text(word), delay(0.6))]
    openai_server.script(reply(*steps, finish("stop"), usage(5, 4)))
    ran = await api.client.post("/v1/runs", json={"workflow": chat_flow(), "message": "count"},
                                headers=api.auth())
    run = ran.json()
    assert run["status"] == "succeeded" and run["answer"] == "one two three four ", run.get("error")


SLOW_CODE_FLOW = {
    "id": "slow-code", "name": "Slow code",
    "nodes": [{"id": "start", "type": "start"},
              {"id": "crunch", "type": "code", "config": {
                  "language": "python", "timeout": 10, "outputs": [{"name": "done", "type": "boolean"}],
                  "code": "import time\n\ndef main():\n    time.sleep(2.2)\n    return {'done': True}\n"}},
              {"id": "say", "type": "answer", "config": {"text": "{{ crunch.done }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "crunch"}, {"id": "e2", "source": "crunch", "target": "say"}],
}


async def test_a_quiet_node_longer_than_the_interval_is_not_idle(idle_one_second, api):
    # A code node streams nothing by nature and has its own timeout: silence while it
    # computes is not a hung provider.
    ran = await api.client.post("/v1/runs", json={"workflow": SLOW_CODE_FLOW, "inputs": {}}, headers=api.auth())
    run = ran.json()
    assert run["status"] == "succeeded", run.get("error")
    assert run["answer"] == "true"


def test_the_cli_run_gets_the_same_watchdog(openai_server, models_file, tmp_path, database_url):
    openai_server.script(reply(stall(), done=False))
    flow = tmp_path / "chat.json"
    flow.write_text(json.dumps(chat_flow()), encoding="utf-8")
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "cli"), "FLOWLOOM_DATABASE_URL": database_url,
           "FLOWLOOM_MODELS": str(models_file), "FLOWLOOM_RUN_IDLE_TIMEOUT_S": "1",
           SCRIPTED_KEY_ENV: "sk-scripted-test"}
    done = subprocess.run([sys.executable, "-m", "api.cli", "run", str(flow), "--message", "Hi", "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "run_failed" and events[-1]["reason"] == "idle_timeout"
    # timed from the model node's start, not from the process start: on a loaded machine
    # the command's imports alone may take most of a minute
    started = next(e["ts"] for e in events if e["type"] == "node_started" and e["node_id"] == "reply")
    assert events[-1]["ts"] - started < 30
    assert "run_idle_timeout_s=1" in events[-1]["error"]["message"] and "Traceback" not in done.stderr
