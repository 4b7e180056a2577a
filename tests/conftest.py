"""Test configuration shared by every test package.

Fixture modules live in ``tests/support/`` and are registered here once. Every test
runs with ``FLOWLOOM_HOME`` in its own temporary folder (and no ``FLOWLOOM_*`` setting
from the developer's shell), so no test reads or writes the user's ``~/.flowloom``.
"""

import os

import pytest

pytest_plugins = [
    "tests.support.workflows",
    "tests.support.openai_server",
    "tests.support.redis_server",
    "tests.support.postgres",
]

# Subprocesses started at collection time inherit this too.
for _name in [n for n in os.environ if n.startswith("FLOWLOOM_") and n != "FLOWLOOM_TEST_POSTGRES_URL"
              and n != "FLOWLOOM_IMPORT_CORPUS"]:
    del os.environ[_name]


@pytest.fixture(autouse=True)
def _flowloom_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A fresh FLOWLOOM_HOME per test; the process settings are re-read."""
    from engine.settings import get_settings

    monkeypatch.setenv("FLOWLOOM_HOME", str(tmp_path_factory.mktemp("flowloom-home")))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
