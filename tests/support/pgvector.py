"""A real PostgreSQL with pgvector for tests: the server bundled in the ``pgserver``
wheel (Debian's PostgreSQL here has no pgvector), started once per test session in its
own temporary data folder and reached over a Unix socket in that folder, so sessions
running side by side never share a server, a port or a socket.

``pgserver`` runs ``postgres`` as an unprivileged system user of its own (``pgserver``,
created on first use) when the tests run as root, since PostgreSQL refuses to run as
root; it makes the data folder's parents traversable for that user.

``pgvector_server_url`` (session) is the maintenance URL; ``make_pgvector_database``
creates empty databases (dropped at the end), each checked to accept ``CREATE EXTENSION
vector``. There is no skip: a server that does not start is a fixture error.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = ["make_pgvector_database", "pgvector_database_url", "pgvector_server_url"]


async def _execute(url: str, *statements: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url, timeout=10)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def pgvector_server_url() -> Iterator[str]:
    """``postgresql://postgres:@/postgres?host=<socket folder>`` of a session-private server
    with the ``vector`` extension (stopped and deleted at the end of the session)."""
    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR, /tmp/runtime-<uid> is used
        warnings.simplefilter("ignore")
        import pgserver

    folder = Path(tempfile.mkdtemp(prefix="flowloom-pgvector-"))
    server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
    try:
        url = server.get_uri()
        asyncio.run(_execute(url, "SELECT 1"))
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def make_pgvector_database(pgvector_server_url: str) -> Iterator[Callable[[], str]]:
    """A factory: each call creates an empty database with the ``vector`` extension
    installed (checked) and returns its URL."""
    made: list[str] = []
    base, _, query = pgvector_server_url.partition("?")

    def make() -> str:
        name = f"flowloom_test_{uuid.uuid4().hex[:12]}"
        asyncio.run(_execute(pgvector_server_url, f'CREATE DATABASE "{name}"'))
        made.append(name)
        url = f"{base.rsplit('/', 1)[0]}/{name}?{query}"
        asyncio.run(_execute(url, "CREATE EXTENSION IF NOT EXISTS vector"))
        return url

    yield make
    for name in made:
        asyncio.run(_execute(pgvector_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def pgvector_database_url(make_pgvector_database: Callable[[], str]) -> str:
    """URL of one fresh pgvector database shared by the session's tests."""
    return make_pgvector_database()
