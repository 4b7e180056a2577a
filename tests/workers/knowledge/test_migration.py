"""The knowledge tables' migration (0006): the vector column follows the server (pgvector
or not), and a downgrade removes everything, the store's own full-text table included."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import pytest
import sqlean

from tests.workers.knowledge.conftest import dataset, document, drafts
from workers.knowledge import open_knowledge_store
from workers.knowledge.sqlite_base import full_text_table
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
    store = await open_knowledge_store(url, tmp_path)
    await store.create_dataset(dataset("t1"))
    doc, _ = await store.put_document(document("t1", "ds", "a.txt"))
    await store.replace_chunks("t1", doc.id, drafts("some words"))  # the tenant's FTS5 table and triggers
    await store.close()

    def names() -> set[str]:
        conn = sqlean.connect(str(tmp_path / "flowloom.db"))
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'kb_%'")}
        finally:
            conn.close()

    fts = full_text_table("t1")
    assert KB_TABLES | {fts, f"{fts}_insert", f"{fts}_delete", "kb_vectors_deleted"} <= names()
    await downgrade(url, "0005")
    assert names() == set()
    await upgrade(url)
    store = await open_knowledge_store(url, tmp_path)
    assert store.vector_support
    await store.close()


async def test_sqlite_store_with_one_shared_full_text_table_is_split_per_tenant_on_open(tmp_path):
    """A store written before full-text tables were per tenant: its shared table (and
    triggers) become one table per tenant when it opens, and every chunk is found again."""
    url = f"sqlite:///{tmp_path / 'flowloom.db'}"
    store = await open_knowledge_store(url, tmp_path)
    for tenant in ("t1", "t2"):
        await store.create_dataset(dataset(tenant))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        await store.replace_chunks(tenant, doc.id, drafts(f"alpha words of {tenant}", "beta words"))
    await store.close()
    conn = sqlean.connect(str(tmp_path / "flowloom.db"))  # the layout of the older stores
    with conn:
        for tenant in ("t1", "t2"):
            fts = full_text_table(tenant)
            conn.execute(f"DROP TRIGGER {fts}_insert")
            conn.execute(f"DROP TRIGGER {fts}_delete")
            conn.execute(f"DROP TABLE {fts}")
        conn.execute("CREATE VIRTUAL TABLE kb_chunks_fts USING fts5(search_terms, content='kb_chunks', "
                     "content_rowid='seq', tokenize='unicode61 remove_diacritics 0')")
        conn.execute("CREATE TRIGGER kb_chunks_fts_insert AFTER INSERT ON kb_chunks BEGIN SELECT 1; END")
        conn.execute("CREATE TRIGGER kb_chunks_fts_delete AFTER DELETE ON kb_chunks BEGIN SELECT 1; END")
        conn.execute("INSERT INTO kb_chunks_fts(kb_chunks_fts) VALUES ('rebuild')")
    conn.close()
    store = await open_knowledge_store(url, tmp_path)
    try:
        for tenant in ("t1", "t2"):
            hits = await store.search_full_text(tenant, ["ds"], "alpha", 5)
            assert [h.chunk.text for h in hits] == [f"alpha words of {tenant}"]
    finally:
        await store.close()
    conn = sqlean.connect(str(tmp_path / "flowloom.db"))
    try:
        left = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'kb_chunks_fts%'")}
    finally:
        conn.close()
    assert left == set()


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
