"""Saved workflows in the SQL store (the engine's ``WorkflowRepo`` port), and the server's
source of workflow tools over them (the engine's ``WorkflowSource`` port).

A workflow row holds the editable draft and its version (raised by one on every
update; an update that names an older version is refused with
:class:`~engine.ports.StaleVersion`, so two editors never overwrite each other
silently). Publishing keeps the document in ``workflow_docs`` under its content hash
(the table runs already use, never pruned) and adds a ``workflow_versions`` row 1..n;
the workflow's ``published_version`` names the one apps and keys run. Every statement
filters by tenant.

:class:`SqlWorkflowStore` shares the connection (and its lock) of a :class:`SqlStore`,
so the steps of a publish run in one transaction and publishes of one process are
serialised; two processes publishing the same workflow at the same instant may see a
primary-key conflict (a ``StoreError``), never two versions with the same number.

The published version read for a run start may be remembered (``published(cached=True)``,
:mod:`workers.sql.launch`): the run's creation checks, in its own transaction, that it is
still the published one, so a publish from another process is never missed; a publish
or delete through this process forgets it at once.

:class:`SqlWorkflowSource` is what a workflow tool runs in the server: the tenant's
published version of the workflow, or the version the tool pins; a draft never (it may be
half edited), and a workflow of another tenant is not found, as one that does not exist.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from pydantic_core import from_json

from engine.compiler import content_hash
from engine.ports import StaleVersion, WorkflowExists, WorkflowNotFound, WorkflowRepo
from schemas.records import WorkflowRecord, WorkflowVersion

from . import launch
from .rows import RowData
from .store import SqlStore, dialect_insert
from .tables import workflow_docs as docs
from .tables import workflow_versions as versions
from .tables import workflows

__all__ = ["SqlWorkflowSource", "SqlWorkflowStore"]


_VERSION_COLUMNS = [
    versions.c[n] for n in ("tenant_id", "workflow_id", "version", "doc_hash", "note", "created_at")
]
#: :meth:`SqlWorkflowStore.published` on SQLite, as plain SQL (parameters: tenant, workflow)
_PUBLISHED_SQL = (
    "SELECT w.published_version, v.tenant_id, v.workflow_id, v.version, v.doc_hash, v.note, v.created_at, d.doc "
    "FROM workflows AS w LEFT OUTER JOIN workflow_versions AS v ON v.tenant_id = w.tenant_id "
    "AND v.workflow_id = w.workflow_id AND v.version = w.published_version "
    "LEFT OUTER JOIN workflow_docs AS d ON d.tenant_id = v.tenant_id AND d.content_hash = v.doc_hash "
    "WHERE w.tenant_id = ? AND w.workflow_id = ?"
)


def _record(row: RowData) -> WorkflowRecord:
    return WorkflowRecord(
        tenant_id=row["tenant_id"],
        id=row["workflow_id"],
        name=row["name"],
        draft=row["draft"],
        draft_version=row["draft_version"],
        published_version=row["published_version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _version(row: RowData, doc: dict[str, Any] | None = None) -> WorkflowVersion:
    return WorkflowVersion(
        tenant_id=row["tenant_id"],
        workflow_id=row["workflow_id"],
        version=row["version"],
        doc_hash=row["doc_hash"],
        note=row["note"],
        created_at=row["created_at"],
        doc=doc,
    )


def _name(doc: Mapping[str, Any]) -> str:
    name = doc.get("name")
    return name if isinstance(name, str) else ""


class SqlWorkflowStore:
    """Saved workflows on the tables of :mod:`workers.sql.tables`, through the
    connection of ``store``. Database errors surface as ``StoreError`` (URL masked)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._insert = dialect_insert(store.backend)

    @staticmethod
    def _mine(tenant_id: str, workflow_id: str) -> Any:
        return sa.and_(workflows.c.tenant_id == tenant_id, workflows.c.workflow_id == workflow_id)

    async def create(self, tenant_id: str, doc: Mapping[str, Any]) -> WorkflowRecord:
        """Save ``doc`` as the draft (version 1) of workflow ``doc["id"]``. Raises WorkflowExists."""
        now = time.time()
        row = {
            "tenant_id": tenant_id,
            "workflow_id": str(doc["id"]),
            "name": _name(doc),
            "draft": dict(doc),
            "draft_version": 1,
            "published_version": None,
            "created_at": now,
            "updated_at": now,
        }
        stmt = self._insert(workflows).on_conflict_do_nothing(
            index_elements=[workflows.c.tenant_id, workflows.c.workflow_id]
        )
        async with self.store._tx() as conn:
            if (await conn.execute(stmt, row)).rowcount != 1:
                raise WorkflowExists(f"workflow {row['workflow_id']!r} already exists")
        return _record(row)

    async def list(self, tenant_id: str, workflow_id: str | None = None) -> list[WorkflowRecord]:
        """The tenant's workflows (only ``workflow_id`` when given), by id."""
        stmt = (
            sa.select(workflows).where(workflows.c.tenant_id == tenant_id).order_by(workflows.c.workflow_id)
        )
        if workflow_id is not None:
            stmt = stmt.where(workflows.c.workflow_id == workflow_id)
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_record(row) for row in rows]

    async def get(self, tenant_id: str, workflow_id: str) -> WorkflowRecord:
        """The workflow with its draft. Raises WorkflowNotFound."""
        async with self.store._tx() as conn:
            row = (
                (await conn.execute(sa.select(workflows).where(self._mine(tenant_id, workflow_id))))
                .mappings()
                .first()
            )
        if row is None:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        return _record(row)

    async def update_draft(
        self, tenant_id: str, workflow_id: str, doc: Mapping[str, Any], draft_version: int
    ) -> WorkflowRecord:
        """Replace the draft when its version is still ``draft_version`` (then one more).
        Raises WorkflowNotFound, StaleVersion."""
        mine = self._mine(tenant_id, workflow_id)
        async with self.store._tx() as conn:
            changed = (
                await conn.execute(
                    sa.update(workflows)
                    .where(mine, workflows.c.draft_version == draft_version)
                    .values(
                        draft=dict(doc),
                        name=_name(doc),
                        draft_version=draft_version + 1,
                        updated_at=time.time(),
                    )
                )
            ).rowcount
            row = (await conn.execute(sa.select(workflows).where(mine))).mappings().first()
        if row is None:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        if changed != 1:
            raise StaleVersion(
                f"the draft of {workflow_id!r} is at version {row['draft_version']}, not "
                f"{draft_version}: reload it and apply the change again",
                row["draft_version"],
            )
        return _record(row)

    async def delete(self, tenant_id: str, workflow_id: str) -> None:
        """Delete the workflow and its versions (runs stay). Raises WorkflowNotFound."""
        launch.forget(self.store._url, tenant_id, workflow_id)
        async with self.store._tx() as conn:
            await conn.execute(
                sa.delete(versions).where(
                    versions.c.tenant_id == tenant_id, versions.c.workflow_id == workflow_id
                )
            )
            gone = (
                await conn.execute(sa.delete(workflows).where(self._mine(tenant_id, workflow_id)))
            ).rowcount
        if gone != 1:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")

    async def publish(
        self, tenant_id: str, workflow_id: str, doc: Mapping[str, Any], note: str = ""
    ) -> WorkflowVersion:
        """Keep ``doc`` as the next version and make it the published one. Raises WorkflowNotFound."""
        digest, now = content_hash(doc), time.time()
        launch.forget(self.store._url, tenant_id, workflow_id)
        keep_doc = self._insert(docs).on_conflict_do_nothing(
            index_elements=[docs.c.tenant_id, docs.c.content_hash]
        )
        last = sa.select(sa.func.max(versions.c.version)).where(
            versions.c.tenant_id == tenant_id, versions.c.workflow_id == workflow_id
        )
        async with self.store._tx() as conn:
            exists = (
                await conn.execute(
                    sa.select(workflows.c.workflow_id).where(self._mine(tenant_id, workflow_id))
                )
            ).first()
            if exists is None:
                raise WorkflowNotFound(f"no workflow {workflow_id!r}")
            number = ((await conn.execute(last)).scalar_one_or_none() or 0) + 1
            await conn.execute(
                keep_doc,
                {"tenant_id": tenant_id, "content_hash": digest, "doc": dict(doc), "created_at": now},
            )
            row = {
                "tenant_id": tenant_id,
                "workflow_id": workflow_id,
                "version": number,
                "doc_hash": digest,
                "note": note,
                "created_at": now,
            }
            await conn.execute(sa.insert(versions), row)
            await conn.execute(
                sa.update(workflows)
                .where(self._mine(tenant_id, workflow_id))
                .values(published_version=number, updated_at=now)
            )
        launch.forget(self.store._url, tenant_id, workflow_id)  # also what a start that raced it remembered
        return _version(row, dict(doc))

    async def versions(self, tenant_id: str, workflow_id: str) -> builtins.list[WorkflowVersion]:
        """Every published version, oldest first, without documents. Raises WorkflowNotFound."""
        await self.get(tenant_id, workflow_id)
        stmt = (
            sa.select(*_VERSION_COLUMNS)
            .where(versions.c.tenant_id == tenant_id, versions.c.workflow_id == workflow_id)
            .order_by(versions.c.version)
        )
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_version(row) for row in rows]

    async def published(
        self, tenant_id: str, workflow_id: str, *, cached: bool = False
    ) -> WorkflowVersion | None:
        """The published version with its document (one query); None when none is
        published. Raises WorkflowNotFound. ``cached``: for a run start, the version
        remembered from the last such read when there is one (no read; the run's creation
        checks it still holds: :mod:`workers.sql.launch`)."""
        url = self.store._url
        if cached and (found := launch.remembered(url, tenant_id, workflow_id)) is not None:
            return found
        if self.store.backend == "sqlite":  # one call in the driver's thread (SqlStore._sqlite_read)
            (rows,) = await self.store._sqlite_read([(_PUBLISHED_SQL, (tenant_id, workflow_id))])
            row: Any = rows[0] if rows else None
            if row is not None and row["doc"] is not None:
                row["doc"] = from_json(row["doc"])
        else:
            stmt = (
                sa.select(workflows.c.published_version, *_VERSION_COLUMNS, docs.c.doc)
                .select_from(workflows)
                .outerjoin(
                    versions,
                    sa.and_(
                        versions.c.tenant_id == workflows.c.tenant_id,
                        versions.c.workflow_id == workflows.c.workflow_id,
                        versions.c.version == workflows.c.published_version,
                    ),
                )
                .outerjoin(
                    docs,
                    sa.and_(
                        docs.c.tenant_id == versions.c.tenant_id, docs.c.content_hash == versions.c.doc_hash
                    ),
                )
                .where(self._mine(tenant_id, workflow_id))
            )
            async with self.store._tx() as conn:
                row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        if row["published_version"] is None:
            return None
        if row["version"] is None:  # pragma: no cover - a published version is never deleted alone
            raise WorkflowNotFound(f"workflow {workflow_id!r} has no version {row['published_version']}")
        version = _version(row, row["doc"])
        if cached:
            launch.remember(url, version)
        return version

    async def get_version(self, tenant_id: str, workflow_id: str, version: int) -> WorkflowVersion:
        """One version with its document. Raises WorkflowNotFound (also for a missing version)."""
        stmt = (
            sa.select(*_VERSION_COLUMNS, docs.c.doc)
            .join(
                docs,
                sa.and_(docs.c.tenant_id == versions.c.tenant_id, docs.c.content_hash == versions.c.doc_hash),
            )
            .where(
                versions.c.tenant_id == tenant_id,
                versions.c.workflow_id == workflow_id,
                versions.c.version == version,
            )
        )
        async with self.store._tx() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise WorkflowNotFound(f"workflow {workflow_id!r} has no version {version}")
        return _version(row, row["doc"])


