"""Smoke test of the recovery benchmark: ``bench/recovery.py --quick --no-operator`` prints
one JSON line whose orphans all ended ``succeeded`` after the restart, each gate node run
twice (once before the kill, once recovered). Speed is reported, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(360)  # the test waits for the benchmark's run (its own timeout: 300 s)


@pytest.mark.slow
def test_the_recovery_bench_prints_one_json_line_with_every_orphan_succeeded():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "recovery.py"), "--quick", "--no-operator"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = done.stdout.splitlines()
    report = json.loads(line)
    assert report["schema"] == "flowloom-bench-recovery/1" and "operator" not in report
    automatic = report["automatic"]
    assert automatic["runs"] == automatic["succeeded"] == 3 and automatic["gate_requests"] == 6
    assert automatic["restart_to_all_ended_s"] >= automatic["startup_s"] > 0
