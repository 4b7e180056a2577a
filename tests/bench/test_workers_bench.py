"""Smoke test of the queued-execution benchmark: ``bench/workers.py --quick`` starts its own
Redis, worker processes and scripted model server, prints one JSON line with every key,
and leaves no process behind. Speed targets are reported by the benchmark, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(360)  # the first test waits for the benchmark's run (its own timeout: 300 s)
SCRIPT = ROOT / "bench" / "workers.py"


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=ROOT / "tests", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    return json.loads(lines[0])


def test_quick_run_reports_every_figure_for_runs_and_plain_rq_jobs(report: dict) -> None:
    assert report["bench"] == "workers" and report["quick"] is True and report["database"] == "sqlite"
    assert set(report["results"]) == {"workers_1"}
    row = report["results"]["workers_1"]
    for workload in ("plumbing", "model"):
        assert {"enqueue_to_first_event_ms_p50", "enqueue_to_first_event_ms_p99", "runs_per_s"} <= set(row[workload])
        assert row[workload]["runs_per_s"] > 0 and row[workload]["enqueue_to_first_event_ms_p50"] > 0
    assert {"enqueue_to_start_ms_p50", "enqueue_to_start_ms_p99", "jobs_per_s"} <= set(row["rq_noop"])
    for target in row["targets"].values():
        assert isinstance(target["met"], bool) and "value" in target and "target" in target
    assert isinstance(report["all_targets_met"], bool)
    assert "rq" in report["machine"]["packages"]
