"""In-memory BM25 over a tenant's full-text rows: the SQLite store's FTS5 ranking, faster.

FTS5's ``bm25()`` walks its segment b-trees and calls back per row (about 0.6 ms a query
at 10k chunks); the same ranking over postings held in numpy arrays takes about a fifth of
that. This index only accelerates: it answers exactly what the FTS5 statement would (the
same rows, order and scores, to the bit) or it does not answer, and the store asks FTS5.

What it holds, per tenant (FTS5 weighs a term by the rows of the tenant's own table, so
the index covers the tenant's table, every dataset; a search keeps its scope afterwards):
each term's postings (row positions, term frequencies), each row's ``seq`` and length in
tokens, the row count and the average length. Lengths, the row count and the token total
are read from FTS5's own shadow tables (``_docsize``, the averages record of ``_data``);
the postings come from splitting ``kb_chunks.search_terms`` on spaces (the terms hold only
letters and digits) and are checked against FTS5's vocabulary (each term's row and token
counts): an index that differs from FTS5 anywhere is not used.

Scores follow ``fts5_aux.c`` operation by operation (idf ``log((N - n + 0.5) / (n + 0.5))``,
at least 1e-6; per term ``idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl))``,
summed in the query's term order), so they are the same doubles.

In step with the database the way the vector indexes are (:mod:`workers.knowledge.hnsw`):
two numbers in ``kb_fts_state`` per tenant, kept by triggers that fire for every writer
of the file (this process, another process, an older version): ``max_seq``, the newest
full-text row, and ``generation``, bumped whenever one is deleted. An index answers only
when both equal what it was built from, read in the search's own read transaction.

Builds never run on a search's path: a search that finds the index missing or stale asks
for a build and is answered by FTS5; one thread builds (so at most one build per tenant
at a time), on a read-only connection of its own, in one read transaction; a tenant
whose build was slow is built again only after a pause (:data:`REBUILD_PACE`). Indexes are
kept within ``memory_bytes`` (least recently searched tenants dropped first); a tenant
whose index alone is larger stays on FTS5.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["FULL_TEXT_MEMORY_BYTES", "FullTextIndexes", "TenantIndex", "fts5_varint"]

#: Default bound on the in-memory full-text indexes of one store (bytes of arrays, plus
#: an estimate of the dictionaries'). About 0.6 MB per thousand chunks of 400 characters
#: (6.0 MB for the bench's 10k chunks).
FULL_TEXT_MEMORY_BYTES = 256 * 1024 * 1024
#: FTS5's bm25() parameters (its defaults; the store never passes others).
K1 = 1.2
B = 0.75
#: A tenant whose build took longer than this (seconds) is not built again until
#: :data:`REBUILD_PACE` times that long has passed since the build ended: while its rows keep
#: changing (an ingestion beside searches), every search would otherwise ask for a rebuild,
#: and at 100k chunks each one costs about 2 s of CPU; so rebuilds take at most about a
#: quarter of a core, and FTS5 answers meanwhile (the same results). Smaller tenants, whose
#: builds cost little, are rebuilt as soon as asked.
PACED_BUILD_S = 0.1
REBUILD_PACE = 3.0
#: Bytes counted per term beyond its arrays (the dict entry, the key, two array headers).
_TERM_OVERHEAD = 300


def fts5_varint(blob: bytes, at: int = 0) -> tuple[int, int]:
    """SQLite's varint at ``blob[at:]`` (big-endian 7-bit groups, the ninth byte whole):
    ``(value, next offset)``. Raises IndexError on a truncated blob."""
    value = 0
    for i in range(8):
        byte = blob[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | blob[at + 8], at + 9


@dataclasses.dataclass(frozen=True)
class TenantIndex:
    """One tenant's postings as of ``(generation, max_seq)``; read-only once built."""

    generation: int
    max_seq: int
    rows: int  # FTS5's row count (N)
    avgdl: float  # FTS5's token total / N
    seqs: np.ndarray  # (N,) int64, ascending
    norm: np.ndarray  # (N,) float64: k1 * (1 - b + b * D / avgdl), as fts5_aux.c computes it
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (positions int32, tf float64)
    nbytes: int

    def doc_count(self, term: str) -> int:
        """Rows holding ``term`` (0 when none)."""
        found = self.postings.get(term)
        return 0 if found is None else len(found[0])

    def rank(self, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(seqs, scores)`` of every row matching any of ``terms`` (the MATCH's OR, in its
        term order), best first, ties by ascending ``seq`` (as SQLite's sorter leaves FTS5's
        rowid order); scores are ``-bm25()`` (>= 0)."""
        score = np.zeros(len(self.seqs))
        for term in terms:
            found = self.postings.get(term)
            if found is None:
                continue
            positions, tf = found
            hits = len(positions)
            idf = math.log((self.rows - hits + 0.5) / (float(hits) + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            score[positions] += idf * ((tf * (K1 + 1.0)) / (tf + self.norm[positions]))
        matched = np.flatnonzero(score)
        order = matched[np.argsort(-score[matched], kind="stable")]
        return self.seqs[order], score[order]


def build_index(conn: Any, tenant_id: str, table: str) -> tuple[tuple[int, int] | None, TenantIndex | None]:
    """``(state, index)``: the tenant's ``(generation, max_seq)`` and its index, from
    ``conn`` (in the caller's read transaction; ``table``: its FTS5 table, whose
    ``temp.<table>_build_terms`` vocabulary the caller made). The index is None when the
    tenant has no row, or FTS5 disagrees with the split terms; the state when the tenant
    has no state row."""
    row = conn.execute(
        "SELECT generation, max_seq FROM kb_fts_state WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    if row is None:
        return None, None
    state = (int(row[0]), int(row[1]))
    return state, _postings(conn, tenant_id, table, state)


def _postings(conn: Any, tenant_id: str, table: str, state: tuple[int, int]) -> TenantIndex | None:
    averages = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    if averages is None:
        return None
    rows, at = fts5_varint(averages[0])
    tokens, _ = fts5_varint(averages[0], at)
    sizes = dict(conn.execute(f"SELECT id, sz FROM {table}_docsize").fetchall())
    chunks = conn.execute(
        "SELECT seq, search_terms FROM kb_chunks WHERE tenant_id = ? AND kind != 'parent' "
        "AND search_terms IS NOT NULL ORDER BY seq",
        (tenant_id,),
    ).fetchall()
    if rows == 0 or len(chunks) != rows or len(sizes) != rows:
        return None
    lists: dict[str, tuple[list[int], list[int]]] = {}
    lengths = np.empty(rows, dtype=np.float64)
    for position, (seq, text) in enumerate(chunks):
        blob = sizes.get(seq)
        if blob is None:
            return None
        lengths[position] = fts5_varint(blob)[0]
        for term, tf in collections.Counter(text.split()).items():
            entry = lists.get(term)
            if entry is None:
                entry = lists[term] = ([], [])
            entry[0].append(position)
            entry[1].append(tf)
    vocabulary = conn.execute(f"SELECT term, doc, cnt FROM temp.{table}_build_terms").fetchall()
    if len(vocabulary) != len(lists):
        return None
    for term, docs, count in vocabulary:
        entry = lists.get(term)
        if entry is None or len(entry[0]) != docs or sum(entry[1]) != count:
            return None
    avgdl = float(tokens) / float(rows)
    norm = K1 * (1 - B + B * lengths / avgdl)
    postings = {
        t: (np.asarray(p, dtype=np.int32), np.asarray(f, dtype=np.float64)) for t, (p, f) in lists.items()
    }
    nbytes = 16 * rows + sum(p.nbytes + f.nbytes + _TERM_OVERHEAD + len(t) for t, (p, f) in postings.items())
    seqs = np.fromiter((c[0] for c in chunks), dtype=np.int64, count=rows)
    return TenantIndex(*state, rows, avgdl, seqs, norm, postings, nbytes)


class FullTextIndexes:
    """The store's in-memory full-text indexes (by tenant), built on a thread of their own.

    ``connect``: makes a connection to the store's file (called on the build thread);
    ``table_of``: a tenant's FTS5 table name; ``memory_bytes``: the bound (0: never build)."""

    def __init__(self, connect: Callable[[], Any], table_of: Callable[[str], str], memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self.builds = 0  # indexes built: what tests watch
        self._connect = connect
        self._table_of = table_of
        self._lock = threading.Lock()
        self._indexes: collections.OrderedDict[str, TenantIndex] = collections.OrderedDict()
        self._pending: set[str] = set()
        self._refused: dict[str, tuple[int, int]] = {}  # tenant -> state not to build again
        self._not_before: dict[str, float] = {}  # tenant -> monotonic time of its next build (PACED_BUILD_S)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowloom-full-text-build")
        self._conn: Any = None

    def current(self, tenant_id: str, generation: int, max_seq: int) -> TenantIndex | None:
        """The tenant's index when it was built from exactly this state (it becomes the most
        recently used); otherwise None, and a build is asked for (never waited on)."""
        with self._lock:
            index = self._indexes.get(tenant_id)
            if index is not None and (index.generation, index.max_seq) == (generation, max_seq):
                self._indexes.move_to_end(tenant_id)
                return index
            if (
                self.memory_bytes > 0
                and tenant_id not in self._pending
                and self._refused.get(tenant_id) != (generation, max_seq)
                and time.monotonic() >= self._not_before.get(tenant_id, 0.0)
            ):
                self._pending.add(tenant_id)
                self._executor.submit(self._build, tenant_id)
        return None

    def drop(self, tenant_id: str) -> None:
        with self._lock:
            self._indexes.pop(tenant_id, None)

    def close(self) -> None:
        """Wait for a running build, close the build connection, forget every index (once;
        no build is asked for after)."""
        with self._lock:
            if self.memory_bytes < 0:
                return
            self.memory_bytes = -1  # closed: current() asks for no build
            self._executor.submit(self._close_conn)
        self._executor.shutdown(wait=True)
        with self._lock:
            self._indexes.clear()

    def memory(self) -> int:
        """Bytes the kept indexes count for."""
        with self._lock:
            return sum(i.nbytes for i in self._indexes.values())

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _build(self, tenant_id: str) -> None:
        started = time.monotonic()
        try:
            state, index = self._read(tenant_id)
        except Exception:  # a failed build leaves the tenant on FTS5 (retried at the next change)
            state, index = None, None
        ended = time.monotonic()
        with self._lock:
            self._pending.discard(tenant_id)
            self.builds += 1
            if ended - started > PACED_BUILD_S:
                self._not_before[tenant_id] = ended + REBUILD_PACE * (ended - started)
            else:
                self._not_before.pop(tenant_id, None)
            if index is None or index.nbytes > self.memory_bytes:
                # unusable or too large as of this state: FTS5 answers until the state moves
                self._indexes.pop(tenant_id, None)
                if state is not None:
                    self._refused[tenant_id] = state
                return
            self._refused.pop(tenant_id, None)
            self._indexes[tenant_id] = index
            self._indexes.move_to_end(tenant_id)
            total = sum(i.nbytes for i in self._indexes.values())
            while total > self.memory_bytes:
                _, dropped = self._indexes.popitem(last=False)
                total -= dropped.nbytes

    def _read(self, tenant_id: str) -> tuple[tuple[int, int] | None, TenantIndex | None]:
        if self._conn is None:
            self._conn = self._connect()
        conn, table = self._conn, self._table_of(tenant_id)
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_build_terms USING fts5vocab(main, {table}, row)"
        )
        conn.execute("BEGIN")
        try:
            return build_index(conn, tenant_id, table)
        finally:
            with contextlib.suppress(Exception):
                conn.execute("COMMIT")
