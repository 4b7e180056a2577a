"""Alembic environment of the SQL store.

Two ways in: :mod:`workers.sql.migrate` passes an open (sync-facing) connection in
``config.attributes["connection"]`` (from ``AsyncConnection.run_sync``), or, from the
``alembic`` command line, the URL in ``sqlalchemy.url`` is opened with the async engine.
On PostgreSQL a transaction-scoped advisory lock serializes concurrent upgrades (several
processes may open a new database at once); on SQLite ``migrate`` holds the write lock.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text

from workers.sql.connect import make_engine
from workers.sql.tables import metadata

#: Key of the PostgreSQL advisory lock held while migrating ("flowloom" in ASCII).
MIGRATION_LOCK_KEY = 0x666C6F776C6F6F6D


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


async def _run_from_url(url: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"), target_metadata=metadata, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        url = context.config.get_main_option("sqlalchemy.url")
        if url is None:
            raise RuntimeError("the migrations need a connection or sqlalchemy.url")
        asyncio.run(_run_from_url(url))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
