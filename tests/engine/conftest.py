"""Fixtures of the engine tests: ``database_url``, a fresh run store of each backend
(SQLite in the test's folder; a PostgreSQL database made for the test)."""

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    return request.getfixturevalue("make_postgres_database")()
