"""The plumbing under :class:`~workers.knowledge.sqlite.SqliteKnowledgeStore` (see that
module): the store's state, its connection on a thread of its own (WAL, ``BEGIN
IMMEDIATE`` writes), the full-text reader's read-only connection, the FTS5 table and
triggers made when the store opens, and the SQL fragments every part of the store selects
chunks with. :class:`SqliteStoreBase` is the base of the store's parts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlean
import sqlite_vec

from engine.ports import StoreError
from workers.sql.connect import BUSY_TIMEOUT_MS

from .hnsw import EXACT_MAX_CELLS, VectorIndexes
from .rows import CHUNK_COLUMNS

__all__ = ["SqliteStoreBase"]

T = TypeVar("T")

_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_fts USING fts5("
    "search_terms, content='kb_chunks', content_rowid='seq', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_fts_insert AFTER INSERT ON kb_chunks "
    "WHEN new.kind != 'parent' AND new.search_terms IS NOT NULL BEGIN "
    "INSERT INTO kb_chunks_fts(rowid, search_terms) VALUES (new.seq, new.search_terms); END",
    "CREATE TRIGGER IF NOT EXISTS kb_chunks_fts_delete AFTER DELETE ON kb_chunks "
    "WHEN old.kind != 'parent' AND old.search_terms IS NOT NULL BEGIN "
    "INSERT INTO kb_chunks_fts(kb_chunks_fts, rowid, search_terms) VALUES ('delete', old.seq, old.search_terms); END",
)

_CHUNK_COLUMNS = CHUNK_COLUMNS  # what every chunk query selects last (rows.chunk_from_row)
_CHUNKS_FROM = "kb_chunks c JOIN kb_documents d ON d.id = c.document_id"
#: what a search may return: not the chunks of a document whose ingestion failed (they may
#: be a part of it, or vectors of an older version); a document being ingested again stays
#: searchable, so a change of embedding model answers from the old index until the new is built
_SEARCHABLE = "d.status != 'failed'"
#: Bytes of the file each connection reads through a memory map (SQLite's ``mmap_size``):
#: a search reads rows scattered over the file (the chunks and vectors its graph or
#: full-text ranking chose), more than SQLite's 2 MB page cache holds, so each page was
#: copied in by a ``pread`` system call; mapped, the pages are read where the operating
#: system caches them. A limit, not an allocation (a larger file is read past it as before).
MMAP_BYTES = 1 << 30


class SqliteStoreBase:
    """The state and connection plumbing of the SQLite knowledge store."""

    def __init__(
        self, path: Path, *, exact_max_cells: int = EXACT_MAX_CELLS, index_directory: Path | None = None
    ):
        """``index_directory``: where HNSW graphs are saved for the next process to load
        (``FLOWLOOM_HOME/indexes``; None: every process builds its own)."""
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowloom-knowledge")
        self._conn: Any = None
        # full-text searches: a read-only connection on a thread of its own, so a hybrid
        # search's full-text pass runs beside its vector pass (WAL: readers do not block)
        self._reader_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="flowloom-knowledge-read"
        )
        self._reader: Any = None
        self._memory = VectorIndexes(exact_max_cells, index_directory)
        self._term_counts: dict[str, int] = {}  # term -> chunks holding it (see _full_text_terms)
        self._term_counts_at = 0.0

    # -------------------------------------------------------------------- plumbing

    def _connect(self) -> None:
        conn = sqlean.connect(
            str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlean.Row
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            f"busy_timeout={BUSY_TIMEOUT_MS}",
            "foreign_keys=ON",
            f"mmap_size={MMAP_BYTES}",
        ):
            conn.execute(f"PRAGMA {pragma}")
        self._conn = conn
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kb_chunks'").fetchone() is None:
            raise StoreError(
                f"knowledge store {self.path}: the database is not migrated (no kb_chunks table)"
            )
        with self._write() as c:
            for statement in _SCHEMA:
                c.execute(statement)

    def _reader_conn(self) -> Any:
        """The full-text reader's connection (made on its thread at its first search)."""
        if self._reader is None:
            conn = sqlean.connect(
                str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlean.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            # each term's chunk count, for choosing a query's terms (this connection only)
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_chunks_terms USING "
                "fts5vocab(main, kb_chunks_fts, row)"
            )
            conn.execute("PRAGMA query_only=ON")  # it only reads from now on
            self._reader = conn
        return self._reader

    async def _read_call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_executor, lambda: self._guard(fn, *args))

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._guard(fn, *args, **kwargs))

    def _guard(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except sqlean.Error as error:
            raise StoreError(f"knowledge store {self.path}: {type(error).__name__}: {error}") from error

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
