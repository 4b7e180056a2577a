"""Schema migrations of the SQL store (Alembic), callable from code.

The schema is only ever created or changed by the revisions in ``migrations/versions``;
:meth:`workers.sql.SqlStore.open` upgrades a database to the head revision on first use.
Upgrading an up-to-date database only reads its revision. Concurrent upgrades are
serialized: SQLite by the database write lock (``BEGIN IMMEDIATE``), PostgreSQL by an
advisory lock (see ``migrations/env.py``).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, URL
from sqlalchemy.ext.asyncio import AsyncConnection

from .connect import make_engine, store_errors

__all__ = ["MIGRATIONS_DIR", "alembic_config", "current_revision", "downgrade", "head_revision",
           "migrate_connection", "upgrade"]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration for the store's migrations (``url`` for the command line path)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", text.replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest revision id of the migrations."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations directory has no revision"
    return head


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _apply(connection: Connection, rev: str, direction: str) -> None:
    if direction == "upgrade" and rev == "head" and _current(connection) == head_revision():
        return
    if connection.dialect.name == "sqlite":
        # take the write lock first: two processes opening a new file do not both create tables
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    config = alembic_config()
    config.attributes["connection"] = connection
    if direction == "upgrade":
        command.upgrade(config, rev)
    else:
        command.downgrade(config, rev)


async def migrate_connection(connection: AsyncConnection, rev: str = "head", *, direction: str = "upgrade") -> None:
    """Upgrade (or downgrade) the database behind an open connection to ``rev``, committed."""
    async with connection.begin():
        await connection.run_sync(_apply, rev, direction)


async def current_revision(url: str | URL) -> str | None:
    """The database's revision (None: never migrated)."""
    engine = make_engine(url)
    try:
        with store_errors(url):
            async with engine.connect() as connection:
                return await connection.run_sync(_current)
    finally:
        await engine.dispose()


async def _migrate_url(url: str | URL, rev: str, direction: str) -> None:
    engine = make_engine(url)
    try:
        with store_errors(url):
            async with engine.connect() as connection:
                await migrate_connection(connection, rev, direction=direction)
    finally:
        await engine.dispose()


async def upgrade(url: str | URL, rev: str = "head") -> None:
    """Upgrade the database at ``url`` to ``rev`` (default: the newest). Raises StoreError
    when the database cannot be reached."""
    await _migrate_url(url, rev, "upgrade")


async def downgrade(url: str | URL, rev: str) -> None:
    """Downgrade the database at ``url`` to ``rev`` (``"base"``: drop every table of the store)."""
    await _migrate_url(url, rev, "downgrade")
