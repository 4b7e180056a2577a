"""A real PostgreSQL for tests: uniquely named databases on the server at
``FLOWLOOM_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``,
a maintenance database the tests only use to create and drop their own).

``postgres_server_url`` (session) checks the server answers; ``make_postgres_database``
creates empty databases: one per test through ``database_url``
(:mod:`tests.support.databases`, dropped after its test), or more where a test needs its
own (dropped at the end of the session).
There is no skip: an unreachable server is a fixture error with a message saying what
to start, so it never shows up as green.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import URL, make_url

__all__ = ["PostgresDatabases", "make_postgres_database", "postgres_server_url"]

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _connect_args(url: URL) -> dict:
    return {"host": url.host or "127.0.0.1", "port": url.port or 5432, "user": url.username or "postgres",
            "password": url.password, "database": url.database or "postgres"}


async def _admin(url: URL, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(**_connect_args(url), timeout=10)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def postgres_server_url() -> URL:
    """The maintenance URL of the test server (errors when the server does not answer)."""
    url = make_url(os.environ.get("FLOWLOOM_TEST_POSTGRES_URL", DEFAULT_SERVER_URL))
    try:
        asyncio.run(_admin(url, "SELECT 1"))
    except Exception as error:
        raise RuntimeError(
            f"PostgreSQL is not reachable at {url.render_as_string(hide_password=True)} ({error!r}); "
            "start it (bash .ci/setup-system) or set FLOWLOOM_TEST_POSTGRES_URL") from error
    return url


class PostgresDatabases:
    """Databases ``flowloom_test_<random>`` on the test server: calling it makes one and
    returns its URL (``postgresql://...``); :meth:`drop` removes one, :meth:`drop_all` the
    rest."""

    def __init__(self, server_url: URL) -> None:
        self.server_url = server_url
        self.made: list[str] = []

    def __call__(self, template: str | None = None) -> str:
        """A new database: empty, or a copy of the database named ``template`` (which
        must have no open connection)."""
        name = f"flowloom_test_{uuid.uuid4().hex[:12]}"
        copied = f' TEMPLATE "{template}"' if template else ""
        asyncio.run(_admin(self.server_url, f'CREATE DATABASE "{name}"{copied}'))
        self.made.append(name)
        return self.server_url.set(database=name).render_as_string(hide_password=False)

    def drop(self, url: str) -> None:
        """Drop the database of ``url`` (one this made), closing its connections first."""
        self._drop(make_url(url).database or "")

    def drop_all(self) -> None:
        for name in list(self.made):
            self._drop(name)

    def _drop(self, name: str) -> None:
        if name in self.made:
            self.made.remove(name)
            asyncio.run(_admin(self.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def make_postgres_database(postgres_server_url: URL) -> Iterator[PostgresDatabases]:
    """The session's :class:`PostgresDatabases`: ``make_postgres_database()`` is the URL of a
    new empty database. What a test does not drop itself is dropped at the end of the session."""
    databases = PostgresDatabases(postgres_server_url)
    yield databases
    databases.drop_all()
