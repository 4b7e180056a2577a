"""The full-text part of the SQLite knowledge store (see :mod:`workers.knowledge.sqlite`):
BM25 search over the tenant's FTS5 table, on the read-only reader connection, and the chunk counts
of terms that choose a query's terms. A search is answered from the tenant's in-memory index
(:mod:`workers.knowledge.bm25`: the same rows, order and scores) when it is current with the
search's snapshot, by FTS5 otherwise. :class:`SqliteFullText` is a base of
:class:`~workers.knowledge.sqlite.SqliteKnowledgeStore`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.knowledge.ports import ScoredChunk
from schemas.knowledge import MetadataFilter

from .filters import sqlite_filters
from .rows import scored_from_row
from .sqlite_base import _CHUNK_COLUMNS, _SEARCHABLE, SqliteStoreBase, full_text_table
from .text import fts5_query, query_terms, rarest_terms

__all__ = ["SqliteFullText"]

#: How long the chunk counts of query terms are reused (seconds).
TERM_COUNTS_TTL_S = 10.0


class SqliteFullText(SqliteStoreBase):
    """The full-text search of the knowledge store port on SQLite."""

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
        (:mod:`workers.knowledge.text`), scored by their BM25 (>= 0, higher is better; no
        fixed scale: fusion divides it by its pass's best, so it is left unsquashed)."""
        return await self._read_call(
            self._search_full_text, tenant_id, list(dataset_ids), query, k, list(filters)
        )

    def _search_full_text(
        self, tenant_id: str, dataset_ids: list[str], query: str, k: int, filters: list[MetadataFilter]
    ) -> list[ScoredChunk]:
        conn = self._reader_conn()
        vocab = self._tenant_terms(conn, tenant_id)
        if vocab is None or not dataset_ids or k < 1:
            return []  # the tenant has no chunk yet
        hits = self._search_in_memory(conn, tenant_id, vocab, dataset_ids, query, k, filters)
        if hits is not None:
            return hits
        return self._search_fts5(conn, tenant_id, vocab, dataset_ids, query, k, filters)

    def _search_in_memory(
        self,
        conn: Any,
        tenant_id: str,
        vocab: str,
        dataset_ids: list[str],
        query: str,
        k: int,
        filters: list[MetadataFilter],
    ) -> list[ScoredChunk] | None:
        """What :meth:`_search_fts5` answers, ranked by the tenant's in-memory index
        (:mod:`workers.knowledge.bm25`); None when that index is missing or not built from
        the state this read transaction sees (a build is asked for, not waited on)."""
        conn.execute("BEGIN")  # the state checked and the rows read: one snapshot
        try:
            state = conn.execute(
                "SELECT generation, max_seq FROM kb_fts_state WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()
            index = None if state is None else self._full_text.current(tenant_id, state[0], state[1])
            if index is None:
                return None
            terms = self._full_text_terms(conn, tenant_id, vocab, query, index.doc_count)
            if not terms:
                return []
            seqs, scores = index.rank(terms)
            scope, params = _scope(tenant_id, dataset_ids, filters)
            return self._best_in_scope(conn, seqs, scores, k, scope, params)
        finally:
            conn.execute("COMMIT")

    def _best_in_scope(
        self, conn: Any, seqs: Any, scores: Any, k: int, scope: str, params: list[Any]
    ) -> list[ScoredChunk]:
        """The first ``k`` rows of the ranking ``seqs`` (row ids, best first; ``scores``
        beside them) whose chunks pass ``scope`` (SQL over ``c`` and ``d``), which is what
        FTS5's two statements answer. The ranking is walked a slice at a time: the first
        ``k`` (most searches: the dataset is most of the tenant's chunks), then
        ``max(4 k, 100)`` at a time; SQLite checks a slice's scope on narrow rows and
        reads the whole rows only of those kept."""
        hits: list[ScoredChunk] = []
        start, size = 0, k
        while start < len(seqs) and len(hits) < k:
            rows = conn.execute(
                f"SELECT r.key AS full_text_rank, {_CHUNK_COLUMNS} FROM (SELECT r.key, c.seq FROM "
                "json_each(?) r CROSS JOIN kb_chunks c ON c.seq = r.value JOIN kb_documents d ON "
                f"d.id = c.document_id WHERE {scope} ORDER BY r.key LIMIT ?) r CROSS JOIN kb_chunks c "
                "ON c.seq = r.seq JOIN kb_documents d ON d.id = c.document_id ORDER BY r.key",
                (json.dumps(seqs[start : start + size].tolist()), *params, k - len(hits)),
            ).fetchall()
            hits.extend(scored_from_row(r, max(0.0, float(scores[start + r[0]]))) for r in rows)
            start, size = start + size, max(4 * k, 100)
        return hits

    def _search_fts5(
        self,
        conn: Any,
        tenant_id: str,
        vocab: str,
        dataset_ids: list[str],
        query: str,
        k: int,
        filters: list[MetadataFilter],
    ) -> list[ScoredChunk]:
        """The ``k`` best in scope by FTS5's ``bm25()``, ties in ascending ``seq``."""
        match = fts5_query(self._full_text_terms(conn, tenant_id, vocab, query))
        if match is None:
            return []
        fts = full_text_table(tenant_id)
        scope, params = _scope(tenant_id, dataset_ids, filters)
        # BM25 first, over the tenant's full-text table alone; the scope is checked on the
        # best ``pool`` rows (most searches: the dataset is most of the tenant's chunks).
        # Fewer than ``k`` in scope out of a full pool: rank every match in scope instead.
        # (``bm25()`` ordered by SQLite's sorter, not FTS5's ``ORDER BY rank``: the same
        # scores, a third less time, since FTS5 sorts by rank through a nested statement)
        pool = max(4 * k, 100)
        rows = conn.execute(
            f"SELECT f.score AS rank, {_CHUNK_COLUMNS} FROM (SELECT rowid, bm25({fts}) AS score FROM "
            f"{fts} WHERE {fts} MATCH ? ORDER BY score LIMIT ?) f JOIN kb_chunks c ON c.seq = "
            f"f.rowid JOIN kb_documents d ON d.id = c.document_id WHERE {scope} ORDER BY f.score LIMIT ?",
            (match, pool, *params, k),
        ).fetchall()
        if (
            len(rows) < k
            and conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?)",
                (match, pool),
            ).fetchone()[0]
            >= pool
        ):
            rows = conn.execute(
                f"SELECT bm25({fts}) AS rank, {_CHUNK_COLUMNS} FROM {fts} JOIN kb_chunks c "
                f"ON c.seq = {fts}.rowid JOIN kb_documents d ON d.id = c.document_id "
                f"WHERE {fts} MATCH ? AND {scope} ORDER BY rank LIMIT ?",
                (match, *params, k),
            ).fetchall()
        hits = []
        for row in rows:
            strength = max(0.0, -row["rank"])
            hits.append(scored_from_row(row, strength))
        return hits

    def _full_text_terms(
        self,
        conn: Any,
        tenant_id: str,
        vocab: str,
        query: str,
        doc_count: Callable[[str], int] | None = None,
    ) -> list[str]:
        """The query's terms found in the tenant's index, rarest first, within the postings
        budget (:func:`workers.knowledge.text.rarest_terms`), by chunk counts from the
        tenant's FTS5 vocabulary ``vocab``, kept for :data:`TERM_COUNTS_TTL_S` (a term's
        count changes slowly, and only chooses which terms are ranked). ``doc_count``: the
        counts of an in-memory index current with ``conn``'s snapshot (the vocabulary's
        own, checked when it was built), read instead of the vocabulary."""
        now = time.monotonic()
        if now - self._term_counts_at > TERM_COUNTS_TTL_S or len(self._term_counts) > 100_000:
            self._term_counts, self._term_counts_at = {}, now
        terms = query_terms(query)
        known = self._term_counts
        counts: dict[str, float] = {t: known.get((tenant_id, t), 0) for t in terms}
        asked = [t for t in terms if (tenant_id, t) not in known]
        if asked and doc_count is not None:
            rows = [(t, doc_count(t)) for t in asked]
        elif asked:  # one statement for the terms not counted yet (a query has at most 256)
            rows = conn.execute(
                f"SELECT term, doc FROM temp.{vocab} WHERE term IN ({', '.join('?' * len(asked))})", asked
            ).fetchall()
        for term, count in rows if asked else ():
            counts[term] = count
            if count:  # a term no chunk holds yet is asked again: it may be added any time
                known[tenant_id, term] = count
        return rarest_terms(counts)


def _scope(tenant_id: str, dataset_ids: list[str], filters: list[MetadataFilter]) -> tuple[str, list[Any]]:
    """``(SQL over c and d, its parameters)``: the chunks a full-text search may return -
    the tenant's, of ``dataset_ids``, searchable, passing ``filters``. One condition for
    both rankings (FTS5's and the in-memory index's), so they answer the same rows."""
    where, params = sqlite_filters(filters)
    sql = f"c.tenant_id = ? AND c.dataset_id IN ({', '.join('?' * len(dataset_ids))}) AND {_SEARCHABLE} AND {where}"
    return sql, [tenant_id, *dataset_ids, *params]
