"""Test configuration shared by every test package.

Fixture modules live in ``tests/support/`` and are registered here once. Every test
runs with ``FLOWLOOM_HOME`` in its own temporary folder (and no ``FLOWLOOM_*`` setting
from the developer's shell), so no test reads or writes the user's ``~/.flowloom``.
"""

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.support.workflows",
    "tests.support.openai_server",
    "tests.support.redis_server",
    "tests.support.postgres",
    "tests.support.databases",
    "tests.support.pgvector",
]

# Subprocesses started at collection time inherit this too.
# The suite's own switches stay (the real-model tier's: tests/real_model/conftest.py; the
# Phoenix environment of .ci/phoenix-env and the README screenshots a test may write:
# tests/workers/rq/test_phoenix_traces.py).
_KEPT = ("FLOWLOOM_TEST_POSTGRES_URL", "FLOWLOOM_IMPORT_CORPUS", "FLOWLOOM_TEST_SEED", "FLOWLOOM_TEST_REAL_MODEL",
         "FLOWLOOM_TEST_REAL_MODEL_CHAT_FORMAT", "FLOWLOOM_TEST_REAL_MODEL_NO_REPACK", "FLOWLOOM_TEST_REAL_MODEL_REPORT",
         "FLOWLOOM_TEST_WHEELHOUSE", "FLOWLOOM_TEST_PHOENIX_VENV", "FLOWLOOM_TEST_README_SHOTS")
for _name in [n for n in os.environ if n.startswith("FLOWLOOM_") and n not in _KEPT]:
    del os.environ[_name]


