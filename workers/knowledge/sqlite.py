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
tokenised search text (:mod:`workers.knowledge.text`), ranked by BM25.

The tables come from the Alembic migration; what Alembic's ``sqlite3`` can not be relied
on to make (the FTS5 table, external content over ``kb_chunks``, and the triggers that
keep it in step) is created here, idempotently, when the store opens. Every call runs on
one dedicated thread with one connection (WAL mode, a busy timeout: other processes, such
as RQ workers ingesting, write the same file); writes take the write lock first (``BEGIN
IMMEDIATE``), so a transaction never fails half-way on a lock upgrade. Full-text searches
are the exception: they read through a second, read-only connection on a thread of its
own, so a hybrid search's full-text pass runs beside its vector pass (it sees what the
first connection committed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import sqlean
import sqlite_vec

from engine.knowledge.ports import (
    DatasetExists,
    DatasetNotFound,
    DimensionMismatch,
    DocumentNotFound,
    ParsedDocument,
    ScoredChunk,
)
from engine.ports import StoreError
from schemas.knowledge import Chunk, ChunkDraft, Dataset, Document, IndexInfo, MetadataFilter
from workers.sql.connect import BUSY_TIMEOUT_MS

from .chunks import plan_chunks
from .filters import sqlite_filters
from .hnsw import EXACT_MAX_CELLS, VectorIndexes
from .rows import (
    UPDATABLE_DATASET_FIELDS,
    UPDATABLE_DOCUMENT_FIELDS,
    chunk_from_row,
    dataset_from_row,
    document_from_row,
    dumps,
    index_from_row,
    new_id,
    parsed_from_row,
    qa_json,
)
from .text import fts5_query, query_terms, rarest_terms, terms_text

__all__ = ["SqliteKnowledgeStore"]

T = TypeVar("T")

#: With metadata filters, memory is asked for this many times ``k`` before filtering;
#: fewer than ``k`` passing means the filter is selective: exact search instead.
FILTER_OVERSAMPLE = 8
#: How long the chunk counts of query terms are reused (seconds).
TERM_COUNTS_TTL_S = 10.0
#: Host parameters per statement (SQLite's default limit is 32766; stay well below).
_IN_BATCH = 900

_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_fts USING fts5("
    "search_terms, content='kb_chunks', content_rowid='seq', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_fts_insert AFTER INSERT ON kb_chunks "
    "WHEN new.kind != 'parent' AND new.search_terms IS NOT NULL BEGIN "
    "INSERT INTO kb_chunks_fts(rowid, search_terms) VALUES (new.seq, new.search_terms); END",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_fts_delete AFTER DELETE ON kb_chunks "
    "WHEN old.kind != 'parent' AND old.search_terms IS NOT NULL BEGIN "
    "INSERT INTO kb_chunks_fts(kb_chunks_fts, rowid, search_terms) VALUES ('delete', old.seq, old.search_terms); END",
)

_CHUNK_COLUMNS = (
    "c.id, c.tenant_id, c.dataset_id, c.document_id, c.position, c.kind, c.text, c.search_text, "
    "c.text_hash, c.heading_path, c.parent_id, c.tokens, d.source_name, d.metadata AS doc_metadata"
)
_CHUNKS_FROM = "kb_chunks c JOIN kb_documents d ON d.id = c.document_id"
#: what a search may return: not the chunks of a document whose ingestion failed (they may
#: be a part of it, or vectors of an older version); a document being ingested again stays
#: searchable, so a change of embedding model answers from the old index until the new is built
_SEARCHABLE = "d.status != 'failed'"

