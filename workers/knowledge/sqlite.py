"""The embedded knowledge store: a SQLite file through ``sqlean``.

Which file: the store works on any migrated SQLite file. In a process that also runs the
run store (the interpreter's ``sqlite3``), give it a file of its own
(``api.composition.knowledge_database_url``): two copies of the SQLite library in one process
do not see each other's POSIX locks, so sharing a file between them can lose writes.

The interpreter's ``sqlite3`` cannot load extensions, so this store opens its own
connection with ``sqlean`` and loads ``sqlite-vec``, whose distance functions compute
exact cosine distances over the float32 BLOBs of ``kb_vectors`` (exact search, used for
small indexes and selective metadata filters); larger searches go through an in-memory
HNSW graph (:mod:`workers.knowledge.hnsw`). Full text is an FTS5 table over the chunks'
tokenised search text (:mod:`workers.knowledge.text`), ranked by BM25; the same ranking,
to the bit, is answered from an in-memory inverted index once one is built and current
(:mod:`workers.knowledge.bm25`).

The tables come from the Alembic migration; what Alembic's ``sqlite3`` can not be relied
on to make (the FTS5 table, external content over ``kb_chunks``, and the triggers that
keep it in step) is created here, idempotently, when the store opens. Every call runs on
one dedicated thread with one connection (WAL mode, a busy timeout: other processes, such
as RQ workers ingesting, write the same file); writes take the write lock first (``BEGIN
IMMEDIATE``), so a transaction never fails half-way on a lock upgrade. Full-text searches
are the exception: they read through a second, read-only connection on a thread of its
own, so a hybrid search's full-text pass runs beside its vector pass (it sees what the
first connection committed).

The store's parts: datasets, documents and chunks here; indexes and vectors in
:mod:`workers.knowledge.sqlite_vectors`; full text in
:mod:`workers.knowledge.sqlite_full_text`; connections and the FTS5 schema in
:mod:`workers.knowledge.sqlite_base`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlean

from engine.knowledge.ports import (
    ChunkToEmbed,
    DatasetExists,
    DatasetNotFound,
    DocumentNotFound,
    ParsedDocument,
)
from engine.ports import StoreError
from schemas.knowledge import Chunk, ChunkDraft, Dataset, Document, IndexInfo

from .chunks import ChunkPlan, chunks_to_embed, pass_progress, plan_chunks
from .rows import (
    UPDATABLE_DATASET_FIELDS,
    UPDATABLE_DOCUMENT_FIELDS,
    chunk_from_row,
    dataset_from_row,
    document_from_row,
    dumps,
    index_from_row,
    parsed_from_row,
    qa_json,
)
from .sqlite_base import _CHUNK_COLUMNS, _CHUNKS_FROM
from .sqlite_full_text import SqliteFullText
from .sqlite_vectors import SqliteVectors
from .text import terms_text

__all__ = ["SqliteKnowledgeStore"]

#: Host parameters per statement (SQLite's default limit is 32766; stay well below).
_IN_BATCH = 900

_DATASET_SELECT = (
    "SELECT s.*, (SELECT count(*) FROM kb_documents WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    "AS document_count, (SELECT count(*) FROM kb_chunks WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    "AS chunk_count FROM kb_datasets s"
)
_DATASET_SELECT_UNCOUNTED = "SELECT s.*, 0 AS document_count, 0 AS chunk_count FROM kb_datasets s"


class SqliteKnowledgeStore(SqliteVectors, SqliteFullText):
    """Knowledge bases in the SQLite file at ``path`` (module docstring). Create with
    :meth:`open`, after the schema is migrated."""

    vector_support = True

    @classmethod
    async def open(cls, path: Path, **options: Any) -> SqliteKnowledgeStore:
        """A store on the (migrated) SQLite file ``path``; creates the full-text table. Raises StoreError."""
        store = cls(path, **options)
        try:
            await store._call(store._connect)
        except BaseException:
            store._executor.shutdown(wait=False)
            store._reader_executor.shutdown(wait=False)
            raise
        return store

    async def close(self) -> None:
        """Save the graphs grown since their last save, close the connection, forget the
        in-memory graphs and stop the thread."""

        def _close() -> None:
            self._memory.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        def _close_reader() -> None:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

        if self._conn is not None:
            await self._call(_close)
        self._executor.shutdown(wait=True)
        await asyncio.get_running_loop().run_in_executor(None, self._full_text.close)
        if self._reader is not None:  # closed once (close may be called again)
            await asyncio.get_running_loop().run_in_executor(self._reader_executor, _close_reader)
        self._reader_executor.shutdown(wait=True)

    # -------------------------------------------------------------------- datasets

    async def create_dataset(self, dataset: Dataset) -> Dataset:
        """Insert ``dataset``. Raises DatasetExists."""
        return await self._call(self._create_dataset, dataset)

    def _create_dataset(self, ds: Dataset) -> Dataset:
        now = time.time()
        try:
            with self._write() as c:
                c.execute(
                    "INSERT INTO kb_datasets (tenant_id, id, name, description, embedding_model, chunking, "
                    "metadata_fields, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        ds.tenant_id,
                        ds.id,
                        ds.name,
                        ds.description,
                        ds.embedding_model,
                        dumps(ds.chunking),
                        dumps(ds.metadata_fields),
                        ds.created_at or now,
                        ds.updated_at or now,
                    ),
                )
        except sqlean.IntegrityError:
            raise DatasetExists(f"dataset {ds.id!r} already exists") from None
        return self._get_dataset(ds.tenant_id, ds.id)

    async def list_datasets(self, tenant_id: str) -> list[Dataset]:
        """The tenant's datasets by name, with counts and indexes."""
        return await self._call(self._list_datasets, tenant_id)

    def _list_datasets(
        self, tenant_id: str, dataset_id: str | None = None, counts: bool = True
    ) -> list[Dataset]:
        where, params = "s.tenant_id = ?", [tenant_id]
        index_where, index_params = "tenant_id = ?", [tenant_id]
        if dataset_id is not None:
            where, params = where + " AND s.id = ?", params + [dataset_id]
            index_where, index_params = index_where + " AND dataset_id = ?", index_params + [dataset_id]
        select = _DATASET_SELECT if counts else _DATASET_SELECT_UNCOUNTED
        rows = self._conn.execute(f"{select} WHERE {where} ORDER BY s.name, s.id", params).fetchall()
        indexes: dict[str, list[IndexInfo]] = {}
        for row in self._conn.execute(
            f"SELECT * FROM kb_indexes WHERE {index_where} AND state != 'retired'", index_params
        ):
            indexes.setdefault(row["dataset_id"], []).append(index_from_row(row))
        return [dataset_from_row(row, indexes.get(row["id"], [])) for row in rows]

    async def get_dataset(self, tenant_id: str, dataset_id: str, *, counts: bool = True) -> Dataset:
        """Raises DatasetNotFound (``counts``: see the port)."""
        return await self._call(self._get_dataset, tenant_id, dataset_id, counts)

    def _get_dataset(self, tenant_id: str, dataset_id: str, counts: bool = True) -> Dataset:
        found = self._list_datasets(tenant_id, dataset_id, counts)
        if not found:
            raise DatasetNotFound(f"dataset {dataset_id!r} not found")
        return found[0]

    async def update_dataset(self, tenant_id: str, dataset_id: str, changes: dict[str, Any]) -> Dataset:
        """Set the given fields. Raises DatasetNotFound; StoreError for another field."""
        return await self._call(self._update_dataset, tenant_id, dataset_id, changes)

    def _update_dataset(self, tenant_id: str, dataset_id: str, changes: dict[str, Any]) -> Dataset:
        unknown = set(changes) - UPDATABLE_DATASET_FIELDS
        if unknown:
            raise StoreError(f"dataset fields that can not be updated: {', '.join(sorted(unknown))}")
        values = {k: dumps(v) if k in ("chunking", "metadata_fields") else v for k, v in changes.items()}
        sets = "".join(f", {name} = ?" for name in values)
        with self._write() as c:
            cur = c.execute(
                f"UPDATE kb_datasets SET updated_at = ?{sets} WHERE tenant_id = ? AND id = ?",
                (time.time(), *values.values(), tenant_id, dataset_id),
            )
            if cur.rowcount == 0:
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
        return self._get_dataset(tenant_id, dataset_id)

    async def delete_dataset(self, tenant_id: str, dataset_id: str) -> None:
        """Delete the dataset and everything in it. Raises DatasetNotFound."""
        await self._call(self._delete_dataset, tenant_id, dataset_id)

    def _delete_dataset(self, tenant_id: str, dataset_id: str) -> None:
        with self._write() as c:
            index_ids = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM kb_indexes WHERE tenant_id = ? AND dataset_id = ?",
                    (tenant_id, dataset_id),
                )
            ]
            # vectors first, by index: their cascade from chunks would bump counters row by row
            c.executemany("DELETE FROM kb_vectors WHERE index_id = ?", [(i,) for i in index_ids])
            if (
                c.execute(
                    "DELETE FROM kb_datasets WHERE tenant_id = ? AND id = ?", (tenant_id, dataset_id)
                ).rowcount
                == 0
            ):
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
        for index_id in index_ids:
            self._memory.drop(index_id, files=True)

    # ------------------------------------------------------------------- documents

    def _document_row(self, tenant_id: str, document_id: str) -> Any:
        row = self._conn.execute(
            "SELECT * FROM kb_documents WHERE tenant_id = ? AND id = ?", (tenant_id, document_id)
        ).fetchone()
        if row is None:
            raise DocumentNotFound(f"document {document_id!r} not found")
        return row

    async def put_document(
        self, document: Document, content: ParsedDocument | None = None
    ) -> tuple[Document, bool]:
        """Add the document, or keep/update the one with its source name (see the port)."""
        return await self._call(self._put_document, document, content)

    def _put_document(self, doc: Document, content: ParsedDocument | None = None) -> tuple[Document, bool]:
        now = time.time()
        with self._write() as c:
            if (
                c.execute(
                    "SELECT 1 FROM kb_datasets WHERE tenant_id = ? AND id = ?",
                    (doc.tenant_id, doc.dataset_id),
                ).fetchone()
                is None
            ):
                raise DatasetNotFound(f"dataset {doc.dataset_id!r} not found")
            old = c.execute(
                "SELECT * FROM kb_documents WHERE tenant_id = ? AND dataset_id = ? AND source_name = ?",
                (doc.tenant_id, doc.dataset_id, doc.source_name),
            ).fetchone()
            if old is not None and old["content_hash"] == doc.content_hash:
                return document_from_row(old), False
            if old is not None:
                c.execute(
                    "UPDATE kb_documents SET content_hash = ?, size_bytes = ?, content_type = ?, metadata = ?, "
                    "status = 'queued', error = NULL, chunks_done = 0, updated_at = ? WHERE id = ?",
                    (doc.content_hash, doc.size_bytes, doc.content_type, dumps(doc.metadata), now, old["id"]),
                )
                document_id = old["id"]
            else:
                c.execute(
                    "INSERT INTO kb_documents (id, tenant_id, dataset_id, source_name, content_type, "
                    "content_hash, size_bytes, status, error, chunk_count, chunks_done, metadata, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.id,
                        doc.tenant_id,
                        doc.dataset_id,
                        doc.source_name,
                        doc.content_type,
                        doc.content_hash,
                        doc.size_bytes,
                        str(doc.status),
                        doc.error,
                        doc.chunk_count,
                        doc.chunks_done,
                        dumps(doc.metadata),
                        doc.created_at or now,
                        now,
                    ),
                )
                document_id = doc.id
            if content is not None:
                self._save_content(doc.tenant_id, document_id, content, c)
            return document_from_row(self._document_row(doc.tenant_id, document_id)), True

    async def save_content(self, tenant_id: str, document_id: str, parsed: ParsedDocument) -> None:
        """Keep the parsed text. Raises DocumentNotFound."""
        await self._call(self._save_content, tenant_id, document_id, parsed)

    def _save_content(
        self, tenant_id: str, document_id: str, parsed: ParsedDocument, within: Any = None
    ) -> None:
        """Keep the parsed text, in the transaction of ``within`` (a connection) or its own."""
        with contextlib.nullcontext(within) if within is not None else self._write() as c:
            if (
                c.execute(
                    "UPDATE kb_documents SET parsed_type = ?, parsed_text = ?, parsed_qa = ? "
                    "WHERE tenant_id = ? AND id = ?",
                    (parsed.content_type, parsed.text, qa_json(parsed), tenant_id, document_id),
                ).rowcount
                == 0
            ):
                raise DocumentNotFound(f"document {document_id!r} not found")

    async def load_content(self, tenant_id: str, document_id: str) -> ParsedDocument:
        """The parsed text kept. Raises DocumentNotFound."""
        return await self._call(lambda: parsed_from_row(self._document_row(tenant_id, document_id)))

    async def get_document(self, tenant_id: str, document_id: str) -> Document:
        """Raises DocumentNotFound."""
        return await self._call(lambda: document_from_row(self._document_row(tenant_id, document_id)))

    async def start_pass(self, tenant_id: str, document_id: str) -> tuple[Document, Dataset, ParsedDocument]:
        """The document, its dataset and parsed text; the document set to ``parsing`` (see the port)."""

        def run() -> tuple[Document, Dataset, ParsedDocument]:
            with self._write() as c:
                row = self._document_row(tenant_id, document_id)
                dataset = self._get_dataset(tenant_id, row["dataset_id"], False)
                c.execute(
                    "UPDATE kb_documents SET status = 'parsing', error = NULL, updated_at = ? WHERE id = ?",
                    (time.time(), document_id),
                )
            return document_from_row(row), dataset, parsed_from_row(row)

        return await self._call(run)

    async def finish_document(
        self, tenant_id: str, document_id: str, *, content_hash: str, chunk_count: int, owner_id: str
    ) -> Document | None:
        """``ready`` and the lease released when the content hash is still ``content_hash`` (see the port)."""

        def run() -> Document | None:
            with self._write() as c:
                if self._document_row(tenant_id, document_id)["content_hash"] != content_hash:
                    return None
                c.execute(
                    "UPDATE kb_documents SET status = 'ready', error = NULL, chunk_count = ?, chunks_done = ?, "
                    "updated_at = ?, lease_owner = CASE WHEN lease_owner = ? THEN NULL ELSE lease_owner END, "
                    "lease_until = CASE WHEN lease_owner = ? THEN NULL ELSE lease_until END WHERE id = ?",
                    (chunk_count, chunk_count, time.time(), owner_id, owner_id, document_id),
                )
                return document_from_row(self._document_row(tenant_id, document_id))

        return await self._call(run)

    async def list_documents(self, tenant_id: str, dataset_id: str, *, limit: int = 1000) -> list[Document]:
        """The dataset's documents, oldest first. Raises DatasetNotFound."""

        def run() -> list[Document]:
            self._get_dataset(tenant_id, dataset_id)
            rows = self._conn.execute(
                "SELECT * FROM kb_documents WHERE tenant_id = ? AND dataset_id = ? "
                "ORDER BY created_at, id LIMIT ?",
                (tenant_id, dataset_id, limit),
            )
            return [document_from_row(r) for r in rows]

        return await self._call(run)

    async def update_document(self, tenant_id: str, document_id: str, **fields: Any) -> Document:
        """Set status, error, chunk counts or metadata. Raises DocumentNotFound."""
        return await self._call(self._update_document, tenant_id, document_id, fields)

    def _update_document(self, tenant_id: str, document_id: str, fields: dict[str, Any]) -> Document:
        unknown = set(fields) - UPDATABLE_DOCUMENT_FIELDS
        if unknown:
            raise StoreError(f"document fields that can not be updated: {', '.join(sorted(unknown))}")
        values = {
            k: dumps(v) if k == "metadata" else (str(v) if k == "status" else v) for k, v in fields.items()
        }
        sets = "".join(f", {name} = ?" for name in values)
        with self._write() as c:
            if (
                c.execute(
                    f"UPDATE kb_documents SET updated_at = ?{sets} WHERE tenant_id = ? AND id = ?",
                    (time.time(), *values.values(), tenant_id, document_id),
                ).rowcount
                == 0
            ):
                raise DocumentNotFound(f"document {document_id!r} not found")
        return document_from_row(self._document_row(tenant_id, document_id))

    async def delete_document(self, tenant_id: str, document_id: str) -> None:
        """Delete the document with its chunks and vectors. Raises DocumentNotFound."""

        def run() -> None:
            with self._write() as c:
                if (
                    c.execute(
                        "DELETE FROM kb_documents WHERE tenant_id = ? AND id = ?", (tenant_id, document_id)
                    ).rowcount
                    == 0
                ):
                    raise DocumentNotFound(f"document {document_id!r} not found")

        await self._call(run)

    async def claim_document(
        self, tenant_id: str, document_id: str, owner_id: str, lease_until: float
    ) -> bool:
        """Take the document's lease when free, expired or already ours. Raises DocumentNotFound."""

        def run() -> bool:
            with self._write() as c:
                cur = c.execute(
                    "UPDATE kb_documents SET lease_owner = ?, lease_until = ? WHERE tenant_id = ? "
                    "AND id = ? AND (lease_owner IS NULL OR lease_until < ? OR lease_owner = ?)",
                    (owner_id, lease_until, tenant_id, document_id, time.time(), owner_id),
                )
                if cur.rowcount == 0:
                    self._document_row(tenant_id, document_id)
                return cur.rowcount == 1

        return await self._call(run)

    async def release_document(self, tenant_id: str, document_id: str, owner_id: str) -> None:
        """Give the lease up (nothing when ``owner_id`` does not hold it)."""

        def run() -> None:
            with self._write() as c:
                c.execute(
                    "UPDATE kb_documents SET lease_owner = NULL, lease_until = NULL WHERE tenant_id = ? "
                    "AND id = ? AND lease_owner = ?",
                    (tenant_id, document_id, owner_id),
                )

        await self._call(run)

    async def unfinished_documents(self, *, limit: int = 100) -> list[Document]:
        """Documents of any tenant not ready or failed, whose lease expired or was never taken."""

        def run() -> list[Document]:
            rows = self._conn.execute(
                "SELECT * FROM kb_documents WHERE status NOT IN ('ready', 'failed') AND "
                "(lease_owner IS NULL OR lease_until < ?) ORDER BY updated_at, id LIMIT ?",
                (time.time(), limit),
            )
            return [document_from_row(r) for r in rows]

        return await self._call(run)

    # ---------------------------------------------------------------------- chunks

    async def replace_chunks(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft]
    ) -> list[Chunk]:
        """Make ``drafts`` the document's chunks, keeping unchanged ones (see the port)."""
        return await self._call(self._replace_chunks, tenant_id, document_id, list(drafts))

    def _replace_chunks(self, tenant_id: str, document_id: str, drafts: list[ChunkDraft]) -> list[Chunk]:
        with self._write() as c:
            self._write_chunks(c, tenant_id, document_id, drafts)
        return self._document_chunks(tenant_id, document_id)

    def _write_chunks(self, c: Any, tenant_id: str, document_id: str, drafts: list[ChunkDraft]) -> ChunkPlan:
        """Make ``drafts`` the document's chunks in the caller's write transaction; the plan
        it wrote. Raises DocumentNotFound."""
        doc = self._document_row(tenant_id, document_id)
        stored = c.execute(
            "SELECT id, text_hash, kind FROM kb_chunks WHERE document_id = ? ORDER BY position",
            (document_id,),
        ).fetchall()
        plan = plan_chunks(
            stored,
            drafts,
            tenant_id=tenant_id,
            dataset_id=doc["dataset_id"],
            document_id=document_id,
            search_terms=terms_text,
        )
        if plan.inserts:
            self._ensure_full_text(c, tenant_id)  # its triggers index the new chunks
        c.executemany("DELETE FROM kb_chunks WHERE id = ?", [(i,) for i in plan.dropped])
        c.executemany(
            "UPDATE kb_chunks SET position = ?, text = ?, heading_path = ?, parent_id = ?, "
            "tokens = ? WHERE id = ?",
            plan.updates,
        )
        c.executemany(
            "INSERT INTO kb_chunks (id, tenant_id, dataset_id, document_id, kind, search_text, "
            "text_hash, search_terms, position, text, heading_path, parent_id, tokens) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            plan.inserts,
        )
        return plan

    async def replace_chunks_for_pass(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft], index_ids: Sequence[str]
    ) -> dict[str, list[ChunkToEmbed]]:
        """The chunks written and, per index, those to embed; progress set (see the port)."""
        return await self._call(
            self._replace_chunks_for_pass, tenant_id, document_id, list(drafts), list(index_ids)
        )

    def _replace_chunks_for_pass(
        self, tenant_id: str, document_id: str, drafts: list[ChunkDraft], index_ids: list[str]
    ) -> dict[str, list[ChunkToEmbed]]:
        with self._write() as c:
            plan = self._write_chunks(c, tenant_id, document_id, drafts)
            vectors: list[tuple[str, str]] = []
            if plan.updates:  # only kept chunks can have vectors: new ones have new ids
                for index_id in index_ids:
                    vectors += c.execute(
                        "SELECT v.index_id, v.chunk_id FROM kb_chunks c JOIN kb_vectors v ON "
                        "v.chunk_id = c.id AND v.index_id = ? WHERE c.tenant_id = ? AND c.document_id = ?",
                        (index_id, tenant_id, document_id),
                    ).fetchall()
            pending = chunks_to_embed(drafts, plan, index_ids, ((r[0], r[1]) for r in vectors))
            if index_ids:
                count, done = pass_progress(drafts, pending, index_ids)
                c.execute(
                    "UPDATE kb_documents SET status = 'embedding', chunk_count = ?, chunks_done = ?, "
                    "updated_at = ? WHERE tenant_id = ? AND id = ?",
                    (count, done, time.time(), tenant_id, document_id),
                )
        return pending

    def _document_chunks(self, tenant_id: str, document_id: str) -> list[Chunk]:
        rows = self._conn.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM {_CHUNKS_FROM} WHERE c.tenant_id = ? AND "
            "c.document_id = ? ORDER BY c.position",
            (tenant_id, document_id),
        )
        return [chunk_from_row(r) for r in rows]

    async def get_chunks(self, tenant_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The tenant's chunks with those ids, in the order asked (missing ones left out)."""
        return await self._call(self._get_chunks, tenant_id, list(chunk_ids))

    def _get_chunks(self, tenant_id: str, chunk_ids: list[str]) -> list[Chunk]:
        found: dict[str, Chunk] = {}
        for start in range(0, len(chunk_ids), _IN_BATCH):
            part = chunk_ids[start : start + _IN_BATCH]
            for row in self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM {_CHUNKS_FROM} WHERE c.tenant_id = ? "
                f"AND c.id IN ({', '.join('?' * len(part))})",
                (tenant_id, *part),
            ):
                found[row["id"]] = chunk_from_row(row)
        return [found[i] for i in dict.fromkeys(chunk_ids) if i in found]

    async def document_chunks(
        self, tenant_id: str, document_id: str, *, offset: int = 0, limit: int = 50
    ) -> tuple[list[Chunk], int]:
        """A page of the document's chunks in position order, and their total."""

        def run() -> tuple[list[Chunk], int]:
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM {_CHUNKS_FROM} WHERE c.tenant_id = ? AND "
                "c.document_id = ? ORDER BY c.position LIMIT ? OFFSET ?",
                (tenant_id, document_id, limit, offset),
            ).fetchall()
            total = self._conn.execute(
                "SELECT count(*) FROM kb_chunks WHERE tenant_id = ? AND document_id = ?",
                (tenant_id, document_id),
            ).fetchone()[0]
            return [chunk_from_row(r) for r in rows], int(total)

        return await self._call(run)

    async def chunks_without_vector(
        self, tenant_id: str, index_id: str, document_id: str | None = None, *, limit: int = 1000
    ) -> list[Chunk]:
        """Searchable chunks of the index's dataset (or one document) with no vector in it yet."""

        def run() -> list[Chunk]:
            index = self._index_row(tenant_id, index_id)
            where, params = "", [index_id, tenant_id, index["dataset_id"]]
            if document_id is not None:
                where, params = " AND c.document_id = ?", params + [document_id]
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM {_CHUNKS_FROM} LEFT JOIN kb_vectors v ON v.chunk_id = c.id AND "
                f"v.index_id = ? WHERE c.tenant_id = ? AND c.dataset_id = ? AND c.kind != 'parent' AND "
                f"v.seq IS NULL{where} ORDER BY c.document_id, c.position LIMIT ?",
                (*params, limit),
            )
            return [chunk_from_row(r) for r in rows]

        return await self._call(run)
