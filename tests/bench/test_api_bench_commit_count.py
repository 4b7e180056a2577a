"""The commit count of ``bench/api.py --database postgresql`` (``count_commits``), without
running the bench: both windows are measured again while PostgreSQL's autovacuum acted in
one of them (its commits land in the bench's database), the database is vacuumed before
each try, and reading autovacuum's actions costs the same commits every time (each window
holds one read, so they cancel out)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy.engine import URL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench_api(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/api.py`` loaded by file (``bench/`` is off ``sys.path``: its script puts it there)."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_api_under_test", ROOT / "bench" / "api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_api_under_test", module)
    spec.loader.exec_module(module)
    return module


def _counters(bench_api: ModuleType, commits: int) -> dict[str, int]:
    return {key: (commits if key == "xact_commit" else 0) for key in bench_api.COUNTERS}


def test_both_windows_are_measured_again_while_autovacuum_acted_in_one(bench_api, monkeypatch) -> None:
    tries = iter([
        (_counters(bench_api, 650), _counters(bench_api, 44), {"measured": 0, "baseline": 7}, 1.5),  # autovacuum
        (_counters(bench_api, 637), _counters(bench_api, 37), {"measured": 0, "baseline": 0}, 0.9),
    ])
    vacuums: list[str] = []

    async def windows(*_args: Any) -> Any:
        return next(tries)

    async def vacuum(_admin_url: str, database_url: str) -> None:
        vacuums.append(database_url)

    monkeypatch.setattr(bench_api, "_commit_windows", windows)
    monkeypatch.setattr(bench_api.pgstat, "vacuum", vacuum)
    found = asyncio.run(bench_api.count_commits("tmp", {}, "key", "admin", "bench-db", 300, False))
    assert found["commits_per_run"] == 2.0 and found["measured"]["xact_commit"] == 637
    assert found["autovacuum"] == {"measured": 0, "baseline": 0, "attempts": 2} and found["warmup_runs"] == 1
    assert found["runs_elapsed_s"] == 0.9
    assert vacuums == ["bench-db", "bench-db"]  # before the first try, and again before the second


def test_a_count_that_autovacuum_disturbs_every_time_says_so(bench_api, monkeypatch) -> None:
    async def windows(*_args: Any) -> Any:
        return _counters(bench_api, 640), _counters(bench_api, 37), {"measured": 3, "baseline": 0}, 1.0

    async def vacuum(*_args: str) -> None:
        return None

    monkeypatch.setattr(bench_api, "_commit_windows", windows)
    monkeypatch.setattr(bench_api.pgstat, "vacuum", vacuum)
    found = asyncio.run(bench_api.count_commits("tmp", {}, "key", "admin", "bench-db", 300, False))
    assert found["autovacuum"] == {"measured": 3, "baseline": 0, "attempts": bench_api.COMMIT_ATTEMPTS}


def test_reading_autovacuums_actions_costs_the_same_commits_every_time(bench_api, postgres_server_url: URL) -> None:
    pgstat = bench_api.pgstat
    admin = postgres_server_url.render_as_string(hide_password=False)

    async def scenario() -> tuple[list[int], int]:
        database = await pgstat.create_database(admin)
        try:
            await pgstat.vacuum(admin, database)
            costs, actions = [], 0
            for _ in range(3):
                before = (await pgstat.counters(admin, database))["xact_commit"]
                actions = await pgstat.autovacuum_actions(admin, database)
                costs.append((await pgstat.counters(admin, database))["xact_commit"] - before)
            return costs, actions
        finally:
            await pgstat.drop_database(admin, database)

    costs, actions = asyncio.run(scenario())
    assert costs[0] > 0 and costs == [costs[0]] * 3, costs
    assert actions >= 0
