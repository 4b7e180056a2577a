"""Smoke test of the start-up benchmark: ``bench/startup.py --quick`` prints one JSON line
with every key. The targets are reported by the benchmark, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "startup.py"
# the first test waits for the whole --quick run (its own timeout: 300 s), about a minute on a
# 2-core machine but over two while other processes take most of the cores
pytestmark = pytest.mark.timeout(360)

COMMANDS = {"python_pass", "cli_help", "validate_hello", "validate_research_agent", "run_hello"}


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=ROOT / "tests", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    return json.loads(lines[0])


def test_top_level_keys(report: dict) -> None:
    assert {"schema", "quick", "date", "machine", "flowloom", "method", "commands", "imports", "imports_run",
            "targets", "all_targets_met"} <= set(report)
    assert report["quick"] is True


def test_commands(report: dict) -> None:
    assert set(report["commands"]) == COMMANDS
    for name, section in report["commands"].items():
        assert {"argv", "exit_code", "s_median", "s_best", "over_python_s_median", "cpu_s_median",
                "samples_s"} <= set(section)
        assert section["exit_code"] == 0, name  # --help, both validates and the run succeed on the bundled examples
        assert section["s_median"] > 0


def test_imports(report: dict) -> None:
    imports = report["imports"]
    top = imports["top10_cumulative"]
    assert 1 <= len(top) <= 10
    assert [e["cumulative_ms"] for e in top] == sorted((e["cumulative_ms"] for e in top), reverse=True)
    for entry in top:
        assert {"package", "cumulative_ms", "self_ms", "modules", "own_package"} <= set(entry)
        assert "." not in entry["package"]
    assert any(e["package"] == "engine" for e in top)  # validate compiles: the engine is loaded
    assert imports["total_import_ms_median"] > 0
    run_top = report["imports_run"]["top10_cumulative"]
    assert any(e["package"] == "workers" for e in run_top)  # the run opened the SQL store


def test_targets_have_booleans(report: dict) -> None:
    assert set(report["targets"]) == COMMANDS - {"python_pass"}
    for target in report["targets"].values():
        assert {"value", "target", "met"} <= set(target)
        assert isinstance(target["met"], bool)
    assert report["all_targets_met"] == all(t["met"] for t in report["targets"].values())