_DATASET_SELECT = (
    "SELECT s.*, (SELECT count(*) FROM kb_documents WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    "AS document_count, (SELECT count(*) FROM kb_chunks WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    "AS chunk_count FROM kb_datasets s"
)
_DATASET_SELECT_UNCOUNTED = "SELECT s.*, 0 AS document_count, 0 AS chunk_count FROM kb_datasets s"


def _blob(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class SqliteKnowledgeStore:
    """Knowledge bases in the SQLite file at ``path`` (module docstring). Create with
    :meth:`open`, after the schema is migrated."""

    vector_support = True

    def __init__(
        self, path: Path, *, exact_max_cells: int = EXACT_MAX_CELLS, index_directory: Path | None = None
    ):
        """``index_directory``: where HNSW graphs are saved for the next process to load
        (``FLOWLOOM_HOME/indexes``; None: every process builds its own)."""
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowloom-knowledge")
        self._conn: Any = None
        # full-text searches: a read-only connection on a thread of its own, so a hybrid
        # search's full-text pass runs beside its vector pass (WAL: readers do not block)
        self._reader_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="flowloom-knowledge-read"
        )
        self._reader: Any = None
        self._memory = VectorIndexes(exact_max_cells, index_directory)
        self._term_counts: dict[str, int] = {}  # term -> chunks holding it (see _full_text_terms)
        self._term_counts_at = 0.0

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

    # -------------------------------------------------------------------- plumbing

    def _connect(self) -> None:
        conn = sqlean.connect(
            str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlean.Row
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            f"busy_timeout={BUSY_TIMEOUT_MS}",
            "foreign_keys=ON",
        ):
            conn.execute(f"PRAGMA {pragma}")
        self._conn = conn
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kb_chunks'").fetchone() is None:
            raise StoreError(
                f"knowledge store {self.path}: the database is not migrated (no kb_chunks table)"
            )
        with self._write() as c:
            for statement in _SCHEMA:
                c.execute(statement)

    def _reader_conn(self) -> Any:
        """The full-text reader's connection (made on its thread at its first search)."""
        if self._reader is None:
            conn = sqlean.connect(
                str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlean.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            # each term's chunk count, for choosing a query's terms (this connection only)
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_chunks_terms USING "
                "fts5vocab(main, kb_chunks_fts, row)"
            )
            conn.execute("PRAGMA query_only=ON")  # it only reads from now on
            self._reader = conn
        return self._reader

    async def _read_call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_executor, lambda: self._guard(fn, *args))

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._guard(fn, *args, **kwargs))

    def _guard(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except sqlean.Error as error:
            raise StoreError(f"knowledge store {self.path}: {type(error).__name__}: {error}") from error

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

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

    # --------------------------------------------------------------------- indexes

    def _index_row(self, tenant_id: str, index_id: str) -> Any:
        row = self._conn.execute(
            "SELECT * FROM kb_indexes WHERE tenant_id = ? AND id = ?", (tenant_id, index_id)
        ).fetchone()
        if row is None:
            raise DatasetNotFound(f"index {index_id!r} not found")
        return row

    async def create_index(self, tenant_id: str, dataset_id: str, embedding_model: str) -> IndexInfo:
        """A new building index (the building one before it retired). Raises DatasetNotFound."""
        return await self._call(self._create_index, tenant_id, dataset_id, embedding_model)

    def _create_index(self, tenant_id: str, dataset_id: str, embedding_model: str) -> IndexInfo:
        index = IndexInfo(
            id=new_id(), embedding_model=embedding_model, state="building", created_at=time.time()
        )
        with self._write() as c:
            if (
                c.execute(
                    "SELECT 1 FROM kb_datasets WHERE tenant_id = ? AND id = ?", (tenant_id, dataset_id)
                ).fetchone()
                is None
            ):
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
            self._retire(c, tenant_id, dataset_id, "building")
            c.execute(
                "INSERT INTO kb_indexes (id, tenant_id, dataset_id, embedding_model, dimension, state, "
                "generation, created_at) VALUES (?, ?, ?, ?, NULL, 'building', 0, ?)",
                (index.id, tenant_id, dataset_id, embedding_model, index.created_at),
            )
        return index

    def _retire(self, c: Any, tenant_id: str, dataset_id: str, state: str, keep: str = "") -> None:
        old = [
            r[0]
            for r in c.execute(
                "SELECT id FROM kb_indexes WHERE tenant_id = ? AND dataset_id = ? AND state = ? AND id != ?",
                (tenant_id, dataset_id, state, keep),
            )
        ]
        for index_id in old:
            c.execute("DELETE FROM kb_vectors WHERE index_id = ?", (index_id,))
            c.execute("UPDATE kb_indexes SET state = 'retired' WHERE id = ?", (index_id,))
            self._memory.drop(index_id, files=True)

    async def set_index_dimension(self, tenant_id: str, index_id: str, dimension: int) -> None:
        """Record the index's dimension (once). Raises DatasetNotFound; DimensionMismatch
        when another dimension is recorded."""
        await self._call(self._set_dimension, tenant_id, index_id, dimension)

    def _set_dimension(self, tenant_id: str, index_id: str, dimension: int) -> None:
        if dimension < 1:
            raise StoreError(f"index {index_id!r}: dimension must be positive, got {dimension}")
        with self._write() as c:
            row = self._index_row(tenant_id, index_id)
            if row["dimension"] is None:
                c.execute("UPDATE kb_indexes SET dimension = ? WHERE id = ?", (dimension, index_id))
            elif row["dimension"] != dimension:
                raise DimensionMismatch(
                    f"index {index_id!r} holds {row['dimension']}-dimensional vectors, not {dimension}"
                )

    async def activate_index(self, tenant_id: str, dataset_id: str, index_id: str) -> None:
        """Make the index active; the previous active one retires with its vectors."""
        await self._call(self._activate, tenant_id, dataset_id, index_id)

    def _activate(self, tenant_id: str, dataset_id: str, index_id: str) -> None:
        with self._write() as c:
            row = self._index_row(tenant_id, index_id)
            if row["dataset_id"] != dataset_id or row["state"] == "retired":
                raise DatasetNotFound(f"index {index_id!r} of dataset {dataset_id!r} not found")
            self._retire(c, tenant_id, dataset_id, "active", keep=index_id)
            c.execute("UPDATE kb_indexes SET state = 'active' WHERE id = ?", (index_id,))

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
        return self._document_chunks(tenant_id, document_id)

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

    # --------------------------------------------------------------------- vectors

    async def put_vectors(
        self, tenant_id: str, index_id: str, vectors: Sequence[tuple[str, Sequence[float]]]
    ) -> int:
        """Store ``(chunk id, vector)`` pairs (chunks of the index's dataset only; a chunk's
        earlier vector is replaced); the number stored. Raises DatasetNotFound; DimensionMismatch."""
        return await self._call(self._put_vectors, tenant_id, index_id, list(vectors))

    def _put_vectors(self, tenant_id: str, index_id: str, vectors: list[tuple[str, Sequence[float]]]) -> int:
        if not vectors:
            return 0
        matrix = np.asarray([v for _, v in vectors], dtype=np.float32)
        if matrix.ndim != 2:
            raise DimensionMismatch(f"index {index_id!r}: vectors of different lengths in one batch")
        with self._write() as c:
            index = self._index_row(tenant_id, index_id)
            if index["state"] == "retired":
                raise DatasetNotFound(f"index {index_id!r} is retired")
            if index["dimension"] is None:
                c.execute("UPDATE kb_indexes SET dimension = ? WHERE id = ?", (matrix.shape[1], index_id))
            elif index["dimension"] != matrix.shape[1]:
                raise DimensionMismatch(
                    f"index {index_id!r} holds {index['dimension']}-dimensional vectors, "
                    f"not {matrix.shape[1]}"
                )
            ids = [chunk_id for chunk_id, _ in vectors]
            c.executemany(
                "DELETE FROM kb_vectors WHERE index_id = ? AND chunk_id = ?", [(index_id, i) for i in ids]
            )
            # INSERT ... SELECT: a chunk of another tenant or dataset is silently not stored
            latest = dict(zip(ids, matrix, strict=True))  # a chunk given twice: its last vector
            cur = c.executemany(
                "INSERT INTO kb_vectors (tenant_id, index_id, chunk_id, embedding) SELECT ?, ?, id, ? "
                "FROM kb_chunks WHERE id = ? AND tenant_id = ? AND dataset_id = ?",
                [
                    (tenant_id, index_id, row.tobytes(), chunk_id, tenant_id, index["dataset_id"])
                    for chunk_id, row in latest.items()
                ],
            )
            return max(0, cur.rowcount)

    async def search_vectors(
        self,
        tenant_id: str,
        index_id: str,
        vector: Sequence[float],
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` nearest chunks by cosine similarity (best first) passing ``filters``:
        in-memory indexes (:mod:`workers.knowledge.hnsw`), and exact search in SQL when a
        selective filter leaves fewer than ``k`` of their nearest.
        Raises DatasetNotFound; DimensionMismatch."""
        return await self._call(self._search_vectors, tenant_id, index_id, vector, k, list(filters))

    def _search_vectors(
        self, tenant_id: str, index_id: str, vector: Sequence[float], k: int, filters: list[MetadataFilter]
    ) -> list[ScoredChunk]:
        # the index and its newest vector in one statement: one snapshot, one round trip
        index = self._conn.execute(
            "SELECT i.*, (SELECT max(seq) FROM kb_vectors WHERE index_id = i.id) AS max_seq "
            "FROM kb_indexes i WHERE i.tenant_id = ? AND i.id = ?",
            (tenant_id, index_id),
        ).fetchone()
        if index is None:
            self._memory.drop(index_id, files=True)  # deleted, maybe by another process
            raise DatasetNotFound(f"index {index_id!r} not found")
        query = np.asarray(vector, dtype=np.float32)
        if index["state"] == "retired":
            self._memory.drop(index_id, files=True)  # retired, maybe by another process
            return []
        if k < 1 or index["dimension"] is None:
            return []
        if query.shape != (index["dimension"],):
            raise DimensionMismatch(
                f"index {index_id!r} holds {index['dimension']}-dimensional vectors, not {query.size}"
            )
        where, params = sqlite_filters(filters)
        if not self._memory.is_current(index_id, index["generation"], index["max_seq"]):
            self._memory.sync(self._conn, index_id, index["dimension"])
        wanted = k * FILTER_OVERSAMPLE if filters else k
        found = self._memory.search(index_id, query, wanted)
        hits = self._chunks_by_vector(tenant_id, found, where, params)
        if len(hits) >= k or len(found) < wanted:
            return hits[:k]
        return self.exact_search(tenant_id, index_id, query, k, where, params)

    def _chunks_by_vector(
        self, tenant_id: str, found: list[tuple[int, float]], where: str, params: list[Any]
    ) -> list[ScoredChunk]:
        if not found:
            return []
        distance = dict(found)
        keys = list(distance)
        rows = self._conn.execute(
            f"SELECT v.seq AS vector_seq, {_CHUNK_COLUMNS} FROM kb_vectors v JOIN kb_chunks c ON c.id = v.chunk_id "
            "JOIN kb_documents d ON d.id = c.document_id "
            f"WHERE v.seq IN ({', '.join('?' * len(keys))}) AND v.tenant_id = ? AND {_SEARCHABLE} AND {where}",
            (*keys, tenant_id, *params),
        ).fetchall()
        hits = [ScoredChunk(chunk_from_row(r), 1.0 - distance[r["vector_seq"]]) for r in rows]
        hits.sort(key=lambda h: -h.score)
        return hits

    def exact_search(
        self,
        tenant_id: str,
        index_id: str,
        query: np.ndarray,
        k: int,
        where: str = "1",
        params: Sequence[Any] = (),
    ) -> list[ScoredChunk]:
        """Exact cosine search with sqlite-vec over the index's stored vectors (on the
        store's thread: call through the store's own methods)."""
        rows = self._conn.execute(
            f"SELECT vec_distance_cosine(v.embedding, ?) AS distance, {_CHUNK_COLUMNS} FROM kb_vectors v "
            "JOIN kb_chunks c ON c.id = v.chunk_id JOIN kb_documents d ON d.id = c.document_id "
            f"WHERE v.index_id = ? AND v.tenant_id = ? AND {_SEARCHABLE} AND {where} "
            "ORDER BY distance LIMIT ?",
            (query.tobytes(), index_id, tenant_id, *params, k),
        )
        return [ScoredChunk(chunk_from_row(r), 1.0 - r["distance"]) for r in rows]

    async def exact_search_vectors(
        self, tenant_id: str, index_id: str, vector: Sequence[float], k: int
    ) -> list[ScoredChunk]:
        """Exact search without the graph (what the graph's answers are checked against)."""
        query = np.asarray(vector, dtype=np.float32)
        return await self._call(lambda: self.exact_search(tenant_id, index_id, query, k))

    # ------------------------------------------------------------------- full text

    async def search_full_text(
        self,
        tenant_id: str,
        dataset_ids: Sequence[str],
        query: str,
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks of the tenant's datasets by BM25 over the query's terms
        (:mod:`workers.knowledge.text`), scored ``b / (1 + b)`` for BM25 ``b`` (in [0, 1),
        higher is better)."""
        return await self._read_call(
            self._search_full_text, tenant_id, list(dataset_ids), query, k, list(filters)
        )

    def _search_full_text(
        self, tenant_id: str, dataset_ids: list[str], query: str, k: int, filters: list[MetadataFilter]
    ) -> list[ScoredChunk]:
        conn = self._reader_conn()
        match = fts5_query(self._full_text_terms(conn, query))
        if match is None or not dataset_ids or k < 1:
            return []
        where, params = sqlite_filters(filters)
        scope = (
            f"c.tenant_id = ? AND c.dataset_id IN ({', '.join('?' * len(dataset_ids))}) AND {_SEARCHABLE} "
            f"AND {where}",
            (tenant_id, *dataset_ids, *params),
        )
        # BM25 first, over the full-text table alone; the scope is checked on the best
        # ``pool`` rows (most searches: one tenant's dataset is most of the file). Fewer
        # than ``k`` in scope out of a full pool: rank every match in scope instead.
        # (``bm25()`` ordered by SQLite's sorter, not FTS5's ``ORDER BY rank``: the same
        # scores, a third less time, since FTS5 sorts by rank through a nested statement)
        pool = max(4 * k, 100)
        rows = conn.execute(
            f"SELECT f.score AS rank, {_CHUNK_COLUMNS} FROM (SELECT rowid, bm25(kb_chunks_fts) AS score FROM "
            f"kb_chunks_fts WHERE kb_chunks_fts MATCH ? ORDER BY score LIMIT ?) f JOIN kb_chunks c ON c.seq = "
            f"f.rowid JOIN kb_documents d ON d.id = c.document_id WHERE {scope[0]} ORDER BY f.score LIMIT ?",
            (match, pool, *scope[1], k),
        ).fetchall()
        if (
            len(rows) < k
            and conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ? LIMIT ?)",
                (match, pool),
            ).fetchone()[0]
            >= pool
        ):
            rows = conn.execute(
                f"SELECT bm25(kb_chunks_fts) AS rank, {_CHUNK_COLUMNS} FROM kb_chunks_fts JOIN kb_chunks c "
                "ON c.seq = kb_chunks_fts.rowid JOIN kb_documents d ON d.id = c.document_id "
                f"WHERE kb_chunks_fts MATCH ? AND {scope[0]} ORDER BY rank LIMIT ?",
                (match, *scope[1], k),
            ).fetchall()
        hits = []
        for row in rows:
            strength = max(0.0, -row["rank"])
            hits.append(ScoredChunk(chunk_from_row(row), strength / (1.0 + strength)))
        return hits

    def _full_text_terms(self, conn: Any, query: str) -> list[str]:
        """The query's terms found in the index, rarest first, within the postings budget
        (:func:`workers.knowledge.text.rarest_terms`), by chunk counts from FTS5's
        vocabulary, kept for :data:`TERM_COUNTS_TTL_S` (a term's count changes slowly, and
        only chooses which terms are ranked)."""
        now = time.monotonic()
        if now - self._term_counts_at > TERM_COUNTS_TTL_S or len(self._term_counts) > 100_000:
            self._term_counts, self._term_counts_at = {}, now
        counts: dict[str, float] = {}
        for term in query_terms(query):
            count = self._term_counts.get(term)
            if count is None:
                row = conn.execute("SELECT doc FROM temp.kb_chunks_terms WHERE term = ?", (term,)).fetchone()
                count = row[0] if row is not None else 0
                if count:  # a term no chunk holds yet is asked again: it may be added any time
                    self._term_counts[term] = count
            counts[term] = count
        return rarest_terms(counts)
