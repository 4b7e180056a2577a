"""The two tiers of the test suite: ``pytest -m "not slow"`` (the inner loop, a few
minutes) and ``pytest`` (everything, what ``.ci/run`` runs).

A test is ``slow`` when it is marked so, or when :func:`slow_reason` finds a part that
costs seconds whatever the test does with it: a browser, a process it starts (the
``flowloom`` command, a server, a worker), a Redis server (started per test, restarted
by some), a PostgreSQL database, a benchmark. ``tests/conftest.py`` applies this to
every collected test, so a new test is put in its tier by what it uses, not by someone
remembering the mark; an explicit ``@pytest.mark.slow`` remains for the rest (large
inputs, long timeouts).

What counts as "starts a process": the test function, the fixtures it uses, or the
helpers of the test suite they call (followed a few calls deep, only functions defined
under ``tests``) name ``subprocess``, ``Popen``, asyncio's subprocess functions, or
``sys.executable`` (a Python command handed to Flowloom to start: a stdio MCP server).
Code that Flowloom itself runs (the code node's sandbox) is not followed: that cost is
the feature under test and stays in the fast tier when it is quick.

The slow tier runs on two processes (``tests/conftest.py``, ``--dist loadgroup``). Its
heavy tests (:data:`SERIAL_PATHS`: the browsers, the benchmarks, Phoenix) share one
``xdist_group``, :data:`SERIAL_GROUP`, so they run one after another on one process: each
of them keeps a core busy by itself (a browser with its server; a benchmark's own load),
and a benchmark measures CPU and rates that another heavy test beside it would skew.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["SERIAL_GROUP", "SERIAL_PATHS", "SLOW_DIRECTORIES", "SLOW_FIXTURES", "group_serial_tests",
           "mark_slow_tests", "serial_group", "slow_reason", "starts_processes"]

TESTS = Path(__file__).resolve().parents[1]

#: directories whose every test is slow: the browser, the benchmarks, RQ workers
SLOW_DIRECTORIES = ("web", "bench", "workers/rq")
#: fixtures that start a server process or create a database
SLOW_FIXTURES = frozenset({
    "postgres_server_url", "make_postgres_database",
    "pgvector_server_url", "make_pgvector_database", "pgvector_database_url",
    "redis_url", "flowloom_redis_proc", "flowloom_redis",
})
#: a parameter value naming one of these backends makes the test use it (``database_url[postgres]``)
SLOW_BACKENDS = ("postgres", "pgvector", "redis")
#: names whose use starts a process
PROCESS_NAMES = frozenset({"subprocess", "Popen", "create_subprocess_exec", "create_subprocess_shell",
                           "executable"})  # sys.executable: a Python command for Flowloom to start (stdio MCP)
DEPTH = 4
#: the xdist group of the slow tier's heavy tests (they run on one process, in turn)
SERIAL_GROUP = "serial"
#: what is in :data:`SERIAL_GROUP`: paths under ``tests``, a directory ending in ``/``
SERIAL_PATHS = ("web/", "bench/", "workers/rq/test_phoenix_traces.py")


def _code_objects(code: types.CodeType) -> Iterable[types.CodeType]:
    """``code`` and the code of the functions, lambdas and classes defined inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _under_tests(func: Any) -> bool:
    path = getattr(getattr(func, "__code__", None), "co_filename", "")
    return bool(path) and Path(path).resolve().is_relative_to(TESTS)


_VERDICTS: dict[types.CodeType, bool] = {}  # code of a test or fixture -> starts_processes (every test asks)


