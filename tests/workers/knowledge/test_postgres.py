"""The PostgreSQL knowledge store's own behaviour: without pgvector (Debian's server) it
serves full text and says what vectors need; with pgvector its HNSW index is what
answers, with the results of exact search."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from engine.knowledge.ports import VectorSearchUnavailable
from workers.knowledge import open_knowledge_store, postgres_full_text, vector_support_warning
from workers.knowledge.postgres import hnsw_breadth, nearest_query
from workers.knowledge.postgres_base import SEARCH_SETTINGS

from .conftest import dataset, document, drafts


@pytest.fixture
def plain_postgres_url(make_postgres_database) -> str:
    """A fresh database on Debian's PostgreSQL (no pgvector)."""
    return make_postgres_database()


async def test_without_pgvector_full_text_works_and_vectors_say_what_is_missing(plain_postgres_url, tenant):
    url = plain_postgres_url
    store = await open_knowledge_store(url, Path(os.environ["FLOWLOOM_HOME"]))
    try:
        assert store.vector_support is False
        warning = vector_support_warning(store)
        assert "'vector' extension" in warning and "full-text" in warning and "semantic" in warning
        await store.create_dataset(dataset(tenant))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        chunks = await store.replace_chunks(tenant, doc.id, drafts("向量数据库的扩展", "plain words"))
        hits = await store.search_full_text(tenant, ["ds"], "数据库", 5)
        assert [h.chunk.id for h in hits] == [chunks[0].id]
        with pytest.raises(VectorSearchUnavailable) as error:
            await store.create_dataset(dataset(tenant, "emb", embedding_model="text-embedding-3-small"))
        assert "'vector' extension" in str(error.value) and "semantic search" in str(error.value)
        assert "password" not in str(error.value)
        for call in (store.create_index(tenant, "ds", "m"), store.search_vectors(tenant, "0" * 32, [1.0], 3),
                     store.put_vectors(tenant, "0" * 32, [(chunks[0].id, [1.0])]),
                     store.chunks_without_vector(tenant, "0" * 32)):
            with pytest.raises(VectorSearchUnavailable, match="hybrid search"):
                await call
        with pytest.raises(VectorSearchUnavailable):
            await store.update_dataset(tenant, "ds", {"embedding_model": "m"})
    finally:
        await store.close()


async def test_stale_full_text_statistics_are_refreshed_beside_the_search_not_in_it(plain_postgres_url, tenant):
    """A search that finds the statistics missing answers at once and leaves ANALYZE to a
    task: here a transaction holding the lock ANALYZE needs keeps it waiting, and the
    search must not wait with it."""
    store = await open_knowledge_store(plain_postgres_url, Path(os.environ["FLOWLOOM_HOME"]))
    blocker = await asyncpg.connect(plain_postgres_url)
    try:
        await store.create_dataset(dataset(tenant))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        texts = [f"common word{i % 50} rare{i}" for i in range(2500)]
        await store.replace_chunks(tenant, doc.id, drafts(*texts))
        for _ in range(100):  # the server publishes row counts a moment after the commit
            live = await blocker.fetchval(
                "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'kb_chunks' "
                "AND schemaname = current_schema()"
            )
            if live >= len(texts):
                break
            await asyncio.sleep(0.1)
        await blocker.execute("BEGIN; LOCK TABLE kb_chunks IN SHARE UPDATE EXCLUSIVE MODE")
        hits = await asyncio.wait_for(store.search_full_text(tenant, ["ds"], "common rare7 word7", 5), 10)
        assert hits and hits[0].chunk.text == "common word7 rare7"
        assert store._analyzing is not None and not store._analyzing.done()  # waiting for the lock
        await blocker.execute("COMMIT")
        await asyncio.wait_for(store._analyzing, 30)
        analyzed = await blocker.fetchval(
            "SELECT most_common_elems IS NOT NULL FROM pg_stats WHERE tablename = 'kb_chunks' "
            "AND attname = 'search_vector' AND schemaname = current_schema()"
        )
        assert analyzed is True
        again = await store.search_full_text(tenant, ["ds"], "common rare7 word7", 1)
        assert [h.chunk.id for h in again] == [hits[0].chunk.id]  # ranked by the chosen terms now
        assert store._lexemes is not None and store._lexemes[1] >= 2500  # the new statistics were read
    finally:
        await blocker.close()
        await store.close()


async def test_inserted_chunks_pending_in_the_full_text_index_are_merged(plain_postgres_url, tenant, monkeypatch):
    """New rows' lexemes wait in the GIN index's pending list, which every full-text
    search reads whole; the store merges them once it inserted enough chunks."""
    monkeypatch.setattr(postgres_full_text, "PENDING_MERGE_ROWS", 3)
    monkeypatch.setattr(postgres_full_text, "PENDING_MERGE_QUIET_S", 60.0)
    url = plain_postgres_url
    store = await open_knowledge_store(url, Path(os.environ["FLOWLOOM_HOME"]))
    conn = await asyncpg.connect(url)
    merge = "SELECT gin_clean_pending_list('ix_kb_chunks_search'::regclass)"
    try:
        await store.create_dataset(dataset(tenant))
        first, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        await store.replace_chunks(tenant, first.id, drafts("steel cables", "green tea"))
        assert store._merging is None  # two chunks: below the count
        assert await conn.fetchval(merge) > 0  # they were pending (merged here)
        second, _ = await store.put_document(document(tenant, "ds", "b.txt"))
        await store.replace_chunks(tenant, second.id, drafts("rocket fuel", "black tea", "river bridges"))
        assert store._merging is not None
        await store._merging
        assert await conn.fetchval(merge) == 0  # the store merged them
        hits = await store.search_full_text(tenant, ["ds"], "tea", 5)
        assert sorted(h.chunk.text for h in hits) == ["black tea", "green tea"]
    finally:
        await conn.close()
        await store.close()


