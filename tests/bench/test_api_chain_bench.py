"""Smoke test of the long-chain API benchmark: ``bench/api_chain.py --nodes 200 --rounds 1``
runs the template chain in memory and through ``flowloom serve`` and prints one JSON line
with every key. Speed targets are reported by the benchmark, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(360)  # the test waits for the benchmark's run (its own timeout: 300 s)
SCRIPT = ROOT / "bench" / "api_chain.py"


def test_the_chain_bench_prints_one_line_with_its_figures() -> None:
    # Run from another folder: the script must find the checkout it lives in.
    proc = subprocess.run([sys.executable, str(SCRIPT), "--nodes", "200", "--rounds", "1"], cwd=ROOT / "tests",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    report = json.loads(lines[0])
    assert report["schema"] == "flowloom-bench-api-chain/1" and report["nodes"] == 200
    assert {"wall_s", "compile_s", "cpu_s"} <= set(report["engine_in_memory"])
    [round_] = report["api_rounds"]
    assert {"wall_s", "server_cpu_s", "answer_bytes"} <= set(round_) and round_["answer_bytes"] > 200 * 100
    assert set(report["targets"]) == {"api_wall_s"} and isinstance(report["targets"]["api_wall_s"]["met"], bool)