#: the marker expression of the fast tier (README): it runs on several processes by default
FAST_TIER = "not slow"
#: processes for the fast tier: it is the inner loop on a 2-core machine, where its waits
#: (timeouts, sleeps, socket round trips) and its CPU overlap well; more than 4 start-ups
#: cost more than they save
FAST_TIER_PROCESSES = 4
#: the marker expression of the slow tier (README, ``.ci/run``): it runs on several processes too
SLOW_TIER = "slow"
#: processes for the slow tier: in one process it mostly waits on the servers, browsers,
#: workers and databases its tests start (a load of about 1 on 2 cores); two fill the
#: machine. Its heavy tests still run one after another (:data:`SLOW_TIER_DIST`), and the
#: tests that start several processes each are sized for a core each, so no more than two
SLOW_TIER_PROCESSES = 2
#: how xdist spreads the slow tier: by group, so that the tests of one ``xdist_group``
#: (:func:`tests.support.tiers.serial_group`: browsers, benchmarks, Phoenix) run on one
#: process, never at the same time as each other
SLOW_TIER_DIST = "loadgroup"
#: the key of the master's ``--dist`` in an xdist worker's ``workerinput``
DIST_INPUT = "flowloom_dist"
#: processes and distribution mode per tier (the exact ``-m`` expression)
TIER_PROCESSES = {FAST_TIER: (FAST_TIER_PROCESSES, "load"), SLOW_TIER: (SLOW_TIER_PROCESSES, SLOW_TIER_DIST)}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run the fast tier (``-m "not slow"``) on up to :data:`FAST_TIER_PROCESSES` and the
    slow tier (``-m slow``) on up to :data:`SLOW_TIER_PROCESSES` processes with
    pytest-xdist (the slow tier by group, :data:`SLOW_TIER_DIST`) when it is installed and
    ``-n`` was not given (``-n 0`` keeps one process), never more than the machine's cores.
    The full suite (no ``-m``) stays in one process."""
    option = config.option
    if hasattr(config, "workerinput"):  # an xdist worker: its master decided (pytest_configure_node)
        if config.workerinput.get(DIST_INPUT) == "loadgroup":
            option.loadgroup = True  # xdist's worker reads --dist from its own command line only
        return
    if getattr(option, "numprocesses", 0) is not None or not config.pluginmanager.has_plugin("xdist"):
        return
    tier = TIER_PROCESSES.get((option.markexpr or "").strip())
    if tier is None or option.collectonly or option.usepdb:
        return
    most, dist = tier
    processes = min(os.cpu_count() or 1, most)
    if processes > 1:
        option.numprocesses = processes
        if option.dist == "no":  # a --dist given on the command line stays
            option.dist = dist


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without xdist
def pytest_configure_node(node) -> None:
    """Tell each xdist worker how its master spreads the tests (:data:`DIST_INPUT`): a
    worker takes ``--dist`` from the command line, not from :func:`pytest_cmdline_main`,
    and it names the tests of an ``xdist_group`` for ``loadgroup`` itself."""
    node.workerinput[DIST_INPUT] = node.config.option.dist


#: the marker of the real-model tier (tests/real_model): off unless asked for
REAL_MODEL = "real_model"
#: set to 1 to run the real-model tier with the rest (else only ``-m real_model`` runs it)
REAL_MODEL_ENV = "FLOWLOOM_TEST_REAL_MODEL"


def real_model_wanted(config: pytest.Config) -> bool:
    """Whether this session runs the real-model tier: its marker is named in ``-m`` (as in
    ``-m real_model``; ``-m "not real_model"`` names it too and then deselects it itself)
    or ``FLOWLOOM_TEST_REAL_MODEL=1``. It builds and runs a local model for minutes, so
    neither ``pytest`` nor ``pytest -m "not slow"`` runs it."""
    return REAL_MODEL in (config.option.markexpr or "") or os.environ.get(REAL_MODEL_ENV) == "1"


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups (--dist loadgroup) and -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark slow every test that uses a browser, starts a process, a Redis or PostgreSQL
    server, or is a benchmark (:mod:`tests.support.tiers`): ``pytest -m "not slow"`` is
    the fast tier, whoever wrote the test. The heavy slow tests get their ``xdist_group``
    (:func:`tests.support.tiers.group_serial_tests`). The real-model tier is deselected
    unless asked for (:func:`real_model_wanted`)."""
    from tests.support.tiers import group_serial_tests, mark_slow_tests

    mark_slow_tests(items)
    group_serial_tests(items)
    if not real_model_wanted(config):
        off = [item for item in items if item.get_closest_marker(REAL_MODEL) is not None]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [item for item in items if item.get_closest_marker(REAL_MODEL) is None]


@pytest.fixture(autouse=True)
def _flowloom_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A fresh FLOWLOOM_HOME per test; the process settings are re-read."""
    from engine.settings import get_settings

    monkeypatch.setenv("FLOWLOOM_HOME", str(tmp_path_factory.mktemp("flowloom-home")))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _user_home_state() -> list[tuple[str, int, float]]:
    """What ``~/.flowloom`` holds now: (name, size, mtime) of each file, [] when absent."""
    home = Path.home() / ".flowloom"
    if not home.is_dir():
        return []
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime) for p in home.iterdir() if p.is_file())


_USER_HOME_AT_START = _user_home_state()


#: the node ids of the tests that skipped in this session (on xdist's controller: its
#: workers' reports come to it)
_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember a skipped test (:func:`pytest_sessionfinish` fails the run for it)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when any test (or a process it started) wrote into ``~/.flowloom``:
    tests use their own ``FLOWLOOM_HOME``, and a subprocess whose environment dropped it
    would otherwise write into the user's real run store unnoticed. Fail it too when a
    test skipped: every test runs on this project's machines (its services are started
    or present), so a skip hides a test that silently stopped testing."""
    if _user_home_state() != _USER_HOME_AT_START:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nerror: the tests wrote into {Path.home() / '.flowloom'} (a subprocess lost FLOWLOOM_HOME)")
    if _SKIPPED and not hasattr(session.config, "workerinput"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nerror: {len(_SKIPPED)} test(s) skipped; tests run, never skip: {', '.join(_SKIPPED[:5])}")
