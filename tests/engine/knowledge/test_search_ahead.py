"""On PostgreSQL a search of datasets this process read before runs ahead of their read:
the answer must be the one a search after the read gives, whatever changed in between
(on SQLite the same tests check the plain order). On both stores a hybrid or full-text
search's full-text pass starts before its datasets are read."""

from __future__ import annotations

import asyncio

import pytest

from engine.knowledge.ports import DatasetNotFound
from engine.knowledge.service import Upload
from schemas.knowledge import DatasetCreate, DatasetUpdate, SearchRequest
from tests.support.knowledge_files import corpus

from .conftest import BOTH_STORES, wait_ended

T = "tenant-a"


async def ingested(service, **create):
    dataset = await service.create_dataset(T, DatasetCreate(name="Docs", **create))
    await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"]),
                                                Upload("rockets.txt", corpus()["rockets.txt"])])
    await wait_ended(service, T, dataset.id)
    return dataset


def counting_reads(service):
    """Wrap the store's dataset read; the list the calls are appended to."""
    calls = []
    read = service.store.get_dataset

    async def get_dataset(tenant_id, dataset_id, **options):
        calls.append((tenant_id, dataset_id))
        return await read(tenant_id, dataset_id, **options)

    service.store.get_dataset = get_dataset
    return calls


@BOTH_STORES
async def test_a_repeated_search_reads_the_dataset_and_answers_as_a_fresh_service(make_service, openai_server):
    service = make_service()
    dataset = await ingested(service, embedding_model="embed-model")
    calls = counting_reads(service)
    for mode in ("semantic", "hybrid", "full_text"):
        request = SearchRequest(dataset_ids=[dataset.id], query="How do I brew green tea?", mode=mode, top_k=3)
        first = await service.search(T, request)
        again = await service.search(T, request)  # ahead of its read
        fresh = await make_service().search(T, request)
        assert first.hits and first.hits[0].source_name == "tea.md"
        assert again.model_dump() == first.model_dump() == fresh.model_dump()
    assert calls == [(T, dataset.id)] * 9  # every search read the dataset (the fresh services too)


@pytest.mark.parametrize("knowledge_url", ["postgres"], indirect=True)  # SQLite reads on one thread
async def test_a_repeated_search_runs_while_its_dataset_is_read(service, openai_server, monkeypatch):
    dataset = await ingested(service, embedding_model="embed-model")
    request = SearchRequest(dataset_ids=[dataset.id], query="How do I brew green tea?", mode="hybrid")
    first = await service.search(T, request)
    searching = asyncio.Event()
    read, full_text = service.store.get_dataset, service.store.search_full_text

    async def read_after_the_search_started(*args, **options):
        await asyncio.wait_for(searching.wait(), 10)
        return await read(*args, **options)

    async def searched(*args, **options):
        searching.set()
        return await full_text(*args, **options)

    monkeypatch.setattr(service.store, "get_dataset", read_after_the_search_started)
    monkeypatch.setattr(service.store, "search_full_text", searched)
    again = await service.search(T, request)
    assert again.model_dump() == first.model_dump()


@BOTH_STORES
async def test_a_dataset_changed_since_the_last_search_is_searched_as_it_is_now(service, openai_server):
    dataset = await ingested(service)  # full text only: a semantic search says so, naming the dataset
    request = SearchRequest(dataset_ids=[dataset.id], query="green tea", mode="semantic")
    before = await service.search(T, request)
    assert any("(Docs) has no embedding model" in note for note in before.notes)
    await service.update_dataset(T, dataset.id, DatasetUpdate(name="Papers"))
    after = await service.search(T, request)
    assert any("(Papers) has no embedding model" in note for note in after.notes)
    assert not any("Docs" in note for note in after.notes)
    assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]


@BOTH_STORES
async def test_a_deleted_dataset_or_another_tenant_is_not_found_after_a_search(service, openai_server):
    dataset = await ingested(service, embedding_model="embed-model")
    request = SearchRequest(dataset_ids=[dataset.id], query="green tea", mode="hybrid")
    assert (await service.search(T, request)).hits
    with pytest.raises(DatasetNotFound):
        await service.search("tenant-b", request)
    await service.delete_dataset(T, dataset.id)
    with pytest.raises(DatasetNotFound):
        await service.search(T, request)


@BOTH_STORES
@pytest.mark.parametrize("mode", ["hybrid", "full_text"])
async def test_the_full_text_pass_starts_before_the_datasets_are_read(make_service, openai_server, monkeypatch, mode):
    dataset = await ingested(make_service(), embedding_model="embed-model")
    request = SearchRequest(dataset_ids=[dataset.id], query="How do I brew green tea?", mode=mode, top_k=3)
    expected = await make_service().search(T, request)
    service = make_service()  # a fresh one: it has not read the dataset (no search ahead on PostgreSQL)
    searching = asyncio.Event()
    read, full_text = service.store.get_dataset, service.store.search_full_text

    async def read_after_the_full_text_pass_started(*args, **options):
        await asyncio.wait_for(searching.wait(), 10)
        return await read(*args, **options)

    async def searched(*args, **options):
        searching.set()
        return await full_text(*args, **options)

    monkeypatch.setattr(service.store, "get_dataset", read_after_the_full_text_pass_started)
    monkeypatch.setattr(service.store, "search_full_text", searched)
    found = await service.search(T, request)
    assert found.hits and found.model_dump() == expected.model_dump()


@BOTH_STORES
async def test_a_full_text_pass_ahead_of_a_missing_dataset_is_cancelled(make_service, openai_server, monkeypatch):
    dataset = await ingested(make_service(), embedding_model="embed-model")
    service = make_service()
    started, ended = [], []
    full_text = service.store.search_full_text

    async def slow_full_text(*args, **options):
        started.append(args[1])
        try:
            await asyncio.sleep(5)
            return await full_text(*args, **options)
        finally:
            ended.append(args[1])

    monkeypatch.setattr(service.store, "search_full_text", slow_full_text)
    for tenant, ids in (("tenant-b", [dataset.id]), (T, [dataset.id, "no-such-dataset"])):
        with pytest.raises(DatasetNotFound):
            await asyncio.wait_for(service.search(tenant, SearchRequest(dataset_ids=ids, query="tea")), 3)
    assert started == ended == [[dataset.id], [dataset.id, "no-such-dataset"]]  # started ahead, and ended
