"""A run's start as one transaction: the quota admission, the run (created already
claimed by the process that executes it), its workflow document, and the condition that
the published version it was built from is still the published one.

A blocking run used to make five commits before its end: the published version's read,
the admission, the run's creation, its claim and - on the first run of a document - the
document. Each is a WAL flush and, on PostgreSQL, a round trip or three. Here they are
one :class:`LaunchWrite`, written:

- **PostgreSQL** (:func:`pg_launch`): one statement of data-modifying CTEs in autocommit
  on the raw asyncpg connection (one round trip, one commit, atomic as any statement);
  every part is conditional on the published version still being the one named.
- **SQLite** (:func:`sqlite_launch`): one call in aiosqlite's worker thread,
  ``BEGIN IMMEDIATE`` ... ``COMMIT``.
- inside a transaction the caller holds (:func:`launch_in`, SQLAlchemy): the quota
  admission that counts (a limit is set), which must lock and count first.

A published version read for a run start may come from memory (:func:`remembered`):
versions are immutable, so a remembered ``(version, content hash)`` is still right
exactly while the workflow's ``published_version`` is that version with that hash -
which the write checks in its own transaction. When it no longer holds nothing is
written, the memory is forgotten and the caller gets :class:`~engine.ports.StalePublished`
(it reads again and retries). A publish or delete through this process forgets at once.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pydantic_core import to_json
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.ports import Published, StalePublished
from schemas.records import WorkflowVersion

from .checkpoint import _immediate
from .connect import dialect_insert
from .tables import quota_admissions as _admissions
from .tables import runs as _runs
from .tables import workflow_docs as _docs
from .tables import workflow_versions as _versions
from .tables import workflows as _workflows

__all__ = [
    "AdmissionRow",
    "LaunchWrite",
    "forget",
    "launch_in",
    "pg_launch",
    "remember",
    "remembered",
    "sqlite_launch",
]


#: published versions remembered for run starts (oldest dropped first)
_REMEMBERED_MAX = 4096
#: (database URL, tenant, workflow id) -> the published version (with its document) last read there
_published: OrderedDict[tuple[str, str, str], WorkflowVersion] = OrderedDict()


def remembered(url: str, tenant_id: str, workflow_id: str) -> WorkflowVersion | None:
    """The published version last read for a run start of the workflow (None: none)."""
    return _published.get((url, tenant_id, workflow_id))


def remember(url: str, version: WorkflowVersion) -> None:
    """Remember ``version`` (with its document) as the workflow's published one."""
    key = (url, version.tenant_id, version.workflow_id)
    _published[key] = version
    _published.move_to_end(key)
    while len(_published) > _REMEMBERED_MAX:
        _published.popitem(last=False)


def forget(url: str, tenant_id: str, workflow_id: str) -> None:
    """Forget the workflow's remembered published version (it changed, or may have)."""
    _published.pop((url, tenant_id, workflow_id), None)


@dataclass(frozen=True, slots=True)
class AdmissionRow:
    """A ``quota_admissions`` row written with the run; ``prune_before``: the tenant's
    admissions older than this are deleted in the same write (None: none)."""

    tenant_id: str
    app_id: str
    run_id: str
    admitted_at: float
    prune_before: float | None = None


@dataclass(slots=True)
class LaunchWrite:
    """Everything a run's start writes: the ``runs`` row (owner columns included), the
    ``workflow_docs`` row (None: stored already), the published version that must still
    hold, and the admission (None: none).

    ``durable`` False: on PostgreSQL the start commits without waiting for its WAL to
    reach the disk (``synchronous_commit = off`` for this transaction only) - for a start
    that nobody is told about before the run's next commit, which waits for the disk and
    so makes everything before it durable too: a run executed here whose caller waits
    for it. A PostgreSQL server that crashes within a moment of such a start loses the
    run and its admission together, before any of its effects (a node with effects
    commits its start first) and before any answer; a Flowloom crash loses nothing.
    SQLite's commits never wait for the disk (``synchronous=NORMAL``: they survive a
    crash of the process, not of the machine), so it changes nothing there.
    """

    run: dict[str, Any]
    doc: dict[str, Any] | None = None
    published: Published | None = None
    admission: AdmissionRow | None = None
    durable: bool = True

    def stale(self, url: str) -> StalePublished:
        """The error of a write whose published version no longer holds (and forget it)."""
        assert self.published is not None
        forget(url, self.run["tenant_id"], self.published.workflow_id)
        return StalePublished(
            f"version {self.published.version} of workflow {self.published.workflow_id!r} is no "
            f"longer the published one"
        )


# -------------------------------------------------------------------------- PostgreSQL

