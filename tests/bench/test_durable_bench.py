"""Smoke test of the durable-run benchmark: ``bench/durable.py --quick`` on SQLite and on a
scratch PostgreSQL database prints one JSON line with every key, and drops the database.

Speed targets are reported by the benchmark itself and never asserted here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(360)  # the first test waits for the benchmark's run (its own timeout: 300 s)
SCRIPT = ROOT / "bench" / "durable.py"

RUN_KEYS = {"nodes", "ms_per_run_median", "ms_per_run_best", "us_per_node_median", "us_per_node_best",
            "cpu_us_per_node_median", "create_run_ms_median", "samples_us_per_node"}
FLOOR_KEYS = {"iterations", "us_per_commit_median", "us_per_commit_best", "samples_us_per_commit"}
BACKEND_KEYS = {"connection", "checkpoints_per_run", "checkpointed", "added_us_per_node_median", "floor_sqlalchemy",
                "floor_driver", "ratio_vs_sqlalchemy_floor", "ratio_vs_driver_floor"}


async def _database_exists(server: URL, name: str) -> bool:
    import asyncpg

    conn = await asyncpg.connect(host=server.host or "127.0.0.1", port=server.port or 5432,
                                 user=server.username or "postgres", password=server.password,
                                 database=server.database or "postgres", timeout=10)
    try:
        return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def report(postgres_server_url: URL) -> dict:
    # The script creates its own scratch database on this server and drops it at the end.
    server = postgres_server_url.render_as_string(hide_password=False)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--postgres-server", server],
                          cwd=ROOT / "tests", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {len(lines)}: {proc.stdout[:500]!r}"
    result = json.loads(lines[0])
    name = result.get("postgresql", {}).get("connection", {}).get("database")
    if name and name.startswith("flowloom_bench_") and asyncio.run(_database_exists(postgres_server_url, name)):
        # never leave it behind, even when the script failed to drop it (the test below says so)
        import tests.support.postgres as pg

        asyncio.run(pg._admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        result["_left_behind"] = True
    return result


def test_top_level_keys(report: dict) -> None:
    assert {"schema", "quick", "date", "machine", "flowloom", "method", "backends", "in_memory", "sqlite",
            "postgresql", "reference", "targets", "secondary_targets", "all_targets_met", "cleanup"} <= set(report)
    assert report["quick"] is True
    assert report["backends"] == ["sqlite", "postgresql"]
    assert {"nodes", "ms_per_run_median", "us_per_node_median", "us_per_node_best"} <= set(report["in_memory"])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_backend_section(report: dict, backend: str) -> None:
    section = report[backend]
    assert BACKEND_KEYS <= set(section)
    assert RUN_KEYS <= set(section["checkpointed"])
    assert FLOOR_KEYS <= set(section["floor_sqlalchemy"]) and FLOOR_KEYS <= set(section["floor_driver"])
    nodes = section["checkpointed"]["nodes"]
    assert nodes == report["in_memory"]["nodes"]
    # one checkpoint per node, plus the final one when the run ends
    assert section["checkpoints_per_run"] >= nodes
    for value in (section["checkpointed"]["us_per_node_median"], section["floor_sqlalchemy"]["us_per_commit_median"],
                  section["floor_driver"]["us_per_commit_median"], section["ratio_vs_driver_floor"],
                  section["ratio_vs_sqlalchemy_floor"]):
        assert isinstance(value, float) and value > 0


def test_connections_are_what_the_store_uses(report: dict) -> None:
    assert report["sqlite"]["connection"]["journal_mode"] == "wal"
    assert report["postgresql"]["connection"]["database"].startswith("flowloom_bench_")


def test_targets_have_booleans(report: dict) -> None:
    assert set(report["targets"]) == {"sqlite_ratio_vs_driver_floor", "sqlite_us_per_node",
                                      "postgresql_ratio_vs_driver_floor", "postgresql_us_per_node"}
    for target in [*report["targets"].values(), *report["secondary_targets"].values()]:
        assert {"value", "target", "met"} <= set(target)
        assert isinstance(target["met"], bool)
    assert report["all_targets_met"] == all(t["met"] for t in report["targets"].values())


def test_scratch_database_dropped(report: dict) -> None:
    assert report["cleanup"]["postgresql_database_dropped"] is True
    assert "_left_behind" not in report
