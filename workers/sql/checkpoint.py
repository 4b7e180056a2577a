"""The checkpoint write of :class:`workers.sql.SqlStore`, on the driver connections.

A checkpoint is the hot path of a durable run (one per finished node), so it bypasses
SQLAlchemy's per-statement and per-transaction machinery. Everything is built in the
event loop first (:class:`CheckpointWrite`: the run row, the node-run rows, the flips
of node runs a loop round replaced, the durable events), then written in one go:

- **SQLite** (:class:`SqliteCheckpointWriter`): one function runs in aiosqlite's worker
  thread on its ``sqlite3.Connection`` - ``BEGIN IMMEDIATE``, the run UPDATE
  (conditional on the owner), flips, node-run upserts, event inserts, ``COMMIT`` - so a
  checkpoint costs one thread hand-off. Plain SQL text with ``?`` parameters (the
  ``sqlite3`` statement cache prepares each text once), ``executemany`` for several rows.
- **PostgreSQL** (:class:`PostgresCheckpointWriter`): one statement of data-modifying
  CTEs (run UPDATE, flips, node-run upsert, event insert; the last three only when the
  UPDATE matched), prepared once per connection and executed in autocommit on the raw
  asyncpg connection: one round trip, atomic as any single statement. Rows travel as
  JSON arrays (``json_populate_recordset``), so one statement fits any number of rows.

Both return whether the run row matched: False means nothing was written (the caller
raises LeaseLost or RunNotFound).

The store's other hot statements use the same paths: on SQLite its reads, writes and
claims as one call each in the worker thread (``_sqlite_reads``, ``_sqlite_writes``,
``_sqlite_claim``), on PostgreSQL a run's creation and its claim as one statement each
in autocommit (:func:`pg_statement`). Both also write several checkpoints of different runs
in one transaction (``write_many``): the group commit of :class:`workers.sql.group.GroupCommit`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, TypeVar

import sqlalchemy as sa
from pydantic_core import to_json
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.ports import StoreError

from .tables import node_runs as _node_runs
from .tables import run_events as _run_events
from .tables import runs as _runs

_T = TypeVar("_T")

__all__ = [
    "CheckpointWrite",
    "PostgresCheckpointWriter",
    "SqliteCheckpointWriter",
    "event_rows",
    "pg_statement",
]


#: ``node_runs`` columns in table order; the JSON ones are encoded before binding.
NODE_COLUMNS = tuple(c.name for c in _node_runs.c)
#: ``run_events`` columns written by a checkpoint (and by ``append``).
EVENT_COLUMNS = ("run_id", "seq", "tenant_id", "type", "node_id", "payload", "ts")
_JSON = frozenset(
    c.name for t in (_runs, _node_runs, _run_events) for c in t.c if isinstance(c.type, sa.JSON)
)
#: the ``node_runs`` columns of a row in table order, fetched in one call
_NODE_VALUES = itemgetter(*NODE_COLUMNS)
#: positions of the JSON columns in :data:`NODE_COLUMNS`
_NODE_JSON_AT = tuple(i for i, name in enumerate(NODE_COLUMNS) if name in _JSON)
_RUN_KEY = ("run_id", "node_run_id")


def _dumps(value: Any) -> str | None:
    """JSON text of a column value (pydantic's serializer, as the engine's); None stays NULL."""
    return None if value is None else to_json(value).decode()


def _node_params(row: dict[str, Any]) -> tuple[Any, ...]:
    """The parameters of a ``node_runs`` row in table order, JSON columns encoded (:func:`_dumps`)."""
    values = list(_NODE_VALUES(row))
    for at in _NODE_JSON_AT:
        value = values[at]
        if value is not None:
            values[at] = to_json(value).decode()
    return tuple(values)


def event_rows(tenant_id: str, run_id: str, events: Sequence[Any]) -> list[dict[str, Any]]:
    """``run_events`` rows of ``events`` (models or their JSON dicts), ``node_delta`` events
    skipped (they are broadcast only). ``payload`` is the event itself (a model is encoded
    by its own serializer, as ``model_dump(mode="json")`` would)."""
    rows = []
    for event in events:
        if isinstance(event, dict):
            get = event.get
            kind, seq, node_id, ts = get("type"), event["seq"], get("node_id"), get("ts")
        else:
            # a model's fields are in its __dict__; getattr with a default on one without
            # ``node_id`` (the run's own events) raises and catches an AttributeError built by
            # pydantic's __getattr__, about 30x the cost of the lookup
            kind, seq, node_id, ts = event.type, event.seq, event.__dict__.get("node_id"), event.ts
        if kind == "node_delta":
            continue
        rows.append(
            {
                "run_id": run_id,
                "seq": seq,
                "tenant_id": tenant_id,
                "type": kind,
                "node_id": node_id,
                "payload": event,
                "ts": ts or time.time(),
            }
        )
    return rows


@dataclass(slots=True)
class CheckpointWrite:
    """Everything one checkpoint writes, built in the event loop.

    ``run_values``: the ``runs`` columns to set (``rows.run_columns``); ``owner_id``: only
    write while this owner holds the run (None: no owner check); ``flips``: ``(node_id,
    keep)`` pairs - the node's other current rows stop being current; ``node_rows``:
    ``node_runs`` rows to upsert; ``events``: ``run_events`` rows (existing seqs ignored).
    """

    run_id: str
    tenant_id: str
    owner_id: str | None
    run_values: dict[str, Any]
    flips: list[tuple[str, str]] = field(default_factory=list)
    node_rows: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


# ------------------------------------------------------------------------------ SQLite


def _immediate(db: sqlite3.Connection, body: Callable[[], tuple[bool, _T]]) -> _T:
    """``body`` in one write transaction (``BEGIN IMMEDIATE``: the write lock at once, so
    no other writer fails it half way): committed when it returns ``(True, result)``,
    rolled back when it returns ``(False, result)`` or raises. Returns ``result``."""
    db.execute("BEGIN IMMEDIATE")
    try:
        keep, result = body()
        if keep:
            db.commit()
        else:
            db.rollback()
    except BaseException:
        db.rollback()
        raise
    return result


def _rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """The rows of an executed SELECT as dicts by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _sqlite_transaction(
    db: sqlite3.Connection,
    writes: list[tuple[tuple[str, tuple[Any, ...]], list[tuple[str, list[tuple[Any, ...]]]]]],
) -> list[bool]:
    """Runs in aiosqlite's worker thread: the checkpoints ``writes`` (each its run UPDATE and
    its other statements) in one transaction. A write whose run UPDATE matched no row
    writes nothing more (False in the result); the others are committed together."""

    def body() -> tuple[bool, list[bool]]:
        matched = []
        for update, batches in writes:
            if db.execute(*update).rowcount == 0:
                matched.append(False)
                continue
            for sql, args in batches:
                if len(args) == 1:  # one row: a plain execute (executemany costs more per call)
                    db.execute(sql, args[0])
                elif args:
                    db.executemany(sql, args)
            matched.append(True)
        return any(matched), matched

    return _immediate(db, body)


