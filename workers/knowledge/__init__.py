"""Knowledge stores: datasets, documents, chunks and vectors in SQLite or PostgreSQL.

:func:`open_knowledge_store` picks the store by the database URL: SQLite ->
:class:`SqliteKnowledgeStore` (sqlite-vec, FTS5, in-memory exact or HNSW indexes; see
its module for why a process running the run store on SQLite gives it a file of its
own); PostgreSQL -> :class:`PostgresKnowledgeStore` (pgvector when the server has it,
``tsvector``). The schema is migrated first (the Alembic migrations of
:mod:`workers.sql`, the same revisions as the run store's).
"""

from __future__ import annotations

from pathlib import Path

from engine.knowledge.ports import KnowledgeStore
from engine.ports import StoreError
from workers.sql.connect import normalize_url
from workers.sql.migrate import upgrade

from .bm25 import FULL_TEXT_MEMORY_BYTES
from .sqlite import SqliteKnowledgeStore

__all__ = ["SqliteKnowledgeStore", "open_knowledge_store", "vector_support_warning"]


async def open_knowledge_store(
    database_url: str, home: Path, *, full_text_memory_bytes: int = FULL_TEXT_MEMORY_BYTES
) -> KnowledgeStore:
    """The knowledge store of the database at ``database_url`` (migrated to the newest
    schema first). ``home``: ``FLOWLOOM_HOME`` (the SQLite store saves its HNSW graphs in
    ``home/indexes`` for the next process to load instead of rebuilding);
    ``full_text_memory_bytes``: the SQLite store's bound on its in-memory full-text
    indexes (:mod:`workers.knowledge.bm25`; 0: none). Raises StoreError when the database
    cannot be reached or the URL names another database."""
    url = normalize_url(database_url)
    await upgrade(url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            raise StoreError("the knowledge store needs a SQLite file (not an in-memory database)")
        return await SqliteKnowledgeStore.open(
            Path(database).expanduser(),
            index_directory=Path(home) / "indexes",
            full_text_memory_bytes=full_text_memory_bytes,
        )
    from .postgres import PostgresKnowledgeStore

    return await PostgresKnowledgeStore.open(url)


def vector_support_warning(store: KnowledgeStore) -> str | None:
    """The start-up warning for a store without vector support (None when it has it):
    what is missing (the ``vector`` extension) and what needs it."""
    if store.vector_support:
        return None
    return (
        "warning: the PostgreSQL server has no 'vector' extension (pgvector): datasets with an "
        "embedding model and semantic or hybrid search are unavailable; full-text datasets and "
        "full-text search work. Install pgvector on the server to enable them."
    )
