"""The full-text part of the PostgreSQL knowledge store (see :mod:`workers.knowledge.postgres`):
``tsvector`` search ranked by ``ts_rank``, and the planner's lexeme statistics that
choose a query's terms. :class:`PostgresFullText` is a base of
:class:`~workers.knowledge.postgres.PostgresKnowledgeStore`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from engine.knowledge.ports import ScoredChunk
from engine.ports import StoreError
from schemas.knowledge import MetadataFilter

from .filters import postgres_filters
from .postgres_base import _CHUNK_COLUMNS, _SEARCHABLE, PostgresStoreBase
from .rows import scored_from_row
from .text import query_terms, rarest_terms, tsquery_literal

__all__ = ["PENDING_MERGE_QUIET_S", "PENDING_MERGE_ROWS", "PostgresFullText", "full_text_query"]

#: How long lexeme statistics are reused, and when (and how often) the store analyzes
#: the chunks itself (statistics missing or older than half the rows).
_STATS_TTL_S = 60.0
_ANALYZE_MIN_ROWS = 2000
_ANALYZE_EVERY_S = 300.0
#: Chunks this store inserts before it merges the full-text index's pending entries
#: (:meth:`PostgresFullText._merge_pending_soon`) while it keeps inserting: about 50
#: pages of them at most, where PostgreSQL's own limit (4 MB) is ten times as many.
#: Every 500 made ingestion's statements wait for the merges (chunks/s -15 % on the
#: knowledge bench's topics).
PENDING_MERGE_ROWS = 2000
#: Seconds without an insert after which the chunks inserted since the last merge are
#: merged, however few: an ingestion's end, before the searches that follow it.
PENDING_MERGE_QUIET_S = 0.5


def full_text_query(where: str) -> str:
    """The ranked full-text query (``$1`` tsquery, ``$2`` tenant, ``$3`` dataset ids, ``$4``
    k; ``where``: the metadata filters over ``d``, parameters from ``$5``): the ``k`` best
    chunks in scope by ``ts_rank`` (ties by id). The matches come from the GIN index
    alone (a materialized step, run with sequential scans off on the search pool's
    connections: the planner, unsure of an OR of lexemes, would otherwise read every chunk
    of the tenant's datasets and test each), ranked on the rows that scan reads; only the ``k`` best are read again with
    their text (joining every match back to its row by key cost more than ranking it)."""
    return (
        "WITH m AS MATERIALIZED (SELECT seq, id, document_id, CASE WHEN tenant_id = $2 AND dataset_id = "
        "ANY($3::text[]) THEN ts_rank(search_vector, $1::tsquery) END AS rank FROM kb_chunks "
        "WHERE search_vector @@ $1::tsquery), "
        "top AS (SELECT m.seq, m.id, m.rank FROM m JOIN kb_documents d ON d.id = m.document_id "
        f"WHERE m.rank IS NOT NULL AND {_SEARCHABLE} AND {where} ORDER BY m.rank DESC, m.id LIMIT $4) "
        f"SELECT top.rank, {_CHUNK_COLUMNS} FROM top JOIN kb_chunks c ON c.seq = top.seq "
        "JOIN kb_documents d ON d.id = c.document_id ORDER BY top.rank DESC, top.id"
    )


class PostgresFullText(PostgresStoreBase):
    """The full-text search of the knowledge store port on PostgreSQL."""

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
        ``ts_rank`` (>= 0, higher is better; no fixed scale: fusion divides it by its pass's
        best, so it is not squashed into [0, 1)): how often
        the query's terms occur in the chunk (a term's further occurrences count less). Not
        ``ts_rank_cd`` (cover density: how close the matched terms stand), which costs
        about twice the database CPU per matching chunk (a search ranks several hundred)
        and, on the knowledge bench's 50 questions, found fewer right topics (recall@10
        0.98 against 1.00, MRR@10 0.71 against 0.82)."""
        if not dataset_ids or k < 1:
            return []
        where, params = postgres_filters(filters, 5)
        tsquery = tsquery_literal(await self._full_text_terms(query))
        if tsquery is None:
            return []
        async with self._search() as c:  # sequential scans off: the search pool's setting
            rows = await c.fetch(full_text_query(where), tsquery, tenant_id, list(dataset_ids), k, *params)
        return [scored_from_row(r, float(r["rank"])) for r in rows]

    async def _full_text_terms(self, query: str) -> list[str]:
        """The query's terms, rarest first, within the postings budget
        (:func:`workers.knowledge.text.rarest_terms`), by chunk counts estimated from the
        planner's lexeme statistics of ``search_vector`` (a lexeme not among the most
        common ones counts as the least common of them). No statistics: every term."""
        terms = query_terms(query)
        if len(terms) <= 1:
            return terms
        stats = await self._lexeme_stats()
        if stats is None:
            return terms
        rows, freqs, floor = stats
        return rarest_terms({t: max(freqs.get(t, floor) * rows, 1.0) for t in terms})

    async def _lexeme_stats(self) -> tuple[float, dict[str, float], float] | None:
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
        async with self._read() as c:  # a connection only when the statistics are read
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

    def _inserted(self, rows: int) -> None:
        """Count ``rows`` chunks this store inserted: the lexeme statistics may be stale,
        and the full-text index's pending entries are merged (:meth:`_merge_pending_soon`)
        every :data:`PENDING_MERGE_ROWS`, or once no chunk was inserted for
        :data:`PENDING_MERGE_QUIET_S`."""
        self._chunks_written += rows
        self._pending_rows += rows
        if self._merge_later is not None:
            self._merge_later.cancel()
            self._merge_later = None
        if self._pending_rows >= PENDING_MERGE_ROWS:
            self._merge_pending_soon()
        elif self._pending_rows > 0:
            self._merge_later = asyncio.get_running_loop().call_later(
                PENDING_MERGE_QUIET_S, self._merge_pending_soon
            )

    def _merge_pending_soon(self) -> None:
        """``gin_clean_pending_list`` of the full-text index, in a task of its own on a
        connection of its own. PostgreSQL adds a new row's lexemes to a GIN index's
        *pending list*, merged into the index only by a vacuum, an automatic analyze or
        once 4 MB of them wait; until then every full-text search reads the whole list.
        After 10k chunks were inserted that was ≈240 pages, and the knowledge bench's
        full-text pass took 3.5-4.7 ms instead of 2.1-2.7 with the list merged. The
        merge is the work a vacuum would do later, done sooner, beside ingestion. A failure
        (a role that does not own the index, a read-only server) is left: the list is
        then merged by PostgreSQL as before."""
        self._merge_later = None
        if self._merging is not None and not self._merging.done():
            return
        self._pending_rows = 0

        async def merge() -> None:
            with contextlib.suppress(StoreError):
                async with self._read() as c:
                    await c.execute("SELECT gin_clean_pending_list('ix_kb_chunks_search'::regclass)")

        self._merging = asyncio.get_running_loop().create_task(merge())