class SqlWorkflowSource:
    """The workflows a tenant's workflow tools run: saved and published ones (module
    docstring). Reads through ``workflows`` (a :class:`SqlWorkflowStore`, or any
    ``WorkflowRepo``) on every call, so a tool started after a publish runs the new
    version; one query for the published version, one for a pinned one."""

    def __init__(self, workflows: WorkflowRepo) -> None:
        self.workflows = workflows

    async def load(self, tenant_id: str, workflow_id: str, version: int | None = None) -> dict[str, Any]:
        """The document of the published version of the tenant's ``workflow_id``, or of
        ``version`` when given.

        Raises:
            WorkflowNotFound: no such workflow for this tenant (another tenant's included),
                none published, or no such version; the message says which and what to do.
        """
        try:
            found = (
                await self.workflows.published(tenant_id, workflow_id)
                if version is None
                else await self.workflows.get_version(tenant_id, workflow_id, version)
            )
        except WorkflowNotFound as exc:
            fix = "save and publish it in this tenant" if version is None else "pin a version it has, or none"
            raise WorkflowNotFound(f"{exc} ({fix})") from None
        if found is None:
            raise WorkflowNotFound(
                f"workflow {workflow_id!r} has no published version: publish it to use it as a tool"
            )
        if found.doc is None:  # pragma: no cover - both reads return the document
            raise WorkflowNotFound(f"workflow {workflow_id!r}: version {found.version} has no document")
        return dict(found.doc)
