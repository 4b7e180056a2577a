"""Durable runs through the real CLI processes, on SQLite and on a real PostgreSQL:
SIGKILL mid-run then resume, two processes racing to resume, cancel from another
process, chat history across turns, one assistant message per stopped turn.

A local HTTP service counts the workflow's POST requests by ``Idempotency-Key``: a node
that finished before the kill must have sent exactly one request; the node that was
running sends its request again after recovery, with the same key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.support.chat_flow import chat_flow
from tests.support.counting_server import Counter, counter  # noqa: F401  (fixture)
from tests.support.openai_server import error_after_tokens, text_reply

ROOT = Path(__file__).resolve().parents[2]
FLOWLOOM = [sys.executable, "-m", "api.cli"]


@pytest.fixture
def env(database_url, tmp_path) -> dict[str, str]:
    """Environment of the CLI processes: a fresh FLOWLOOM_HOME and the test's database (each backend)."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    values.update(FLOWLOOM_HOME=str(tmp_path / "home"), FLOWLOOM_HTTP_ALLOW="127.0.0.1",
                  FLOWLOOM_DATABASE_URL=database_url)
    return values


def post(node_id: str, url: str, timeout: float = 120) -> dict[str, Any]:
    return {"id": node_id, "type": "http_request", "name": f"Step {node_id.upper()}",
            "config": {"method": "POST", "url": url, "body": {"type": "json", "json": {"step": node_id}},
                       "timeout": timeout}}


def gated_flow(counter: Counter) -> dict[str, Any]:
    """start -> a -> b -> gate (blocks) -> c -> end."""
    nodes = [{"id": "start", "type": "start"}, post("a", f"{counter.url}/hit/a"), post("b", f"{counter.url}/hit/b"),
             post("gate", f"{counter.url}/gate/g"), post("c", f"{counter.url}/hit/c"),
             {"id": "end", "type": "end", "config": {"outputs": [
                 {"name": "a", "value": {"ref": "a.json.node"}}, {"name": "g", "value": {"ref": "gate.json.node"}},
                 {"name": "c", "value": {"ref": "c.json.node"}}]}}]
    ids = [n["id"] for n in nodes]
    edges = [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(pairwise(ids))]
    return {"id": "durable", "name": "Durable", "nodes": nodes, "edges": edges}


def cli(env: dict[str, str], *args: str, stdin: str = "", timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLOWLOOM, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT)


def start_run(env: dict[str, str], path: Path) -> tuple[subprocess.Popen[str], str]:
    """``flowloom run PATH --json`` in the background; returns the process and its run id."""
    proc = subprocess.Popen([*FLOWLOOM, "run", str(path), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    assert first["type"] == "run_started", first
    return proc, first["run_id"]


def show(env: dict[str, str], run_id: str) -> dict[str, Any]:
    proc = cli(env, "show", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def statuses(record: dict[str, Any]) -> dict[str, str]:
    return {r["node_id"]: r["status"] for r in record["node_runs"]}


def test_sigkill_mid_run_then_resume_runs_every_finished_node_exactly_once(env, counter, tmp_path):
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated_flow(counter)))
    proc, run_id = start_run(env, path)
    counter.wait_for("g")  # a and b finished (checkpointed); gate is running
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    killed = show(env, run_id)
    assert killed["run"]["status"] == "running"
    # the node with effects that was running is stored as started (its attempt counts)
    assert statuses(killed) == {"start": "succeeded", "a": "succeeded", "b": "succeeded", "gate": "running"}

    counter.gate.set()
    resumed = cli(env, "resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert [e["node_id"] for e in events if e["type"] == "node_started"] == ["gate", "c", "end"]
    assert events[-1]["type"] == "run_finished" and events[-1]["outputs"] == {"a": "a", "g": "g", "c": "c"}

    assert counter.names().count("a") == 1 and counter.names().count("b") == 1 and counter.names().count("c") == 1
    gate_keys = counter.keys("g")
    assert len(gate_keys) == 2 and gate_keys[0] == gate_keys[1] and gate_keys[0], \
        "the node that was running runs again, with the same idempotency key"
    keys = [key for _, key in counter.requests]
    assert len(set(keys)) == 4 and None not in keys, "one key per node run"
    final = show(env, run_id)
    assert final["run"]["status"] == "succeeded"
    assert {r["node_id"]: r["attempts"] for r in final["node_runs"]}["gate"] == 2, "it ran twice: once per process"


def test_two_processes_racing_to_resume_one_run_exactly_one_runs_it(env, counter, tmp_path):
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated_flow(counter)))
    proc, run_id = start_run(env, path)
    counter.wait_for("g")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    gate_requests = len(counter.keys("g"))

    racers = [subprocess.Popen([*FLOWLOOM, "resume", run_id, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=ROOT) for _ in range(2)]
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while len(counter.keys("g")) == gate_requests:  # the winner is inside the gate
        assert time.monotonic() < deadline, [r.poll() for r in racers]
        time.sleep(0.02)
    time.sleep(1.0)  # let the loser finish its attempt while the winner still holds the run
    counter.gate.set()
    results = [(r.wait(60), r.stdout.read(), r.stderr.read()) for r in racers]  # type: ignore[union-attr]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, _, err in results if code == 2)
    assert "owned by another process" in loser and "pid" in loser
    assert counter.names().count("c") == 1, "exactly one process ran the rest of the run"
    assert len(counter.keys("g")) == gate_requests + 1


def test_cancel_from_another_process_ends_the_run_within_a_second(env, counter, tmp_path):
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated_flow(counter)))
    proc, run_id = start_run(env, path)
    counter.wait_for("g")

    async def cancel_and_wait() -> float:
        """Send the command from this process, then poll the store until the run has ended;
        returns the seconds between the two (what a person waiting on the run sees)."""
        from schemas.records import CommandKind, RunCommand
        from workers.sql import SqlStore

        store = await SqlStore.open(env["FLOWLOOM_DATABASE_URL"])
        try:
            sent = time.monotonic()
            await store.send("default", RunCommand(run_id=run_id, kind=CommandKind.cancel, reason="test stop",
                                                   created_at=time.time()))
            while (await store.get_run("default", run_id)).status.value == "running":
                assert time.monotonic() - sent < 10, "the run never ended"
                await asyncio.sleep(0.02)
            return time.monotonic() - sent
        finally:
            await store.close()

    took = asyncio.run(cancel_and_wait())
    code = proc.wait(10)
    assert code == 130, proc.stderr.read()  # type: ignore[union-attr]
    assert took < 1.0, f"the run ended {took:.2f}s after the cancel command was stored"
    record = show(env, run_id)
    assert record["run"]["status"] == "cancelled"
    assert statuses(record) == {"start": "succeeded", "a": "succeeded", "b": "succeeded", "gate": "cancelled"}
    assert "c" not in counter.names()
    again = cli(env, "cancel", run_id)
    assert again.returncode == 2 and "already ended (cancelled)" in again.stderr