#: $1 the run row, $2 the document row (NULL: none), $3 tenant, $4 workflow, $5 version
#: (NULL: no condition), $6 its content hash, $7 the admission row (NULL: none), $8 the
#: admissions' prune time (NULL: none), $9 true for a start that need not wait for the
#: disk (:attr:`LaunchWrite.durable`). Every part waits on ``ok``.
_PG_LAUNCH = """
WITH ok AS (
  SELECT $5::int IS NULL OR EXISTS (
    SELECT 1 FROM workflows AS w JOIN workflow_versions AS v ON v.tenant_id = w.tenant_id
      AND v.workflow_id = w.workflow_id AND v.version = w.published_version
    WHERE w.tenant_id = $3::text AND w.workflow_id = $4::text AND w.published_version = $5::int
      AND v.doc_hash = $6::text) AS ok),
d AS (
  INSERT INTO workflow_docs SELECT * FROM json_populate_record(NULL::workflow_docs, $2::json)
  WHERE $2::json IS NOT NULL AND (SELECT ok FROM ok)
  ON CONFLICT (tenant_id, content_hash) DO NOTHING RETURNING 1),
p AS (
  DELETE FROM quota_admissions WHERE $8::float8 IS NOT NULL AND (SELECT ok FROM ok)
    AND tenant_id = $3::text AND admitted_at < $8::float8 RETURNING 1),
a AS (
  INSERT INTO quota_admissions (tenant_id, app_id, run_id, admitted_at)
  SELECT x.tenant_id, x.app_id, x.run_id, x.admitted_at
  FROM json_to_record($7::json) AS x(tenant_id text, app_id text, run_id text, admitted_at float8)
  WHERE $7::json IS NOT NULL AND (SELECT ok FROM ok) RETURNING id),
r AS (
  INSERT INTO runs SELECT * FROM json_populate_record(NULL::runs, $1::json) WHERE (SELECT ok FROM ok) RETURNING 1)
SELECT (SELECT ok FROM ok) AS ok, (SELECT id FROM a) AS admission,
  CASE WHEN $9::bool THEN set_config('synchronous_commit', 'off', true) END AS quick"""


def _pg_args(write: LaunchWrite) -> tuple[Any, ...]:
    published, admission = write.published, write.admission
    return (
        to_json(write.run).decode(),
        None if write.doc is None else to_json(write.doc).decode(),
        write.run["tenant_id"],
        published.workflow_id if published else None,
        published.version if published else None,
        published.doc_hash if published else None,
        None
        if admission is None
        else to_json(
            {
                "tenant_id": admission.tenant_id,
                "app_id": admission.app_id,
                "run_id": admission.run_id,
                "admitted_at": admission.admitted_at,
            }
        ).decode(),
        admission.prune_before if admission is not None else None,
        not write.durable,
    )


async def pg_launch(driver: Any, write: LaunchWrite) -> tuple[bool, int | None]:
    """Write ``write`` as one statement in autocommit on the asyncpg connection ``driver``;
    ``(whether the published version held, the admission's id)`` - nothing was written
    when it did not. The driver's errors (a unique violation: the run exists) go to the caller."""
    row = await driver.fetchrow(_PG_LAUNCH, *_pg_args(write))
    return bool(row["ok"]), row["admission"]


# ------------------------------------------------------------------------------ SQLite

_SQLITE_PUBLISHED = (
    "SELECT 1 FROM workflows AS w JOIN workflow_versions AS v ON v.tenant_id = w.tenant_id "
    "AND v.workflow_id = w.workflow_id AND v.version = w.published_version "
    "WHERE w.tenant_id = ? AND w.workflow_id = ? AND w.published_version = ? AND v.doc_hash = ?"
)
_SQLITE_DOC = (
    "INSERT INTO workflow_docs (tenant_id, content_hash, doc, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, content_hash) DO NOTHING"
)
_SQLITE_PRUNE = "DELETE FROM quota_admissions WHERE tenant_id = ? AND admitted_at < ?"
_SQLITE_ADMIT = "INSERT INTO quota_admissions (tenant_id, app_id, run_id, admitted_at) VALUES (?, ?, ?, ?)"


