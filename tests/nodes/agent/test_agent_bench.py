"""Smoke test of the agent-loop benchmark: it runs and prints one JSON line with every key.

Speed targets are reported by the benchmark itself and never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The benchmark compares against LangGraph (pip install -e '.[bench]'): without it this
# test fails at import - a missing extra is a setup failure, never a skip.
import langgraph  # noqa: F401
import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_quick_run_prints_one_json_line():
    # From another folder: the script must find its checkout, and bench/engine.py must not shadow ``engine``.
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "agent.py"), "--quick"], cwd=ROOT / "tests",
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    report = json.loads(lines[0])
    assert report["schema"] == "flowloom-bench-agent/1" and report["quick"] is True and report["rounds"] == 100
    for side in ("kernel", "langgraph"):
        assert report[side]["us_per_round_median"] > 0 and report[side]["cpu_us_per_round_median"] > 0
    assert report["ratio_median"] > 0 and isinstance(report["target"]["met"], bool)
    http = report["http"]
    assert http["kernel_us_per_round_median"] > 0 and http["raw_sdk_us_per_round_median"] > 0
    assert 0 < http["kernel_share"] < 1 and http["http_and_sdk_share"] == pytest.approx(1 - http["kernel_share"])
