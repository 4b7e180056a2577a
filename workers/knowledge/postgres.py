"""The knowledge store on PostgreSQL: ``tsvector`` full text, and pgvector when the
server has it.

Full text: each chunk's ``search_vector`` is a ``tsvector`` built from the terms of
:mod:`workers.knowledge.text` (with positions, no stemming), searched with a GIN index
and ranked by ``ts_rank``, so matches are the same as
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

The store's parts: datasets, documents and chunks here; indexes and vectors in
:mod:`workers.knowledge.postgres_vectors`; full text in
:mod:`workers.knowledge.postgres_full_text`; connections and transactions in
:mod:`workers.knowledge.postgres_base`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from engine.knowledge.ports import (
    ChunkToEmbed,
    DatasetExists,
    DatasetNotFound,
    DocumentNotFound,
    ParsedDocument,
)
from engine.ports import StoreError
from schemas.knowledge import Chunk, ChunkDraft, Dataset, Document

from .chunks import ChunkPlan, chunks_to_embed, pass_progress, plan_chunks
from .postgres_base import _CHUNK_COLUMNS, SEARCH_SETTINGS, SearchConnection, _Conn, _errors
from .postgres_full_text import PostgresFullText
from .postgres_vectors import PostgresVectors, _drop_hnsw, hnsw_breadth, nearest_query
from .rows import (
    UPDATABLE_DATASET_FIELDS,
    UPDATABLE_DOCUMENT_FIELDS,
    chunk_from_row,
    dataset_from_row,
    document_from_row,
    dumps,
    index_from_row,
    loads,
    parsed_from_row,
    qa_json,
)
from .text import tsvector_literal

# hnsw_breadth and nearest_query live in postgres_vectors and are exported from here too
__all__ = ["PostgresKnowledgeStore", "hnsw_breadth", "nearest_query"]

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


class PostgresKnowledgeStore(PostgresVectors, PostgresFullText):
    """Knowledge bases in a (migrated) PostgreSQL database (module docstring). Create with :meth:`open`."""

    #: reads run on pooled connections, side by side (the knowledge store port)
    reads_side_by_side = True

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

            async def init_search(connection: asyncpg.Connection) -> None:
                if support:
                    from pgvector.asyncpg import register_vector

                    await register_vector(connection)

            pool = await asyncpg.create_pool(
                dsn, min_size=1, max_size=8, init=init, reset=_keep_session, timeout=30
            )
            try:
                # the search queries' planner settings, sent with the connection's start-up
                search_pool = await asyncpg.create_pool(
                    dsn,
                    min_size=1,
                    max_size=8,
                    init=init_search,
                    reset=_keep_session,
                    timeout=30,
                    connection_class=SearchConnection,
                    server_settings=SEARCH_SETTINGS,
                )
            except BaseException:
                await pool.close()
                raise
        return cls(pool, url, support, search_pool)

    async def close(self) -> None:
        """Stop a statistics refresh or a full-text index merge still running, close the
        connection pools."""
        if self._merge_later is not None:
            self._merge_later.cancel()
        for task in (self._analyzing, self._merging):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._search_pool.close()
        await self._pool.close()

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
        async with self._tx() as c:
            await self._write_chunks(c, tenant_id, document_id, list(drafts))
            rows = await c.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = "
                "c.document_id WHERE c.tenant_id = $1 AND c.document_id = $2 ORDER BY c.position",
                tenant_id,
                document_id,
            )
        return [chunk_from_row(r) for r in rows]

    async def replace_chunks_for_pass(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft], index_ids: Sequence[str]
    ) -> dict[str, list[ChunkToEmbed]]:
        """The chunks written and, per index, those to embed; progress set (see the port)."""
        drafts, index_ids = list(drafts), list(index_ids)
        async with self._tx() as c:
            plan = await self._write_chunks(c, tenant_id, document_id, drafts)
            vectors: list[Any] = []
            if plan.updates and index_ids:  # only kept chunks can have vectors: new ones have new ids
                vectors = await c.fetch(
                    "SELECT v.index_id, v.chunk_id FROM kb_chunks c JOIN kb_vectors v ON v.chunk_id = c.id "
                    "WHERE c.tenant_id = $1 AND c.document_id = $2 AND v.index_id = ANY($3::text[])",
                    tenant_id,
                    document_id,
                    index_ids,
                )
            pending = chunks_to_embed(drafts, plan, index_ids, ((r[0], r[1]) for r in vectors))
            if index_ids:
                count, done = pass_progress(drafts, pending, index_ids)
                await c.execute(
                    "UPDATE kb_documents SET status = 'embedding', chunk_count = $3, chunks_done = $4, "
                    "updated_at = $5 WHERE tenant_id = $1 AND id = $2",
                    tenant_id,
                    document_id,
                    count,
                    done,
                    time.time(),
                )
        return pending

    async def _write_chunks(
        self, c: _Conn, tenant_id: str, document_id: str, drafts: list[ChunkDraft]
    ) -> ChunkPlan:
        """Make ``drafts`` the document's chunks in the caller's transaction (the document
        row locked); the plan it wrote. Raises DocumentNotFound."""
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
        self._inserted(len(plan.inserts))  # full-text statistics may be stale from now on
        return plan

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


# ------------------------------------------------------------------------- helpers


async def _keep_session(connection: asyncpg.Connection) -> None:
    """The pools' reset: nothing beyond asyncpg's own rollback of an open transaction.
    Every setting this store makes on its own pool is transaction-local (``SET LOCAL``),
    the search pool's session settings are meant to stay, and it takes no session locks
    or listeners, so the default reset (``RESET ALL`` and more) would only cost a round
    trip per store call (and undo the search pool's settings)."""


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
