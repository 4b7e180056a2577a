"""Smoke test of the capacity benchmark: ``bench/capacity.py --runs 200`` starts a whole
deployment (PostgreSQL scratch database, Redis, 2 ``flowloom serve`` replicas, 3 ``flowloom
worker`` processes), submits 200 queued runs through the HTTP API and checks that each was
executed exactly once - every run succeeded, one side-effect request per run with its own
idempotency key, one node run per node, whole event logs (numbered from 1, none twice, one end) - then leaves no process and
no database behind. Speed is reported by the benchmark, never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "capacity.py"
RUNS = 200

pytestmark = [pytest.mark.slow, pytest.mark.timeout(660)]  # the first test waits for the benchmark's run (its own timeout: 600 s)


@pytest.fixture(scope="module")
def report(postgres_server_url: Any) -> dict:
    env = {**os.environ, "FLOWLOOM_TEST_POSTGRES_URL": postgres_server_url.render_as_string(hide_password=False)}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--runs", str(RUNS)], cwd=ROOT / "tests", env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    return json.loads(lines[0])


def test_each_queued_run_through_two_replicas_and_three_workers_is_executed_exactly_once(report: dict) -> None:
    assert report["deployment"] == {"api_replicas": 2, "workers": 3, "run_store": "postgresql",
                                    "queue": "redis + rq"}
    once = report["results"]["exactly_once"]
    assert once["accepted"] == RUNS and once["refused"] == 0, once["refusals"]
    assert once["runs_by_status"] == {"succeeded": RUNS}
    assert once["side_effect_requests"] == RUNS and once["distinct_idempotency_keys"] == RUNS
    assert once["node_runs"] == RUNS * 4 and once["max_node_attempts"] == 1
    assert once["runs_with_events"] == RUNS and once["runs_with_broken_event_logs"] == 0
    assert once["ok"] is True and report["exactly_once"] is True


def test_the_report_carries_the_rates_and_the_cpu_split(report: dict) -> None:
    results = report["results"]
    assert results["runs_per_s"] > 0 and results["runs_per_s_per_core"] > 0 and results["wall_s"] > 0
    assert set(results["cpu_s"]) == {"api", "workers", "redis", "counter", "postgresql"}
    assert results["cpu_s"]["workers"] > 0 and results["cpu_s"]["api"] > 0
    assert report["machine"]["cpu_count"] == results["cores"]


def test_nothing_is_left_behind(report: dict, postgres_server_url: Any) -> None:
    import asyncpg

    for pid in report["pids"]:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid
    server = postgres_server_url

    async def exists() -> bool:
        conn = await asyncpg.connect(host=server.host, port=server.port or 5432, user=server.username or "postgres",
                                     password=server.password,
                                     database=server.database or "postgres")
        try:
            return bool(await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1",
                                            report["database"]))
        finally:
            await conn.close()

    assert not asyncio.run(exists())