def starts_processes(func: Callable[..., Any], depth: int = DEPTH, _seen: set[int] | None = None) -> bool:
    """True when ``func`` (a test, a fixture, a helper) names a way to start a process,
    itself or through functions of the test suite it calls (``depth`` calls deep)."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if _seen is None and code is not None:
        if code not in _VERDICTS:
            _VERDICTS[code] = starts_processes(func, depth, set())
        return _VERDICTS[code]
    seen = set() if _seen is None else _seen
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    names = {name for part in _code_objects(code) for name in part.co_names}
    if names & PROCESS_NAMES:
        return True
    if depth == 0:
        return False
    scope = getattr(func, "__globals__", {})
    for name in names:
        called = scope.get(name)
        if isinstance(called, type):  # a helper class of the suite: its methods
            called_funcs = [m for m in vars(called).values() if inspect.isfunction(m)]
        else:
            called_funcs = [called] if callable(called) else []
        for candidate in called_funcs:
            candidate = inspect.unwrap(candidate)
            if _under_tests(candidate) and starts_processes(candidate, depth - 1, seen):
                return True
    return False


def slow_reason(path: Path, fixtures: Iterable[str], params: dict[str, Any], function: Any,
                fixture_functions: Iterable[Any] = ()) -> str | None:
    """Why a test belongs to the slow tier (a few words), or None: its directory, a fixture
    that starts a server or makes a database, a parameter of a fixture (``params``: name ->
    value) choosing such a backend, or a process that it or one of its fixtures starts."""
    relative = Path(path).resolve().relative_to(TESTS).as_posix()
    for directory in SLOW_DIRECTORIES:
        if relative.startswith(directory + "/"):
            return f"in tests/{directory}"
    used = sorted(SLOW_FIXTURES.intersection(fixtures))
    if used:
        return f"uses the fixture {used[0]}"
    for name, value in params.items():
        if isinstance(value, str) and any(backend in value for backend in SLOW_BACKENDS):
            return f"runs with {name}={value}"
    if function is not None and starts_processes(function):
        return "starts a process"
    for fixture in fixture_functions:
        if _under_tests(inspect.unwrap(fixture)) and starts_processes(fixture):
            return f"its fixture {getattr(fixture, '__name__', fixture)} starts a process"
    return None


def mark_slow_tests(items: list[Any]) -> None:
    """Add the ``slow`` mark to every collected test :func:`slow_reason` puts in the slow
    tier (for ``pytest_collection_modifyitems``)."""
    import pytest

    for item in items:
        if item.get_closest_marker("slow") is not None:
            continue
        callspec = getattr(item, "callspec", None)
        definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        fixture_functions = [defs[-1].func for defs in definitions.values() if defs]
        # the parameters of fixtures (``@pytest.fixture(params=...)``, or ``parametrize(...,
        # indirect=True)``) choose a backend; a test's own ``parametrize`` values are data
        backends = {name: value for name, value in (callspec.params.items() if callspec else ())
                    if definitions.get(name) and getattr(definitions[name][-1].func, "__name__", "")
                    != "get_direct_param_fixture_func"}
        reason = slow_reason(Path(str(item.path)), item.fixturenames, backends, getattr(item, "function", None),
                             fixture_functions)
        if reason is not None:
            item.add_marker(pytest.mark.slow)


def serial_group(path: Path) -> str | None:
    """:data:`SERIAL_GROUP` for a test file under one of :data:`SERIAL_PATHS`, else None
    (the test may run beside any other)."""
    relative = Path(path).resolve().relative_to(TESTS).as_posix()
    if any(relative == serial or (serial.endswith("/") and relative.startswith(serial)) for serial in SERIAL_PATHS):
        return SERIAL_GROUP
    return None


def group_serial_tests(items: list[Any]) -> None:
    """Add ``xdist_group(SERIAL_GROUP)`` to every collected slow test :func:`serial_group`
    names (for ``pytest_collection_modifyitems``, after :func:`mark_slow_tests`); a test
    with a group of its own keeps it. Without ``--dist loadgroup`` the mark does nothing."""
    import pytest

    for item in items:
        if item.get_closest_marker("slow") is None or item.get_closest_marker("xdist_group") is not None:
            continue
        if serial_group(Path(str(item.path))) is not None:
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
