"""SIGKILL at every node of a workflow that mixes pure nodes (templates, a condition, an
aggregator, start and end: no checkpoint of their own) with nodes that have effects (HTTP
requests: checkpointed), then ``flowloom recover``, on SQLite and on PostgreSQL.

The process is a real one (:mod:`tests.support.crash_run`) that kills itself inside the
node's executor, before its work or right after it; a local HTTP service counts the
requests of every node by ``Idempotency-Key``. After recovery:

- a request whose node was stored as finished is never sent again (one request);
- the node that was doing its request when the process died sends it again with the
  same key (two requests, one key), and its node run says it ran twice (``attempts``);
- the stored events have every sequence number once, from 1, with no gap, and one
  ``node_finished`` per node.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import pytest

from tests.support.counting_server import Counter, counter  # noqa: F401  (fixture)
from workers.sql import SqlStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EFFECTS = ("h1", "h2", "h3")
#: (node, when): before the work of every node; after it for the nodes with effects
#: (after a pure node's work is before its successor's)
POINTS = [(n, "before") for n in ("start", "greet", "h1", "check", "h2", "h3", "pick", "shout", "end")] + [
    (n, "after") for n in EFFECTS]


def post(node_id: str, url: str) -> dict[str, Any]:
    return {"id": node_id, "type": "http_request",
            "config": {"method": "POST", "url": f"{url}/hit/{node_id}", "body": {"type": "json", "json": {}},
                       "timeout": 60}}


def mixed_flow(url: str) -> dict[str, Any]:
    """start -> greet -> h1 -> check -(yes)-> h2 -> h3 -> pick -> shout -> end, with
    check -(else)-> never -> pick (skipped). h1..h3 are HTTP requests; the rest is pure."""
    nodes = [{"id": "start", "type": "start"},
             {"id": "greet", "type": "template", "config": {"template": "go", "variables": []}},
             post("h1", url),
             {"id": "check", "type": "if_else", "config": {"cases": [{"id": "yes", "conditions": [
                 {"left": {"ref": "h1.json.node"}, "operator": "equals", "right": "h1"}]}]}},
             post("h2", url), post("h3", url), post("never", url),
             {"id": "pick", "type": "variable_aggregator", "config": {"refs": [{"ref": "h3.json.node"},
                                                                               {"ref": "never.json.node"}]}},
             {"id": "shout", "type": "template", "config": {"template": "{{ a }}+{{ b }}", "variables": [
                 {"name": "a", "value": {"ref": "h1.json.node"}, "type": "string"},
                 {"name": "b", "value": {"ref": "pick.output"}, "type": "string"}]}},
             {"id": "end", "type": "end", "config": {"outputs": [
                 {"name": "said", "value": {"ref": "shout.output"}},
                 {"name": "two", "value": {"ref": "h2.json.node"}}]}}]
    pairs = [("start", "greet", None), ("greet", "h1", None), ("h1", "check", None), ("check", "h2", "yes"),
             ("check", "never", "else"), ("h2", "h3", None), ("h3", "pick", None), ("never", "pick", None),
             ("pick", "shout", None), ("shout", "end", None)]
    edges = [{"id": f"e{i}", "source": s, "target": t, **({"sourceHandle": h} if h else {})}
             for i, (s, t, h) in enumerate(pairs)]
    return {"id": "mixed", "name": "Mixed", "nodes": nodes, "edges": edges}


@pytest.fixture
def env(database_url, tmp_path) -> dict[str, str]:
    """Environment of the crashing and recovering processes: a fresh FLOWLOOM_HOME and the
    test's database (each backend)."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    values.update(FLOWLOOM_HOME=str(tmp_path / "home"), FLOWLOOM_HTTP_ALLOW="127.0.0.1",
                  FLOWLOOM_DATABASE_URL=database_url, PYTHONPATH=str(ROOT) + os.pathsep + values.get("PYTHONPATH", ""))
    return values


async def _stored(env: dict[str, str], run_id: str) -> tuple[Any, list[dict[str, Any]]]:
    store = await SqlStore.open(env["FLOWLOOM_DATABASE_URL"])
    try:
        return await store.load_run("default", run_id), await store.read("default", run_id, limit=10_000)
    finally:
        await store.close()


@pytest.mark.parametrize(("node_id", "when"), POINTS, ids=[f"{n}-{w}" for n, w in POINTS])
def test_sigkill_at_a_node_then_recover_redoes_no_finished_effect(env, counter, tmp_path, node_id, when):
    flow = tmp_path / "mixed.json"
    flow.write_text(json.dumps(mixed_flow(counter.url)))
    killed = subprocess.run([sys.executable, "-m", "tests.support.crash_run", str(flow), node_id, when],
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, (killed.returncode, killed.stdout, killed.stderr[-2000:])
    run_id = killed.stdout.split()[0]

    recovered = subprocess.run([sys.executable, "-m", "api.cli", "recover", run_id, "--json"], env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
    assert recovered.returncode == 0, recovered.stdout[-2000:] + recovered.stderr[-2000:]

    state, events = asyncio.run(_stored(env, run_id))
    assert state.status == "succeeded" and state.outputs == {"said": "h1+h3", "two": "h2"}
    expected = {name: 2 if (name == node_id and when == "after") else 1 for name in EFFECTS}
    assert {name: counter.names().count(name) for name in EFFECTS} == expected, counter.requests
    assert "never" not in counter.names()
    for name in EFFECTS:
        keys = counter.keys(name)
        assert len(set(keys)) == 1 and keys[0], f"{name}: one idempotency key across processes, got {keys}"
    killed_effect = node_id if node_id in EFFECTS else None
    assert {nid: run.attempts for nid, run in state.node_runs.items() if nid in EFFECTS} == {
        name: 2 if name == killed_effect else 1 for name in EFFECTS}, "a node run again counts both runs"

    # Numbered from 1, none twice or out of order. Not gap-free: the End's deltas take
    # numbers that are never stored (its final outputs are); the tallies below find a lost
    # or repeated durable event.
    seqs = [event["seq"] for event in events]
    assert seqs[:1] == [1] and seqs == sorted(set(seqs)), f"stored seqs out of order or twice: {seqs}"
    assert state.seq == seqs[-1] and events[-1]["type"] == "run_finished"
    kinds = Tally(event["type"] for event in events)
    assert kinds["run_started"] == 1 and kinds["run_finished"] == 1
    finished = Tally(event["node_id"] for event in events if event["type"] == "node_finished")
    assert finished == {nid: 1 for nid in state.node_runs}, finished
