"""PostgreSQL helpers of ``bench/api.py --database postgresql``: a private database for the
bench, and the commit and row counters of ``pg_stat_database`` for it.

The counters are read from another database (the maintenance URL's), so reading them
never counts as a commit of the bench's database. A backend reports its counters when
its transaction ends (at most once a second), when it has been idle a while, and when it
exits: :func:`counters` is read after the server stopped and every backend of the bench's
database is gone, so what it reads is complete.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sqlalchemy.engine import URL, make_url

__all__ = ["COUNTERS", "counters", "create_database", "drop_database"]

#: ``pg_stat_database`` columns the bench reads (a transaction committed, rows read by
#: index fetches, rows scanned, rows written)
COUNTERS = ("xact_commit", "xact_rollback", "tup_fetched", "tup_returned", "tup_inserted", "tup_updated")


def _connect_args(url: URL) -> dict[str, Any]:
    return {"host": url.host or "127.0.0.1", "port": url.port or 5432, "user": url.username or "postgres",
            "password": url.password, "database": url.database or "postgres"}


async def _run(url: URL, sql: str, *args: Any) -> list[Any]:
    import asyncpg

    conn = await asyncpg.connect(**_connect_args(url), timeout=10)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def create_database(admin_url: str) -> str:
    """Create an empty database ``flowloom_bench_<random>`` on the server of ``admin_url``
    (a maintenance URL, e.g. ``postgresql://postgres@127.0.0.1:5432/postgres``); returns
    its URL for ``FLOWLOOM_DATABASE_URL``. Raises RuntimeError when the server does not answer."""
    url = make_url(admin_url)
    name = f"flowloom_bench_{uuid.uuid4().hex[:10]}"
    try:
        await _run(url, f'CREATE DATABASE "{name}"')
    except Exception as exc:
        raise RuntimeError(f"PostgreSQL at {url.render_as_string(hide_password=True)} cannot create a "
                           f"database for the bench: {exc!r}") from exc
    return url.set(drivername="postgresql", database=name).render_as_string(hide_password=False)


async def drop_database(admin_url: str, database_url: str) -> None:
    """Drop the bench's database (its connections closed first)."""
    name = make_url(database_url).database
    await _run(make_url(admin_url), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def counters(admin_url: str, database_url: str, timeout_s: float = 30.0) -> dict[str, int]:
    """The :data:`COUNTERS` of the bench's database once no backend is connected to it.
    Raises RuntimeError when backends stay longer than ``timeout_s``."""
    admin, name = make_url(admin_url), make_url(database_url).database
    deadline = time.monotonic() + timeout_s
    while (await _run(admin, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name))[0][0]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"connections to {name} stayed open {timeout_s:.0f} s after the server stopped")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # a backend leaves pg_stat_activity a moment before its last report may land
    row = (await _run(admin, f"SELECT {', '.join(COUNTERS)} FROM pg_stat_database WHERE datname = $1", name))[0]
    return {key: int(row[key]) for key in COUNTERS}
