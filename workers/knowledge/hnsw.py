"""In-memory HNSW indexes (usearch) over the vectors SQLite holds.

sqlite-vec searches by brute force: fine for a few thousand vectors, slow for a hundred
thousand. So each vector index of the SQLite store gets an HNSW graph in memory, keyed by
the vector's row id (``kb_vectors.seq``), built from the stored vectors on its first
search and kept in step before every search by two numbers read from SQL in one read
transaction:

* the newest row id of the index: rows above what the graph holds are added;
* the index's ``generation``, bumped by a trigger whenever one of its vectors is deleted
  (by this process or any other writing the same file): the graph is rebuilt.

Row ids never repeat (AUTOINCREMENT), so a graph key always names the same vector. The
graphs are touched only from the store's one database thread.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from usearch.index import Index

__all__ = ["HnswGraphs"]

#: Graph degree and build/search breadth: recall@10 above 0.95 at 100k vectors.
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128
#: Rows read per batch while building (bounds the memory of one read).
_BATCH = 20_000


@dataclasses.dataclass
class _Graph:
    index: Index
    dimension: int
    generation: int
    max_seq: int


class HnswGraphs:
    """The graphs of the store's vector indexes (by index id)."""

    def __init__(self) -> None:
        self._graphs: dict[str, _Graph] = {}

    def drop(self, index_id: str) -> None:
        """Forget the graph of ``index_id`` (retired or deleted)."""
        self._graphs.pop(index_id, None)

    def clear(self) -> None:
        self._graphs.clear()

    def search(self, conn: Any, index_id: str, dimension: int, vector: np.ndarray,
               count: int) -> list[tuple[int, float]]:
        """``[(vector row id, cosine distance)...]`` nearest first, after bringing the graph
        in step with the table (``conn`` is the store's sqlean connection, outside a transaction)."""
        graph = self._sync(conn, index_id, dimension)
        if graph is None or len(graph.index) == 0:
            return []
        count = min(count, len(graph.index))
        graph.index.expansion_search = max(EXPANSION_SEARCH, count)
        matches = graph.index.search(vector, count)
        return [(int(key), float(distance)) for key, distance in zip(matches.keys, matches.distances)]

    def _sync(self, conn: Any, index_id: str, dimension: int) -> _Graph | None:
        conn.execute("BEGIN")  # one snapshot for the counters and the rows read
        try:
            row = conn.execute("SELECT generation FROM kb_indexes WHERE id = ?", (index_id,)).fetchone()
            if row is None:
                self.drop(index_id)
                return None
            generation = row[0]
            graph = self._graphs.get(index_id)
            if graph is None or graph.generation != generation or graph.dimension != dimension:
                graph = _Graph(Index(ndim=dimension, metric="cos", dtype="f32", connectivity=CONNECTIVITY,
                                     expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH),
                               dimension, generation, 0)
                self._graphs[index_id] = graph
            self._add_new(conn, index_id, graph)
            return graph
        finally:
            conn.execute("COMMIT")

    @staticmethod
    def _add_new(conn: Any, index_id: str, graph: _Graph) -> None:
        while True:
            rows = conn.execute(
                "SELECT seq, embedding FROM kb_vectors WHERE index_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (index_id, graph.max_seq, _BATCH)).fetchall()
            if not rows:
                return
            keys = np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
            vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            graph.index.add(keys, vectors)
            graph.max_seq = int(keys[-1])
