"""Smoke test of ``bench/knowledge_ingest_cpu.py``: two ingestions of the topics into fresh
SQLite datasets, one JSON line with each run's CPU per chunk, chunks/s and embedding
requests; nothing left behind. Speed is never asserted."""

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
SCRIPT = ROOT / "bench" / "knowledge_ingest_cpu.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # ~20 s: two ingestions of 1137 chunks


def test_two_runs_report_cpu_per_chunk_and_leave_nothing_behind() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="fl-ic-"))  # its own: a bench beside it leaves no doubt
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2", "--concurrency", "3"], cwd=ROOT / "tests",
                              capture_output=True, text=True, timeout=280, env={**os.environ, "TMPDIR": str(tmp)})
        left = sorted(p.name for p in tmp.glob("flowloom-bench-ingest-cpu-*"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"temporary folders left behind: {left}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    report = json.loads(lines[0])
    assert report["schema"] == "flowloom-bench-knowledge-ingest-cpu/1"
    assert report["database"] == "sqlite" and report["concurrency"] == 3 and len(report["runs"]) == 2
    chunks = {run["chunks"] for run in report["runs"]}
    assert len(chunks) == 1 and chunks.pop() > 1000  # the same corpus each time
    for run in report["runs"]:
        assert run["cpu_ms_per_chunk"] > 0 and run["chunks_per_s"] > 0
        assert 0 < run["embedding_requests"] < run["chunks"]
    assert report["cpu_ms_per_chunk"]["min"] == report["runs"][1]["cpu_ms_per_chunk"]
