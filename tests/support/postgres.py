"""A real PostgreSQL for tests: uniquely named databases on the server at
``FLOWLOOM_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``,
a maintenance database the tests only use to create and drop their own).

``postgres_server_url`` (session) checks the server answers; ``make_postgres_database``
creates empty databases (each dropped at the end of the session): one per test through
``database_url`` (:mod:`tests.support.databases`), or more where a test needs its own.
There is no skip: an unreachable server is a fixture error with a message saying what
to start, so it never shows up as green.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Callable, Iterator

import pytest
from sqlalchemy.engine import URL, make_url

__all__ = ["make_postgres_database", "postgres_server_url"]

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
    except Exception as error:  # noqa: BLE001 - any failure means the same thing here
        raise RuntimeError(
            f"PostgreSQL is not reachable at {url.render_as_string(hide_password=True)} ({error!r}); "
            "start it (bash .ci/setup-system) or set FLOWLOOM_TEST_POSTGRES_URL") from error
    return url


@pytest.fixture(scope="session")
def make_postgres_database(postgres_server_url: URL) -> Iterator[Callable[[], str]]:
    """A factory: each call creates an empty database ``flowloom_test_<random>`` and returns
    its URL (``postgresql://...``); every database made is dropped at the end of the session."""
    made: list[str] = []

    def make() -> str:
        name = f"flowloom_test_{uuid.uuid4().hex[:12]}"
        asyncio.run(_admin(postgres_server_url, f'CREATE DATABASE "{name}"'))
        made.append(name)
        return postgres_server_url.set(database=name).render_as_string(hide_password=False)

    yield make
    for name in made:
        asyncio.run(_admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
