"""The knowledge tables' migration (0006): the vector column follows the server (pgvector
or not), and a downgrade removes everything, the store's own full-text table included."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import pytest
import sqlean

from workers.knowledge import open_knowledge_store
from workers.sql import downgrade, upgrade

KB_TABLES = {"kb_datasets", "kb_indexes", "kb_documents", "kb_chunks", "kb_vectors"}


@pytest.fixture
def plain_postgres_url(make_postgres_database) -> str:
    return make_postgres_database()


@pytest.fixture
def fresh_pgvector_url(make_pgvector_database) -> str:
    return make_pgvector_database()


async def test_sqlite_downgrade_removes_the_knowledge_tables_and_full_text(tmp_path):
    url = f"sqlite:///{tmp_path / 'flowloom.db'}"
    store = await open_knowledge_store(url, tmp_path)  # creates the FTS5 table and its triggers
    await store.close()

    def names() -> set[str]:
        conn = sqlean.connect(str(tmp_path / "flowloom.db"))
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'kb_%'")}
        finally:
            conn.close()

    assert KB_TABLES | {"kb_chunks_fts", "kb_chunks_fts_insert", "kb_chunks_fts_delete", "kb_vectors_deleted"} <= names()
    await downgrade(url, "0005")
    assert names() == set()
    await upgrade(url)
    store = await open_knowledge_store(url, tmp_path)
    assert store.vector_support
    await store.close()


async def _columns(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        return {r[0] for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'kb_vectors'")}
    finally:
        await conn.close()


async def test_postgres_vector_column_follows_the_server(plain_postgres_url, fresh_pgvector_url):
    await upgrade(plain_postgres_url)
    assert "embedding" not in await _columns(plain_postgres_url)
    with_vector = fresh_pgvector_url
    store = await open_knowledge_store(with_vector, Path(os.environ["FLOWLOOM_HOME"]))
    await store.close()
    assert "embedding" in await _columns(with_vector)
    await downgrade(with_vector, "0005")
    assert await _columns(with_vector) == set()
