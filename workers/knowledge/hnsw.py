"""In-memory nearest-neighbour indexes over the vectors SQLite holds.

Reading and ranking vectors in SQL (sqlite-vec) is brute force over rows: fine for a
few thousand vectors, slow for a hundred thousand. So each vector index of the SQLite
store is held in memory, keyed by the vector's row id (``kb_vectors.seq``):

* small (up to :data:`EXACT_MAX_CELLS` floats): a normalised float32 matrix searched
  exactly (usearch's SIMD brute force on one thread: exact answers, and as fast as a
  graph at that size);
* larger: an HNSW graph (usearch), built from the matrix when the index outgrows it
  (at 10k vectors of 384 dimensions it answers several times faster than brute force,
  recall@10 about 0.98). The graph holds float16 copies of the vectors: half the memory
  a search walks (34 -> 17 MB at 10k x 384, which no longer overflows a 32 MB cache),
  20-40 % less time a search, and the same recall on the bench's embeddings; the
  graph only chooses the candidates, which the store scores exactly from the float32
  vectors SQLite holds. A graph saved as float32 by an earlier version loads as it is.

It is loaded on the index's first search and kept in step before every search by two
numbers the store reads from SQL in one statement (one snapshot):

* the newest row id of the index: rows above what memory holds are added;
* the index's ``generation``, bumped by a trigger whenever one of its vectors is deleted
  (by this process or any other writing the same file): memory is reloaded.

Row ids never repeat (AUTOINCREMENT), so a key always names the same vector. The
indexes are touched only from the store's one database thread.

Building a graph of 100k vectors takes minutes, and every process opening the store
(``flowloom serve`` after a restart, each ``flowloom run``) would pay it on its first
search. So a graph is saved to ``directory/<index id>-g<generation>-s<row id>.usearch``
(the generation and newest row id it covers are in the name: one rename publishes the
graph and what it covers together; a reader never sees a half-written file) after it is
built, when it grew by :data:`SAVE_GROWTH` since its last save, and on close. A process
loads the file whose generation is the database's (checking it holds as many vectors as
the table up to its row id) and adds only the newer rows; a file of another generation,
or one that cannot be read, is removed and the graph rebuilt. A file older than the data
only costs catch-up time: the answers follow the table either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from usearch.index import Index, MetricKind
from usearch.index import search as exact_search

from engine.settings import private_directory

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
#: A graph is saved again once it holds this fraction more vectors than its saved file
#: (saving 100k vectors of 384 dimensions writes about 190 MB).
SAVE_GROWTH = 0.1
#: Vectors a graph must have gained since its last save to be saved on close (catching
#: up on fewer on the next load is cheaper than writing the whole graph).
SAVE_ON_CLOSE = 1000
_ID = re.compile(r"^[A-Za-z0-9_]+$")
_FILE = re.compile(r"^(?P<index>[A-Za-z0-9_]+)-g(?P<generation>\d+)-s(?P<seq>\d+)\.usearch$")


@dataclasses.dataclass
class _Memory:
    dimension: int
    generation: int
    max_seq: int = 0
    keys: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    matrix: np.ndarray | None = None  # exact mode: (n, dimension) unit rows
    graph: Index | None = None  # HNSW mode
    saved: int = 0  # vectors in the graph's newest file (0: none)

    def __len__(self) -> int:
        return len(self.graph) if self.graph is not None else len(self.keys)


class VectorIndexes:
    """The in-memory indexes of the store's vector indexes (by index id). ``directory``:
    where graphs are saved (created when needed; None: never saved)."""

    def __init__(self, exact_max_cells: int = EXACT_MAX_CELLS, directory: Path | None = None) -> None:
        self.exact_max_cells = exact_max_cells
        self.directory = directory
        self.builds = 0  # graphs built from rows (not loaded from a file): what tests watch
        self._memory: dict[str, _Memory] = {}

    def drop(self, index_id: str, *, files: bool = False) -> None:
        """Forget ``index_id``; ``files``: also remove its saved graphs (retired or deleted)."""
        self._memory.pop(index_id, None)
        if files:
            for path, _, _ in self._files(index_id):
                path.unlink(missing_ok=True)

    def clear(self) -> None:
        """Save the graphs grown since their last save, then forget everything (on close)."""
        for index_id, memory in self._memory.items():
            if memory.graph is not None and (
                memory.saved == 0 or len(memory.graph) - memory.saved >= SAVE_ON_CLOSE
            ):
                self._save(index_id, memory)
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
            generation = conn.execute(
                "SELECT generation FROM kb_indexes WHERE id = ?", (index_id,)
            ).fetchone()[0]
            memory = self._memory.get(index_id)
            if memory is None or memory.generation != generation or memory.dimension != dimension:
                memory = self._memory[index_id] = self._restore(
                    conn, index_id, dimension, generation
                ) or _Memory(dimension, generation)
            self._load(conn, index_id, memory)
        finally:
            conn.execute("COMMIT")
        if memory.graph is not None and len(memory.graph) > memory.saved * (1 + SAVE_GROWTH):
            self._save(index_id, memory)

    # ------------------------------------------------------------------ saved graphs

    def _files(self, index_id: str) -> list[tuple[Path, int, int]]:
        """``[(path, generation, row id)...]`` of the index's saved graphs, newest first."""
        if self.directory is None or not _ID.match(index_id) or not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.glob(f"{index_id}-g*-s*.usearch"):
            match = _FILE.match(path.name)
            if match and match["index"] == index_id:
                found.append((path, int(match["generation"]), int(match["seq"])))
        return sorted(found, key=lambda f: (f[1], f[2]), reverse=True)

    def _restore(self, conn: Any, index_id: str, dimension: int, generation: int) -> _Memory | None:
        """The newest saved graph of this generation (None when there is none or it is
        unusable: unreadable, another dimension, or not the table's rows up to its row id;
        unusable files and those of older generations or older than the one loaded are
        removed)."""
        restored = None
        for path, file_generation, seq in self._files(index_id):
            if file_generation > generation:
                continue  # saved by a process that saw a newer snapshot than this one
            if restored is None and file_generation == generation:
                graph = _new_graph(dimension)
                try:
                    graph.load(str(path))
                    loaded = True
                except (RuntimeError, OSError, ValueError):
                    loaded = False
                if (
                    loaded
                    and graph.ndim == dimension
                    and len(graph)
                    == conn.execute(
                        "SELECT count(*) FROM kb_vectors WHERE index_id = ? AND seq <= ?", (index_id, seq)
                    ).fetchone()[0]
                ):
                    restored = _Memory(dimension, generation, max_seq=seq, graph=graph, saved=len(graph))
                    continue
            with contextlib.suppress(OSError):  # another process may have removed it first
                path.unlink()
        return restored

    def _save(self, index_id: str, memory: _Memory) -> None:
        """Write the graph to a temporary file and rename it into place; the index's files
        covering less are removed. A failure (disk full, read-only home) only costs the next
        process a rebuild, so it is not raised."""
        if self.directory is None or memory.graph is None or not _ID.match(index_id):
            return
        name = f"{index_id}-g{memory.generation}-s{memory.max_seq}.usearch"
        try:
            private_directory(self.directory)
            handle, temporary = tempfile.mkstemp(prefix=f".{index_id}-", suffix=".tmp", dir=self.directory)
            os.close(handle)
            try:
                memory.graph.save(temporary)
                os.replace(temporary, self.directory / name)
            finally:
                Path(temporary).unlink(missing_ok=True)
        except (OSError, RuntimeError):
            return
        memory.saved = len(memory.graph)
        for path, generation, seq in self._files(index_id):  # a newer one is another process's
            if (generation, seq) < (memory.generation, memory.max_seq):
                path.unlink(missing_ok=True)

    def search(self, index_id: str, vector: np.ndarray, count: int) -> list[tuple[int, float]]:
        """``[(vector row id, cosine distance)...]`` nearest first (after :meth:`sync`);
        a graph's distances are float16 approximations (exact-mode distances are float32)."""
        memory = self._memory.get(index_id)
        if memory is None or len(memory) == 0 or count < 1:
            return []
        count = min(count, len(memory))
        if memory.graph is not None:
            memory.graph.expansion_search = min(  # type: ignore[misc]  # usearch's setter stands apart from its getter
                EXPANSION_MAX, max(EXPANSION_SEARCH, count + 32, len(memory.graph) // EXPANSION_PER_VECTORS)
            )
            found = memory.graph.search(vector, count)
            return [(int(k), float(d)) for k, d in zip(found.keys, found.distances, strict=True)]
        matrix = memory.matrix
        assert matrix is not None  # exact mode: no graph, the rows in a matrix
        norm = float(np.linalg.norm(vector))
        # one thread: a BLAS or usearch thread pool costs more than it saves at this size
        found = exact_search(
            matrix, vector / norm if norm else vector, count, MetricKind.IP, exact=True, threads=1
        )
        return [(int(memory.keys[i]), float(d)) for i, d in zip(found.keys, found.distances, strict=True)]

    def _load(self, conn: Any, index_id: str, memory: _Memory) -> None:
        while True:
            rows = conn.execute(
                "SELECT seq, embedding FROM kb_vectors WHERE index_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (index_id, memory.max_seq, _BATCH),
            ).fetchall()
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
            self.builds += 1
            memory.graph = _new_graph(memory.dimension)
            memory.graph.add(memory.keys.astype(np.uint64), memory.matrix)
            memory.matrix, memory.keys = None, np.zeros(0, np.int64)


def _new_graph(dimension: int) -> Index:
    return Index(
        ndim=dimension,
        metric="cos",
        dtype="f16",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
