"""Orphaned runs recover themselves in the embedded server (no Redis; SQLite and
PostgreSQL), with no operator command: ``flowloom serve`` SIGKILLed with 30 runs in flight, then started again, finishes
every one of them; a run whose process died while the server is up is picked up as soon
as a client watches its events, and the stream goes on with the recovered execution.

A local HTTP service counts the workflows' POST requests by ``Idempotency-Key``: a node
that finished before the kill sent exactly one request; the node that was running sends
its request again after recovery, with the same key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter as Tally
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.counting_server import Counter, counter  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
FLOWLOOM = [sys.executable, "-m", "api.cli"]
RUNS = 30


def post(node_id: str, url: str) -> dict[str, Any]:
    return {"id": node_id, "type": "http_request",
            "config": {"method": "POST", "url": url, "body": {"type": "json", "json": {"step": node_id}},
                       "timeout": 60}}


def chain(workflow_id: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    every = [{"id": "start", "type": "start"}, *nodes, {"id": "end", "type": "end", "config": {"outputs": [
        {"name": "last", "value": {"ref": f"{nodes[-1]['id']}.json.node"}}]}}]
    ids = [n["id"] for n in every]
    return {"id": workflow_id, "name": workflow_id, "nodes": every,
            "edges": [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(pairwise(ids))]}


def gated(counter: Counter) -> dict[str, Any]:
    """start -> a (counted) -> gate (held until the counter's gate opens) -> c (counted) -> end."""
    return chain("gated", [post("a", f"{counter.url}/hit/a"), post("gate", f"{counter.url}/gate/g"),
                           post("c", f"{counter.url}/hit/c")])


class Server:
    """``flowloom serve`` processes on one FLOWLOOM_HOME (one at a time)."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env, self.tmp = env, tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""
        self.starts = 0

    def start(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.starts += 1
        log = open(self.tmp / f"serve-{self.starts}.log", "wb")
        self.proc = subprocess.Popen([*FLOWLOOM, "serve", "--port", str(port), "--no-examples", "--heartbeat", "0.2"],
                                     cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            assert self.proc.poll() is None, self.log()
            try:
                if httpx.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "flowloom serve did not answer"
            time.sleep(0.05)

    def log(self) -> str:
        return (self.tmp / f"serve-{self.starts}.log").read_text(errors="replace")

    @property
    def auth(self) -> dict[str, str]:
        key = (Path(self.env["FLOWLOOM_HOME"]) / "canvas-key").read_text().strip()
        return {"Authorization": f"Bearer {key}"}

    def submit(self, doc: dict[str, Any]) -> str:
        response = httpx.post(f"{self.base}/v1/runs", json={"workflow": doc, "inputs": {}, "response_mode": "async"},
                              headers=self.auth, timeout=30)
        assert response.status_code == 202, response.text
        return response.json()["run_id"]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    """The servers' environment: a fresh FLOWLOOM_HOME and the test's database (each backend)."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    values.update(FLOWLOOM_HOME=str(tmp_path / "home"), FLOWLOOM_HTTP_ALLOW="127.0.0.1", PYTHONUNBUFFERED="1",
                  FLOWLOOM_DATABASE_URL=database_url)
    return values


@pytest.fixture
def server(env: dict[str, str], tmp_path: Path):
    found = Server(env, tmp_path)
    try:
        yield found
    finally:
        found.stop()


def stored(env: dict[str, str], run_ids: list[str]) -> dict[str, tuple[Any, list[dict[str, Any]], list[Any]]]:
    """``run id -> (summary, durable events, node runs)`` read from the run store directly."""
    from workers.sql import SqlStore

    async def read() -> dict[str, Any]:
        store = await SqlStore.open(env["FLOWLOOM_DATABASE_URL"])
        try:
            return {run_id: (await store.get_run("default", run_id), await store.read("default", run_id, 0, 10_000),
                             await store.list_node_runs("default", run_id)) for run_id in run_ids}
        finally:
            await store.close()

    return asyncio.run(read())


