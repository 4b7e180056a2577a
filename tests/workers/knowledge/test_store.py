"""The knowledge stores (SQLite and PostgreSQL with pgvector) against the KnowledgeStore
port: datasets and tenants, documents and leases, chunks, vectors, full text, filters."""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.knowledge.ports import (
    DatasetExists,
    DatasetNotFound,
    DimensionMismatch,
    DocumentNotFound,
    KnowledgeStore,
    ParsedDocument,
)
from schemas.knowledge import ChunkDraft, ChunkingSettings, ChunkKind, DocumentStatus, MetadataFilter

from .conftest import dataset, document, drafts


async def test_dataset_crud_and_tenant_isolation(kstore, tenant):
    assert isinstance(kstore, KnowledgeStore)
    created = await kstore.create_dataset(dataset(tenant, "b", name="Beta", description="d"))
    assert (created.name, created.document_count, created.active_index) == ("Beta", 0, None)
    await kstore.create_dataset(dataset(tenant, "a", name="Alpha"))
    with pytest.raises(DatasetExists):
        await kstore.create_dataset(dataset(tenant, "a"))
    assert [d.name for d in await kstore.list_datasets(tenant)] == ["Alpha", "Beta"]
    other = tenant + "-other"
    assert await kstore.list_datasets(other) == []
    with pytest.raises(DatasetNotFound):
        await kstore.get_dataset(other, "a")
    with pytest.raises(DatasetNotFound):
        await kstore.update_dataset(other, "a", {"name": "stolen"})
    with pytest.raises(DatasetNotFound):
        await kstore.delete_dataset(other, "a")
    await kstore.create_dataset(dataset(other, "a", name="Theirs"))  # same id, another tenant
    updated = await kstore.update_dataset(tenant, "a", {"name": "Alpha 2", "chunking": ChunkingSettings(
        chunk_tokens=100, overlap_tokens=10), "embedding_model": "emb"})
    assert (updated.name, updated.chunking.chunk_tokens, updated.embedding_model) == ("Alpha 2", 100, "emb")
    assert (await kstore.get_dataset(other, "a")).name == "Theirs"
    await kstore.delete_dataset(tenant, "a")
    with pytest.raises(DatasetNotFound):
        await kstore.get_dataset(tenant, "a")
    assert [d.id for d in await kstore.list_datasets(tenant)] == ["b"]


async def test_delete_dataset_and_document_cascade(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    await kstore.activate_index(tenant, "ds", index.id)
    doc1, _ = await kstore.put_document(document(tenant, "ds", "one.txt"))
    doc2, _ = await kstore.put_document(document(tenant, "ds", "two.txt"))
    c1 = await kstore.replace_chunks(tenant, doc1.id, drafts("alpha words", "beta words"))
    c2 = await kstore.replace_chunks(tenant, doc2.id, drafts("gamma words"))
    await kstore.put_vectors(tenant, index.id, [(c.id, [1.0, 0.0, float(i)]) for i, c in enumerate(c1 + c2)])
    listed = await kstore.get_dataset(tenant, "ds")
    assert (listed.document_count, listed.chunk_count) == (2, 3)
    await kstore.delete_document(tenant, doc1.id)
    with pytest.raises(DocumentNotFound):
        await kstore.get_document(tenant, doc1.id)
    assert await kstore.get_chunks(tenant, [c.id for c in c1]) == []
    assert [h.chunk.id for h in await kstore.search_vectors(tenant, index.id, [1, 0, 0], 10)] == [c2[0].id]
    assert [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "words", 10)] == [c2[0].id]
    await kstore.delete_dataset(tenant, "ds")
    assert await kstore.get_chunks(tenant, [c2[0].id]) == []
    with pytest.raises(DocumentNotFound):
        await kstore.get_document(tenant, doc2.id)
    await kstore.create_dataset(dataset(tenant))  # the id is free again, and empty
    assert await kstore.search_full_text(tenant, ["ds"], "words", 10) == []


