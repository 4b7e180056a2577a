"""Smoke test of the API benchmark: ``bench/api.py --quick --skip-peer --tracing`` serves
Flowloom (``flowloom serve``, with the scripted model server) and the FastAPI floor, then
Flowloom again with OpenTelemetry traces exported to a local OTLP sink, sends a tiny load
from its own client and prints one JSON line with every key.

It runs without LangGraph (``--skip-peer``): ``langgraph dev`` takes seconds to start and
its in-memory queue answers a run after up to half a second of polling, which says
nothing about Flowloom; the full bench fails when the peer cannot start. Speed targets
are reported by the benchmark, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(360)  # the first test waits for the benchmark's run (its own timeout: 300 s)
SCRIPT = ROOT / "bench" / "api.py"

PHASE_KEYS = {"requests", "concurrency", "elapsed_s", "per_s", "server_cpu_ms_per_req", "client_cpu_ms_per_req",
              "latency_p50_ms", "latency_p99_ms"}
TARGETS = {"cpu_ratio_vs_langgraph", "cpu_ratio_vs_floor", "p50_c1_ms", "sse_first_event_p50_ms"}


@pytest.fixture(scope="module")
def report() -> dict:
    # Run from another folder: the script must find the checkout it lives in.
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--skip-peer", "--tracing"], cwd=ROOT / "tests",
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    return json.loads(lines[0])


def test_top_level_keys_are_all_there(report: dict) -> None:
    assert {"schema", "quick", "date", "machine", "flowloom", "peer", "method", "results", "targets",
            "all_targets_met", "elapsed_s"} <= set(report)
    assert report["quick"] is True
    assert report["peer"]["skipped"] is True
    assert report["machine"]["cpu_count"] >= 1
    assert set(report["results"]) == {"fastapi_floor", "flowloom_plumbing", "flowloom_model",
                                      "flowloom_plumbing_traced", "flowloom_model_traced"}


def test_flowloom_phases_measure_every_request(report: dict) -> None:
    load = report["method"]["load"]
    for workflow in ("flowloom_plumbing", "flowloom_model", "flowloom_plumbing_traced", "flowloom_model_traced"):
        section = report["results"][workflow]
        assert set(section) >= {"blocking_c1", "blocking_c16", "sse", "async", "cpu_ms_per_run"}, workflow
        for name in ("blocking_c1", "blocking_c16", "sse", "async"):
            assert PHASE_KEYS <= set(section[name]), (workflow, name)
        assert section["blocking_c1"]["requests"] == load["c1"] and section["blocking_c1"]["concurrency"] == 1
        assert section["blocking_c16"]["requests"] == load["c16"] and section["blocking_c16"]["concurrency"] == 16
        sse = section["sse"]
        # the first event comes before the run's first event, which comes before the end
        assert 0 < sse["first_event_p50_ms"] <= sse["run_event_p50_ms"] <= sse["latency_p50_ms"]
        assert section["cpu_ms_per_run"] > 0 and section["blocking_c1"]["latency_p50_ms"] > 0
    assert report["results"]["flowloom_model"]["model_server_cpu_ms_per_run"] > 0  # the model was called
    assert report["results"]["flowloom_plumbing"]["idle_cpu_ms_per_s"] >= 0


def test_floor_is_measured(report: dict) -> None:
    floor = report["results"]["fastapi_floor"]
    for name in ("blocking_c1", "blocking_c16"):
        assert PHASE_KEYS <= set(floor[name])
    assert floor["cpu_ms_per_run"] >= 0


def test_targets_have_booleans(report: dict) -> None:
    targets = report["targets"]
    assert set(targets) == TARGETS
    for target in targets.values():
        assert {"value", "target", "met"} <= set(target)
        assert isinstance(target["met"], bool)
    # without the peer its target is not met, and says why
    assert targets["cpu_ratio_vs_langgraph"] == {"value": None, "target": "<= 1/3", "met": False, "skipped": True}
    assert report["all_targets_met"] is False


def test_tracing_off_and_on_are_side_by_side_and_the_spans_arrived(report: dict) -> None:
    tracing = report["tracing"]
    results = report["results"]
    for workflow in ("plumbing", "model"):
        cpu = tracing[workflow]["cpu_ms_per_run"]
        assert cpu["off"] == results[f"flowloom_{workflow}"]["cpu_ms_per_run"]
        assert cpu["on"] == results[f"flowloom_{workflow}_traced"]["cpu_ms_per_run"]
        assert cpu["overhead_pct"] == round((cpu["on"] - cpu["off"]) / cpu["off"] * 100, 1)
        p50 = tracing[workflow]["p50_c1_ms"]
        assert p50["on"] == results[f"flowloom_{workflow}_traced"]["blocking_c1"]["latency_p50_ms"]
    # every traced run exported at least its run span and a span per node (plumbing: 3 nodes)
    load = report["method"]["load"]
    runs = sum(load[k] + load["warmup"] for k in ("c1", "c16", "sse", "async"))
    assert tracing["spans_received"] >= 2 * runs * 4 and tracing["exports"] >= 1