def sqlite_statements(
    write: LaunchWrite, run_json: tuple[str, ...]
) -> tuple[Any, list[tuple[str, tuple[Any, ...]]]]:
    """``(the published check or None, the statements)`` of ``write`` for
    :func:`sqlite_launch`; ``run_json``: the ``runs`` columns to encode as JSON text."""
    run, published, admission = write.run, write.published, write.admission
    check = (
        None
        if published is None
        else (
            _SQLITE_PUBLISHED,
            (run["tenant_id"], published.workflow_id, published.version, published.doc_hash),
        )
    )
    statements: list[tuple[str, tuple[Any, ...]]] = []
    if write.doc is not None:
        doc = write.doc
        statements.append(
            (
                _SQLITE_DOC,
                (doc["tenant_id"], doc["content_hash"], to_json(doc["doc"]).decode(), doc["created_at"]),
            )
        )
    if admission is not None:
        if admission.prune_before is not None:
            statements.append((_SQLITE_PRUNE, (admission.tenant_id, admission.prune_before)))
        statements.append(
            (_SQLITE_ADMIT, (admission.tenant_id, admission.app_id, admission.run_id, admission.admitted_at))
        )
    names = tuple(run)
    sql, json_at = _run_insert(names, run_json)
    values = list(run.values())
    for at in json_at:
        value = values[at]
        if value is not None:
            values[at] = to_json(value).decode()
    statements.append((sql, tuple(values)))
    return check, statements


#: (the ``runs`` columns of an insert, the JSON ones) -> its SQL and the JSON columns' positions;
#: a run's columns are the same names in the same order from one run to the next
_RUN_INSERTS: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, tuple[int, ...]]] = {}


def _run_insert(names: tuple[str, ...], run_json: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    """The ``INSERT INTO runs`` of the columns ``names`` and the positions of those among
    them to encode as JSON text (``run_json``), made once per set of columns."""
    made = _RUN_INSERTS.get((names, run_json))
    if made is None:
        sql = f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        made = sql, tuple(at for at, name in enumerate(names) if name in run_json)
        if len(_RUN_INSERTS) < 64:  # a handful of column sets exist; bounded all the same
            _RUN_INSERTS[(names, run_json)] = made
    return made


def sqlite_launch(
    db: sqlite3.Connection,
    check: tuple[str, tuple[Any, ...]] | None,
    statements: list[tuple[str, tuple[Any, ...]]],
) -> tuple[bool, int | None]:
    """Runs in aiosqlite's worker thread: ``check`` (a SELECT that must find a row; None:
    none) then ``statements`` in one write transaction; ``(whether the check held, the
    rowid of the admission INSERT or None)``. Nothing is written when the check fails or
    a statement raises (an IntegrityError: the run exists)."""

    def body() -> tuple[bool, tuple[bool, int | None]]:
        if check is not None and db.execute(*check).fetchone() is None:
            return False, (False, None)
        admission = None
        for sql, params in statements:
            cursor = db.execute(sql, params)
            if sql is _SQLITE_ADMIT:
                admission = cursor.lastrowid
        return True, (True, admission)

    return _immediate(db, body)


# ------------------------------------------------------------ inside a caller's transaction


async def launch_in(conn: AsyncConnection, write: LaunchWrite, url: str) -> int | None:
    """Write ``write`` on ``conn`` inside the transaction the caller holds (SQLAlchemy, both
    backends); the admission's id (None: no admission). Raises StalePublished when the
    published version no longer holds - before anything of it is written, so the caller's
    transaction rolls back with it (``url``: the store's, the key of the remembered versions)."""
    published = write.published
    if published is not None:
        held = (
            await conn.execute(
                sa.select(sa.literal(1))
                .select_from(_workflows)
                .join(
                    _versions,
                    sa.and_(
                        _versions.c.tenant_id == _workflows.c.tenant_id,
                        _versions.c.workflow_id == _workflows.c.workflow_id,
                        _versions.c.version == _workflows.c.published_version,
                    ),
                )
                .where(
                    _workflows.c.tenant_id == write.run["tenant_id"],
                    _workflows.c.workflow_id == published.workflow_id,
                    _workflows.c.published_version == published.version,
                    _versions.c.doc_hash == published.doc_hash,
                )
            )
        ).first()
        if held is None:
            raise write.stale(url)
    if write.doc is not None:
        doc = write.doc
        insert = dialect_insert(conn.engine.url.get_backend_name())
        await conn.execute(
            insert(_docs).on_conflict_do_nothing(index_elements=[_docs.c.tenant_id, _docs.c.content_hash]),
            doc,
        )
    admission_id = None
    admission = write.admission
    if admission is not None:
        if admission.prune_before is not None:
            await conn.execute(
                sa.delete(_admissions).where(
                    _admissions.c.tenant_id == admission.tenant_id,
                    _admissions.c.admitted_at < admission.prune_before,
                )
            )
        admission_id = int(
            (
                await conn.execute(
                    sa.insert(_admissions)
                    .values(
                        tenant_id=admission.tenant_id,
                        app_id=admission.app_id,
                        run_id=admission.run_id,
                        admitted_at=admission.admitted_at,
                    )
                    .returning(_admissions.c.id)
                )
            ).scalar_one()
        )
    await conn.execute(sa.insert(_runs), write.run)
    return admission_id
