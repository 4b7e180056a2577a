"""Smoke test of the engine benchmark: it runs and prints one JSON line with every key.

Speed targets are reported by the benchmark itself and never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The benchmark compares against LangGraph (pip install -e '.[bench]'): without it these
# tests fail at import - a missing extra is a setup failure, never a skip.
import langgraph  # noqa: F401
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "engine.py"

OVERHEAD_KEYS = {
    "nodes",
    "flowloom_us_per_node_median",
    "flowloom_us_per_node_best",
    "flowloom_events_us_per_node_median",
    "flowloom_events_us_per_node_best",
    "flowloom_events_per_run",
    "langgraph_us_per_node_median",
    "langgraph_us_per_node_best",
    "ratio_median",
    "ratio_best",
    "ratio_events_median",
    "flowloom_cpu_us_per_node_median",
    "langgraph_cpu_us_per_node_median",
    "ratio_cpu_median",
    "samples_us_per_node",
}
TARGET_KEYS = {"chain_overhead_ratio", "fanout_overhead_ratio", "compile_ratio_at_largest", "fanout_memory_mib"}


@pytest.fixture(scope="module")
def report() -> dict:
    # Run from another folder: the script must find the checkout it lives in, and its own
    # name (bench/engine.py) must not shadow the ``engine`` package.
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=ROOT / "tests", capture_output=True,
                          text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    return json.loads(lines[0])


def test_top_level_keys(report: dict) -> None:
    assert {"schema", "quick", "date", "machine", "flowloom", "method", "overhead", "compile", "memory", "targets",
            "all_targets_met"} <= set(report)
    assert report["quick"] is True
    assert report["machine"]["cpu_count"] >= 1
    assert report["machine"]["python"].count(".") == 2


def test_overhead_section(report: dict) -> None:
    for shape in ("chain", "fanout"):
        section = report["overhead"][shape]
        assert OVERHEAD_KEYS <= set(section), shape
        assert section["nodes"] > 2
        for key in ("flowloom_us_per_node_median", "langgraph_us_per_node_median", "ratio_median"):
            assert isinstance(section[key], float) and section[key] > 0
        # the events variant really received events (node_started + node_finished per node at least)
        assert section["flowloom_events_per_run"] >= 2 * section["nodes"]


def test_compile_and_memory_sections(report: dict) -> None:
    comp = report["compile"]
    assert comp["shape"] == "chain"
    assert len(comp["sizes"]) == 3 and comp["largest"] == max(comp["sizes"])
    for key in ("flowloom_ms_median", "flowloom_ms_best", "langgraph_ms_median", "langgraph_ms_best"):
        assert set(comp[key]) == {str(n) for n in comp["sizes"]}
    assert comp["ratio_median_at_largest"] > 0
    mem = report["memory"]
    assert mem["shape"] == "fanout"
    for key in ("flowloom_peak_increase_mib_median", "flowloom_peak_increase_mib_max",
                "flowloom_events_peak_increase_mib_median", "langgraph_peak_increase_mib_median",
                "langgraph_peak_increase_mib_max", "ratio_median"):
        assert mem[key] >= 0


def test_targets_have_booleans(report: dict) -> None:
    targets = report["targets"]
    assert set(targets) == TARGET_KEYS
    for target in targets.values():
        assert {"value", "target", "met"} <= set(target)
        assert isinstance(target["met"], bool)
    assert report["all_targets_met"] == all(t["met"] for t in targets.values())