async def test_a_few_inserted_chunks_are_merged_once_inserts_pause(plain_postgres_url, tenant, monkeypatch):
    monkeypatch.setattr(postgres_full_text, "PENDING_MERGE_QUIET_S", 0.2)
    url = plain_postgres_url
    store = await open_knowledge_store(url, Path(os.environ["FLOWLOOM_HOME"]))
    conn = await asyncpg.connect(url)
    try:
        await store.create_dataset(dataset(tenant))
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        await store.replace_chunks(tenant, doc.id, drafts("steel cables", "green tea"))
        assert store._merging is None  # not while inserts may follow
        await asyncio.sleep(0.5)
        assert store._merging is not None
        await store._merging
        assert await conn.fetchval("SELECT gin_clean_pending_list('ix_kb_chunks_search'::regclass)") == 0
    finally:
        await conn.close()
        await store.close()


async def test_pgvector_hnsw_index_answers_like_exact_search(pgvector_database_url, tenant):
    store = await open_knowledge_store(pgvector_database_url, Path(os.environ["FLOWLOOM_HOME"]))
    try:
        assert store.vector_support is True and vector_support_warning(store) is None
        rng = np.random.default_rng(3)
        await store.create_dataset(dataset(tenant))
        index = await store.create_index(tenant, "ds", "emb")
        doc, _ = await store.put_document(document(tenant, "ds", "a.txt"))
        vectors = rng.normal(size=(2000, 24)).astype(np.float32)
        chunks = await store.replace_chunks(tenant, doc.id, drafts(*[f"chunk {i}" for i in range(len(vectors))]))
        await store.put_vectors(tenant, index.id, [(c.id, v) for c, v in zip(chunks, vectors, strict=True)])
        await store.search_vectors(tenant, index.id, vectors[0].tolist(), 10)  # builds the HNSW index
        conn = await asyncpg.connect(pgvector_database_url, server_settings=SEARCH_SETTINGS)
        try:  # the store's own query, session settings and breadth (2000 vectors: the floor)
            await conn.execute(f"SET hnsw.ef_search = {hnsw_breadth(10, 2000)}")
            assert await conn.fetchval("SHOW hnsw.ef_search") == "80"
            plan = "\n".join(r[0] for r in await conn.fetch(
                f"EXPLAIN {nearest_query(index.id, 24)}", str(vectors[0].tolist()), tenant, 10))
        finally:
            await conn.close()
        assert f"kb_vectors_hnsw_{index.id}" in plan
        normed = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        found = 0
        for query in rng.normal(size=(20, 24)).astype(np.float32):
            truth = {chunks[i].id for i in np.argsort(-(normed @ (query / np.linalg.norm(query))))[:10]}
            hits = await store.search_vectors(tenant, index.id, query.tolist(), 10)
            found += len({h.chunk.id for h in hits} & truth)
        assert found / 200 >= 0.95
        # the breadth lives on the search connection's session, set when a search needs
        # another; the store's own connections keep the planner's defaults
        wide = await store.search_vectors(tenant, index.id, vectors[0].tolist(), 150)
        assert len(wide) == 150 and wide[0].chunk.id == chunks[0].id
        async with store._search_pool.acquire() as c:
            assert (await c.fetchval("SHOW hnsw.ef_search"), await c.fetchval("SHOW enable_sort")) == ("300", "off")
        async with store._pool.acquire() as c:
            assert (await c.fetchval("SHOW enable_sort"), await c.fetchval("SHOW enable_seqscan")) == ("on", "on")
        await store.search_vectors(tenant, index.id, vectors[0].tolist(), 10)
        async with store._search_pool.acquire() as c:
            assert await c.fetchval("SHOW hnsw.ef_search") == "80"
        # searches after the first skip reading the index row: a retired index must still
        # answer nothing, even while its vectors are there
        conn = await asyncpg.connect(pgvector_database_url)
        try:
            await conn.execute("UPDATE kb_indexes SET state = 'retired' WHERE id = $1", index.id)
        finally:
            await conn.close()
        assert await store.search_vectors(tenant, index.id, vectors[0].tolist(), 10) == []
    finally:
        await store.close()


def test_hnsw_breadth_grows_with_k_and_the_index():
    assert hnsw_breadth(10) == hnsw_breadth(10, 2000) == hnsw_breadth(40, 2000) == 80  # the floor
    assert hnsw_breadth(50, 2000) == 100 and hnsw_breadth(150, 2000) == 300  # twice k
    assert hnsw_breadth(10, 20_000) == 80 and hnsw_breadth(10, 25_000) == 100
    assert hnsw_breadth(10, 100_000) == 400  # one per 250 vectors
    assert hnsw_breadth(10, 10_000_000) == hnsw_breadth(900) == 1000  # pgvector's limit
