"""examples/poll_job.json: a loop drawn with a back-edge, polling the local stub API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import FLOWLOOM

ROOT = Path(__file__).resolve().parents[2]


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = os.environ["FLOWLOOM_HOME"]  # the test's own folder, never ~/.flowloom
    env.update(FLOWLOOM=FLOWLOOM, PYTHON=sys.executable)  # the script's CLI and stub: never from PATH
    return subprocess.run([str(ROOT / "examples" / "with_stub.sh"), str(ROOT / "examples" / "poll_job.json"),
                           "--json", *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


def test_poll_job_loops_until_the_job_is_done():
    proc = run_example("--input", "after=6")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["outputs"] == {"polls": 7, "result": "report for report-42 is ready"}
    polls = [e for e in events if e["type"] == "node_finished" and e["node_id"] == "poll"]
    assert [e["iteration"] for e in polls] == list(range(7))
    assert all(e["loop_id"] == "poll~loop" for e in polls)


def test_poll_job_stops_at_the_entry_limit_with_a_reason():
    proc = run_example("--input", "after=50", "--input", "job_id=slow-job")
    assert proc.returncode == 1
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["type"] == "run_failed" and events[-1]["reason"] == "max_iterations"
    assert "reached its limit of 20 rounds" in events[-1]["error"]["message"]


def test_a_poll_that_fails_in_its_first_round_fails_the_run_naming_the_node(tmp_path):
    # The loop's later members never ran: the run is stored failed, not an internal error.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    proc = subprocess.run([FLOWLOOM, "run", str(ROOT / "examples" / "poll_job.json"), "--json",
                           "--input", "base_url=http://127.0.0.1:9"], capture_output=True, text=True, timeout=60,
                          env=env, cwd=ROOT)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["type"] == "run_failed" and events[-1]["error"]["node_id"] == "poll"
    shown = subprocess.run([FLOWLOOM, "runs", "--json"], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert json.loads(shown.stdout)[0]["status"] == "failed", shown.stdout