class SqliteCheckpointWriter:
    """Writes a :class:`CheckpointWrite` in one call in aiosqlite's worker thread."""

    def __init__(self) -> None:
        names = ", ".join(NODE_COLUMNS)
        marks = ", ".join("?" * len(NODE_COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in NODE_COLUMNS if c not in _RUN_KEY)
        self._upsert = (
            f"INSERT INTO node_runs ({names}) VALUES ({marks}) "
            f"ON CONFLICT (run_id, node_run_id) DO UPDATE SET {updates}"
        )
        self._flip = (
            "UPDATE node_runs SET current = 0 WHERE run_id = ? AND tenant_id = ? AND node_id = ? "
            "AND current = 1 AND node_run_id != ?"
        )
        self._events = (
            f"INSERT INTO run_events ({', '.join(EVENT_COLUMNS)}) VALUES "
            f"({', '.join('?' * len(EVENT_COLUMNS))}) ON CONFLICT (run_id, seq) DO NOTHING"
        )
        self._updates: dict[tuple[tuple[str, ...], bool], str] = {}

    def _update_sql(self, keys: tuple[str, ...], owned: bool) -> str:
        sql = self._updates.get((keys, owned))
        if sql is None:
            sets = ", ".join(f"{name} = ?" for name in keys)
            sql = f"UPDATE runs SET {sets} WHERE run_id = ? AND tenant_id = ?" + (
                " AND owner_id = ?" if owned else ""
            )
            self._updates[(keys, owned)] = sql
        return sql

    def _statements(
        self, write: CheckpointWrite
    ) -> tuple[tuple[str, tuple[Any, ...]], list[tuple[str, list[tuple[Any, ...]]]]]:
        values = write.run_values
        keys = tuple(values)
        params = [_dumps(v) if k in _JSON else v for k, v in values.items()]
        params += (
            (write.run_id, write.tenant_id)
            if write.owner_id is None
            else (write.run_id, write.tenant_id, write.owner_id)
        )
        update = (self._update_sql(keys, write.owner_id is not None), tuple(params))
        flips = [(write.run_id, write.tenant_id, node_id, keep) for node_id, keep in write.flips]
        rows = [_node_params(row) for row in write.node_rows]
        events = [
            (e["run_id"], e["seq"], e["tenant_id"], e["type"], e["node_id"], _dumps(e["payload"]), e["ts"])
            for e in write.events
        ]
        return update, [(self._flip, flips), (self._upsert, rows), (self._events, events)]

    async def write(self, conn: AsyncConnection, write: CheckpointWrite) -> bool:
        """Commit ``write`` in one transaction; False when the run row did not match."""
        return (await self.write_many(conn, [write]))[0]

    async def write_many(self, conn: AsyncConnection, writes: Sequence[CheckpointWrite]) -> list[bool]:
        """Commit ``writes`` (of different runs) in one transaction, in one call in the
        worker thread; for each, whether its run row matched (False: nothing of it written)."""
        driver = (await _raw_connection(conn)).driver_connection  # aiosqlite.Connection
        return await driver._execute(_sqlite_transaction, driver._conn, [self._statements(w) for w in writes])


async def _raw_connection(conn: AsyncConnection) -> Any:
    """The pooled DBAPI connection of ``conn``, without a greenlet hop when it is valid."""
    sync = conn.sync_connection
    if sync is not None and not sync.invalidated and not sync.closed:
        return sync.connection
    return await conn.get_raw_connection()


# -------------------------------------------------------------------------- PostgreSQL


class PostgresCheckpointWriter:
    """Writes a :class:`CheckpointWrite` as one prepared statement on the raw asyncpg connection.

    Parameters: ``$1`` the run values (a JSON object), ``$2``/``$3`` run and tenant id,
    ``$4`` the owner id (NULL: no owner check), ``$5`` node-run rows, ``$6`` flips
    (``[{node_id, keep}]``), ``$7`` event rows - JSON arrays. Node runs named in ``$5``
    are left out of the flips (the upsert sets their ``current``), so no row is modified
    twice by the statement.

    The run row is found by its primary key: the tenant is compared with ``IS NOT
    DISTINCT FROM``, which no index serves (the same test as ``=`` here: ``tenant_id`` is
    NOT NULL and ``$3`` a tenant id). With ``=`` the planner took ``ix_runs_tenant_workflow``
    (tenant, workflow) and filtered every run of the tenant by id whenever ``runs`` had no
    statistics yet - a new database until autovacuum analyzes it: both indexes are
    estimated at one row, and the (tenant, workflow) one, its keys deduplicated, is the
    smaller. The checkpoint then read one index entry per run of the tenant (0.45 ms of
    the statement's 0.6 ms with 600 runs, growing with every run).
    """

    def __init__(self) -> None:
        self._sql: dict[tuple[str, ...], str] = {}
        self._prepared: dict[tuple[str, ...], Any] = {}
        self._prepared_on: Any = None

    def _statement(self, keys: tuple[str, ...]) -> str:
        sql = self._sql.get(keys)
        if sql is not None:
            return sql
        sets = ", ".join(f"{name} = r.{name}" for name in keys)
        node_cols = ", ".join(NODE_COLUMNS)
        picked = ", ".join(
            "$2" if c == "run_id" else "$3" if c == "tenant_id" else f"n.{c}" for c in NODE_COLUMNS
        )
        node_updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in NODE_COLUMNS if c not in _RUN_KEY)
        sql = f"""
WITH u AS (
  UPDATE runs SET {sets} FROM json_populate_record(NULL::runs, $1::json) AS r
  WHERE runs.run_id = $2 AND runs.tenant_id IS NOT DISTINCT FROM $3::text
    AND ($4::text IS NULL OR runs.owner_id = $4::text)
  RETURNING 1),
nr AS (SELECT * FROM json_populate_recordset(NULL::node_runs, $5::json)),
f AS (
  UPDATE node_runs SET current = false FROM json_to_recordset($6::json) AS k(node_id text, keep text)
  WHERE EXISTS (SELECT 1 FROM u) AND node_runs.run_id = $2 AND node_runs.tenant_id = $3
    AND node_runs.node_id = k.node_id AND node_runs.current AND node_runs.node_run_id <> k.keep
    AND node_runs.node_run_id NOT IN (SELECT node_run_id FROM nr)
  RETURNING 1),
n AS (
  INSERT INTO node_runs ({node_cols}) SELECT {picked} FROM nr AS n WHERE EXISTS (SELECT 1 FROM u)
  ON CONFLICT (run_id, node_run_id) DO UPDATE SET {node_updates}
  RETURNING 1),
e AS (
  INSERT INTO run_events ({", ".join(EVENT_COLUMNS)})
  SELECT $2, v.seq, $3, v.type, v.node_id, v.payload, v.ts
  FROM json_populate_recordset(NULL::run_events, $7::json) AS v WHERE EXISTS (SELECT 1 FROM u)
  ON CONFLICT (run_id, seq) DO NOTHING
  RETURNING 1)
SELECT (SELECT count(*) FROM u)"""
        self._sql[keys] = sql
        return sql

    async def _prepared_for(self, driver: Any, keys: tuple[str, ...]) -> Any:
        if driver is not self._prepared_on:
            self._prepared, self._prepared_on = {}, driver
        statement = self._prepared.get(keys)
        if statement is None:
            statement = self._prepared[keys] = await driver.prepare(self._statement(keys))
        return statement

    @staticmethod
    def _args(write: CheckpointWrite) -> tuple[Any, ...]:
        rows = write.node_rows
        if len(rows) > 1:  # one row per node run (the statement may not upsert a row twice)
            rows = list({row["node_run_id"]: row for row in rows}.values())
        return (
            to_json(write.run_values).decode(),
            write.run_id,
            write.tenant_id,
            write.owner_id,
            to_json(rows).decode(),
            to_json([{"node_id": n, "keep": k} for n, k in write.flips]).decode(),
            to_json(write.events).decode(),
        )

    async def write(self, conn: AsyncConnection, write: CheckpointWrite) -> bool:
        """Commit ``write`` with one statement; False when the run row did not match."""
        return (await self.write_many(conn, [write]))[0]

    async def write_many(self, conn: AsyncConnection, writes: Sequence[CheckpointWrite]) -> list[bool]:
        """Commit ``writes`` (of different runs): one alone as one statement in autocommit
        (one round trip, one commit), several as one statement each inside one transaction
        (one commit for all); for each, whether its run row matched (False: nothing of it
        written, since its statement's other parts depend on the UPDATE)."""
        driver = (await _raw_connection(conn)).driver_connection  # asyncpg.Connection
        if driver.is_in_transaction():  # the statements would not commit on their own
            raise StoreError("checkpoint: the connection is inside a transaction")
        statements = [(await self._prepared_for(driver, tuple(w.run_values)), self._args(w)) for w in writes]
        if len(statements) == 1:
            statement, args = statements[0]
            return [bool(await statement.fetchval(*args))]
        async with driver.transaction():
            return [bool(await statement.fetchval(*args)) for statement, args in statements]


