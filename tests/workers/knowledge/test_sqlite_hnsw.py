"""The SQLite store's in-memory HNSW graphs: the same answers as exact search, kept in
step with vectors added and deleted, also by another process's store on the same file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from workers.knowledge import SqliteKnowledgeStore, open_knowledge_store
from workers.sql.connect import default_database_url

from .conftest import dataset, document, drafts


async def _fill(store, tenant: str, source: str, index_id: str, vectors: np.ndarray) -> list[str]:
    doc, _ = await store.put_document(document(tenant, "ds", source))
    chunks = await store.replace_chunks(tenant, doc.id, drafts(*[f"{source} {i}" for i in range(len(vectors))]))
    await store.put_vectors(tenant, index_id, [(c.id, v.tolist()) for c, v in zip(chunks, vectors)])
    return [c.id for c in chunks]


async def test_hnsw_answers_equal_exact_search_and_follow_changes(tenant):
    home = Path(os.environ["FLOWLOOM_HOME"])
    store = await open_knowledge_store(default_database_url(home), home)
    assert isinstance(store, SqliteKnowledgeStore)
    other = await SqliteKnowledgeStore.open(store.path)  # like a second process on the same file
    try:
        rng = np.random.default_rng(7)
        await store.create_dataset(dataset(tenant))
        index = await store.create_index(tenant, "ds", "emb")
        first = await _fill(store, tenant, "a.txt", index.id, rng.normal(size=(2500, 48)).astype(np.float32))
        queries = rng.normal(size=(30, 48)).astype(np.float32)
        found = exact = 0
        for query in queries:
            graph = [h.chunk.id for h in await store.search_vectors(tenant, index.id, query.tolist(), 10)]
            truth = [h.chunk.id for h in await store.exact_search_vectors(tenant, index.id, query.tolist(), 10)]
            assert graph[0] == truth[0]
            found, exact = found + len(set(graph) & set(truth)), exact + len(truth)
        assert found / exact >= 0.98

        # vectors added by another store show up; a deleted document's vectors disappear
        near = queries[0] / np.linalg.norm(queries[0])
        added = await _fill(other, tenant, "b.txt", index.id, np.stack([near, -near]))
        hits = await store.search_vectors(tenant, index.id, near.tolist(), 3)
        assert hits[0].chunk.id == added[0] and abs(hits[0].score - 1.0) < 1e-4
        doc_b = (await other.get_chunks(tenant, [added[0]]))[0].document_id
        await other.delete_document(tenant, doc_b)
        hits = await store.search_vectors(tenant, index.id, near.tolist(), 3)
        assert added[0] not in {h.chunk.id for h in hits} and hits[0].chunk.id in first
        truth = await store.exact_search_vectors(tenant, index.id, near.tolist(), 3)
        assert [h.chunk.id for h in hits] == [h.chunk.id for h in truth]
    finally:
        await other.close()
        await store.close()
