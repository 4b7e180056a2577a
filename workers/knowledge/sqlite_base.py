"""The plumbing under :class:`~workers.knowledge.sqlite.SqliteKnowledgeStore` (see that
module): the store's state, its connection on a thread of its own (WAL, ``BEGIN
IMMEDIATE`` writes), the full-text reader's read-only connection, each tenant's FTS5
table and triggers (made before its first chunk is written), and the SQL fragments every part of the store selects
chunks with. :class:`SqliteStoreBase` is the base of the store's parts."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlean
import sqlite_vec

from engine.ports import StoreError
from workers.sql.connect import BUSY_TIMEOUT_MS

from .bm25 import FULL_TEXT_MEMORY_BYTES, FullTextIndexes
from .hnsw import EXACT_MAX_CELLS, VectorIndexes
from .rows import CHUNK_COLUMNS

__all__ = ["SqliteStoreBase", "full_text_table"]

T = TypeVar("T")

#: The full-text table and triggers of one tenant (``{name}``: :func:`full_text_table`;
#: ``{tenant}``: its id as an SQL string literal). A table per tenant, because FTS5's BM25
#: weighs a term by how many rows of *its table* hold it: in a shared table one tenant's
#: documents would change another's ranking, and a tenant could learn from its scores
#: which words other tenants' documents hold. External content over ``kb_chunks`` (the
#: text is stored once); the triggers keep it in step with every write and cascade.
_TENANT_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5("
    "search_terms, content='kb_chunks', content_rowid='seq', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER IF NOT EXISTS {name}_insert AFTER INSERT ON kb_chunks "
    "WHEN new.tenant_id = {tenant} AND new.kind != 'parent' AND new.search_terms IS NOT NULL BEGIN "
    "INSERT INTO {name}(rowid, search_terms) VALUES (new.seq, new.search_terms); END",
    "CREATE TRIGGER IF NOT EXISTS {name}_delete AFTER DELETE ON kb_chunks "
    "WHEN old.tenant_id = {tenant} AND old.kind != 'parent' AND old.search_terms IS NOT NULL BEGIN "
    "INSERT INTO {name}({name}, rowid, search_terms) VALUES ('delete', old.seq, old.search_terms); END",
    # what the in-memory full-text index checks before answering (workers.knowledge.bm25):
    # the newest full-text row and a generation bumped by each deleted one, kept by every
    # writer of the file
    "INSERT OR IGNORE INTO kb_fts_state (tenant_id, generation, max_seq) SELECT {tenant}, 0, "
    "coalesce(max(seq), 0) FROM kb_chunks WHERE tenant_id = {tenant} AND kind != 'parent' "
    "AND search_terms IS NOT NULL",
    "CREATE TRIGGER IF NOT EXISTS {name}_inserted AFTER INSERT ON kb_chunks "
    "WHEN new.tenant_id = {tenant} AND new.kind != 'parent' AND new.search_terms IS NOT NULL BEGIN "
    "UPDATE kb_fts_state SET max_seq = new.seq WHERE tenant_id = {tenant}; END",
    "CREATE TRIGGER IF NOT EXISTS {name}_deleted AFTER DELETE ON kb_chunks "
    "WHEN old.tenant_id = {tenant} AND old.kind != 'parent' AND old.search_terms IS NOT NULL BEGIN "
    "UPDATE kb_fts_state SET generation = generation + 1 WHERE tenant_id = {tenant}; END",
)
#: one row per tenant with a full-text table made by a store that keeps it (see above)
_FTS_STATE = (
    "CREATE TABLE IF NOT EXISTS kb_fts_state (tenant_id TEXT PRIMARY KEY, "
    "generation INTEGER NOT NULL, max_seq INTEGER NOT NULL)"
)
#: the one full-text table all tenants shared before (converted when a store opens)
_SHARED_FTS = "kb_chunks_fts"


def full_text_table(tenant_id: str) -> str:
    """The name of ``tenant_id``'s FTS5 table: ``kb_fts_`` and 20 hex digits of the id's
    SHA-256 (a name SQL can carry whatever characters the id has)."""
    return "kb_fts_" + hashlib.sha256(tenant_id.encode("utf-8")).hexdigest()[:20]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
        self,
        path: Path,
        *,
        exact_max_cells: int = EXACT_MAX_CELLS,
        index_directory: Path | None = None,
        full_text_memory_bytes: int = FULL_TEXT_MEMORY_BYTES,
    ):
        """``index_directory``: where HNSW graphs are saved for the next process to load
        (``FLOWLOOM_HOME/indexes``; None: every process builds its own);
        ``full_text_memory_bytes``: the bound on the in-memory full-text indexes
        (:mod:`workers.knowledge.bm25`; 0: full text is always ranked by FTS5)."""
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
        # (tenant, term) -> chunks holding it (see _full_text_terms)
        self._term_counts: dict[tuple[str, str], int] = {}
        self._term_counts_at = 0.0
        self._full_text_tenants: set[str] = set()  # tenants whose full-text table this process made or saw
        self._vocabularies: dict[str, str] = {}  # tenant -> the reader's vocabulary table
        self._full_text = FullTextIndexes(self._build_conn, full_text_table, full_text_memory_bytes)

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
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (_SHARED_FTS,)).fetchone() is not None:
            self._split_shared_full_text()
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'kb_fts_state'").fetchone() is None:
            self._add_full_text_state()

    def _add_full_text_state(self) -> None:
        """Make ``kb_fts_state`` and every tenant's state row and triggers (once per file,
        for tenants whose full-text table an earlier version made)."""
        with self._write() as c:
            c.execute(_FTS_STATE)
            self._full_text_tenants.clear()
            for (tenant_id,) in c.execute("SELECT DISTINCT tenant_id FROM kb_chunks").fetchall():
                self._ensure_full_text(c, tenant_id)

    def _ensure_full_text(self, conn: Any, tenant_id: str) -> None:
        """Create ``tenant_id``'s full-text table and triggers unless they exist (in the
        caller's write transaction, before the tenant's first chunk is written)."""
        if tenant_id in self._full_text_tenants:
            return
        name, tenant = full_text_table(tenant_id), _literal(tenant_id)
        for statement in _TENANT_SCHEMA:
            conn.execute(statement.format(name=name, tenant=tenant))
        self._full_text_tenants.add(tenant_id)

    def _split_shared_full_text(self) -> None:
        """Move a store made before full-text tables were per tenant onto them: each
        tenant's table filled from its chunks, the shared table and its triggers dropped
        (one transaction: a crash leaves the old layout, converted at the next open)."""
        with self._write() as c:
            c.execute(_FTS_STATE)
            for (tenant_id,) in c.execute("SELECT DISTINCT tenant_id FROM kb_chunks").fetchall():
                self._ensure_full_text(c, tenant_id)
                c.execute(
                    f"INSERT INTO {full_text_table(tenant_id)}(rowid, search_terms) SELECT seq, search_terms "
                    "FROM kb_chunks WHERE tenant_id = ? AND kind != 'parent' AND search_terms IS NOT NULL",
                    (tenant_id,),
                )
            for trigger in ("kb_chunks_fts_insert", "kb_chunks_fts_delete"):
                c.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            c.execute(f"DROP TABLE IF EXISTS {_SHARED_FTS}")

    def _reader_conn(self) -> Any:
        """The full-text reader's connection (made on its thread at its first search)."""
        if self._reader is None:
            conn = self._reading_conn(check_same_thread=False)
            conn.row_factory = sqlean.Row
            conn.execute("PRAGMA query_only=ON")  # it reads, but for its own temp vocabulary tables
            self._reader = conn
        return self._reader

    def _build_conn(self) -> Any:
        """A connection for the full-text index builds (on their thread; it writes only
        its temp vocabulary tables)."""
        return self._reading_conn()

    def _reading_conn(self, *, check_same_thread: bool = True) -> Any:
        """A new autocommit connection to the file for reads: the busy timeout and memory
        map every reading connection of the store has."""
        conn = sqlean.connect(
            str(self.path),
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=check_same_thread,
        )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        return conn

    def _tenant_terms(self, conn: Any, tenant_id: str) -> str | None:
        """The name of the reader's vocabulary table over ``tenant_id``'s full-text table
        (each term's chunk count, for choosing a query's terms), made at its first use;
        None while the tenant has no full-text table (no chunk written yet)."""
        vocab = self._vocabularies.get(tenant_id)
        if vocab is None:
            name = full_text_table(tenant_id)
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is None:
                return None
            vocab = f"{name}_terms"
            conn.execute("PRAGMA query_only=OFF")  # a temp table: the database file is not written
            try:
                conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {name}, row)"
                )
            finally:
                conn.execute("PRAGMA query_only=ON")
            self._vocabularies[tenant_id] = vocab
        return vocab

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
