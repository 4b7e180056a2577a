"""Smoke test of the knowledge-base benchmark: ``bench/knowledge.py --smoke`` ingests 8
documents on both sides (LangChain + Chroma, Flowloom on SQLite and on PostgreSQL with
pgvector), searches a 1k-chunk set, and prints one JSON line with every figure, ratio and
target; nothing of it is left behind. Speed targets are reported by the benchmark, never
asserted here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "knowledge.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(360)]  # ~30 s: a pgserver start, Chroma, two Flowloom stores


@pytest.fixture(scope="module")
def report() -> dict:
    # a temporary folder of its own (short: pgserver's socket lives under it), so another
    # bench running beside this one cannot look like something this one left behind
    tmp = Path(tempfile.mkdtemp(prefix="fl-kb-"))
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--database", "both"], cwd=ROOT / "tests",
                              capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
        left = sorted(p.name for p in tmp.glob("flowloom-bench-knowledge-*"))
        assert not left, f"temporary folders left behind: {left}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return json.loads(lines[0])


def test_smoke_run_reports_ingestion_for_both_sides_and_stores(report: dict) -> None:
    assert report["bench"] == "knowledge" and report["mode"] == "smoke" and report["quick"] is True
    assert report["databases"] == ["sqlite", "postgresql"]
    assert report["errors"] == []
    corpus = report["corpus"]
    assert corpus["documents"] == 8 and corpus["flowloom_chunks"] > 0 and corpus["langchain_chunk_chars"] > 0
    # the LangChain splitter is calibrated to cut as many chunks as Flowloom's chunker
    assert abs(corpus["langchain_chunks"] - corpus["flowloom_chunks"]) <= max(2, corpus["flowloom_chunks"] // 20)
    for side in ("langchain_chroma", "flowloom_sqlite", "flowloom_postgresql"):
        row = report["ingest"][side]
        assert row["chunks"] > 0 and row["chunks_per_s"] > 0 and row["seconds"] > 0, side
    for kind in ("sqlite", "postgresql"):
        asked = report["full_text"][f"flowloom_{kind}"]
        assert asked["questions"] == 8 and 0 <= asked["recall_at_10"] <= 1 and 0 <= asked["mrr_at_10"] <= 1


def test_smoke_run_reports_search_latency_and_recall_against_chroma(report: dict) -> None:
    assert set(report["search"]) == {"1000"}
    row = report["search"]["1000"]
    assert row["queries"] == 20
    assert {"semantic_ms_p50", "semantic_ms_p99", "vector_ms_p50", "vector_ms_p99", "recall_at_10",
            "insert_s"} <= set(row["chroma"])
    for kind in ("sqlite", "postgresql"):
        side = row[f"flowloom_{kind}"]
        assert {"semantic_ms_p50", "semantic_ms_p99", "hybrid_ms_p50", "hybrid_ms_p99", "vector_ms_p50",
                "vector_ms_p99", "full_text_ms_p50", "full_text_ms_p99", "recall_at_10", "first_search_ms",
                "insert_s"} <= set(side)
        assert side["semantic_ms_p50"] > 0 and 0 <= side["recall_at_10"] <= 1


def test_targets_carry_value_target_and_met(report: dict) -> None:
    names = {"ingest_sqlite_vs_langchain", "ingest_postgresql_vs_langchain"}
    for kind in ("sqlite", "postgresql"):
        names |= {f"search_1000_{kind}_semantic_p50_vs_chroma", f"search_1000_{kind}_hybrid_p50_vs_chroma",
                  f"recall_1000_{kind}"}
    assert set(report["targets"]) == names
    for target in report["targets"].values():
        assert isinstance(target["met"], bool) and isinstance(target["value"], float) and target["target"]
    assert isinstance(report["all_targets_met"], bool)
    assert set(report["ratios"]) >= {"ingest_sqlite_vs_langchain", "ingest_postgresql_vs_langchain"}