def wait_ended(env: dict[str, str], run_ids: list[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = stored(env, run_ids)
        left = {r: s.status.value for r, (s, _, _) in found.items() if s.status.value in ("pending", "running")}
        if not left:
            return found
        assert time.monotonic() < deadline, f"{len(left)} run(s) never ended: {left}"
        time.sleep(0.2)


def assert_ordered(events: list[dict[str, Any]]) -> None:
    """Stored events numbered from 1, none twice or out of order, one run_started first and
    one run_finished last. Numbers may be missing: deltas (the End's outputs) take numbers
    that are never stored."""
    seqs = [e["seq"] for e in events]
    assert seqs[:1] == [1] and seqs == sorted(set(seqs)), f"duplicate or disorder in the stored events: {seqs}"
    types = [e["type"] for e in events]
    assert types[0] == "run_started" and types.count("run_started") == 1, types
    assert types[-1] == "run_finished" and types.count("run_finished") == 1, types


@pytest.mark.slow
def test_serve_killed_with_thirty_runs_in_flight_finishes_them_all_after_a_restart_without_an_operator(
        server, env, counter):
    server.start()
    orphans = [server.submit(gated(counter)) for _ in range(RUNS)]
    counter.wait_for("g", RUNS)  # every run finished a (checkpointed) and is inside the gate
    server.kill()
    assert {s.status.value for s, _, _ in stored(env, orphans).values()} == {"running"}

    counter.gate.set()
    server.start()  # no `flowloom recover`: the server finds its orphans itself
    later = [server.submit(chain("later", [post("n", f"{counter.url}/hit/n")])) for _ in range(5)]
    found = wait_ended(env, orphans + later, timeout=40)

    assert {r: s.status.value for r, (s, _, _) in found.items()} == {r: "succeeded" for r in orphans + later}
    for run_id in orphans + later:
        summary, events, node_runs = found[run_id]
        assert_ordered(events)
        assert [e["type"] for e in events].count("run_finished") == 1 and events[-1]["type"] == "run_finished"
        assert all(n.status.value == "succeeded" for n in node_runs), node_runs
        # the gate was running at the kill: it ran twice and its node run says so; every other node once
        attempts = {n.node_id: n.attempts for n in node_runs}
        assert attempts == {n: 2 if (n == "gate" and run_id in orphans) else 1 for n in attempts}, attempts
    # no node ran twice: a and c once per run (one key each); the gate, which was running
    # at the kill, twice per run with the same key
    for name in ("a", "c"):
        keys = counter.keys(name)
        assert len(keys) == RUNS and len(set(keys)) == RUNS and None not in keys, name
    assert sorted(Tally(counter.keys("g")).values()) == [2] * RUNS
    assert len(counter.keys("n")) == 5
    assert "Traceback" not in server.log()
    log = (Path(env["FLOWLOOM_HOME"]) / "flowloom.log").read_text()  # where serve's own records go
    assert f"recovering {RUNS} run(s) whose owner is gone" in log


@pytest.mark.slow
def test_an_event_stream_of_a_run_whose_process_died_continues_with_the_recovered_execution(
        server, env, counter, tmp_path):
    # a long lease: the periodic look (every lease_ttl/2, >= 22 s) is far off; the watcher triggers the recovery
    server.env = {**env, "FLOWLOOM_LEASE_TTL": "60"}
    server.start()
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated(counter)))
    cli = subprocess.Popen([*FLOWLOOM, "run", str(path), "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, env=server.env, cwd=ROOT)
    assert cli.stdout is not None
    run_id = json.loads(cli.stdout.readline())["run_id"]
    counter.wait_for("g")
    cli.send_signal(signal.SIGKILL)
    cli.wait(10)
    counter.gate.set()

    frames: list[dict[str, Any]] = []
    ended = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{server.base}/v1/runs/{run_id}/events", headers=server.auth, timeout=60) as reply:
            kind = None
            for line in reply.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind != "done":
                    frames.append(json.loads(line[6:]))
                elif line.startswith("data: "):
                    frames.append({"type": "done", **json.loads(line[6:])})
                    break
        ended.set()

    began = time.monotonic()
    threading.Thread(target=follow, daemon=True).start()
    assert ended.wait(15), f"the stream did not end: {[f.get('type') for f in frames]}"
    assert time.monotonic() - began < 15
    types = [f["type"] for f in frames]
    assert types[-2:] == ["run_finished", "done"], types
    events = frames[:-1]
    assert_ordered(events)
    # the killed execution's events past its last checkpoint were never stored: one per seq, the recovered ones
    assert [e.get("node_id") for e in events if e["type"] == "node_started"] == ["start", "a", "gate", "c", "end"]
    assert counter.names().count("a") == 1 and counter.names().count("c") == 1
    gate_keys = counter.keys("g")
    assert len(gate_keys) == 2 and gate_keys[0] == gate_keys[1]
    summary, stored_events, _ = stored(server.env, [run_id])[run_id]
    assert summary.status.value == "succeeded"
    # the stream told the End's deltas too (live only: never stored)
    assert stored_events == [e for e in events if e["type"] != "node_delta"]
