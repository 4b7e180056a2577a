"""PostgreSQL helpers of ``bench/api.py --database postgresql``: a private database for the
bench, and the commit and row counters of ``pg_stat_database`` for it.

The counters are read from another database (the maintenance URL's), so reading them
never counts as a commit of the bench's database. A backend reports its counters when
its transaction ends (at most once a second), when it has been idle a while, and when it
exits: :func:`counters` is read after the server stopped and every backend of the bench's
database is gone, so what it reads is complete.

PostgreSQL's own autovacuum counts there too: a worker vacuuming or analysing a table of the
bench's database commits a few transactions in it (6 for one table vacuumed and analysed,
measured on PostgreSQL 15), which land in whatever window of the bench it falls in. The
inserts of the bench's runs are what trigger it, when its next visit (every
``autovacuum_naptime``, 60 s by default) finds enough new rows. :func:`vacuum` leaves it
nothing to do before a count, and :func:`autovacuum_actions` tells whether it vacuumed or
analysed anyway. What neither sees: a worker's visit that finds nothing to do commits too
(2 transactions, about once a naptime for a database with activity, measured with a 1 s
naptime), and lives too briefly for ``pg_stat_activity`` to show it reliably (one visit in
seven seen when polled every 0.5 ms): at most a few commits per window, within a minute.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sqlalchemy.engine import URL, make_url

__all__ = ["COUNTERS", "autovacuum_actions", "counters", "create_database", "drop_database", "vacuum"]

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


def _in_database(admin_url: str, database_url: str) -> URL:
    """The maintenance URL's user and server, on the bench's database."""
    return make_url(admin_url).set(database=make_url(database_url).database)


async def vacuum(admin_url: str, database_url: str) -> None:
    """``VACUUM (ANALYZE)`` of the bench's database, catalogs included, so autovacuum finds
    no table past its thresholds (``n_dead_tup``, inserts and changes since the last
    vacuum and analyse) for a while. Its own commits count before the next read of
    :func:`counters`, never inside a window."""
    await _run(_in_database(admin_url, database_url), "VACUUM (ANALYZE)")


async def autovacuum_actions(admin_url: str, database_url: str) -> int:
    """How many times autovacuum vacuumed or analysed a table of the bench's database
    (``pg_stat_all_tables``, catalogs included) since the database was made. Reading it
    connects to that database: a constant number of its commits (the connection's
    start-up, the query), so a caller reads it once per window to cancel them out."""
    rows = await _run(_in_database(admin_url, database_url),
                      "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_all_tables")
    return int(rows[0][0])

