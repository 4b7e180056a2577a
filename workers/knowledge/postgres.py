"""The knowledge store on PostgreSQL: ``tsvector`` full text, and pgvector when the
server has it.

Full text: each chunk's ``search_vector`` is a ``tsvector`` built from the terms of
:mod:`workers.knowledge.text` (with positions, no stemming), searched with a GIN index
and ranked by ``ts_rank_cd`` (normalised to ``r / (1 + r)``), so matches are the same as
on SQLite, CJK included.

Vectors: ``kb_vectors.embedding`` is a ``vector`` column without a fixed dimension (each
index has its own); on an index's first search, a partial HNSW index over ``embedding::vector(N)``
(``vector_cosine_ops``) is created for that index id alone (built once over the vectors
ingested by then, instead of updated per insert during the first ingestion), and
nearest-neighbour queries order by that same expression, with the index id as a literal
so the planner can use the partial index. A search with metadata filters is exact (the
HNSW scan of this pgvector filters after the scan and would return fewer than ``k``).

Without the ``vector`` extension the store still serves full-text datasets;
``vector_support`` is False and the vector methods raise VectorSearchUnavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import numpy as np
from sqlalchemy.engine import URL

from engine.knowledge.ports import (
    DatasetExists,
    DatasetNotFound,
    DimensionMismatch,
    DocumentNotFound,
    ParsedDocument,
    ScoredChunk,
    VectorSearchUnavailable,
)
from engine.ports import StoreError
from schemas.knowledge import Chunk, ChunkDraft, Dataset, Document, IndexInfo, MetadataFilter
from workers.sql.connect import mask_url

from .chunks import plan_chunks
from .filters import postgres_filters
from .rows import (
    UPDATABLE_DATASET_FIELDS,
    UPDATABLE_DOCUMENT_FIELDS,
    check_index_id,
    chunk_from_row,
    dataset_from_row,
    document_from_row,
    dumps,
    index_from_row,
    loads,
    new_id,
    parsed_from_row,
    qa_json,
)
from .text import query_terms, rarest_terms, tsquery_literal, tsvector_literal

__all__ = ["PostgresKnowledgeStore", "nearest_query", "nearest_settings"]

#: a connection as the pool lends it (a proxy with the connection's methods)
_Conn = asyncpg.pool.PoolConnectionProxy

_CHUNK_COLUMNS = (
    "c.id, c.tenant_id, c.dataset_id, c.document_id, c.position, c.kind, c.text, c.search_text, "
    "c.text_hash, c.heading_path, c.parent_id, c.tokens, d.source_name, d.metadata AS doc_metadata"
)
#: what a search may return: not the chunks of a document whose ingestion failed (they may
#: be a part of it, or vectors of an older version); a document being ingested again stays
#: searchable, so a change of embedding model answers from the old index until the new is built
_SEARCHABLE = "d.status <> 'failed'"
#: exact nearest chunks ($1 vector, $2 index, $3 tenant, $4 k): when the graph's nearest
#: held fewer than k searchable chunks
_EXACT_NEAREST = (
    f"SELECT v.embedding <=> $1 AS distance, {_CHUNK_COLUMNS} FROM kb_vectors v JOIN kb_chunks c "
    "ON c.id = v.chunk_id JOIN kb_documents d ON d.id = c.document_id WHERE v.index_id = $2 AND "
    f"v.tenant_id = $3 AND {_SEARCHABLE} ORDER BY distance LIMIT $4"
)
#: a dataset with its live indexes (as JSON) in one statement: one snapshot, one round trip
_DATASET_INDEXES = (
    "(SELECT coalesce(json_agg(json_build_object('id', i.id, 'embedding_model', i.embedding_model, 'dimension', "
    "i.dimension, 'state', i.state, 'created_at', i.created_at)), '[]') FROM kb_indexes i WHERE i.tenant_id = "
    "s.tenant_id AND i.dataset_id = s.id AND i.state != 'retired') AS indexes"
)
_DATASET_SELECT = (
    "SELECT s.*, (SELECT count(*) FROM kb_documents WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    "AS document_count, (SELECT count(*) FROM kb_chunks WHERE tenant_id = s.tenant_id AND dataset_id = s.id) "
    f"AS chunk_count, {_DATASET_INDEXES} FROM kb_datasets s"
)
_DATASET_SELECT_UNCOUNTED = (
    f"SELECT s.*, 0 AS document_count, 0 AS chunk_count, {_DATASET_INDEXES} FROM kb_datasets s"
)
#: per-connection scratch tables that chunks and vectors are COPYed into (made once per
#: connection; emptied by every commit)
_CHUNKS_IN = (
    "CREATE TEMP TABLE IF NOT EXISTS kb_chunks_in (id text, tenant_id text, dataset_id text, "
    "document_id text, kind text, search_text text, text_hash text, search_vector text, "
    "position integer, text text, heading_path text, parent_id text, tokens integer) "
    "ON COMMIT DELETE ROWS"
)
_VECTORS_IN = (
    "CREATE TEMP TABLE IF NOT EXISTS kb_vectors_in (chunk_id text, embedding vector) ON COMMIT DELETE ROWS"
)


def _hnsw_name(index_id: str) -> str:
    return f"kb_vectors_hnsw_{index_id}"


class PostgresKnowledgeStore:
    """Knowledge bases in a (migrated) PostgreSQL database (module docstring). Create with :meth:`open`."""

    def __init__(self, pool: asyncpg.Pool, url: URL, vector_support: bool):
        self._pool, self._url, self.vector_support = pool, url, vector_support
        self._hnsw_ready: set[str] = set()  # index ids whose HNSW index exists
        self._dimensions: dict[str, int] = {}  # index id -> its dimension (set once, never changed)
        self._lexemes: tuple[float, float, dict[str, float], float] | None = (
            None  # (read at, rows, freqs, floor)
        )
        self._analyzed_at = 0.0
        self._analyzing: asyncio.Task[None] | None = None  # the ANALYZE running off the search path
        self._chunks_written = 0  # chunks this store inserted since it last read the statistics

    @classmethod
    async def open(cls, url: URL) -> PostgresKnowledgeStore:
        """A store on the database at ``url``: adds the ``vector`` column when the server
        offers the extension and the migration ran without it. Raises StoreError."""
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        with _errors(url):
            conn = await asyncpg.connect(dsn, timeout=30)
            try:
                support = await _ensure_vector_column(conn)
            finally:
                await conn.close()

            async def init(connection: asyncpg.Connection) -> None:
                if support:
                    from pgvector.asyncpg import register_vector

                    await register_vector(connection)
                await connection.execute(_CHUNKS_IN + (f"; {_VECTORS_IN}" if support else ""))

            pool = await asyncpg.create_pool(
                dsn, min_size=1, max_size=8, init=init, reset=_keep_session, timeout=30
            )
        return cls(pool, url, support)

    async def close(self) -> None:
        """Stop a statistics refresh still running, close the connection pool."""
        if self._analyzing is not None:
            self._analyzing.cancel()
            await asyncio.gather(self._analyzing, return_exceptions=True)
        await self._pool.close()

    # -------------------------------------------------------------------- plumbing

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[_Conn]:
        with _errors(self._url):
            async with self._pool.acquire() as conn, conn.transaction():
                yield conn

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[_Conn]:
        """A connection for reads whose statements need no common snapshot (each one its
        own): no BEGIN and COMMIT round trips."""
        with _errors(self._url):
            async with self._pool.acquire() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def _local(self, settings: str) -> AsyncIterator[_Conn]:
        """A transaction opened together with its ``SET LOCAL`` statements (``settings``:
        SQL without parameters) in one round trip; committed after, rolled back on error."""
        with _errors(self._url):
            async with self._pool.acquire() as conn:
                await conn.execute(f"BEGIN; {settings}")
                try:
                    yield conn
                except BaseException:
                    if not conn.is_closed():
                        with contextlib.suppress(Exception):
                            await conn.execute("ROLLBACK")
                    raise
                await conn.execute("COMMIT")

    def _need_vectors(self) -> None:
        if not self.vector_support:
            raise VectorSearchUnavailable(
                f"PostgreSQL at {mask_url(self._url)} has no 'vector' extension (pgvector): datasets with an "
                "embedding model, semantic search and hybrid search need it; full-text datasets and full-text "
                "search work without it"
            )

    # -------------------------------------------------------------------- datasets

    async def create_dataset(self, dataset: Dataset) -> Dataset:
        """Insert ``dataset``. Raises DatasetExists; VectorSearchUnavailable for an
        embedding model without vector support."""
        if dataset.embedding_model:
            self._need_vectors()
        now = time.time()
        try:
            async with self._tx() as c:
                await c.execute(
                    "INSERT INTO kb_datasets (tenant_id, id, name, description, embedding_model, chunking, "
                    "metadata_fields, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9)",
                    dataset.tenant_id,
                    dataset.id,
                    dataset.name,
                    dataset.description,
                    dataset.embedding_model,
                    dumps(dataset.chunking),
                    dumps(dataset.metadata_fields),
                    dataset.created_at or now,
                    dataset.updated_at or now,
                )
        except StoreError as error:
            if isinstance(error.__cause__, asyncpg.UniqueViolationError):
                raise DatasetExists(f"dataset {dataset.id!r} already exists") from None
            raise
        return await self.get_dataset(dataset.tenant_id, dataset.id)

    async def list_datasets(self, tenant_id: str) -> list[Dataset]:
        """The tenant's datasets by name, with counts and indexes."""
        async with self._read() as c:
            return await self._datasets(c, tenant_id)

    async def _datasets(
        self, c: _Conn, tenant_id: str, dataset_id: str | None = None, counts: bool = True
    ) -> list[Dataset]:
        where, params = "s.tenant_id = $1", [tenant_id]
        if dataset_id is not None:
            where, params = where + " AND s.id = $2", params + [dataset_id]
        select = _DATASET_SELECT if counts else _DATASET_SELECT_UNCOUNTED
        rows = await c.fetch(f"{select} WHERE {where} ORDER BY s.name, s.id", *params)
        return [dataset_from_row(row, [index_from_row(i) for i in loads(row["indexes"])]) for row in rows]

    async def get_dataset(self, tenant_id: str, dataset_id: str, *, counts: bool = True) -> Dataset:
        """Raises DatasetNotFound (``counts``: see the port)."""
        async with self._read() as c:
            found = await self._datasets(c, tenant_id, dataset_id, counts)
        if not found:
            raise DatasetNotFound(f"dataset {dataset_id!r} not found")
        return found[0]

    async def update_dataset(self, tenant_id: str, dataset_id: str, changes: dict[str, Any]) -> Dataset:
        """Set the given fields. Raises DatasetNotFound; StoreError for another field."""
        unknown = set(changes) - UPDATABLE_DATASET_FIELDS
        if unknown:
            raise StoreError(f"dataset fields that can not be updated: {', '.join(sorted(unknown))}")
        if changes.get("embedding_model"):
            self._need_vectors()
        values = {k: dumps(v) if k in ("chunking", "metadata_fields") else v for k, v in changes.items()}
        sets = "".join(
            f", {name} = ${i}" + ("::jsonb" if name in ("chunking", "metadata_fields") else "")
            for i, name in enumerate(values, start=4)
        )
        async with self._tx() as c:
            done = await c.execute(
                f"UPDATE kb_datasets SET updated_at = $3{sets} WHERE tenant_id = $1 AND id = $2",
                tenant_id,
                dataset_id,
                time.time(),
                *values.values(),
            )
        if done.endswith(" 0"):
            raise DatasetNotFound(f"dataset {dataset_id!r} not found")
        return await self.get_dataset(tenant_id, dataset_id)

    async def delete_dataset(self, tenant_id: str, dataset_id: str) -> None:
        """Delete the dataset and everything in it. Raises DatasetNotFound."""
        async with self._tx() as c:
            index_ids = [
                r["id"]
                for r in await c.fetch(
                    "SELECT id FROM kb_indexes WHERE tenant_id = $1 AND dataset_id = $2",
                    tenant_id,
                    dataset_id,
                )
            ]
            if (
                await c.execute(
                    "DELETE FROM kb_datasets WHERE tenant_id = $1 AND id = $2", tenant_id, dataset_id
                )
                == "DELETE 0"
            ):
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
            for index_id in index_ids:
                await _drop_hnsw(c, index_id)

    # --------------------------------------------------------------------- indexes

    async def _index_row(
        self, c: _Conn, tenant_id: str, index_id: str, *, lock: bool = False, share: bool = False
    ) -> Any:
        """The index's row; ``lock``: locked for update; ``share``: locked against updates
        (a state change waits) but not against other sharers."""
        suffix = " FOR UPDATE" if lock else " FOR SHARE" if share else ""
        row = await c.fetchrow(
            "SELECT * FROM kb_indexes WHERE tenant_id = $1 AND id = $2" + suffix, tenant_id, index_id
        )
        if row is None or not check_index_id(index_id):
            raise DatasetNotFound(f"index {index_id!r} not found")
        return row

    async def create_index(self, tenant_id: str, dataset_id: str, embedding_model: str) -> IndexInfo:
        """A new building index (the building one before it retired). Raises DatasetNotFound;
        VectorSearchUnavailable."""
        self._need_vectors()
        index = IndexInfo(
            id=new_id(), embedding_model=embedding_model, state="building", created_at=time.time()
        )
        async with self._tx() as c:
            if (
                await c.fetchrow(
                    "SELECT 1 FROM kb_datasets WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                    tenant_id,
                    dataset_id,
                )
                is None
            ):
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
            await _retire(c, tenant_id, dataset_id, "building")
            await c.execute(
                "INSERT INTO kb_indexes (id, tenant_id, dataset_id, embedding_model, dimension, state, "
                "generation, created_at) VALUES ($1, $2, $3, $4, NULL, 'building', 0, $5)",
                index.id,
                tenant_id,
                dataset_id,
                embedding_model,
                index.created_at,
            )
        return index

    async def set_index_dimension(self, tenant_id: str, index_id: str, dimension: int) -> None:
        """Record the dimension (once) and create the index's HNSW index. Raises
        DatasetNotFound; DimensionMismatch; VectorSearchUnavailable."""
        self._need_vectors()
        async with self._tx() as c:
            await self._set_dimension(c, await self._index_row(c, tenant_id, index_id, lock=True), dimension)

    @staticmethod
    async def _set_dimension(c: _Conn, index: Any, dimension: int) -> None:
        if dimension < 1 or dimension > 16000:
            raise StoreError(f"index {index['id']!r}: dimension must be in 1..16000, got {dimension}")
        if index["dimension"] is None:
            await c.execute("UPDATE kb_indexes SET dimension = $1 WHERE id = $2", dimension, index["id"])
        elif index["dimension"] != dimension:
            raise DimensionMismatch(
                f"index {index['id']!r} holds {index['dimension']}-dimensional vectors, not {dimension}"
            )

    async def activate_index(self, tenant_id: str, dataset_id: str, index_id: str) -> None:
        """Make the index active; the previous active one retires with its vectors."""
        self._need_vectors()
        async with self._tx() as c:
            row = await self._index_row(c, tenant_id, index_id, lock=True)
            if row["dataset_id"] != dataset_id or row["state"] == "retired":
                raise DatasetNotFound(f"index {index_id!r} of dataset {dataset_id!r} not found")
            await _retire(c, tenant_id, dataset_id, "active", keep=index_id)
            await c.execute("UPDATE kb_indexes SET state = 'active' WHERE id = $1", index_id)

    # ------------------------------------------------------------------- documents

    @staticmethod
    async def _document_row(c: _Conn, tenant_id: str, document_id: str, *, lock: bool = False) -> Any:
        row = await c.fetchrow(
            "SELECT * FROM kb_documents WHERE tenant_id = $1 AND id = $2" + (" FOR UPDATE" if lock else ""),
            tenant_id,
            document_id,
        )
        if row is None:
            raise DocumentNotFound(f"document {document_id!r} not found")
        return row

    async def put_document(
        self, document: Document, content: ParsedDocument | None = None
    ) -> tuple[Document, bool]:
        """Add the document, or keep/update the one with its source name (see the port)."""
        doc, now = document, time.time()
        async with self._tx() as c:
            return await self._put_document(c, doc, now, content)

    async def _put_document(
        self, c: _Conn, doc: Document, now: float, content: ParsedDocument | None
    ) -> tuple[Document, bool]:
        # the parsed text goes in with the row (inserted or changed): one statement, no second write
        keep = content is not None
        parsed_type, parsed_text, parsed_qa = (
            (content.content_type, content.text, qa_json(content))
            if content is not None
            else (None, None, None)
        )
        if (
            await c.fetchrow(
                "SELECT 1 FROM kb_datasets WHERE tenant_id = $1 AND id = $2", doc.tenant_id, doc.dataset_id
            )
            is None
        ):
            raise DatasetNotFound(f"dataset {doc.dataset_id!r} not found")
        row = await c.fetchrow(
            "INSERT INTO kb_documents (id, tenant_id, dataset_id, source_name, content_type, content_hash, "
            "size_bytes, status, error, chunk_count, chunks_done, metadata, created_at, updated_at, parsed_type, "
            "parsed_text, parsed_qa) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, "
            "$15, $16, $17::jsonb) ON CONFLICT (tenant_id, dataset_id, source_name) DO NOTHING RETURNING *",
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
            parsed_type,
            parsed_text,
            parsed_qa,
        )
        if row is not None:
            return document_from_row(row), True
        old = await c.fetchrow(
            "SELECT * FROM kb_documents WHERE tenant_id = $1 AND dataset_id = $2 AND "
            "source_name = $3 FOR UPDATE",
            doc.tenant_id,
            doc.dataset_id,
            doc.source_name,
        )
        if old is None:  # removed between the two statements
            raise DocumentNotFound(f"document {doc.source_name!r} was deleted while it was being replaced")
        if old["content_hash"] == doc.content_hash:
            return document_from_row(old), False
        row = await c.fetchrow(
            "UPDATE kb_documents SET content_hash = $1, size_bytes = $2, content_type = $3, metadata = $4::jsonb, "
            "status = 'queued', error = NULL, chunks_done = 0, updated_at = $5, "
            "parsed_type = CASE WHEN $7 THEN $8 ELSE parsed_type END, "
            "parsed_text = CASE WHEN $7 THEN $9 ELSE parsed_text END, "
            "parsed_qa = CASE WHEN $7 THEN $10::jsonb ELSE parsed_qa END WHERE id = $6 RETURNING *",
            doc.content_hash,
            doc.size_bytes,
            doc.content_type,
            dumps(doc.metadata),
            now,
            old["id"],
            keep,
            parsed_type,
            parsed_text,
            parsed_qa,
        )
        return document_from_row(row), True

    async def save_content(self, tenant_id: str, document_id: str, parsed: ParsedDocument) -> None:
        """Keep the parsed text. Raises DocumentNotFound."""
        async with self._tx() as c:
            if (
                await c.execute(
                    "UPDATE kb_documents SET parsed_type = $1, parsed_text = $2, parsed_qa = $3::jsonb "
                    "WHERE tenant_id = $4 AND id = $5",
                    parsed.content_type,
                    parsed.text,
                    qa_json(parsed),
                    tenant_id,
                    document_id,
                )
                == "UPDATE 0"
            ):
                raise DocumentNotFound(f"document {document_id!r} not found")

    async def load_content(self, tenant_id: str, document_id: str) -> ParsedDocument:
        """The parsed text kept. Raises DocumentNotFound."""
        async with self._read() as c:
            return parsed_from_row(await self._document_row(c, tenant_id, document_id))

    async def get_document(self, tenant_id: str, document_id: str) -> Document:
        """Raises DocumentNotFound."""
        async with self._read() as c:
            return document_from_row(await self._document_row(c, tenant_id, document_id))

    async def start_pass(self, tenant_id: str, document_id: str) -> tuple[Document, Dataset, ParsedDocument]:
        """The document, its dataset and parsed text; the document set to ``parsing`` (see the port)."""
        async with self._tx() as c:
            row = await self._document_row(c, tenant_id, document_id, lock=True)
            found = await self._datasets(c, tenant_id, row["dataset_id"], counts=False)
            if not found:
                raise DatasetNotFound(f"dataset {row['dataset_id']!r} not found")
            await c.execute(
                "UPDATE kb_documents SET status = 'parsing', error = NULL, updated_at = $1 WHERE id = $2",
                time.time(),
                document_id,
            )
        return document_from_row(row), found[0], parsed_from_row(row)

    async def finish_document(
        self, tenant_id: str, document_id: str, *, content_hash: str, chunk_count: int, owner_id: str
    ) -> Document | None:
        """``ready`` and the lease released when the content hash is still ``content_hash`` (see the port)."""
        async with self._read() as c:  # one statement
            row = await c.fetchrow(
                "WITH d AS (SELECT id FROM kb_documents WHERE tenant_id = $1 AND id = $2), "
                "u AS (UPDATE kb_documents k SET status = 'ready', error = NULL, chunk_count = $4, chunks_done = $4, "
                "updated_at = $5, lease_owner = CASE WHEN k.lease_owner = $6 THEN NULL ELSE k.lease_owner END, "
                "lease_until = CASE WHEN k.lease_owner = $6 THEN NULL ELSE k.lease_until END FROM d "
                "WHERE k.id = d.id AND k.content_hash = $3 RETURNING k.*) "
                "SELECT u.id IS NOT NULL AS same, u.* FROM d LEFT JOIN u ON u.id = d.id",
                tenant_id,
                document_id,
                content_hash,
                chunk_count,
                time.time(),
                owner_id,
            )
        if row is None:
            raise DocumentNotFound(f"document {document_id!r} not found")
        return document_from_row(row) if row["same"] else None

    async def list_documents(self, tenant_id: str, dataset_id: str, *, limit: int = 1000) -> list[Document]:
        """The dataset's documents, oldest first. Raises DatasetNotFound."""
        async with self._tx() as c:
            if (
                await c.fetchrow(
                    "SELECT 1 FROM kb_datasets WHERE tenant_id = $1 AND id = $2", tenant_id, dataset_id
                )
                is None
            ):
                raise DatasetNotFound(f"dataset {dataset_id!r} not found")
            rows = await c.fetch(
                "SELECT * FROM kb_documents WHERE tenant_id = $1 AND dataset_id = $2 "
                "ORDER BY created_at, id LIMIT $3",
                tenant_id,
                dataset_id,
                limit,
            )
        return [document_from_row(r) for r in rows]

    async def update_document(self, tenant_id: str, document_id: str, **fields: Any) -> Document:
        """Set status, error, chunk counts or metadata. Raises DocumentNotFound."""
        unknown = set(fields) - UPDATABLE_DOCUMENT_FIELDS
        if unknown:
            raise StoreError(f"document fields that can not be updated: {', '.join(sorted(unknown))}")
        values = {
            k: dumps(v) if k == "metadata" else (str(v) if k == "status" else v) for k, v in fields.items()
        }
        sets = "".join(
            f", {name} = ${i}" + ("::jsonb" if name == "metadata" else "")
            for i, name in enumerate(values, start=4)
        )
        async with self._tx() as c:
            row = await c.fetchrow(
                f"UPDATE kb_documents SET updated_at = $3{sets} WHERE tenant_id = $1 AND id = $2 RETURNING *",
                tenant_id,
                document_id,
                time.time(),
                *values.values(),
            )
        if row is None:
            raise DocumentNotFound(f"document {document_id!r} not found")
        return document_from_row(row)

    async def delete_document(self, tenant_id: str, document_id: str) -> None:
        """Delete the document with its chunks and vectors. Raises DocumentNotFound."""
        async with self._tx() as c:
            if (
                await c.execute(
                    "DELETE FROM kb_documents WHERE tenant_id = $1 AND id = $2", tenant_id, document_id
                )
                == "DELETE 0"
            ):
                raise DocumentNotFound(f"document {document_id!r} not found")

    async def claim_document(
        self, tenant_id: str, document_id: str, owner_id: str, lease_until: float
    ) -> bool:
        """Take the document's lease when free, expired or already ours. Raises DocumentNotFound."""
        async with self._tx() as c:
            done = await c.execute(
                "UPDATE kb_documents SET lease_owner = $1, lease_until = $2 WHERE tenant_id = $3 AND id = $4 AND "
                "(lease_owner IS NULL OR lease_until < $5 OR lease_owner = $1)",
                owner_id,
                lease_until,
                tenant_id,
                document_id,
                time.time(),
            )
            if done == "UPDATE 0":
                await self._document_row(c, tenant_id, document_id)
                return False
        return True

    async def release_document(self, tenant_id: str, document_id: str, owner_id: str) -> None:
        """Give the lease up (nothing when ``owner_id`` does not hold it)."""
        async with self._tx() as c:
            await c.execute(
                "UPDATE kb_documents SET lease_owner = NULL, lease_until = NULL WHERE tenant_id = $1 "
                "AND id = $2 AND lease_owner = $3",
                tenant_id,
                document_id,
                owner_id,
            )

    async def unfinished_documents(self, *, limit: int = 100) -> list[Document]:
        """Documents of any tenant not ready or failed, whose lease expired or was never taken."""
        async with self._tx() as c:
            rows = await c.fetch(
                "SELECT * FROM kb_documents WHERE status NOT IN ('ready', 'failed') AND "
                "(lease_owner IS NULL OR lease_until < $1) ORDER BY updated_at, id LIMIT $2",
                time.time(),
                limit,
            )
        return [document_from_row(r) for r in rows]

    # ---------------------------------------------------------------------- chunks

    async def replace_chunks(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft]
    ) -> list[Chunk]:
        """Make ``drafts`` the document's chunks, keeping unchanged ones (see the port)."""
        drafts = list(drafts)
        async with self._tx() as c:
            doc = await self._document_row(c, tenant_id, document_id, lock=True)
            stored = await c.fetch(
                "SELECT id, text_hash, kind FROM kb_chunks WHERE document_id = $1 ORDER BY position",
                document_id,
            )
            plan = plan_chunks(
                stored,
                drafts,
                tenant_id=tenant_id,
                dataset_id=doc["dataset_id"],
                document_id=document_id,
                search_terms=tsvector_literal,
            )
            if plan.dropped:
                await c.execute("DELETE FROM kb_chunks WHERE id = ANY($1::text[])", plan.dropped)
            if plan.updates:
                await c.executemany(
                    "UPDATE kb_chunks SET position = $1, text = $2, heading_path = $3::jsonb, "
                    "parent_id = $4, tokens = $5 WHERE id = $6",
                    plan.updates,
                )
            if plan.inserts:  # COPY into the connection's scratch table, then one INSERT ... SELECT
                await c.copy_records_to_table("kb_chunks_in", records=plan.inserts)
                await c.execute(
                    "INSERT INTO kb_chunks (id, tenant_id, dataset_id, document_id, kind, search_text, text_hash, "
                    "search_vector, position, text, heading_path, parent_id, tokens) SELECT id, tenant_id, "
                    "dataset_id, document_id, kind, search_text, text_hash, search_vector::tsvector, position, text, "
                    "heading_path::jsonb, parent_id, tokens FROM kb_chunks_in"
                )
            rows = await c.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = "
                "c.document_id WHERE c.tenant_id = $1 AND c.document_id = $2 ORDER BY c.position",
                tenant_id,
                document_id,
            )
        self._chunks_written += len(plan.inserts)  # full-text statistics may be stale from now on
        return [chunk_from_row(r) for r in rows]

    async def get_chunks(self, tenant_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The tenant's chunks with those ids, in the order asked (missing ones left out)."""
        ids = list(dict.fromkeys(chunk_ids))
        async with self._read() as c:
            rows = await c.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = "
                "c.document_id WHERE c.tenant_id = $1 AND c.id = ANY($2::text[])",
                tenant_id,
                ids,
            )
        found = {r["id"]: chunk_from_row(r) for r in rows}
        return [found[i] for i in ids if i in found]

    async def document_chunks(
        self, tenant_id: str, document_id: str, *, offset: int = 0, limit: int = 50
    ) -> tuple[list[Chunk], int]:
        """A page of the document's chunks in position order, and their total."""
        async with self._read() as c:
            rows = await c.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = "
                "c.document_id WHERE c.tenant_id = $1 AND c.document_id = $2 ORDER BY c.position "
                "LIMIT $3 OFFSET $4",
                tenant_id,
                document_id,
                limit,
                offset,
            )
            total = await c.fetchval(
                "SELECT count(*) FROM kb_chunks WHERE tenant_id = $1 AND document_id = $2",
                tenant_id,
                document_id,
            )
        return [chunk_from_row(r) for r in rows], int(total)

    async def chunks_without_vector(
        self, tenant_id: str, index_id: str, document_id: str | None = None, *, limit: int = 1000
    ) -> list[Chunk]:
        """Searchable chunks of the index's dataset (or one document) with no vector in it yet."""
        self._need_vectors()
        async with self._read() as c:  # the index's dataset never changes: no common snapshot needed
            index = await self._index_row(c, tenant_id, index_id)
            rows = await c.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id "
                "WHERE c.tenant_id = $1 AND c.dataset_id = $2 AND c.kind != 'parent' AND "
                "($3::text IS NULL OR c.document_id = $3) AND NOT EXISTS (SELECT 1 FROM kb_vectors v WHERE "
                "v.index_id = $4 AND v.chunk_id = c.id) ORDER BY c.document_id, c.position LIMIT $5",
                tenant_id,
                index["dataset_id"],
                document_id,
                index_id,
                limit,
            )
        return [chunk_from_row(r) for r in rows]

    # --------------------------------------------------------------------- vectors

    async def put_vectors(
        self, tenant_id: str, index_id: str, vectors: Sequence[tuple[str, Sequence[float]]]
    ) -> int:
        """Store ``(chunk id, vector)`` pairs (chunks of the index's dataset only; a chunk's
        earlier vector is replaced); the number stored. Raises DatasetNotFound;
        DimensionMismatch; VectorSearchUnavailable."""
        self._need_vectors()
        if not vectors:
            return 0
        matrix = np.asarray([v for _, v in vectors], dtype=np.float32)
        if matrix.ndim != 2:
            raise DimensionMismatch(f"index {index_id!r}: vectors of different lengths in one batch")
        async with self._tx() as c:
            # shared: batches of documents ingested side by side are stored side by side, and
            # a retirement waits for them
            index = await self._index_row(c, tenant_id, index_id, share=True)
            if index["state"] == "retired":
                raise DatasetNotFound(f"index {index_id!r} is retired")
            done = "INSERT 0 -1"  # the dimension is not set yet
            if index["dimension"] is not None:
                await self._set_dimension(c, index, matrix.shape[1])  # checks it
                # COPY into a per-connection scratch table, then one INSERT ... SELECT (a chunk of
                # another tenant or dataset is silently not stored; the last vector of a chunk wins)
                latest = dict(zip((chunk_id for chunk_id, _ in vectors), matrix, strict=True))
                await c.copy_records_to_table(
                    "kb_vectors_in", records=list(latest.items()), columns=["chunk_id", "embedding"]
                )
                done = await c.execute(
                    "INSERT INTO kb_vectors (tenant_id, index_id, chunk_id, embedding) SELECT $1, $2, i.chunk_id, "
                    "i.embedding FROM kb_vectors_in i JOIN kb_chunks c ON c.id = i.chunk_id WHERE c.tenant_id = $1 "
                    "AND c.dataset_id = $3 ON CONFLICT (index_id, chunk_id) DO UPDATE SET embedding = "
                    "excluded.embedding",
                    tenant_id,
                    index_id,
                    index["dataset_id"],
                )
        stored = int(done.rsplit(" ", 1)[-1])
        if stored < 0:  # the index's first vectors: its dimension set in a transaction of its own
            # (upgrading the shared lock could deadlock with another sharer), then stored
            await self.set_index_dimension(tenant_id, index_id, matrix.shape[1])
            return await self.put_vectors(tenant_id, index_id, vectors)
        return stored

    async def search_vectors(
        self,
        tenant_id: str,
        index_id: str,
        vector: Sequence[float],
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` nearest chunks by cosine similarity (best first) passing ``filters``
        (HNSW without filters, exact with them; never a failed document's chunks). Raises
        DatasetNotFound; DimensionMismatch; VectorSearchUnavailable."""
        self._need_vectors()
        query = np.asarray(vector, dtype=np.float32)
        if not filters and index_id in self._hnsw_ready:
            return await self._nearest(tenant_id, index_id, query, k)
        async with self._read() as c:
            dim = await self._searchable_dimension(c, tenant_id, index_id, query, k)
            if dim is None:
                return []
            if filters:
                where, params = postgres_filters(filters, 5)
                rows = await c.fetch(
                    f"SELECT v.embedding <=> $1 AS distance, {_CHUNK_COLUMNS} FROM kb_vectors v JOIN kb_chunks c "
                    "ON c.id = v.chunk_id JOIN kb_documents d ON d.id = c.document_id WHERE v.index_id = $2 AND "
                    f"v.tenant_id = $3 AND {_SEARCHABLE} AND {where} ORDER BY distance LIMIT $4",
                    query,
                    index_id,
                    tenant_id,
                    k,
                    *params,
                )
            else:
                rows = None
        if rows is None:  # the index's first search here: its HNSW index first
            await self._ensure_hnsw(index_id, dim)
            return await self._nearest(tenant_id, index_id, query, k)
        return [ScoredChunk(chunk_from_row(r), 1.0 - float(r["distance"])) for r in rows]

    async def _searchable_dimension(
        self, c: Any, tenant_id: str, index_id: str, query: np.ndarray, k: int
    ) -> int | None:
        """The dimension of the index a vector search reads; None when it has nothing to
        give (``k`` below 1, a retired index, no vector stored yet). Raises
        DatasetNotFound; DimensionMismatch when ``query`` has another dimension."""
        index = await self._index_row(c, tenant_id, index_id)
        dim = index["dimension"]
        if k < 1 or index["state"] == "retired" or dim is None:
            return None
        if query.shape != (dim,):
            raise DimensionMismatch(f"index {index_id!r} holds {dim}-dimensional vectors, not {query.size}")
        return dim

    async def _nearest(self, tenant_id: str, index_id: str, query: np.ndarray, k: int) -> list[ScoredChunk]:
        """Nearest chunks through the index's HNSW index (it exists): the transaction and
        its settings in one round trip, the graph's nearest, the commit. The index row is
        read only on the index's first search here (its dimension never changes once set)
        or when fewer than ``k`` rows come back: the nearest query itself returns nothing
        for a retired or deleted index, and the row then says which (``[]`` or
        DatasetNotFound), as it does for a query of another dimension."""
        dim = self._dimensions.get(index_id)
        checked = dim is None or k < 1 or query.shape != (dim,)
        async with self._local("; ".join(nearest_settings(k, index_id))) as c:
            if checked:
                dim = await self._searchable_dimension(c, tenant_id, index_id, query, k)
                if dim is None:
                    return []
                self._dimensions[index_id] = dim
            assert dim is not None
            rows = await c.fetch(nearest_query(index_id, dim), query, tenant_id, k)
            if len(rows) < k:  # fewer: a failed document's chunks were among the nearest, or a small index
                if not checked and await self._searchable_dimension(c, tenant_id, index_id, query, k) is None:
                    return []
                rows = await c.fetch(_EXACT_NEAREST, query, index_id, tenant_id, k)
        return [ScoredChunk(chunk_from_row(r), 1.0 - float(r["distance"])) for r in rows]

    async def _ensure_hnsw(self, index_id: str, dimension: int) -> None:
        """Create the index's HNSW index if it does not exist yet. Built on the first search
        rather than when the dimension is known: building once over the vectors there is
        many times faster than keeping the graph up to date insert by insert while a
        dataset is first ingested."""
        async with self._tx() as c:
            exists = await c.fetchval("SELECT to_regclass($1) IS NOT NULL", _hnsw_name(index_id))
        if not exists:
            try:
                async with self._tx() as c:
                    await c.execute("SET LOCAL maintenance_work_mem = '256MB'")
                    # the id is 32 hex digits (checked) and the dimension an int: safe in SQL text
                    await c.execute(
                        f"CREATE INDEX IF NOT EXISTS {_hnsw_name(index_id)} ON kb_vectors USING hnsw "
                        f"((embedding::vector({int(dimension)})) vector_cosine_ops) "
                        f"WITH (m = 16, ef_construction = 100) WHERE index_id = '{index_id}'"
                    )
            except StoreError as error:  # another process created it at the same moment
                if not isinstance(
                    error.__cause__, (asyncpg.DuplicateTableError, asyncpg.UniqueViolationError)
                ):
                    raise
        self._hnsw_ready.add(index_id)

    # ------------------------------------------------------------------- full text

    async def search_full_text(
        self,
        tenant_id: str,
        dataset_ids: Sequence[str],
        query: str,
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks of the tenant's datasets for the query's terms, ranked by
        ``ts_rank_cd`` normalised to ``r / (1 + r)`` (in [0, 1), higher is better)."""
        if not dataset_ids or k < 1:
            return []
        where, params = postgres_filters(filters, 5)
        async with self._read() as c:
            tsquery = tsquery_literal(await self._full_text_terms(c, query))
        if tsquery is None:
            return []
        # the matches come from the GIN index alone (a materialized step, no sequential
        # scan): the planner, unsure of an OR of lexemes, would otherwise read every
        # chunk of the tenant's datasets and test each
        async with self._local("SET LOCAL enable_seqscan = off") as c:
            rows = await c.fetch(
                "WITH m AS MATERIALIZED (SELECT seq FROM kb_chunks WHERE search_vector @@ $1::tsquery) "
                f"SELECT ts_rank_cd(c.search_vector, $1::tsquery, 32) AS rank, {_CHUNK_COLUMNS} FROM m "
                "JOIN kb_chunks c ON c.seq = m.seq JOIN kb_documents d ON d.id = c.document_id "
                "WHERE c.tenant_id = $2 AND c.dataset_id = ANY($3::text[]) "
                f"AND {_SEARCHABLE} AND {where} ORDER BY rank DESC, c.id LIMIT $4",
                tsquery,
                tenant_id,
                list(dataset_ids),
                k,
                *params,
            )
        return [ScoredChunk(chunk_from_row(r), float(r["rank"])) for r in rows]

    async def _full_text_terms(self, c: _Conn, query: str) -> list[str]:
        """The query's terms, rarest first, within the postings budget
        (:func:`workers.knowledge.text.rarest_terms`), by chunk counts estimated from the
        planner's lexeme statistics of ``search_vector`` (a lexeme not among the most
        common ones counts as the least common of them). No statistics: every term."""
        terms = query_terms(query)
        if len(terms) <= 1:
            return terms
        stats = await self._lexeme_stats(c)
        if stats is None:
            return terms
        rows, freqs, floor = stats
        return rarest_terms({t: max(freqs.get(t, floor) * rows, 1.0) for t in terms})

    async def _lexeme_stats(self, c: _Conn) -> tuple[float, dict[str, float], float] | None:
        """(rows, lexeme -> frequency, floor) from the planner's statistics, read at most
        every :data:`_STATS_TTL_S` (sooner once this store inserted more chunks than half
        the rows they describe). Statistics missing or stale start an ``ANALYZE`` in the
        background (:meth:`_analyze_soon`) and this search uses what there is: an
        ``ANALYZE`` inline made the search that found them stale wait for it (0.5-3 s at
        10k chunks), since it only chooses which terms are ranked."""
        now = time.monotonic()
        cached = self._lexemes
        if (
            cached is not None
            and now - cached[0] < _STATS_TTL_S
            and self._chunks_written <= max(cached[1], _ANALYZE_MIN_ROWS) / 2
        ):
            return cached[1:]
        self._chunks_written = 0
        row = await c.fetchrow(
            "SELECT s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs, t.n_live_tup, "
            "t.n_mod_since_analyze FROM pg_stat_user_tables t LEFT JOIN pg_stats s ON s.schemaname = t.schemaname "
            "AND s.tablename = t.relname AND s.attname = 'search_vector' WHERE t.relname = 'kb_chunks' "
            "AND t.schemaname = current_schema()"
        )
        if row is None:
            return None
        live = row["n_live_tup"] or 0
        stale = row["elems"] is None or (row["n_mod_since_analyze"] or 0) > live / 2
        if stale and live >= _ANALYZE_MIN_ROWS and now - self._analyzed_at > _ANALYZE_EVERY_S:
            # autovacuum analyzes too, but maybe not before the searches right after a big ingestion
            self._analyzed_at = now
            self._analyze_soon()
        if row["elems"] is None:
            self._lexemes = (now, 0.0, {}, 0.0)
            return None
        freqs = list(row["freqs"])  # one per lexeme, then the minimum, maximum and null frequencies
        self._lexemes = (now, float(live), dict(zip(row["elems"], freqs, strict=False)), float(freqs[-3]))
        return self._lexemes[1:]

    def _analyze_soon(self) -> None:
        """``ANALYZE kb_chunks`` in a task of its own, on a connection of its own; once it
        is done the next search reads the new statistics. A failure is left to the next
        stale read (the statistics only choose a query's terms)."""
        if self._analyzing is not None and not self._analyzing.done():
            return

        async def analyze() -> None:
            with contextlib.suppress(StoreError):
                async with self._read() as c:
                    await c.execute("ANALYZE kb_chunks")
                self._lexemes = None

        self._analyzing = asyncio.get_running_loop().create_task(analyze())


# ------------------------------------------------------------------------- helpers

#: How long lexeme statistics are reused, and when (and how often) the store analyzes
#: the chunks itself (statistics missing or older than half the rows).
_STATS_TTL_S = 60.0
_ANALYZE_MIN_ROWS = 2000
_ANALYZE_EVERY_S = 300.0


def nearest_settings(k: int, index_id: str | None = None) -> list[str]:
    """Statements run in a nearest-neighbour search's transaction: a search breadth for
    ``k`` results that grows with the index (one per 250 vectors, from the HNSW index's
    row count in the catalog: near-duplicate passages need more of the graph visited as
    they multiply), and no sort plan (the planner, with few rows or stale statistics,
    would otherwise rank every vector of the index instead of walking the graph)."""
    floor = max(100, min(1000, 2 * int(k)))
    breadth = str(floor)
    if index_id is not None and check_index_id(index_id):
        breadth = (
            f"(SELECT least(1000, greatest({floor}, (max(reltuples) / 250)::int))::text FROM pg_class "
            f"WHERE relname = '{_hnsw_name(index_id)}')"
        )
    else:
        breadth = f"'{breadth}'"
    return [f"SELECT set_config('hnsw.ef_search', {breadth}, true)", "SET LOCAL enable_sort = off"]


def nearest_query(index_id: str, dimension: int) -> str:
    """The nearest-neighbour query of an index (``$1`` vector, ``$2`` tenant, ``$3`` k):
    the ``ORDER BY`` expression and the literal index id match the index's partial HNSW
    index; no row when the index is retired or not the tenant's (checked once, not per
    row). The id must be one :func:`check_index_id` accepts."""
    if not check_index_id(index_id):
        raise StoreError(f"invalid index id {index_id!r}")
    near = f"v.embedding::vector({int(dimension)}) <=> $1::vector({int(dimension)})"
    return (
        f"WITH nn AS (SELECT v.chunk_id, {near} AS distance FROM kb_vectors v WHERE v.index_id = '{index_id}' "
        f"AND v.tenant_id = $2 ORDER BY {near} LIMIT $3) SELECT nn.distance, {_CHUNK_COLUMNS} FROM nn "
        "JOIN kb_chunks c ON c.id = nn.chunk_id JOIN kb_documents d ON d.id = c.document_id "
        f"WHERE {_SEARCHABLE} AND EXISTS (SELECT 1 FROM kb_indexes i WHERE i.id = '{index_id}' "
        "AND i.tenant_id = $2 AND i.state <> 'retired') ORDER BY nn.distance"
    )


async def _keep_session(connection: asyncpg.Connection) -> None:
    """The pool's reset: nothing beyond asyncpg's own rollback of an open transaction.
    Every setting this store makes is transaction-local (``SET LOCAL``) and it takes no
    session locks or listeners, so the default reset (``RESET ALL`` and more) would only
    cost a round trip per store call."""


@contextlib.contextmanager
def _errors(url: URL):
    """Driver and connection failures as StoreError naming the masked URL."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise StoreError(f"database {mask_url(url)}: {type(error).__name__}: {error}") from error
    except OSError as error:
        raise StoreError(f"cannot reach database {mask_url(url)}: {error}") from error


async def _ensure_vector_column(conn: asyncpg.Connection) -> bool:
    """True when ``kb_vectors.embedding`` exists; adds it (with the extension) when the
    server offers ``vector`` now but did not when the schema was migrated."""
    column = "SELECT 1 FROM information_schema.columns WHERE table_name = 'kb_vectors' AND column_name = 'embedding'"
    if await conn.fetchval(column):
        return True
    if not await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        return False
    async with conn.transaction():
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute("LOCK TABLE kb_vectors IN ACCESS EXCLUSIVE MODE")
        await conn.execute("ALTER TABLE kb_vectors ADD COLUMN IF NOT EXISTS embedding vector NOT NULL")
    return True


async def _drop_hnsw(c: _Conn, index_id: str) -> None:
    if check_index_id(index_id):
        await c.execute(f"DROP INDEX IF EXISTS {_hnsw_name(index_id)}")


async def _retire(c: _Conn, tenant_id: str, dataset_id: str, state: str, keep: str = "") -> None:
    """Retire the dataset's indexes in ``state`` (but ``keep``): their vectors and HNSW indexes go."""
    for row in await c.fetch(
        "SELECT id FROM kb_indexes WHERE tenant_id = $1 AND dataset_id = $2 AND state = $3 AND id != $4",
        tenant_id,
        dataset_id,
        state,
        keep,
    ):
        await c.execute("DELETE FROM kb_vectors WHERE index_id = $1", row["id"])
        await c.execute("UPDATE kb_indexes SET state = 'retired' WHERE id = $1", row["id"])
        await _drop_hnsw(c, row["id"])
