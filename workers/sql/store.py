"""The SQL implementation of the engine's storage ports (SQLite and PostgreSQL).

:class:`SqlStore` is a ``RunStore``, ``EventLog``, ``CommandChannel`` and ``ChatStore``
(see :mod:`engine.ports` for each method's contract) on the tables of
:mod:`workers.sql.tables`. It keeps one connection and serializes its use with an
asyncio lock (a connection runs one statement at a time; SQLite has one writer anyway).

Checkpoints are the hot path (one per finished node with effects, and one at a run's
end): the run row (conditional on the owner), the changed node runs, the flip of a
node's previous latest run when a loop round replaced it, and the step's durable events
commit in one transaction, written on the driver connection in one call
(:mod:`workers.sql.checkpoint`), with no read before the write. The checkpoints of
concurrent runs that are ready together share that transaction (group commit,
:mod:`workers.sql.group`). Which node run is the latest of each node is remembered per run after the first
checkpoint (the store that writes a run owns it, so nobody else changes those rows
meanwhile).

Reading runs back is :class:`workers.sql.run_reads.RunReads`, their leases
:class:`workers.sql.leases.RunLeases`, commands and chat messages
:class:`workers.sql.messages.CommandsAndMessages`: bases of :class:`SqlStore`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic_core import from_json, to_json
from sqlalchemy import exc
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.compiler import content_hash
from engine.ports import CheckpointDelta, LeaseLost, Published, RunExists, RunNotFound, StoreError
from schemas.records import OwnerInfo
from schemas.run import NodeRun, RunState

from .checkpoint import (
    CheckpointWrite,
    PostgresCheckpointWriter,
    SqliteCheckpointWriter,
    _raw_connection,
    _sqlite_reads,
    _sqlite_writes,
    event_rows,
)
from .connect import dialect_insert, make_engine, mask_url, normalize_url, store_errors
from .group import CheckpointJob, GroupCommit
from .launch import AdmissionRow, LaunchWrite, launch_in, pg_launch, sqlite_launch, sqlite_statements
from .leases import _RELEASED, RunLeases
from .messages import CommandsAndMessages
from .migrate import migrate_connection
from .rows import ENDED, node_run_row, run_columns
from .run_reads import _INDEXED, _NODE_RUN_JSON, _RUN_JSON, _NodeIndex
from .tables import node_runs, run_events, workflow_docs

__all__ = ["SqlStore", "dialect_insert"]


#: workflow documents a store remembers having stored (oldest dropped first)
_DOCS_LIMIT = 4096
#: ended runs whose rows a store remembers for their first detail read (oldest dropped first)
_ENDED_LIMIT = 256
#: the ``runs`` columns only :meth:`SqlStore.create_run` writes
_CREATED = (
    "run_id",
    "tenant_id",
    "workflow_id",
    "workflow_version",
    "workflow_hash",
    "created_at",
    "tokens_in",
    "tokens_out",
    "cost",
    "usage_estimated",
    "owner_id",
    "owner_host",
    "owner_pid",
    "lease_until",
)


def _broken(conn: AsyncConnection) -> bool:
    """True when ``conn`` can no longer be used: invalidated by SQLAlchemy, or its
    driver connection closed under it (asyncpg's, when the server went away). No round trip."""
    sync = conn.sync_connection
    if sync is None or sync.closed:
        return False  # not connected yet (or closed on purpose): SQLAlchemy connects on use
    if sync.invalidated:
        return True
    is_closed = getattr(sync.connection.driver_connection, "is_closed", None)
    return bool(is_closed is not None and is_closed())


def _same_run(row: dict[str, Any] | None, run: NodeRun) -> dict[str, Any] | None:
    """``row`` when it is the row of ``run`` (same node run id), else None."""
    return row if row is not None and row["node_run_id"] == run.id else None


def _through_json(row: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """A copy of ``row`` whose JSON columns ``names`` went through JSON, as a read returns them."""
    return _rows_through_json([row], names)[0]


def _rows_through_json(
    rows: Sequence[dict[str, Any]], names: Sequence[str] = _NODE_RUN_JSON
) -> list[dict[str, Any]]:
    """Copies of ``rows`` whose JSON columns ``names`` went through JSON (tuples become
    lists, models dicts, keys strings...), as a read returns them; None stays None. All
    rows are encoded and decoded as one JSON array: the values are the same as column by
    column, without two calls per column of each row (60,000 for a 10,000-node run)."""
    decoded = from_json(to_json([[row[name] for name in names] for row in rows]))
    copies = []
    for row, values in zip(rows, decoded, strict=True):
        copy = dict(row)
        copy.update(zip(names, values, strict=True))
        copies.append(copy)
    return copies


class _Statements:
    """The Core statements used more than once (creating runs, loading the node index,
    appending events), for one dialect."""

    def __init__(self, backend: str) -> None:
        self.insert = dialect_insert(backend)
        upsert = self.insert(node_runs)
        self.upsert_node_runs = upsert.on_conflict_do_update(
            index_elements=[node_runs.c.run_id, node_runs.c.node_run_id],
            set_={
                c.name: upsert.excluded[c.name]
                for c in node_runs.c
                if c.name not in ("run_id", "node_run_id")
            },
        )
        self.current_index = sa.select(node_runs.c.node_id, node_runs.c.node_run_id, node_runs.c.seq).where(
            node_runs.c.run_id == sa.bindparam("b_run_id"), node_runs.c.current.is_(sa.true())
        )
        self.append_events = self.insert(run_events).on_conflict_do_nothing(
            index_elements=[run_events.c.run_id, run_events.c.seq]
        )


class SqlStore(RunLeases, CommandsAndMessages):
    """Runs, node runs, events, commands and chats in SQLite or PostgreSQL.

    Create with :meth:`open` (connects lazily, upgrades the schema to the newest
    migration) or :meth:`from_url` (no migration). Every method is async; errors from the
    database (unreachable, broken) surface as :class:`engine.ports.StoreError` naming the
    URL with its password masked. Times are Unix seconds (``time.time()``).
    """

    def __init__(self, url: str | URL) -> None:
        self.url: URL = normalize_url(url)
        self.backend: str = self.url.get_backend_name()
        self._engine = make_engine(self.url)
        self._conn: AsyncConnection | None = None
        self._lock = asyncio.Lock()
        self._sql = _Statements(self.backend)
        self._writer = SqliteCheckpointWriter() if self.backend == "sqlite" else PostgresCheckpointWriter()
        self._group = GroupCommit(self._flush_checkpoints)
        self._index: OrderedDict[str, _NodeIndex] = OrderedDict()
        #: (tenant, run id) -> the rows of a run that ended here, until its first load_detail
        self._ended: OrderedDict[tuple[str, str], tuple[dict[str, Any], list[dict[str, Any]]]] = OrderedDict()
        self._docs: OrderedDict[tuple[str, str], None] = OrderedDict()  # (tenant, hash) stored by this store
        self._url = str(self.url)  # the key of what workers.sql.launch remembers for this database

    def __repr__(self) -> str:
        return f"SqlStore({mask_url(self.url)!r})"

    @classmethod
    def from_url(cls, url: str | URL) -> SqlStore:
        """A store for ``url`` (``sqlite+aiosqlite:///path``, ``postgresql+asyncpg://...``;
        plain ``sqlite://``/``postgresql://`` map to those drivers). Does not connect."""
        return cls(url)

    @classmethod
    async def open(cls, url: str | URL) -> SqlStore:
        """A store for ``url`` whose database is created/upgraded to the newest schema."""
        store = cls(url)
        try:
            await store.migrate()
        except BaseException:
            await store.close()
            raise
        return store

    async def migrate(self, rev: str = "head") -> None:
        """Upgrade the database to ``rev`` (no-op when it is there already)."""
        async with self._lock:
            with store_errors(self.url):
                await migrate_connection(await self._connection(), rev)

    async def close(self) -> None:
        """Release the connection and the engine."""
        async with self._lock:
            if self._conn is not None:
                with contextlib.suppress(exc.SQLAlchemyError, OSError):
                    await self._conn.close()
                self._conn = None
            await self._engine.dispose()

    async def _connection(self) -> AsyncConnection:
        """The store's connection; a broken one (the server restarted, the network dropped
        it) is replaced, since the hot paths use the driver connection directly and
        SQLAlchemy would not notice it is gone."""
        conn = self._conn
        if conn is not None and _broken(conn):
            with contextlib.suppress(Exception):
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()
            conn = self._conn = None
        if conn is None:
            conn = self._conn = await self._engine.connect()
        return conn

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        """One transaction on the store's connection (committed on success)."""
        async with self._lock:
            with store_errors(self.url):
                conn = await self._connection()
                async with conn.begin():
                    yield conn

    # ----------------------------------------------------------------- workflow documents

    async def put_workflow(self, tenant_id: str, doc: Mapping[str, Any]) -> str:
        """Keep ``doc`` under its content hash (idempotent); returns the hash."""
        digest = content_hash(doc)
        if (tenant_id, digest) in self._docs:  # documents are never deleted: stored once is stored
            return digest
        stmt = self._sql.insert(workflow_docs).on_conflict_do_nothing(
            index_elements=[workflow_docs.c.tenant_id, workflow_docs.c.content_hash]
        )
        async with self._tx() as conn:
            await conn.execute(
                stmt, {"tenant_id": tenant_id, "content_hash": digest, "doc": doc, "created_at": time.time()}
            )
        self._keep_doc(tenant_id, digest)
        return digest

    async def get_workflow(self, tenant_id: str, content_hash: str) -> dict[str, Any]:
        """The document kept under ``content_hash``. Raises RunNotFound."""
        stmt = sa.select(workflow_docs.c.doc).where(
            workflow_docs.c.tenant_id == tenant_id, workflow_docs.c.content_hash == content_hash
        )
        async with self._tx() as conn:
            doc = (await conn.execute(stmt)).scalar_one_or_none()
        if doc is None:
            raise RunNotFound(f"no workflow document {content_hash} for tenant {tenant_id!r}")
        return doc

    # ----------------------------------------------------------------------------- runs

    async def create_run(
        self,
        state: RunState,
        *,
        owner: OwnerInfo | None = None,
        doc: Mapping[str, Any] | None = None,
        published: Published | None = None,
        admission: AdmissionRow | None = None,
        durable: bool = True,
    ) -> int | None:
        """Insert a new run (with any node runs it already has) owned by ``owner``, with
        ``doc`` kept under its hash and, in this store only, the quota ``admission`` row,
        in one transaction (:mod:`workers.sql.launch`): one statement on PostgreSQL, one
        call in the driver's thread on SQLite. With ``published``, only while that version
        is still the published one; ``durable`` False: a start that need not wait for the
        disk (:class:`~workers.sql.launch.LaunchWrite`). Returns the admission's id (None:
        none). Raises RunExists, StalePublished (nothing written either way)."""
        write, index, node_rows = self._new_run(state, owner, doc, published, admission)
        write.durable = durable
        try:
            if node_rows:  # a rerun's reused node runs: through SQLAlchemy, in one transaction
                async with self._tx() as conn:
                    admission_id = await launch_in(conn, write, self._url)
                    await conn.execute(self._sql.upsert_node_runs, node_rows)
            else:
                async with self._lock:
                    with store_errors(self.url):
                        driver = (await _raw_connection(await self._connection())).driver_connection
                        if self.backend == "sqlite":
                            held, admission_id = await driver._execute(
                                sqlite_launch, driver._conn, *sqlite_statements(write, _RUN_JSON)
                            )
                        elif driver.is_in_transaction():  # the statement would not commit on its own
                            raise StoreError("the connection is inside a transaction")
                        else:
                            held, admission_id = await pg_launch(driver, write)
                if not held:
                    raise write.stale(self._url)
        except StoreError as error:
            cause = error.__cause__
            if isinstance(cause, (sqlite3.IntegrityError, exc.IntegrityError)) or (
                type(cause).__name__ == "UniqueViolationError"
            ):
                raise RunExists(f"run {state.run_id} already exists") from None
            raise
        self._created(write, index)
        return admission_id

    def _new_run(
        self,
        state: RunState,
        owner: OwnerInfo | None,
        doc: Mapping[str, Any] | None,
        published: Published | None,
        admission: AdmissionRow | None,
    ) -> tuple[LaunchWrite, _NodeIndex, list[dict[str, Any]]]:
        """The write of a new run (:meth:`create_run`), its node index and its node-run rows."""
        row = {
            "run_id": state.run_id,
            "tenant_id": state.tenant_id,
            "workflow_id": state.workflow_id,
            "workflow_version": state.workflow_version,
            "workflow_hash": state.workflow_hash,
            "created_at": time.time(),
            **run_columns(state),
        }
        row.setdefault("tokens_in", 0), row.setdefault("tokens_out", 0), row.setdefault("cost", 0.0)
        row.setdefault("usage_estimated", False)
        row.update(
            owner_id=owner.id if owner else None,
            owner_host=owner.host if owner else None,
            owner_pid=owner.pid if owner else None,
            lease_until=owner.lease_until if owner else None,
        )
        index = _NodeIndex()
        index.indexed = tuple(row[name] for name in _INDEXED)
        index.created = {name: row[name] for name in _CREATED}
        node_rows, current, added = self._node_rows(state, index, list(state.node_runs), 0)
        index.apply(current, added)
        doc_row = None
        if doc is not None and (state.tenant_id, state.workflow_hash) not in self._docs:
            doc_row = {
                "tenant_id": state.tenant_id,
                "content_hash": state.workflow_hash,
                "doc": dict(doc),
                "created_at": row["created_at"],
            }
        return LaunchWrite(row, doc_row, published, admission), index, node_rows

    def _created(self, write: LaunchWrite, index: _NodeIndex) -> None:
        """What a store remembers of a run it created (once committed)."""
        if write.doc is not None:
            self._keep_doc(write.doc["tenant_id"], write.doc["content_hash"])
        self._remember(write.run["run_id"], index)

    def _keep_doc(self, tenant_id: str, digest: str) -> None:
        self._docs[(tenant_id, digest)] = None
        while len(self._docs) > _DOCS_LIMIT:
            self._docs.popitem(last=False)

    async def _sqlite_write(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[int]:
        """SQLite only: ``statements`` (SQL text with ``?`` parameters) in one write
        transaction, run in one call in aiosqlite's worker thread; each one's row count,
        or for an INSERT of one row its rowid. Errors are StoreError (the driver's error
        as its cause)."""
        async with self._lock:
            with store_errors(self.url):
                driver = (await _raw_connection(await self._connection())).driver_connection
                return await driver._execute(_sqlite_writes, driver._conn, statements)

    async def _sqlite_read(self, queries: list[tuple[str, tuple[Any, ...]]]) -> list[list[dict[str, Any]]]:
        """SQLite only: the SELECTs ``queries`` in one read transaction in one call in
        aiosqlite's worker thread; rows as dicts (JSON columns still text)."""
        async with self._lock:
            with store_errors(self.url):
                driver = (await _raw_connection(await self._connection())).driver_connection
                return await driver._execute(_sqlite_reads, driver._conn, queries)

    async def checkpoint(
        self,
        state: RunState,
        delta: CheckpointDelta,
        *,
        owner_id: str | None,
        events: Sequence[Any] = (),
        release: bool = False,
    ) -> None:
        """Commit the run row, the node runs named by ``delta`` and ``events`` (the step's
        durable events; ``node_delta`` ones skipped, seqs already stored ignored) in one
        transaction; with ``release`` the same UPDATE gives the run up (as :meth:`release`).
        Checkpoints of other runs that are ready at the same time share the transaction
        (group commit, :mod:`workers.sql.group`); each run's write stays all or nothing.

        With ``owner_id`` the write happens only while that owner holds the run (the
        lease itself is renewed by :meth:`renew`); raises LeaseLost otherwise. Without
        it, raises RunNotFound when the run does not exist for the state's tenant. In
        both cases nothing is written.
        """
        await self._group.submit(CheckpointJob(state, delta, owner_id, events, release))

    async def _build_write(self, conn: AsyncConnection, job: CheckpointJob) -> tuple[Any, ...]:
        """The write of ``job`` and what to remember once it committed."""
        state = job.state
        index = self._index.get(state.run_id)
        if index is None:
            async with conn.begin():
                index = await self._load_index(conn, state.run_id)
        values = run_columns(state)
        indexed = tuple(values[name] for name in _INDEXED)
        if indexed == index.indexed:
            for name in _INDEXED:
                del values[name]
        if job.release:
            values.update(_RELEASED)
        write = CheckpointWrite(state.run_id, state.tenant_id, job.owner_id, values)
        write.node_rows, current, added = self._node_rows(
            state, index, job.delta.node_ids, job.delta.history_from
        )
        write.flips = [
            (node_id, keep) for node_id, keep in current.items() if index.current.get(node_id, keep) != keep
        ]
        write.events = event_rows(state.tenant_id, state.run_id, job.events)
        return job, write, index, current, added, indexed

    def _settle(self, built: tuple[Any, ...], matched: bool) -> None:
        job, write, index, current, added, indexed = built
        state = job.state
        if not matched:
            job.settle(
                LeaseLost(f"run {state.run_id} is no longer owned by {job.owner_id}")
                if job.owner_id is not None
                else RunNotFound(f"no run {state.run_id} for tenant {state.tenant_id!r}")
            )
            return
        index.apply(current, added)
        index.indexed = indexed
        ended = job.release or str(state.status) in ENDED
        if index.created is not None:
            for row in write.node_rows:
                if row["current"]:
                    index.committed[row["node_id"]] = (row["node_run_id"], row["status"], row["finished_at"])
                else:
                    index.history = max(index.history, row["seq"] + 1)
            if ended and str(state.status) in ENDED:
                self._keep_ended(state, index, job.release, write.node_rows)
        self._remember(state.run_id, index, ended=ended)
        job.settle()

    def _keep_ended(
        self, state: RunState, index: _NodeIndex, released: bool, written: Sequence[dict[str, Any]]
    ) -> None:
        """Remember the rows of a run that just ended as this store committed them (it
        created the run and wrote every checkpoint of it), so the first
        :meth:`load_detail` - the answer of a blocking request - needs no read: an ended
        run's rows no longer change. JSON columns go through JSON, as a read returns them.
        Not when a node run or history row of the state was never committed (a checkpoint
        that failed before it reached the store): the rows are then not the state, and a
        read tells what is stored.

        ``written``: the node-run rows the last checkpoint just committed; those are
        copied rather than made again from the state (the pure nodes of a run ride on its
        last checkpoint, so for most runs that is every row)."""
        created = index.created
        if (
            created is None
            or index.history != len(state.history)
            or any(
                index.committed.get(node_id) != (run.id, str(run.status), run.finished_at)
                for node_id, run in state.node_runs.items()
            )
        ):
            return
        row = {**created, **run_columns(state), **(_RELEASED if released else {})}
        current = {r["node_run_id"]: r for r in written if r["current"]}
        earlier = {r["seq"]: r for r in written if not r["current"]}
        rows = [
            _same_run(current.get(run.id), run)
            or node_run_row(
                state.run_id, state.tenant_id, run, current=True, position=index.positions[node_id]
            )
            for node_id, run in state.node_runs.items()
        ]
        rows += [
            _same_run(earlier.get(position), run)
            or node_run_row(state.run_id, state.tenant_id, run, current=False, position=position)
            for position, run in enumerate(state.history)
        ]
        self._ended[(state.tenant_id, state.run_id)] = (
            _through_json(row, _RUN_JSON),
            _rows_through_json(rows),
        )
        while len(self._ended) > _ENDED_LIMIT:
            self._ended.popitem(last=False)

    async def _flush_checkpoints(self, batch: list[CheckpointJob]) -> None:
        """Write ``batch`` (at most one checkpoint per run) in one transaction and settle
        each job. When that transaction fails, each checkpoint is written alone, so a
        fault of one run's write fails that run only."""
        async with self._lock:
            try:
                with store_errors(self.url):
                    conn = await self._connection()
            except Exception as error:
                for job in batch:
                    job.settle(error)
                return
            built = []
            for job in batch:
                if job.future.done():  # its caller was cancelled while the batch waited: nothing of it
                    continue
                try:
                    with store_errors(self.url):
                        built.append(await self._build_write(conn, job))
                except Exception as error:
                    job.settle(error)
            if not built:
                return
            try:
                with store_errors(self.url):
                    matched = await self._writer.write_many(conn, [item[1] for item in built])
            except Exception as error:
                for item in built:  # committed or not: learn the latest runs from the rows next time
                    self._index.pop(item[0].state.run_id, None)
                if len(built) == 1:
                    built[0][0].settle(error)
                    return
                for item in built:
                    try:
                        with store_errors(self.url):
                            alone = await self._writer.write(conn, item[1])
                    except Exception as single:
                        self._index.pop(item[0].state.run_id, None)
                        item[0].settle(single)
                    else:
                        self._settle(item, alone)
                return
            for item, ok in zip(built, matched, strict=True):
                self._settle(item, ok)

    def _node_rows(
        self, state: RunState, index: _NodeIndex, node_ids: Sequence[str], history_from: int
    ) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, int]]:
        """Rows of the current node runs ``node_ids`` and of the history from ``history_from``
        on; with the node run id of each node written and the positions of nodes new to
        ``index`` (left unchanged: :meth:`_NodeIndex.apply` records both once committed)."""
        rows = []
        current: dict[str, str] = {}
        added: dict[str, int] = {}
        positions = index.positions
        for node_id in node_ids:
            run = state.node_runs[node_id]
            position = positions.get(node_id)
            if position is None:
                position = added.setdefault(node_id, len(positions) + len(added))
            current[node_id] = run.id
            rows.append(node_run_row(state.run_id, state.tenant_id, run, current=True, position=position))
        for offset, run in enumerate(state.history[history_from:]):
            rows.append(
                node_run_row(
                    state.run_id, state.tenant_id, run, current=False, position=history_from + offset
                )
            )
        return rows, current, added

    async def _load_index(self, conn: AsyncConnection, run_id: str) -> _NodeIndex:
        """The committed current node runs of a run this store has not written yet (once per run)."""
        index = _NodeIndex()
        result = await conn.execute(self._sql.current_index, {"b_run_id": run_id})
        for node_id, node_run_id, _position in sorted(result.all(), key=lambda r: (r[2], r[1])):
            index.current[node_id] = node_run_id
            index.positions[node_id] = len(index.positions)
        return index

    # --------------------------------------------------------------------------- events

    async def append(self, tenant_id: str, run_id: str, events: Sequence[Any]) -> None:
        """Store events (models with ``seq``/``type``/``ts``, or their JSON dicts) in one batch;
        events already stored and ``node_delta`` events (broadcast only) are skipped."""
        rows = event_rows(tenant_id, run_id, events)
        if not rows:
            return
        async with self._tx() as conn:
            await conn.execute(self._sql.append_events, rows)

    async def read(
        self, tenant_id: str, run_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Events with ``seq > after_seq`` as JSON objects, oldest first (at most ``limit``)."""
        stmt = (
            sa.select(run_events.c.payload)
            .where(
                run_events.c.run_id == run_id,
                run_events.c.tenant_id == tenant_id,
                run_events.c.seq > after_seq,
            )
            .order_by(run_events.c.seq)
            .limit(limit)
        )
        async with self._tx() as conn:
            return list((await conn.execute(stmt)).scalars().all())
