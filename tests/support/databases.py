"""The SQL database of a test, on each backend the run store supports.

``database_url`` is parametrised over :data:`BACKENDS`, so a test that asks for it runs
once per backend (ids ``[sqlite]`` and ``[postgres]``). Each run gets a database of its
own, so a test may count commits, list every run or migrate down without seeing another
test's rows:

- ``sqlite``: a new file ``<tmp_path>/db/flowloom.db`` (the store makes its folder and
  migrates it on open);
- ``postgres``: a new database on the test server (:mod:`tests.support.postgres`),
  copied from one the session migrated once (``CREATE DATABASE ... TEMPLATE``: about
  0.2 s, where migrating each test's database costs about a second), dropped after the
  test.

A test marked ``empty_database`` (the migration tests) gets a database with no schema
on both backends. The URLs are the plain ones a user writes (``sqlite:///...``,
``postgresql://...``); Flowloom maps them to its async drivers. A test module that must
stay on one backend overrides ``database_url`` with a fixture of the same name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

__all__ = ["BACKENDS", "EMPTY_DATABASE", "database_url", "postgres_template", "sqlite_url"]

#: the backends a test of ``database_url`` runs on (the test ids' suffixes)
BACKENDS = ("sqlite", "postgres")
#: the marker of a test whose ``database_url`` must have no schema yet
EMPTY_DATABASE = "empty_database"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{EMPTY_DATABASE}: database_url gives a database with no schema "
        "(on PostgreSQL too, where it is otherwise a copy of a migrated one)",
    )


def sqlite_url(folder: Path) -> str:
    """The URL of a SQLite file ``<folder>/db/flowloom.db``."""
    return f"sqlite:///{folder / 'db' / 'flowloom.db'}"


async def _migrate(url: str) -> None:
    from workers.sql import SqlStore

    store = await SqlStore.open(url)  # what a test's first open would do, once
    await store.close()


@pytest.fixture(scope="session")
def postgres_template(make_postgres_database) -> str:
    """The name of a PostgreSQL database the store migrated to its newest schema, left
    without connections so that ``database_url`` can copy it (dropped with the session's
    other databases)."""
    url = make_postgres_database()
    asyncio.run(_migrate(url))
    return make_url(url).database


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of the backend of the test's parameter. A sync fixture on
    purpose: the PostgreSQL database is made and dropped with an event loop of its own,
    outside the test's. It is dropped right after the test (after the fixtures that use
    it have closed their connections), so a session never holds hundreds of them and
    their cost is not all paid at its end."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    databases = request.getfixturevalue("make_postgres_database")
    empty = request.node.get_closest_marker(EMPTY_DATABASE) is not None
    url = databases() if empty else databases(template=request.getfixturevalue("postgres_template"))
    yield url
    databases.drop(url)