async def test_put_document_dedupes_by_hash_and_updates_by_source_name(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    first, created = await kstore.put_document(document(tenant, "ds", "a.txt", "v1", metadata={"k": 1}))
    assert created and first.status == DocumentStatus.queued
    await kstore.update_document(tenant, first.id, status=DocumentStatus.ready, chunk_count=2, chunks_done=2)
    same, created = await kstore.put_document(document(tenant, "ds", "a.txt", "v1"))
    assert not created and same.id == first.id and same.status == DocumentStatus.ready
    changed, created = await kstore.put_document(document(tenant, "ds", "a.txt", "v2", metadata={"k": 2}))
    assert created and changed.id == first.id
    assert (changed.content_hash, changed.status, changed.chunks_done, changed.metadata) == (
        "hash-v2", DocumentStatus.queued, 0, {"k": 2})
    with pytest.raises(DatasetNotFound):
        await kstore.put_document(document(tenant + "-x", "ds", "a.txt"))
    with pytest.raises(DocumentNotFound):
        await kstore.get_document(tenant + "-x", first.id)
    await kstore.save_content(tenant, first.id, ParsedDocument("csv_qa", "", [("q?", "a.")]))
    assert await kstore.load_content(tenant, first.id) == ParsedDocument("csv_qa", "", [("q?", "a.")])
    await kstore.save_content(tenant, first.id, ParsedDocument("markdown", "# Title\n\ntext"))
    assert await kstore.load_content(tenant, first.id) == ParsedDocument("markdown", "# Title\n\ntext")
    with pytest.raises(DocumentNotFound):
        await kstore.load_content(tenant + "-x", first.id)
    second, _ = await kstore.put_document(document(tenant, "ds", "b.txt"))
    assert [d.id for d in await kstore.list_documents(tenant, "ds")] == [first.id, second.id]
    with pytest.raises(DatasetNotFound):
        await kstore.list_documents(tenant + "-x", "ds")


async def test_replace_chunks_keeps_unchanged_chunks_and_their_vectors(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    before = await kstore.replace_chunks(tenant, doc.id, drafts("one", "two", "three"))
    assert [c.text for c in before] == ["one", "two", "three"]
    assert len(await kstore.chunks_without_vector(tenant, index.id)) == 3
    await kstore.put_vectors(tenant, index.id, [(c.id, [1.0, float(i)]) for i, c in enumerate(before)])
    assert await kstore.chunks_without_vector(tenant, index.id) == []
    after = await kstore.replace_chunks(tenant, doc.id, drafts("zero", "one", "three"))
    assert [c.position for c in after] == [0, 1, 2]
    assert after[1].id == before[0].id and after[2].id == before[2].id and after[0].id not in {c.id for c in before}
    assert [c.id for c in await kstore.chunks_without_vector(tenant, index.id)] == [after[0].id]
    assert [c.id for c in await kstore.chunks_without_vector(tenant, index.id, doc.id, limit=5)] == [after[0].id]
    assert await kstore.get_chunks(tenant, [before[1].id]) == []
    hits = await kstore.search_vectors(tenant, index.id, [1.0, 0.0], 10)
    assert {h.chunk.id for h in hits} == {before[0].id, before[2].id}
    assert [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "two", 5)] == []
    assert [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "zero", 5)] == [after[0].id]
    assert await kstore.get_chunks(tenant + "-x", [after[0].id]) == []


