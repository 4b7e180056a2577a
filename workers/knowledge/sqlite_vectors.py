"""The vector part of the SQLite knowledge store (see :mod:`workers.knowledge.sqlite`): index
rows (create, dimension, activate, retire), float32 vectors in ``kb_vectors``, and search
through the in-memory indexes of :mod:`workers.knowledge.hnsw` with exact sqlite-vec
search behind them. :class:`SqliteVectors` is a base of
:class:`~workers.knowledge.sqlite.SqliteKnowledgeStore`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.knowledge.ports import DatasetNotFound, DimensionMismatch, ScoredChunk
from engine.ports import StoreError
from schemas.knowledge import IndexInfo, MetadataFilter

from .filters import sqlite_filters
from .rows import new_id, scored_from_row
from .sqlite_base import _CHUNK_COLUMNS, _SEARCHABLE, SqliteStoreBase

__all__ = ["SqliteVectors"]

#: With metadata filters, memory is asked for this many times ``k`` before filtering;
#: fewer than ``k`` passing means the filter is selective: exact search instead.
FILTER_OVERSAMPLE = 8


def cosine_similarities(vectors: np.ndarray, query: np.ndarray) -> list[float]:
    """Cosine similarity of each row of ``vectors`` ``(n, d)`` to ``query`` ``(d,)``, in
    float64 (0.0 for a zero vector), as Python floats."""
    rows = vectors.astype(np.float64)
    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(query))
    dots = rows @ query.astype(np.float64)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).tolist()


def _blob(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class SqliteVectors(SqliteStoreBase):
    """The index and vector methods of the knowledge store port on SQLite."""

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
        hits = self._chunks_by_vector(tenant_id, query, found, where, params)
        if len(hits) >= k or len(found) < wanted:
            return hits[:k]
        return self.exact_search(tenant_id, index_id, query, k, where, params)

    def _chunks_by_vector(
        self, tenant_id: str, query: np.ndarray, found: list[tuple[int, float]], where: str, params: list[Any]
    ) -> list[ScoredChunk]:
        """The searchable chunks of the vector rows ``found`` (row ids, nearest first),
        scored by their exact cosine similarity to ``query`` from the stored float32
        vectors (the graph holds float16 copies, which only choose the candidates), best
        first."""
        if not found:
            return []
        keys = [key for key, _ in found]
        rows = self._conn.execute(
            f"SELECT v.embedding, {_CHUNK_COLUMNS} FROM kb_vectors v JOIN kb_chunks c ON c.id = v.chunk_id "
            "JOIN kb_documents d ON d.id = c.document_id "
            f"WHERE v.seq IN ({', '.join('?' * len(keys))}) AND v.tenant_id = ? AND {_SEARCHABLE} AND {where}",
            (*keys, tenant_id, *params),
        ).fetchall()
        if not rows:
            return []
        vectors = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        hits = [
            scored_from_row(r, score)
            for r, score in zip(rows, cosine_similarities(vectors, query), strict=True)
        ]
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
        return [scored_from_row(r, 1.0 - r["distance"]) for r in rows]

    async def exact_search_vectors(
        self, tenant_id: str, index_id: str, vector: Sequence[float], k: int
    ) -> list[ScoredChunk]:
        """Exact search without the graph (what the graph's answers are checked against)."""
        query = np.asarray(vector, dtype=np.float32)
        return await self._call(lambda: self.exact_search(tenant_id, index_id, query, k))
