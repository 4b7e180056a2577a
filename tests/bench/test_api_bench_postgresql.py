"""Smoke test of ``bench/api.py --database postgresql``: next to the SQLite figures, the
plumbing phases on a PostgreSQL run store and the commits and rows per blocking run read
from ``pg_stat_database``, on a database the bench creates and drops. Figures and
targets are reported, never asserted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "api.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(460)]  # the first test waits for the benchmark's run (its own timeout: 400 s)


async def _bench_databases(url: URL) -> set[str]:
    import asyncpg

    conn = await asyncpg.connect(host=url.host or "127.0.0.1", port=url.port or 5432, user=url.username or "postgres",
                                 password=url.password, database=url.database or "postgres")
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'flowloom_bench_%'")
    finally:
        await conn.close()
    return {row["datname"] for row in rows}


@pytest.fixture(scope="module")
def report_and_leftovers(postgres_server_url: URL) -> tuple[dict, set[str]]:
    before = asyncio.run(_bench_databases(postgres_server_url))
    url = postgres_server_url.render_as_string(hide_password=False)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--skip-peer", "--database", "postgresql",
                           "--postgres-url", url], cwd=ROOT / "tests", capture_output=True, text=True, timeout=400,
                          env={k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[:500]
    return json.loads(lines[0]), asyncio.run(_bench_databases(postgres_server_url)) - before


def test_postgresql_plumbing_is_measured_next_to_sqlite(report_and_leftovers) -> None:
    report, _ = report_and_leftovers
    assert report["method"]["database"] == "postgresql" and "pg_stat_database" in report["method"]["postgresql"]
    results = report["results"]
    assert {"flowloom_plumbing", "flowloom_plumbing_postgresql"} <= set(results)
    section = results["flowloom_plumbing_postgresql"]
    load = report["method"]["load"]
    assert section["blocking_c1"]["requests"] == load["c1"] and section["blocking_c1"]["latency_p50_ms"] > 0
    assert section["blocking_c16"]["concurrency"] == 16 and section["cpu_ms_per_run"] > 0


def test_commits_and_rows_per_run_come_from_pg_stat_database(report_and_leftovers) -> None:
    report, _ = report_and_leftovers
    commits = report["results"]["flowloom_plumbing_postgresql"]["commits"]
    assert commits["runs"] == report["method"]["load"]["c1"]
    assert set(commits["baseline"]) == set(commits["measured"]) == set(commits["per_run"]) >= {
        "xact_commit", "tup_fetched", "tup_returned"}
    assert commits["baseline"]["xact_commit"] > 0, "a server that starts and stops commits (its migrations check)"
    # every blocking run stores at least its run row and its end
    assert commits["commits_per_run"] >= 1 and commits["per_run"]["tup_inserted"] >= 1
    assert commits["rows_fetched_per_run"] == commits["per_run"]["tup_fetched"]
    # both servers serve one warm-up run (the first run's reads cancel out), and the count
    # says whether PostgreSQL's autovacuum acted in the windows it kept
    assert commits["warmup_runs"] == 1 and commits["baseline"]["tup_inserted"] >= 1
    assert set(commits["autovacuum"]) == {"measured", "baseline", "attempts"}


def test_postgresql_targets_are_reported_and_the_database_dropped(report_and_leftovers) -> None:
    report, leftovers = report_and_leftovers
    targets = report["targets"]
    for name in ("postgresql_p50_c1_ratio", "postgresql_commits_per_run"):
        assert {"value", "target", "met"} <= set(targets[name]) and isinstance(targets[name]["met"], bool)
    assert targets["postgresql_commits_per_run"]["value"] == \
        report["results"]["flowloom_plumbing_postgresql"]["commits"]["commits_per_run"]
    assert leftovers == set(), "the bench drops the database it made"