async def test_replace_chunks_for_pass_lists_what_each_index_lacks_and_sets_progress(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    active = await kstore.create_index(tenant, "ds", "emb")
    await kstore.activate_index(tenant, "ds", active.id)
    building = await kstore.create_index(tenant, "ds", "emb2")
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    first = await kstore.replace_chunks_for_pass(tenant, doc.id, drafts("one", "two", "three"), [])
    assert first == {}
    assert (await kstore.get_document(tenant, doc.id)).status == DocumentStatus.queued  # no index: no progress
    stored = await kstore.replace_chunks(tenant, doc.id, drafts("one", "two", "three"))
    await kstore.put_vectors(tenant, active.id, [(c.id, [1.0, float(i)]) for i, c in enumerate(stored)])
    await kstore.put_vectors(tenant, building.id, [(stored[2].id, [1.0, 2.0, 3.0])])
    pending = await kstore.replace_chunks_for_pass(tenant, doc.id, [
        ChunkDraft(position=0, kind=ChunkKind.parent, text="zero", search_text="zero"),
        ChunkDraft(position=1, kind=ChunkKind.child, text="new", search_text="new", parent=0),
        ChunkDraft(position=2, text="one", search_text="one"),
        ChunkDraft(position=3, text="three", search_text="three")], [active.id, building.id])
    new_id = next(c.id for c in await kstore.chunks_without_vector(tenant, active.id, doc.id))
    assert [(c.id, c.search_text) for c in pending[active.id]] == [(new_id, "new")]
    assert [(c.id, c.search_text) for c in pending[building.id]] == [(new_id, "new"), (stored[0].id, "one")]
    assert [c.id for c in await kstore.chunks_without_vector(tenant, building.id, doc.id)] == [
        c.id for c in pending[building.id]]
    now = await kstore.get_document(tenant, doc.id)  # progress follows the last index
    assert (now.status, now.chunk_count, now.chunks_done) == (DocumentStatus.embedding, 3, 1)
    with pytest.raises(DocumentNotFound):
        await kstore.replace_chunks_for_pass(tenant + "-x", doc.id, drafts("x"), [active.id])
    assert [c.text for c in (await kstore.document_chunks(tenant, doc.id))[0]] == ["zero", "new", "one", "three"]


async def test_parent_child_chunks(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt", metadata={"lang": "en"}))
    chunks = await kstore.replace_chunks(tenant, doc.id, [
        ChunkDraft(position=0, kind=ChunkKind.parent, text="big parent text", search_text="big parent text"),
        ChunkDraft(position=1, kind=ChunkKind.child, text="small child", search_text="small child", parent=0,
                   heading_path=["H1", "H2"])])
    assert chunks[1].parent_id == chunks[0].id and chunks[1].heading_path == ["H1", "H2"]
    assert (chunks[1].source_name, chunks[1].metadata) == ("a.txt", {"lang": "en"})
    assert [c.id for c in await kstore.chunks_without_vector(tenant, index.id)] == [chunks[1].id]
    assert await kstore.search_full_text(tenant, ["ds"], "parent", 5) == []
    assert [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "child", 5)] == [chunks[1].id]


async def test_search_candidates_name_their_chunk_before_it_is_built(kstore, tenant):
    """Retrieval ranks by a candidate's id, kind and parent, and builds its chunk only for
    a hit: what a search pass says of each must be what the built chunk holds."""
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt", metadata={"lang": "en"}))
    chunks = await kstore.replace_chunks(tenant, doc.id, [
        ChunkDraft(position=0, kind=ChunkKind.parent, text="big parent text", search_text="big parent text"),
        ChunkDraft(position=1, kind=ChunkKind.child, text="small child", search_text="small child", parent=0),
        ChunkDraft(position=2, text="a child of none", search_text="a child of none", heading_path=["H"])])
    await kstore.put_vectors(tenant, index.id, [(chunks[1].id, [1, 0]), (chunks[2].id, [1, 1])])
    found = [*await kstore.search_full_text(tenant, ["ds"], "child", 5),
             *await kstore.search_vectors(tenant, index.id, [1, 0], 5)]
    assert len(found) == 4
    for candidate in found:
        assert (candidate.id, candidate.kind, candidate.parent_id, candidate.dataset_id) == (
            candidate.chunk.id, candidate.chunk.kind, candidate.chunk.parent_id, "ds")
    assert {(c.id, c.kind, c.parent_id) for c in found} == {
        (chunks[1].id, "child", chunks[0].id), (chunks[2].id, "text", None)}
    built = {c.id: c.chunk for c in found}
    assert built[chunks[2].id].heading_path == ["H"] and built[chunks[2].id].metadata == {"lang": "en"}


async def test_vectors_ordered_by_cosine(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    await kstore.set_index_dimension(tenant, index.id, 3)
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    chunks = await kstore.replace_chunks(tenant, doc.id, drafts("a", "b", "c", "d"))
    vectors = [[1, 0, 0], [10, 1, 0], [0, 1, 0], [-1, 0, 0]]
    await kstore.put_vectors(tenant, index.id, [(c.id, v) for c, v in zip(chunks, vectors, strict=True)])
    hits = await kstore.search_vectors(tenant, index.id, [1, 0, 0], 3)
    assert [h.chunk.id for h in hits] == [chunks[0].id, chunks[1].id, chunks[2].id]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5) and hits[2].score == pytest.approx(0.0, abs=1e-5)
    assert hits[1].score == pytest.approx(10 / np.sqrt(101), abs=1e-5)
    # a new vector for a chunk replaces its old one
    await kstore.put_vectors(tenant, index.id, [(chunks[3].id, [1, 0, 0])])
    assert (await kstore.search_vectors(tenant, index.id, [1, 0, 0], 2))[1].score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(DimensionMismatch):
        await kstore.put_vectors(tenant, index.id, [(chunks[0].id, [1, 0])])
    with pytest.raises(DimensionMismatch):
        await kstore.search_vectors(tenant, index.id, [1, 0], 3)
    with pytest.raises(DatasetNotFound):
        await kstore.search_vectors(tenant + "-x", index.id, [1, 0, 0], 3)
    with pytest.raises(DatasetNotFound):
        await kstore.put_vectors(tenant + "-x", index.id, [(chunks[0].id, [1, 0, 0])])


async def test_index_create_and_activate(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    chunks = await kstore.replace_chunks(tenant, doc.id, drafts("a", "b"))
    old = await kstore.create_index(tenant, "ds", "small")
    await kstore.put_vectors(tenant, old.id, [(chunks[0].id, [1, 0]), (chunks[1].id, [0, 1])])
    await kstore.activate_index(tenant, "ds", old.id)
    ds = await kstore.get_dataset(tenant, "ds")
    assert (ds.active_index.id, ds.active_index.dimension, ds.building_index) == (old.id, 2, None)
    abandoned = await kstore.create_index(tenant, "ds", "medium")
    new = await kstore.create_index(tenant, "ds", "large")  # the building one before it retires
    with pytest.raises(DatasetNotFound):
        await kstore.activate_index(tenant, "ds", abandoned.id)
    ds = await kstore.get_dataset(tenant, "ds")
    assert (ds.active_index.id, ds.building_index.id) == (old.id, new.id)
    await kstore.put_vectors(tenant, new.id, [(c.id, [0, 0, 1]) for c in chunks])
    assert len(await kstore.search_vectors(tenant, old.id, [1, 0], 5)) == 2  # searches keep the old one
    await kstore.activate_index(tenant, "ds", new.id)
    ds = await kstore.get_dataset(tenant, "ds")
    assert (ds.active_index.id, ds.active_index.embedding_model, ds.building_index) == (new.id, "large", None)
    assert await kstore.search_vectors(tenant, old.id, [1, 0], 5) == []
    assert len(await kstore.search_vectors(tenant, new.id, [0, 0, 1], 5)) == 2
    with pytest.raises(DatasetNotFound):
        await kstore.create_index(tenant + "-x", "ds", "emb")


async def test_full_text_ranks_and_matches_chinese(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    await kstore.create_dataset(dataset(tenant, "other"))
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    chunks = await kstore.replace_chunks(tenant, doc.id, drafts(
        "知识库的检索方法包括全文检索和向量检索", "今天天气很好，我们去公园散步", "The Knowledge base supports hybrid search",
        "Cooking recipes with rice"))
    other_doc, _ = await kstore.put_document(document(tenant, "other", "b.txt"))
    await kstore.replace_chunks(tenant, other_doc.id, drafts("知识库 in another dataset"))
    hits = await kstore.search_full_text(tenant, ["ds"], "知识库检索", 5)
    assert hits[0].chunk.id == chunks[0].id and all(h.chunk.dataset_id == "ds" for h in hits)
    assert hits[0].score > 0  # BM25 (SQLite) or ts_rank (PostgreSQL), no fixed scale
    assert [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "天气", 5)] == [chunks[1].id]
    english = await kstore.search_full_text(tenant, ["ds"], "knowledge SEARCH", 5)
    assert [h.chunk.id for h in english] == [chunks[2].id]
    both = await kstore.search_full_text(tenant, ["ds", "other"], "知识库", 5)
    assert {h.chunk.dataset_id for h in both} == {"ds", "other"}
    assert await kstore.search_full_text(tenant, ["ds"], "，。!?", 5) == []
    assert await kstore.search_full_text(tenant + "-x", ["ds"], "知识库", 5) == []
    ranked = await kstore.search_full_text(tenant, ["ds"], "rice rice cooking", 5)
    assert [h.chunk.id for h in ranked] == [chunks[3].id]


async def test_metadata_filters(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    metas = [{"lang": "en", "year": 2020, "tags": ["a", "b"], "when": "2024-01-05", "flag": True},
             {"lang": "zh", "year": 2023, "tags": ["b"], "when": "2024-03-01", "title": "Annual report"},
             {"lang": "en", "year": 2025.5, "title": "report draft"}]
    ids = []
    for i, meta in enumerate(metas):
        doc, _ = await kstore.put_document(document(tenant, "ds", f"{i}.txt", metadata=meta))
        chunk, = await kstore.replace_chunks(tenant, doc.id, drafts(f"common text {i}"))
        await kstore.put_vectors(tenant, index.id, [(chunk.id, [1.0, float(i)])])
        ids.append(chunk.id)

    async def matching(*filters: MetadataFilter) -> tuple[set[int], set[int]]:
        text = await kstore.search_full_text(tenant, ["ds"], "common", 10, filters)
        vec = await kstore.search_vectors(tenant, index.id, [1.0, 0.0], 10, filters)
        return {ids.index(h.chunk.id) for h in text}, {ids.index(h.chunk.id) for h in vec}

    cases = [
        (MetadataFilter(field="lang", op="eq", value="en"), {0, 2}),
        (MetadataFilter(field="lang", op="ne", value="en"), {1}),
        (MetadataFilter(field="title", op="ne", value="report draft"), {0, 1}),
        (MetadataFilter(field="year", op="in", value=[2020, 2023]), {0, 1}),
        (MetadataFilter(field="tags", op="contains", value="a"), {0}),
        (MetadataFilter(field="title", op="contains", value="report"), {1, 2}),
        (MetadataFilter(field="year", op="gt", value=2020), {1, 2}),
        (MetadataFilter(field="year", op="gte", value=2020), {0, 1, 2}),
        (MetadataFilter(field="year", op="lt", value=2023), {0}),
        (MetadataFilter(field="year", op="lte", value=2023), {0, 1}),
        (MetadataFilter(field="when", op="gte", value="2024-02-01"), {1}),
        (MetadataFilter(field="year", op="gt", value="2000"), set()),  # a string does not compare with numbers
        (MetadataFilter(field="title", op="exists"), {1, 2}),
        (MetadataFilter(field="title", op="exists", value=False), {0}),
        (MetadataFilter(field="flag", op="eq", value=True), {0}),
        (MetadataFilter(field="missing", op="eq", value="x"), set()),
    ]
    for flt, expected in cases:
        assert await matching(flt) == (expected, expected), flt
    both = (MetadataFilter(field="lang", value="en"), MetadataFilter(field="year", op="lt", value=2021))
    assert await matching(*both) == ({0}, {0})


async def test_leases_and_unfinished_documents(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    done, _ = await kstore.put_document(document(tenant, "ds", "b.txt"))
    await kstore.update_document(tenant, done.id, status=DocumentStatus.ready)
    now = time.time()
    assert await kstore.claim_document(tenant, doc.id, "w1", now + 60)
    assert not await kstore.claim_document(tenant, doc.id, "w2", now + 60)
    assert await kstore.claim_document(tenant, doc.id, "w1", now + 120)  # the holder extends
    unfinished = {d.id for d in await kstore.unfinished_documents(limit=10_000)}
    assert doc.id not in unfinished and done.id not in unfinished
    await kstore.release_document(tenant, doc.id, "w2")  # not the holder: nothing
    assert not await kstore.claim_document(tenant, doc.id, "w2", now + 60)
    await kstore.release_document(tenant, doc.id, "w1")
    assert doc.id in {d.id for d in await kstore.unfinished_documents(limit=10_000)}
    assert await kstore.claim_document(tenant, doc.id, "w2", now - 1)  # an expired lease
    assert doc.id in {d.id for d in await kstore.unfinished_documents(limit=10_000)}
    assert await kstore.claim_document(tenant, doc.id, "w3", now + 60)
    with pytest.raises(DocumentNotFound):
        await kstore.claim_document(tenant + "-x", doc.id, "w4", now + 60)
    failed = await kstore.update_document(tenant, doc.id, status=DocumentStatus.failed, error="bad")
    assert (failed.status, failed.error) == (DocumentStatus.failed, "bad")


async def test_full_text_finds_a_tenants_chunk_among_many_of_another(kstore, tenant):
    crowd = tenant + "-crowd"
    for who, count in ((crowd, 300), (tenant, 1)):
        await kstore.create_dataset(dataset(who))
        doc, _ = await kstore.put_document(document(who, "ds", "a.txt"))
        await kstore.replace_chunks(who, doc.id, drafts(*[f"shared marker word {i}" for i in range(count)]))
    hits = await kstore.search_full_text(tenant, ["ds"], "marker", 5)
    assert [(h.chunk.tenant_id, h.chunk.text) for h in hits] == [(tenant, "shared marker word 0")]
    assert len(await kstore.search_full_text(crowd, ["ds"], "marker", 50)) == 50


async def test_another_tenants_documents_change_neither_full_text_hits_nor_scores(kstore, tenant):
    # BM25 weighs a term by how many chunks hold it: counted over every tenant, another
    # tenant's uploads would reorder this one's results and tell it which words they hold.
    await kstore.create_dataset(dataset(tenant))
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    await kstore.replace_chunks(tenant, doc.id, drafts("paid holiday days a year", "expenses paid within days",
                                                      "remote work days", "laptop replaced"))
    before = [(h.chunk.id, h.score) for h in await kstore.search_full_text(tenant, ["ds"], "paid holiday days", 10)]
    other = tenant + "-other"
    await kstore.create_dataset(dataset(other))
    doc, _ = await kstore.put_document(document(other, "ds", "b.txt"))
    await kstore.replace_chunks(other, doc.id, drafts(*[f"holiday rota {i}" for i in range(40)], "no match here"))
    after = [(h.chunk.id, h.score) for h in await kstore.search_full_text(tenant, ["ds"], "paid holiday days", 10)]
    assert after == before and before


async def test_full_text_finds_chunks_added_after_a_search(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    doc, _ = await kstore.put_document(document(tenant, "ds", "a.txt"))
    await kstore.replace_chunks(tenant, doc.id, drafts("first words"))
    assert await kstore.search_full_text(tenant, ["ds"], "words later", 5)
    await kstore.replace_chunks(tenant, doc.id, drafts("first words", "later addition"))
    hits = await kstore.search_full_text(tenant, ["ds"], "later", 5)
    assert [h.chunk.text for h in hits] == ["later addition"]


async def test_selective_filter_falls_back_to_exact_search(kstore, tenant):
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    rng = np.random.default_rng(5)
    near, _ = await kstore.put_document(document(tenant, "ds", "near.txt", metadata={"lang": "en"}))
    far, _ = await kstore.put_document(document(tenant, "ds", "far.txt", metadata={"lang": "zh"}))
    near_chunks = await kstore.replace_chunks(tenant, near.id, drafts(*[f"n{i}" for i in range(300)]))
    far_chunks = await kstore.replace_chunks(tenant, far.id, drafts("f0", "f1", "f2", "f3"))
    query = np.ones(8, np.float32)
    await kstore.put_vectors(tenant, index.id, [(c.id, (query + rng.normal(scale=0.1, size=8)).tolist())
                                                for c in near_chunks])
    far_vectors = [(-query + rng.normal(scale=0.5, size=8)) for _ in far_chunks]
    await kstore.put_vectors(tenant, index.id, [(c.id, v.tolist()) for c, v in zip(far_chunks, far_vectors, strict=True)])
    hits = await kstore.search_vectors(tenant, index.id, query.tolist(), 3, [MetadataFilter(field="lang", value="zh")])
    cosine = [float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)) for v in far_vectors]
    best = sorted(range(4), key=lambda i: -cosine[i])[:3]
    assert [h.chunk.id for h in hits] == [far_chunks[i].id for i in best]
    assert [h.score for h in hits] == pytest.approx([cosine[i] for i in best], abs=1e-5)


async def test_searches_never_return_a_failed_documents_chunks(kstore, tenant):
    """A failed document's chunks (a part of it, or vectors of an older version) are left
    out of every search, in SQL; a document being ingested again stays searchable."""
    await kstore.create_dataset(dataset(tenant))
    index = await kstore.create_index(tenant, "ds", "emb")
    await kstore.activate_index(tenant, "ds", index.id)
    broken, again, fine = [(await kstore.put_document(document(tenant, "ds", name, metadata={"team": "a"})))[0]
                           for name in ("broken.txt", "again.txt", "fine.txt")]
    chunks = {}
    for doc, text in ((broken, "harbour cranes broken"), (again, "harbour cranes again"), (fine, "harbour cranes")):
        chunks[doc.id] = (await kstore.replace_chunks(tenant, doc.id, drafts(text)))[0]
    # the failed document's chunk is the nearest and the best full-text match
    await kstore.put_vectors(tenant, index.id, [(chunks[broken.id].id, [1.0, 0.0, 0.0]),
                                                (chunks[again.id].id, [0.9, 0.1, 0.0]),
                                                (chunks[fine.id].id, [0.5, 0.5, 0.0])])
    await kstore.update_document(tenant, broken.id, status=DocumentStatus.failed, error="embedding failed")
    await kstore.update_document(tenant, again.id, status=DocumentStatus.embedding)
    await kstore.update_document(tenant, fine.id, status=DocumentStatus.ready)
    kept = {chunks[again.id].id, chunks[fine.id].id}
    for k in (1, 2, 10):
        for _ in range(2):  # PostgreSQL: the first search builds the HNSW index, the second walks it
            found = [h.chunk.id for h in await kstore.search_vectors(tenant, index.id, [1.0, 0.0, 0.0], k)]
            assert found == [chunks[again.id].id, chunks[fine.id].id][:k]
        filtered = await kstore.search_vectors(tenant, index.id, [1.0, 0.0, 0.0], k,
                                               [MetadataFilter(field="team", value="a")])
        assert {h.chunk.id for h in filtered} <= kept and len(filtered) == min(k, 2)
        texts = await kstore.search_full_text(tenant, ["ds"], "harbour cranes broken", k)
        assert {h.chunk.id for h in texts} <= kept and len(texts) == min(k, 2)
    await kstore.update_document(tenant, broken.id, status=DocumentStatus.queued, error=None)  # retried
    assert chunks[broken.id].id in [h.chunk.id for h in await kstore.search_full_text(tenant, ["ds"], "broken", 10)]
