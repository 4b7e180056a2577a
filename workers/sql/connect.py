"""Database URLs and async engines for the SQL store (SQLite and PostgreSQL).

Plain URLs are mapped to the async drivers (``sqlite://`` -> ``sqlite+aiosqlite://``,
``postgresql://`` / ``postgres://`` -> ``postgresql+asyncpg://``). SQLite connections
run in WAL mode with ``synchronous=NORMAL`` (a commit does not wait for fsync; the WAL
survives a process crash), a busy timeout (the CLI run and ``flowloom cancel`` write the
same file from two processes) and foreign keys on (node runs, events and commands are
deleted with their run). JSON is encoded by pydantic's serializer (fast, and it knows
pydantic models) and decoded by its parser.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_core import from_json, to_json
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine.ports import StoreError, StoreUnavailable
from engine.settings import private_file

__all__ = [
    "BUSY_TIMEOUT_MS",
    "default_database_url",
    "dialect_insert",
    "make_engine",
    "mask_url",
    "normalize_url",
    "store_errors",
    "transient",
]

#: How long a SQLite writer waits for another process's write transaction (milliseconds).
BUSY_TIMEOUT_MS = 30_000

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def default_database_url(home: Path) -> str:
    """``sqlite+aiosqlite:///<home>/flowloom.db``: the embedded database under ``FLOWLOOM_HOME``."""
    return f"sqlite+aiosqlite:///{Path(home).expanduser().absolute() / 'flowloom.db'}"


def normalize_url(url: str | URL) -> URL:
    """The URL with an async driver (plain ``sqlite``/``postgresql`` mapped). Raises StoreError
    for a URL that does not parse or names another database."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except exc.ArgumentError as error:
        raise StoreError(f"invalid database URL: {error}") from None
    name = parsed.drivername
    if name in _ASYNC_DRIVERS:
        parsed = parsed.set(drivername=_ASYNC_DRIVERS[name])
    elif parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"unsupported database {mask_url(parsed)}: use sqlite or postgresql")
    return parsed


def mask_url(url: str | URL) -> str:
    """The URL as text with its password replaced by ``***`` (safe to log or show)."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except exc.ArgumentError:
        return "<unparsable database URL>"
    return parsed.render_as_string(hide_password=True)


def _json_dumps(value: Any) -> str:
    return to_json(value).decode()


def _json_loads(text: str | bytes) -> Any:
    return from_json(text)


def _bind_as_is() -> None:
    """Give sqlite3 an adapter for ``None`` and ``bool`` parameters that returns what it
    binds anyway: ``None`` as is (NULL), a bool as its int (SQLite stores 0/1 either way).

    sqlite3 adapts every parameter that is not exactly an int, float, str or bytearray;
    with no adapter registered for its type it looks up ``__adapt__`` on its protocol
    class, and that failed lookup builds an AttributeError message each time - about
    70 times per run (the NULL columns of a run's rows and events). Both adapters are
    C callables, so no Python frame either. Process-wide and idempotent; the values
    stored and read back are unchanged."""
    sqlite3.register_adapter(type(None), _NO_ADAPTATION.get)
    sqlite3.register_adapter(bool, int)


#: ``{}.get(None)`` is None: the adapter of ``None`` (a C callable)
_NO_ADAPTATION: dict[Any, Any] = {}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_engine(url: str | URL) -> AsyncEngine:
    """An async engine for ``url`` (normalized); for a SQLite file, its parent directories
    are created (the last one 0700) and the file is created 0600 before SQLite opens it,
    so that its ``-wal`` and ``-shm`` files are private too. Nothing connects until first use."""
    parsed = normalize_url(url)
    options: dict[str, Any] = {"json_serializer": _json_dumps, "json_deserializer": _json_loads}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            private_file(Path(database), "-wal", "-shm", "-journal")
        options["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000}
        _bind_as_is()
        engine = create_async_engine(parsed, **options)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(parsed, pool_pre_ping=True, **options)


def _driver_errors() -> tuple[type[BaseException], ...]:
    """Errors of the drivers used directly (the checkpoint's path): sqlite3, and asyncpg once loaded."""
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return (sqlite3.Error,)
    return (sqlite3.Error, asyncpg.PostgresError, asyncpg.InterfaceError)


def _transient_errors() -> tuple[type[BaseException], ...]:
    """Driver errors after which the same request may succeed later: SQLite's operational
    errors (a full disk, a locked or unreadable file), PostgreSQL's lost or refused
    connections, a server shutting down or starting, and its out-of-resources errors (a
    full disk), and any failure to reach the server (OSError)."""
    found: tuple[type[BaseException], ...] = (sqlite3.OperationalError, OSError)
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is not None:
        errors = asyncpg.exceptions
        found += (
            errors.PostgresConnectionError,
            errors.CannotConnectNowError,
            errors.OperatorInterventionError,
            errors.InsufficientResourcesError,
            errors.ConnectionDoesNotExistError,
        )
    return found


def transient(error: BaseException) -> bool:
    """True when ``error`` (or an error it wraps: SQLAlchemy's ``orig``, a cause or a
    context) means the store is unavailable for now rather than the request is wrong."""
    if isinstance(error, StoreUnavailable):
        return True
    kinds, seen = _transient_errors(), set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kinds) or getattr(current, "connection_invalidated", False):
            return True
        if type(current).__name__ == "InterfaceError" and "connection is closed" in str(current):
            return True  # asyncpg: the connection died under a prepared statement (the store then reconnects)
        pending += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return False


@contextlib.contextmanager
def store_errors(url: str | URL) -> Iterator[None]:
    """Turn driver and connection failures into :class:`StoreError` naming the masked URL:
    :class:`StoreUnavailable` when the same request may succeed later (:func:`transient`)."""
    try:
        yield
    except exc.SQLAlchemyError as error:
        detail = getattr(error, "orig", None) or error
        kind = StoreUnavailable if transient(error) else StoreError
        raise kind(f"database {mask_url(url)}: {type(detail).__name__}: {detail}") from error
    except _driver_errors() as error:
        detail = getattr(error, "orig", None) or error
        kind = StoreUnavailable if transient(error) else StoreError
        raise kind(f"database {mask_url(url)}: {type(detail).__name__}: {detail}") from error
    except OSError as error:
        raise StoreUnavailable(f"cannot reach database {mask_url(url)}: {error}") from error


def dialect_insert(backend: str) -> Any:
    """The ``insert`` construct of ``backend`` (``postgresql`` or ``sqlite``), which has
    ``on_conflict_do_*``. The dialect's module is imported for its backend only:
    PostgreSQL's costs ~50 ms of start-up that a SQLite ``flowloom run`` would pay for nothing."""
    if backend == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert
