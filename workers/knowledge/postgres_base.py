"""The plumbing under :class:`~workers.knowledge.postgres.PostgresKnowledgeStore` (see that
module): the store's state, its pooled connections and transactions, driver errors as
StoreError, and the SQL fragments every part of the store selects chunks with.
:class:`PostgresStoreBase` is the base of the store's parts.

Two pools: the store's own, whose connections keep PostgreSQL's default planner settings
(every setting made on them is transaction-local), and the *search* pool, whose
connections are opened with the planner settings the nearest-neighbour and full-text
queries need (:data:`SEARCH_SETTINGS`) as session settings. A search's query then runs
alone, in one round trip, instead of between a ``BEGIN`` with its ``SET LOCAL``
statements and a ``COMMIT`` (three): on a busy host every round trip waits for the
server process to be scheduled, and the search's own statement is short. Only the
search queries run there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
from sqlalchemy.engine import URL

from engine.knowledge.ports import VectorSearchUnavailable
from engine.ports import StoreError
from workers.sql.connect import mask_url

from .rows import CHUNK_COLUMNS

__all__ = ["PostgresStoreBase"]

#: a connection as the pool lends it (a proxy with the connection's methods)
_Conn = asyncpg.pool.PoolConnectionProxy

_CHUNK_COLUMNS = CHUNK_COLUMNS  # what every chunk query selects last (rows.chunk_from_row)
#: what a search may return: not the chunks of a document whose ingestion failed (they may
#: be a part of it, or vectors of an older version); a document being ingested again stays
#: searchable, so a change of embedding model answers from the old index until the new is built
_SEARCHABLE = "d.status <> 'failed'"
#: The session settings of the search pool's connections: the planner must walk the HNSW
#: and GIN indexes, not rank every vector of an index (a sort plan) or read every chunk
#: of the tenant's datasets (a sequential scan), which it would choose with few rows or
#: stale statistics, or unsure of an OR of lexemes.
SEARCH_SETTINGS = {"enable_seqscan": "off", "enable_sort": "off"}


class SearchConnection(asyncpg.Connection):
    """A connection of the search pool: it remembers the HNSW search breadth
    (``hnsw.ef_search``) last set on its session, so a search sets it only when it needs
    another (a round trip), not every time."""

    __slots__ = ("_hnsw_breadth",)

    def hnsw_breadth(self) -> int | None:
        """The breadth set on this session (None: not set yet, pgvector's default)."""
        return getattr(self, "_hnsw_breadth", None)

    def set_hnsw_breadth(self, breadth: int) -> None:
        """Record the breadth just set on this session."""
        self._hnsw_breadth = breadth


class PostgresStoreBase:
    """The state and connection plumbing of the PostgreSQL knowledge store."""

    def __init__(self, pool: asyncpg.Pool, url: URL, vector_support: bool, search_pool: asyncpg.Pool):
        self._pool, self._url, self.vector_support = pool, url, vector_support
        self._search_pool = search_pool  # connections with SEARCH_SETTINGS (module docstring)
        self._index_rows: dict[str, tuple[float, float]] = {}  # HNSW index -> (read at, reltuples)
        self._hnsw_ready: set[str] = set()  # index ids whose HNSW index exists
        self._dimensions: dict[str, int] = {}  # index id -> its dimension (set once, never changed)
        self._lexemes: tuple[float, float, dict[str, float], float] | None = (
            None  # (read at, rows, freqs, floor)
        )
        self._analyzed_at = 0.0
        self._analyzing: asyncio.Task[None] | None = None  # the ANALYZE running off the search path
        self._chunks_written = 0  # chunks this store inserted since it last read the statistics
        self._pending_rows = 0  # chunks inserted since the full-text index's pending entries were merged
        self._merging: asyncio.Task[None] | None = None  # that merge, off the ingestion's path
        self._merge_later: asyncio.TimerHandle | None = None  # the merge once inserts pause

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
    async def _search(self) -> AsyncIterator[_Conn]:
        """A connection of the search pool (:data:`SEARCH_SETTINGS` in effect), for reads
        whose statements need no common snapshot; its session settings are left as set."""
        with _errors(self._url):
            async with self._search_pool.acquire() as conn:
                yield conn

    def _need_vectors(self) -> None:
        if not self.vector_support:
            raise VectorSearchUnavailable(
                f"PostgreSQL at {mask_url(self._url)} has no 'vector' extension (pgvector): datasets with an "
                "embedding model, semantic search and hybrid search need it; full-text datasets and full-text "
                "search work without it"
            )


@contextlib.contextmanager
def _errors(url: URL):
    """Driver and connection failures as StoreError naming the masked URL."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise StoreError(f"database {mask_url(url)}: {type(error).__name__}: {error}") from error
    except OSError as error:
        raise StoreError(f"cannot reach database {mask_url(url)}: {error}") from error