def test_flowloom_cancel_stops_a_running_run_and_a_paused_one(env, counter, tmp_path):
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated_flow(counter)))
    proc, run_id = start_run(env, path)
    counter.wait_for("g")
    stopped = cli(env, "cancel", run_id)
    assert stopped.returncode == 0 and f"run {run_id} cancelled" in stopped.stdout, stopped.stderr
    assert proc.wait(10) == 130

    paused = cli(env, "run", str(ROOT / "examples" / "order_confirm.json"), "--input", "item=tea", "--no-input")
    assert paused.returncode == 3
    paused_id = paused.stderr.split(" waits for interrupt")[0].split()[-1]
    stopped_paused = cli(env, "cancel", paused_id)
    assert stopped_paused.returncode == 0, stopped_paused.stdout + stopped_paused.stderr
    listed = json.loads(cli(env, "runs", "--json").stdout)
    assert {r["run_id"]: r["status"] for r in listed} == {run_id: "cancelled", paused_id: "cancelled"}


def test_chat_history_across_turns_reaches_the_model_and_a_failed_turn_keeps_one_message(
        env, openai_server, tmp_path):
    env = {**env, "FLOWLOOM_LLM_BASE_URL": openai_server.base_url, "FLOWLOOM_LLM_API_KEY": "test",
           "FLOWLOOM_LLM_MODEL": "scripted-upstream"}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat_flow(history=10)))
    openai_server.script(text_reply("Hello Ada!"), text_reply("Your name is Ada."),
                         error_after_tokens("Ada likes", message="upstream model crashed"))
    first = cli(env, "run", str(path), "--chat-id", "c1", "--message", "My name is Ada")
    assert first.returncode == 0, first.stderr
    second = cli(env, "run", str(path), "--chat-id", "c1", "--message", "What is my name?")
    assert second.returncode == 0, second.stderr
    assert "Your name is Ada." in second.stdout
    messages = openai_server.bodies[1]["messages"]
    turns = [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
    assert turns == [("user", "My name is Ada"), ("assistant", "Hello Ada!"), ("user", "What is my name?")]

    third = cli(env, "run", str(path), "--chat-id", "c1", "--message", "And what do I like?")
    assert third.returncode == 1
    other = cli(env, "run", str(path), "--chat-id", "c2", "--message", "hi")  # another chat: no history
    assert other.returncode == 1  # the script is used up: the model call fails
    assert [m["role"] for m in openai_server.bodies[-1]["messages"] if m["role"] != "system"] == ["user"]

    async def chat() -> list[Any]:
        from workers.sql import SqlStore

        store = await SqlStore.open(env["FLOWLOOM_DATABASE_URL"])
        try:
            return await store.messages("default", "c1")
        finally:
            await store.close()

    stored = asyncio.run(chat())
    assert [(m.role, m.status.value) for m in stored] == [
        ("user", "done"), ("assistant", "done"), ("user", "done"), ("assistant", "done"),
        ("user", "done"), ("assistant", "failed")]
    assert stored[-1].text == "Ada likes", "the failed turn keeps the partial text in its one message"
