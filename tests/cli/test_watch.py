"""``flowloom watch RUN`` in a terminal's words: every run it follows ends with the line
of how it ended - succeeded, failed (node and reason) or cancelled (why) - as ``--json``
ends with the terminal event. Real CLI processes on a fresh SQLite home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import failing_workflow
from tests.support.counting_server import counter  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
FLOWLOOM = [sys.executable, "-m", "api.cli"]


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    values.update(FLOWLOOM_HOME=str(tmp_path / "home"), FLOWLOOM_HTTP_ALLOW="127.0.0.1")
    return values


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLOWLOOM, *args], capture_output=True, text=True, env=env, timeout=90, cwd=ROOT)


def last_line(env: dict[str, str], run_id: str) -> str:
    """The last line ``flowloom watch`` prints (progress goes to stderr when stdout is not a terminal)."""
    watched = cli(env, "watch", run_id)
    assert watched.returncode == 0, watched.stderr
    assert "Traceback" not in watched.stderr
    return watched.stderr.strip().splitlines()[-1]


def test_watch_of_a_run_cancelled_while_paused_ends_with_the_cancel_line(env):
    paused = cli(env, "run", str(ROOT / "examples" / "order_confirm.json"), "--input", "item=tea", "--no-input")
    assert paused.returncode == 3, paused.stderr
    run_id = paused.stderr.split(" waits for interrupt")[0].split()[-1]
    assert cli(env, "cancel", run_id).returncode == 0
    watched = cli(env, "watch", run_id)
    lines = watched.stderr.strip().splitlines()
    assert any(line.startswith("run paused: 1 question(s) waiting") for line in lines), watched.stderr
    assert lines[-1].startswith("run cancelled: "), watched.stderr
    assert lines[-1] != "run cancelled: " and "run cancelled: run cancelled" not in lines[-1]
    events = [json.loads(line) for line in cli(env, "watch", run_id, "--json").stdout.splitlines()]
    assert events[-1]["type"] == "run_cancelled"
    assert lines[-1] == "run cancelled: " + events[-1]["reason"].removeprefix("run cancelled: ")


def test_watch_of_a_run_cancelled_while_a_node_ran_ends_with_the_cancel_line(env, counter, tmp_path):
    node = {"id": "gate", "type": "http_request", "name": "Gate",
            "config": {"method": "POST", "url": f"{counter.url}/gate/g", "timeout": 120}}
    doc: dict[str, Any] = {"id": "gated", "name": "Gated", "nodes": [{"id": "start", "type": "start"}, node,
                                                                     {"id": "end", "type": "end"}],
                           "edges": [{"id": "e1", "source": "start", "target": "gate"},
                                     {"id": "e2", "source": "gate", "target": "end"}]}
    path = tmp_path / "gated.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.Popen([*FLOWLOOM, "run", str(path), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    run_id = json.loads(proc.stdout.readline())["run_id"]
    counter.wait_for("g")
    assert cli(env, "cancel", run_id).returncode == 0
    assert proc.wait(20) == 130
    proc.stdout.close()
    watched = cli(env, "watch", run_id)
    lines = watched.stderr.strip().splitlines()
    assert any("Gate (gate)" in line and "cancelled" in line for line in lines), watched.stderr
    assert lines[-1].startswith("run cancelled"), watched.stderr


def test_watch_of_a_failed_run_ends_with_the_node_and_the_reason(env, tmp_path):
    path = tmp_path / "failing.json"
    path.write_text(json.dumps(failing_workflow()))
    failed = cli(env, "run", str(path))
    assert failed.returncode == 1, failed.stderr
    run_id = json.loads(cli(env, "runs", "--json").stdout)[0]["run_id"]
    line = last_line(env, run_id)
    assert line.startswith("run failed at node 'boom' ("), line
    assert line == [x for x in failed.stderr.splitlines() if x.startswith("run failed")][-1], \
        "the same words as the run command's own last line"


def test_watch_of_a_succeeded_run_still_ends_with_its_line(env):
    done = cli(env, "run", str(ROOT / "examples" / "hello.json"), "--input", "name=Ada")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(cli(env, "runs", "--json").stdout)[0]["run_id"]
    assert last_line(env, run_id).startswith("run succeeded in ")