async def pg_statement(conn: AsyncConnection, sql: str, *args: Any) -> str:
    """PostgreSQL: one statement on the raw asyncpg connection, in autocommit - one round
    trip and one commit, no ``BEGIN``/``COMMIT`` around it and no SQLAlchemy on the way
    (the hot path of a run's start, as the checkpoint is of its steps). Returns the
    command status (``"UPDATE 1"``); the driver's errors go to the caller."""
    driver = (await _raw_connection(conn)).driver_connection  # asyncpg.Connection
    if driver.is_in_transaction():  # the statement would not commit on its own
        raise StoreError("the connection is inside a transaction")
    return str(await driver.execute(sql, *args))


# ------------------------------------------------- SQLite calls of the store (worker thread)


def _sqlite_reads(
    db: sqlite3.Connection, queries: list[tuple[str, tuple[Any, ...]]]
) -> list[list[dict[str, Any]]]:
    """Runs in aiosqlite's worker thread: the SELECTs in one read transaction, rows as dicts."""
    db.execute("BEGIN")
    try:
        results = [_rows(db.execute(sql, params)) for sql, params in queries]
    finally:
        db.rollback()  # read only: nothing to keep
    return results


def _sqlite_writes(db: sqlite3.Connection, statements: list[tuple[str, tuple[Any, ...]]]) -> list[int]:
    """Runs in aiosqlite's worker thread: the statements in one write transaction; their row counts."""

    def body() -> tuple[bool, list[int]]:
        counts: list[int] = []
        for sql, params in statements:
            cursor = db.execute(sql, params)
            row_id = cursor.lastrowid if sql.startswith("INSERT") and cursor.rowcount == 1 else None
            counts.append(row_id if row_id is not None else cursor.rowcount)
        return True, counts

    return _immediate(db, body)


def _sqlite_claim(
    db: sqlite3.Connection,
    update: tuple[str, tuple[Any, ...]],
    reads: list[tuple[str, tuple[Any, ...]]],
    owner_read: tuple[str, tuple[Any, ...]],
) -> tuple[bool, list[list[dict[str, Any]]]]:
    """Runs in aiosqlite's worker thread: the claim's conditional UPDATE and, when it
    matched, the ``reads`` in the same write transaction (committed); when it did not,
    the ``owner_read`` alone (nothing written). ``(matched, rows of each read)``."""

    def body() -> tuple[bool, tuple[bool, list[list[dict[str, Any]]]]]:
        matched = db.execute(*update).rowcount == 1
        results = [_rows(db.execute(sql, params)) for sql, params in (reads if matched else [owner_read])]
        return matched, (matched, results)

    return _immediate(db, body)
