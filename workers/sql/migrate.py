"""Schema migrations of the SQL store (Alembic), callable from code.

The schema is only ever created or changed by the revisions in ``migrations/versions``;
:meth:`workers.sql.SqlStore.open` upgrades a database to the head revision on first use.
Upgrading an up-to-date database only reads its revision, without loading Alembic:
the head is read from the revision files' ``revision``/``down_revision`` lines and
compared with the database's version table in one query (Alembic, its migration
environment, Mako and Pygments cost about 0.3 s of start-up that every ``flowloom run``
would pay for nothing). Concurrent upgrades are serialized: SQLite by the database write
lock (``BEGIN IMMEDIATE``), PostgreSQL by an advisory lock (see ``migrations/env.py``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from .connect import make_engine, store_errors

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "migrate_connection",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


#: ``revision = "0005"`` / ``down_revision: str | None = "0004"`` at the start of a line.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration for the store's migrations (``url`` for the command line path)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", text.replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest revision id of the migrations."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations directory has no revision"
    return head


@functools.cache
def declared_head() -> str | None:
    """The head revision as the files in ``migrations/versions`` declare it, read without
    Alembic: the one ``revision`` that no file names as its ``down_revision``.

    None when the files are not a plain chain of string literals (a merge revision with a
    tuple, a computed value, two heads, no files): then Alembic decides, so a shape this
    reader does not understand can only cost time, never skip a migration.
    """
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        found: dict[str, object] = {}
        for name, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            try:
                found.setdefault(name, ast.literal_eval(value))
            except (ValueError, SyntaxError):
                return None
        revision, down = found.get("revision"), found.get("down_revision")
        if (
            not isinstance(revision, str)
            or not (down is None or isinstance(down, str))
            or revision in revisions
        ):
            return None
        revisions.add(revision)
        if down is not None:
            downs.add(down)
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def _at_head(connection: Connection) -> bool:
    """True when the database's version table holds exactly :func:`declared_head`."""
    head = declared_head()
    if head is None or not connection.dialect.has_table(connection, "alembic_version"):
        return False
    return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all() == [head]


def _current(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _apply(connection: Connection, rev: str, direction: str) -> None:
    if direction == "upgrade" and rev == "head" and _at_head(connection):
        return
    from alembic import command  # only when there may be something to do

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


async def migrate_connection(
    connection: AsyncConnection, rev: str = "head", *, direction: str = "upgrade"
) -> None:
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
