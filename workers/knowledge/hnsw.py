"""In-memory nearest-neighbour indexes over the vectors SQLite holds.

Reading and ranking vectors in SQL (sqlite-vec) is brute force over rows: fine for a
few thousand vectors, slow for a hundred thousand. So each vector index of the SQLite
store is held in memory, keyed by the vector's row id (``kb_vectors.seq``):

* small (up to :data:`EXACT_MAX_CELLS` floats): a normalised float32 matrix searched
  exactly (usearch's SIMD brute force on one thread: exact answers, and as fast as a
  graph at that size);
* larger: an HNSW graph (usearch), built from the matrix when the index outgrows it
  (at 10k vectors of 384 dimensions it answers several times faster than brute force,
  recall@10 about 0.98).

It is loaded on the index's first search and kept in step before every search by two
numbers the store reads from SQL in one statement (one snapshot):

* the newest row id of the index: rows above what memory holds are added;
* the index's ``generation``, bumped by a trigger whenever one of its vectors is deleted
  (by this process or any other writing the same file): memory is reloaded.

Row ids never repeat (AUTOINCREMENT), so a key always names the same vector. The
indexes are touched only from the store's one database thread.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from usearch.index import Index, MetricKind
from usearch.index import search as exact_search

__all__ = ["EXACT_MAX_CELLS", "VectorIndexes"]

#: Vectors x dimensions up to which an index is searched exactly (4 MB of float32: 2.6k
#: vectors of 384 dimensions, 650 of 1536).
EXACT_MAX_CELLS = 1_000_000
#: Graph degree and build/search breadth. A search widens the breadth to ``k + 32`` and
#: to one per :data:`EXPANSION_PER_VECTORS` vectors: near-duplicate groups (the same
#: passage in many documents, whose order only per-copy differences decide) need more of
#: the graph visited as they grow. Measured on the bench's embeddings at 100k vectors,
#: recall@10 at breadth 100 / 200 / 300: 0.78 / 0.92 / 0.94 with degree 32 (0.76 / 0.87
#: / - with 16, and 0.95 at 400); at 10k, about 0.97 at breadth 100 with degree 16.
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 100
EXPANSION_PER_VECTORS = 250
EXPANSION_MAX = 1000
#: Rows read per batch while loading (bounds the memory of one read).
_BATCH = 20_000


@dataclasses.dataclass
class _Memory:
    dimension: int
    generation: int
    max_seq: int = 0
    keys: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    matrix: np.ndarray | None = None  # exact mode: (n, dimension) unit rows
    graph: Index | None = None  # HNSW mode

    def __len__(self) -> int:
        return len(self.graph) if self.graph is not None else len(self.keys)


class VectorIndexes:
    """The in-memory indexes of the store's vector indexes (by index id)."""

    def __init__(self, exact_max_cells: int = EXACT_MAX_CELLS) -> None:
        self.exact_max_cells = exact_max_cells
        self._memory: dict[str, _Memory] = {}

    def drop(self, index_id: str) -> None:
        """Forget ``index_id`` (retired or deleted)."""
        self._memory.pop(index_id, None)

    def clear(self) -> None:
        self._memory.clear()

    def is_current(self, index_id: str, generation: int, max_seq: int | None) -> bool:
        """True when memory holds exactly the index's rows as of these two numbers."""
        memory = self._memory.get(index_id)
        return memory is not None and memory.generation == generation and memory.max_seq == (max_seq or 0)

    def sync(self, conn: Any, index_id: str, dimension: int) -> None:
        """Bring memory in step with the table (``conn``: the store's connection, outside a
        transaction; the counters and the rows are read in one read transaction)."""
        conn.execute("BEGIN")
        try:
            generation = conn.execute("SELECT generation FROM kb_indexes WHERE id = ?", (index_id,)).fetchone()[0]
            memory = self._memory.get(index_id)
            if memory is None or memory.generation != generation or memory.dimension != dimension:
                memory = self._memory[index_id] = _Memory(dimension, generation)
            self._load(conn, index_id, memory)
        finally:
            conn.execute("COMMIT")

    def search(self, index_id: str, vector: np.ndarray, count: int) -> list[tuple[int, float]]:
        """``[(vector row id, cosine distance)...]`` nearest first (after :meth:`sync`)."""
        memory = self._memory.get(index_id)
        if memory is None or len(memory) == 0 or count < 1:
            return []
        count = min(count, len(memory))
        if memory.graph is not None:
            memory.graph.expansion_search = min(EXPANSION_MAX, max(EXPANSION_SEARCH, count + 32,
                                                                   len(memory.graph) // EXPANSION_PER_VECTORS))
            found = memory.graph.search(vector, count)
            return [(int(k), float(d)) for k, d in zip(found.keys, found.distances)]
        norm = float(np.linalg.norm(vector))
        # one thread: a BLAS or usearch thread pool costs more than it saves at this size
        found = exact_search(memory.matrix, vector / norm if norm else vector, count, MetricKind.IP,
                             exact=True, threads=1)
        return [(int(memory.keys[i]), float(d)) for i, d in zip(found.keys, found.distances)]

    def _load(self, conn: Any, index_id: str, memory: _Memory) -> None:
        while True:
            rows = conn.execute(
                "SELECT seq, embedding FROM kb_vectors WHERE index_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (index_id, memory.max_seq, _BATCH)).fetchall()
            if not rows:
                return
            keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            self._add(memory, keys, vectors)
            memory.max_seq = int(keys[-1])

    def _add(self, memory: _Memory, keys: np.ndarray, vectors: np.ndarray) -> None:
        if memory.graph is not None:
            memory.graph.add(keys.astype(np.uint64), vectors)
            return
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.where(norms == 0, 1, norms)
        memory.matrix = unit if memory.matrix is None else np.concatenate([memory.matrix, unit])
        memory.keys = np.concatenate([memory.keys, keys])
        if memory.matrix.size > self.exact_max_cells:  # outgrew exact search: build the graph once
            memory.graph = Index(ndim=memory.dimension, metric="cos", dtype="f32", connectivity=CONNECTIVITY,
                                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
            memory.graph.add(memory.keys.astype(np.uint64), memory.matrix)
            memory.matrix, memory.keys = None, np.zeros(0, np.int64)
