"""Smoke test of bench/llm.py: it runs from another folder and prints one JSON line.

The numbers are reported, never asserted (the machine is shared and noisy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_llm_bench_prints_one_json_line():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "llm.py"), "--quick"], cwd=ROOT / "tests",
                          capture_output=True, text=True, timeout=110)

    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    report = json.loads(lines[0])
    assert report["schema"] == "flowloom-bench-llm/1"
    assert {"overhead_per_call_us", "overhead_per_chunk_us", "layer_only", "over_http"} <= set(report)
    for size in ("small", "large"):
        assert report["over_http"][size]["raw_cpu_us_median"] > 0
        assert report["layer_only"][size]["llm_cpu_us_per_call"] > 0
