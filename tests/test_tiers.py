"""The fast tier (``pytest -m "not slow"``) leaves out what costs seconds whatever the test:
browsers, processes, Redis and PostgreSQL servers, benchmarks - decided for every test by
``tests/conftest.py`` (:mod:`tests.support.tiers`), so a new test lands in its tier by
what it uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.cli.test_cli_interrupts as interrupts
import tests.cli.test_mcp_cli as mcp_cli
import tests.cli.test_run_refusals as refusals
import tests.nodes.test_mcp_tools as mcp_tools
from tests.support.tiers import SERIAL_GROUP, serial_group, slow_reason, starts_processes

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _raw(fixture):
    """The function behind a ``@pytest.fixture`` (what pytest's fixture definition calls)."""
    return fixture.__wrapped__


def test_a_test_starting_the_command_through_a_helper_is_slow():
    test = interrupts.test_run_prompts_on_the_terminal_and_continues
    assert starts_processes(test), "it calls flowloom(), which runs the console script"
    assert slow_reason(Path(interrupts.__file__), ["store_env"], {"store_env": "embedded"}, test) == \
        "starts a process"


def test_a_test_whose_fixture_starts_a_server_process_is_slow():
    test = mcp_cli.test_the_loopback_server_typed_by_the_operator_is_listed_without_the_allow_setting
    assert slow_reason(Path(mcp_cli.__file__), ["http_url"], {}, None, [_raw(mcp_cli.http_url)]) == \
        "its fixture http_url starts a process"
    assert starts_processes(test), "and it runs the command itself"


def test_a_test_giving_flowloom_a_python_command_to_start_is_slow():
    """A stdio MCP server: the node starts it, from the command the test's helper names."""
    test = mcp_tools.test_two_servers_listing_the_same_tool_name_need_a_prefix
    assert slow_reason(Path(mcp_tools.__file__), ["tmp_path"], {}, test) == "starts a process"


@pytest.mark.parametrize(("fixtures", "params", "reason"), [
    (["make_postgres_database"], {}, "uses the fixture make_postgres_database"),
    (["redis_url", "tmp_path"], {}, "uses the fixture redis_url"),
    (["database_url"], {"database_url": "postgres"}, "runs with database_url=postgres"),
    (["store_env"], {"store_env": "postgres+redis"}, "runs with store_env=postgres+redis"),
    (["knowledge_url"], {"knowledge_url": "pgvector"}, "runs with knowledge_url=pgvector"),
])
def test_postgres_and_redis_make_a_test_slow(fixtures, params, reason):
    assert slow_reason(TESTS / "api" / "test_x.py", fixtures, params, lambda: None) == reason


@pytest.mark.parametrize("directory", ["web", "bench", "workers/rq"])
def test_browser_benchmark_and_worker_directories_are_slow(directory):
    assert slow_reason(TESTS / directory / "test_x.py", [], {}, lambda: None) == f"in tests/{directory}"


def test_an_in_process_command_test_on_sqlite_is_fast():
    test = refusals.test_resume_of_a_paused_run_without_an_answer_says_so_once
    assert not starts_processes(test)
    assert slow_reason(Path(refusals.__file__), ["tmp_path"], {"database_url": "sqlite"}, test) is None


@pytest.mark.timeout(360)  # a collection in a process of its own (300 s): minutes on a loaded machine
def test_the_fast_tier_collects_none_of_them():
    """The real collection, as a developer runs it."""
    targets = ["tests/web", "tests/cli/test_cli_interrupts.py", "tests/cli/test_mcp_cli.py",
               "tests/api/test_openapi_schemathesis.py", "tests/workers/sql/test_store.py",
               "tests/api/test_datasets.py", "tests/engine/knowledge/test_ingestion.py",
               "tests/nodes/test_mcp_tools.py", "tests/cli/test_run_refusals.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "not slow", *targets], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "::" in line]
    assert {line.split("::")[0] for line in lines} == {
        "tests/cli/test_run_refusals.py", "tests/api/test_datasets.py", "tests/workers/sql/test_store.py",
        "tests/engine/knowledge/test_ingestion.py", "tests/nodes/test_mcp_tools.py"}, lines
    assert not [line for line in lines if "stdio" in line], "the stdio MCP servers are processes"
    # each runs on SQLite and on PostgreSQL (a fixture's params, or parametrize(indirect=True)): the SQLite runs only
    assert [line for line in lines if "[sqlite" in line]
    assert not [line for line in lines if "postgres" in line or "pgvector" in line]


class _Plugins:
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def has_plugin(self, name: str) -> bool:
        return name in self.names


def _config(markexpr: str, numprocesses: int | None = None, *, xdist: bool = True, worker: dict | None = None,
            dist: str = "no"):
    """What ``pytest_cmdline_main`` reads of a config: its options and its plugins (a
    worker's ``workerinput`` when ``worker`` is given)."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        option=SimpleNamespace(markexpr=markexpr, numprocesses=numprocesses, collectonly=False, usepdb=False,
                               dist=dist, loadgroup=False),
        pluginmanager=_Plugins({"xdist"} if xdist else set()))
    if worker is not None:
        config.workerinput = worker
    return config


def test_the_fast_tier_runs_on_several_processes_unless_told_otherwise(monkeypatch):
    import tests.conftest as conftest

    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 2)
    fast = _config("not slow")
    conftest.pytest_cmdline_main(fast)
    assert fast.option.numprocesses == 2
    assert fast.option.dist == "load"
    for config in (_config(""), _config("not slow or slow"), _config("not slow", 0), _config("not slow", xdist=False),
                   _config("not slow", worker={})):
        before = config.option.numprocesses
        conftest.pytest_cmdline_main(config)
        assert config.option.numprocesses == before, "the full suite, -n 0, no xdist and a worker stay as they are"
    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 1)
    single = _config("not slow")
    conftest.pytest_cmdline_main(single)
    assert single.option.numprocesses is None, "one core: one process"


def test_the_slow_tier_runs_on_two_processes_by_group_unless_told_otherwise(monkeypatch):
    import tests.conftest as conftest

    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 8)
    slow = _config("slow")
    conftest.pytest_cmdline_main(slow)
    assert (slow.option.numprocesses, slow.option.dist) == (conftest.SLOW_TIER_PROCESSES, "loadgroup") == (2, "loadgroup")
    chosen = _config(" slow ", dist="load")
    conftest.pytest_cmdline_main(chosen)
    assert (chosen.option.numprocesses, chosen.option.dist) == (2, "load"), "a --dist on the command line stays"
    for config in (_config("slow", 0), _config("slow", 3), _config("slow", xdist=False)):
        before = config.option.numprocesses
        conftest.pytest_cmdline_main(config)
        assert config.option.numprocesses == before and config.option.dist == "no", "-n and no xdist stay as they are"
    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 1)
    single = _config("slow")
    conftest.pytest_cmdline_main(single)
    assert (single.option.numprocesses, single.option.dist) == (None, "no"), "one core: one process"


def test_a_worker_groups_its_tests_when_its_master_spreads_them_by_group():
    """xdist's worker takes ``--dist`` from its command line, where the hook's choice is not:
    the master hands it over in ``workerinput`` (``pytest_configure_node``)."""
    import types

    import tests.conftest as conftest

    master = _config("slow")
    conftest.pytest_cmdline_main(master)
    node = types.SimpleNamespace(config=master, workerinput={})
    conftest.pytest_configure_node(node)
    worker = _config("slow", worker=node.workerinput)
    conftest.pytest_cmdline_main(worker)
    assert worker.option.loadgroup is True and worker.option.numprocesses is None
    plain = _config("slow", worker={conftest.DIST_INPUT: "load"})
    conftest.pytest_cmdline_main(plain)
    assert plain.option.loadgroup is False


@pytest.mark.parametrize(("path", "group"), [
    ("web/test_canvas_e2e.py", SERIAL_GROUP), ("bench/test_capacity_bench.py", SERIAL_GROUP),
    ("workers/rq/test_phoenix_traces.py", SERIAL_GROUP), ("workers/rq/test_stop.py", None),
    ("api/test_runs.py", None), ("webhooks/test_x.py", None),
])
def test_browsers_benchmarks_and_phoenix_run_in_turn_on_one_process(path, group):
    assert serial_group(TESTS / path) == group


@pytest.mark.timeout(360)  # a collection in a process of its own (300 s): minutes on a loaded machine
def test_the_slow_tier_groups_only_its_heavy_tests(tmp_path):
    """The real collection: every slow test of tests/web and tests/bench gets the serial
    group, none of the rest (a plugin prints each collected test's groups)."""
    (tmp_path / "groups_probe.py").write_text(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        groups = [m.args[0] for m in item.iter_markers('xdist_group')]\n"
        "        print('GROUPS', item.nodeid, groups)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "slow", "-p", "no:cacheprovider", "-p", "groups_probe",
                           "--co", "-q", "tests/web/test_variables_e2e.py", "tests/bench/test_startup_bench.py",
                           "tests/workers/rq/test_stop.py"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    groups = {line.split()[1]: line.split(" ", 2)[2] for line in proc.stdout.splitlines() if line.startswith("GROUPS ")}
    assert {test_id.split("/")[1] for test_id in groups} == {"web", "bench", "workers"}, groups
    for test_id, found in groups.items():
        heavy = test_id.startswith(("tests/web/", "tests/bench/"))
        assert found == (f"['{SERIAL_GROUP}']" if heavy else "[]"), (test_id, found)
