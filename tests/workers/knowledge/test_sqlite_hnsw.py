"""The SQLite store's in-memory indexes (a matrix searched exactly, or an HNSW graph once
an index outgrows it): the same answers as exact search in SQL, kept in step with vectors
added and deleted, also by another process's store on the same file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from workers.knowledge import SqliteKnowledgeStore, open_knowledge_store
from workers.sql.connect import default_database_url

from .conftest import dataset, document, drafts


async def _fill(store, tenant: str, source: str, index_id: str, vectors: np.ndarray) -> list[str]:
    doc, _ = await store.put_document(document(tenant, "ds", source))
    chunks = await store.replace_chunks(tenant, doc.id, drafts(*[f"{source} {i}" for i in range(len(vectors))]))
    await store.put_vectors(tenant, index_id, [(c.id, v.tolist()) for c, v in zip(chunks, vectors, strict=True)])
    return [c.id for c in chunks]


@pytest.mark.parametrize("exact_max_cells", [1_000_000, 50_000], ids=["matrix", "graph"])
async def test_memory_answers_equal_exact_search_and_follow_changes(tenant, exact_max_cells):
    home = Path(os.environ["FLOWLOOM_HOME"])
    migrated = await open_knowledge_store(default_database_url(home), home)
    assert isinstance(migrated, SqliteKnowledgeStore)
    await migrated.close()
    store = await SqliteKnowledgeStore.open(migrated.path, exact_max_cells=exact_max_cells)
    other = await SqliteKnowledgeStore.open(store.path)  # like a second process on the same file
    try:
        rng = np.random.default_rng(7)
        await store.create_dataset(dataset(tenant))
        index = await store.create_index(tenant, "ds", "emb")
        first = await _fill(store, tenant, "a.txt", index.id, rng.normal(size=(2500, 48)).astype(np.float32))
        queries = rng.normal(size=(30, 48)).astype(np.float32)
        found = exact = 0
        for query in queries:
            hits = await store.search_vectors(tenant, index.id, query.tolist(), 10)
            truth = await store.exact_search_vectors(tenant, index.id, query.tolist(), 10)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            if exact_max_cells > 2500 * 48:
                assert [h.chunk.id for h in hits] == [h.chunk.id for h in truth]
                assert [h.score for h in hits] == pytest.approx([h.score for h in truth], abs=1e-5)
            found += len({h.chunk.id for h in hits} & {h.chunk.id for h in truth})
            exact += len(truth)
        assert found / exact >= 0.95
        assert (store._memory._memory[index.id].graph is None) == (exact_max_cells > 2500 * 48)

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
        assert hits[0].score == pytest.approx(truth[0].score, abs=1e-5)
    finally:
        await other.close()
        await store.close()
