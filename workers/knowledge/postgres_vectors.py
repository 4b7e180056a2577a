"""The vector part of the PostgreSQL knowledge store (see :mod:`workers.knowledge.postgres`):
index rows (create, dimension, activate, retire), pgvector storage, and nearest-neighbour
search through a partial HNSW index per index id. :class:`PostgresVectors` is a base of
:class:`~workers.knowledge.postgres.PostgresKnowledgeStore`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy as np

from engine.knowledge.ports import DatasetNotFound, DimensionMismatch, ScoredChunk
from engine.ports import StoreError
from schemas.knowledge import IndexInfo, MetadataFilter

from .filters import postgres_filters
from .postgres_base import _CHUNK_COLUMNS, _SEARCHABLE, PostgresStoreBase, _Conn
from .rows import check_index_id, new_id, scored_from_row

__all__ = ["PostgresVectors", "hnsw_breadth", "nearest_query"]

#: exact nearest chunks ($1 vector, $2 index, $3 tenant, $4 k): when the graph's nearest
#: held fewer than k searchable chunks
_EXACT_NEAREST = (
    f"SELECT v.embedding <=> $1 AS distance, {_CHUNK_COLUMNS} FROM kb_vectors v JOIN kb_chunks c "
    "ON c.id = v.chunk_id JOIN kb_documents d ON d.id = c.document_id WHERE v.index_id = $2 AND "
    f"v.tenant_id = $3 AND {_SEARCHABLE} ORDER BY distance LIMIT $4"
)


#: The least HNSW search breadth (:func:`hnsw_breadth`): the breadth of an index under
#: 20,000 vectors at ``k`` up to 40 (above, one per 250 vectors decides). The HNSW scan is
#: most of a nearest query, and its cost follows the breadth: measured on the bench's 10k
#: set (near-duplicate groups of 9), recall@10 over five builds of the graph 0.962-0.981
#: at 80 against 0.972-0.991 at 100 (0.961-0.969 at 64, 0.941-0.954 at 40), for about
#: 15 % less execution time a query.
BREADTH_FLOOR = 80

#: How long an HNSW index's row count (which sets the search breadth) is reused, seconds.
_INDEX_ROWS_TTL_S = 60.0


def _hnsw_name(index_id: str) -> str:
    return f"kb_vectors_hnsw_{index_id}"


class PostgresVectors(PostgresStoreBase):
    """The index and vector methods of the knowledge store port on PostgreSQL."""

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
        return [scored_from_row(r, 1.0 - float(r["distance"])) for r in rows]

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
        """Nearest chunks through the index's HNSW index (it exists), on a search-pool
        connection (its planner settings are the session's): the graph's nearest in one
        round trip once the session's breadth is the one wanted. The index row is read
        only on the index's first search here (its dimension never changes once set) or
        when fewer than ``k`` rows come back: the nearest query itself returns nothing for
        a retired or deleted index, and the row then says which (``[]`` or
        DatasetNotFound), as it does for a query of another dimension."""
        dim = self._dimensions.get(index_id)
        checked = dim is None or k < 1 or query.shape != (dim,)
        async with self._search() as c:
            if checked:
                dim = await self._searchable_dimension(c, tenant_id, index_id, query, k)
                if dim is None:
                    return []
                self._dimensions[index_id] = dim
            assert dim is not None
            await self._set_breadth(c, index_id, k)
            rows = await c.fetch(nearest_query(index_id, dim), query, tenant_id, k)
            if len(rows) < k:  # fewer: a failed document's chunks were among the nearest, or a small index
                if not checked and await self._searchable_dimension(c, tenant_id, index_id, query, k) is None:
                    return []
                rows = await c.fetch(_EXACT_NEAREST, query, index_id, tenant_id, k)
        return [scored_from_row(r, 1.0 - float(r["distance"])) for r in rows]

    async def _set_breadth(self, c: Any, index_id: str, k: int) -> None:
        """Give the search connection ``c`` the HNSW breadth for ``k`` results of the
        index (:func:`hnsw_breadth`) when its session holds another. The index's row count
        comes from the catalog (``reltuples``, which PostgreSQL itself only updates when
        it builds, vacuums or analyzes the index), read at most every
        :data:`_INDEX_ROWS_TTL_S`: the breadth follows a growing index a little later."""
        now = time.monotonic()
        cached = self._index_rows.get(index_id)
        if cached is None or now - cached[0] > _INDEX_ROWS_TTL_S:
            rows = await c.fetchval(
                "SELECT coalesce(max(reltuples), 0)::float8 FROM pg_class WHERE relname = $1",
                _hnsw_name(index_id),
            )
            cached = self._index_rows[index_id] = (now, float(rows))
        breadth = hnsw_breadth(k, cached[1])
        if c.hnsw_breadth() != breadth:
            await c.execute(f"SET hnsw.ef_search = {int(breadth)}")
            c.set_hnsw_breadth(breadth)

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


def hnsw_breadth(k: int, index_rows: float = 0.0) -> int:
    """The HNSW search breadth (``hnsw.ef_search``) for ``k`` results in an index of
    ``index_rows`` vectors: at least :data:`BREADTH_FLOOR` and ``2 k``, one per 250
    vectors, at most 1000 (pgvector's limit). It grows with the index: near-duplicate
    passages need more of the graph visited as they multiply."""
    floor = max(BREADTH_FLOOR, min(1000, 2 * int(k)))
    return min(1000, max(floor, round(index_rows / 250)))


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
