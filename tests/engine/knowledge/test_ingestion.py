"""Ingestion through the knowledge service, on the real SQLite store and the scripted
embeddings server: every format, rejections, re-adding, changed paragraphs, model
changes during searches, deletion, resuming."""

from __future__ import annotations

import asyncio
import io

import pytest

from engine.knowledge.ports import DatasetNotFound, DocumentNotFound
from engine.knowledge.service import InvalidDataset, Upload
from schemas.knowledge import ChunkingSettings, DatasetCreate, DatasetUpdate, DocumentStatus, SearchRequest
from tests.support.knowledge_files import corpus, pdf_bytes

from .conftest import BOTH_STORES, wait_ended

T = "tenant-a"


def encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes("a secret plan"))))
    writer.encrypt(user_password="pw", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def semantic_dataset(service, **chunking):
    return await service.create_dataset(T, DatasetCreate(name="Docs", embedding_model="embed-model",
                                                         chunking=ChunkingSettings(**chunking)))


@pytest.mark.slow
@BOTH_STORES
async def test_a_batch_of_every_format_is_ingested_and_bad_files_are_rejected_alone(make_service, openai_server):
    service = make_service(max_document_bytes=60_000)
    dataset = await semantic_dataset(service)
    files = corpus()
    uploads = [Upload(name, data, {"source": name}) for name, data in files.items()]
    uploads += [Upload("locked.pdf", encrypted_pdf()), Upload("corrupt.pdf", b"%PDF-1.7\n" + b"\x13\x37" * 300),
                Upload("fake.pdf", b"plain text pretending"), Upload("empty.txt", b""),
                Upload("huge.txt", b"word " * 20_000)]
    outcomes = await service.add_documents(T, dataset.id, uploads)
    errors = {o.source_name: (o.error.reason, o.error.status) for o in outcomes if o.error is not None}
    assert errors == {"locked.pdf": ("encrypted", 422), "corrupt.pdf": ("corrupt", 422),
                      "fake.pdf": ("type_mismatch", 422), "empty.txt": ("empty", 422),
                      "huge.txt": ("too_large", 413)}
    assert all(o.created and o.document is not None for o in outcomes if o.error is None)
    documents = await wait_ended(service, T, dataset.id)
    assert {d.source_name: d.status for d in documents} == {name: DocumentStatus.ready for name in files}
    types = {d.source_name: d.content_type for d in documents}
    assert types == {"rockets.txt": "txt", "tea.md": "markdown", "volcano.html": "html", "bridges.pdf": "pdf",
                     "cheese.docx": "docx", "pandas.csv": "csv_qa", "flamingos.jsonl": "jsonl_qa"}
    assert all(d.chunk_count > 0 and d.chunks_done == d.chunk_count for d in documents)
    total = sum(d.chunk_count for d in documents)
    assert sum(openai_server.embedded.values()) == total and max(openai_server.embedded.values()) == 1
    result = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="What do pandas eat?",
                                                   mode="semantic", top_k=1))
    assert result.hits[0].source_name == "pandas.csv" and "bamboo" in result.hits[0].text


@BOTH_STORES
async def test_re_adding_unchanged_bytes_changes_nothing(service, openai_server):
    dataset = await semantic_dataset(service)
    first = await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"])])
    await wait_ended(service, T, dataset.id)
    calls = openai_server.embedding_calls
    again = await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"])])
    assert again[0].created is False and again[0].document.id == first[0].document.id
    assert service.queue.pending == 0
    await wait_ended(service, T, dataset.id)
    assert openai_server.embedding_calls == calls
    assert (await service.get_document(T, dataset.id, first[0].document.id)).status == DocumentStatus.ready


SECTIONS = [f"# Part {i}\n\nPart {i} explains topic number {i} with its own words." for i in range(8)]


@BOTH_STORES
async def test_changing_one_paragraph_re_embeds_only_its_chunks(service, openai_server):
    dataset = await semantic_dataset(service)
    await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    [before] = await wait_ended(service, T, dataset.id)
    assert before.chunk_count == 8
    received = len(openai_server.embedding_texts)
    changed = list(SECTIONS)
    changed[3] = "# Part 3\n\nPart 3 now explains something entirely different."
    [outcome] = await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(changed).encode())])
    assert outcome.created and outcome.document.id == before.id
    [after] = await wait_ended(service, T, dataset.id)
    assert after.status == DocumentStatus.ready and after.chunks_done == after.chunk_count == 8
    assert openai_server.embedding_texts[received:] == ["Part 3\nPart 3 now explains something entirely different."]
    assert max(openai_server.embedded.values()) == 1


async def test_full_text_dataset_needs_no_embedding(service, openai_server):
    dataset = await service.create_dataset(T, DatasetCreate(name="Plain"))
    await service.add_text(T, dataset.id, "note", "Suspension bridges hang from steel cables.")
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.ready and document.chunk_count == 1
    assert openai_server.embedding_calls == 0
    result = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="steel cables", mode="full_text"))
    assert [h.source_name for h in result.hits] == ["note"]


async def test_an_embedding_model_must_be_one(service):
    with pytest.raises(InvalidDataset, match="embedding_model: 'tools-model' is not an embedding model") as info:
        await service.create_dataset(T, DatasetCreate(name="x", embedding_model="tools-model"))
    assert info.value.field == "embedding_model"
    dataset = await service.create_dataset(T, DatasetCreate(name="y"))
    with pytest.raises(InvalidDataset, match="rerank-model"):
        await service.update_dataset(T, dataset.id, DatasetUpdate(embedding_model="rerank-model"))


async def test_a_failing_embedding_model_fails_the_document_and_reindex_retries(service, openai_server):
    from tests.support.openai_server import http_error

    dataset = await semantic_dataset(service)
    openai_server.script_embeddings(http_error(500, "down"), http_error(500, "down"))
    [outcome] = await service.add_documents(T, dataset.id, [Upload("rockets.txt", corpus()["rockets.txt"])])
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.failed
    assert "embedding model 'embed-model' failed after 2 attempts: HTTP 500" in document.error
    await service.reindex_document(T, dataset.id, outcome.document.id)
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.ready and document.error is None


async def test_re_adding_the_same_bytes_of_a_failed_document_retries_it(service, openai_server):
    """The cause of a failure (a provider key missing, a provider down) may be fixed since:
    the same file again is ingested again (``created``, ``retried``), not "unchanged";
    the failed document's chunks are not searched meanwhile."""
    from tests.support.openai_server import http_error

    dataset = await semantic_dataset(service)
    openai_server.script_embeddings(http_error(500, "down"), http_error(500, "down"))
    upload = Upload("rockets.txt", corpus()["rockets.txt"])
    [first] = await service.add_documents(T, dataset.id, [upload])
    [failed] = await wait_ended(service, T, dataset.id)
    assert failed.status == DocumentStatus.failed and failed.chunk_count > 0 and failed.chunks_done == 0
    found = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="rocket kerosene",
                                                  mode="full_text"))
    assert found.hits == []
    [again] = await service.add_documents(T, dataset.id, [upload])
    assert again.created and again.retried and again.error is None
    assert again.document.id == first.document.id and again.document.status == DocumentStatus.queued
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.ready and document.error is None
    [unchanged] = await service.add_documents(T, dataset.id, [upload])  # ready: nothing to do
    assert not unchanged.created and not unchanged.retried
    found = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="rocket kerosene",
                                                  mode="full_text"))
    assert found.hits and found.hits[0].source_name == "rockets.txt"


async def test_usage_is_reported_per_batch(make_service, openai_server):
    seen = []
    service = make_service(on_usage=lambda tenant, tokens, cost: seen.append((tenant, tokens, cost)))
    dataset = await semantic_dataset(service)
    await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    await wait_ended(service, T, dataset.id)
    assert len(seen) == 2 and {t for t, _, _ in seen} == {T}  # 8 chunks, batches of 4
    assert sum(tokens for _, tokens, _ in seen) > 0 and all(cost > 0 for _, _, cost in seen)


@BOTH_STORES
async def test_changing_the_embedding_model_keeps_searches_on_the_old_index_until_the_new_is_built(
        service, openai_server):
    dataset = await semantic_dataset(service)
    await service.add_documents(T, dataset.id, [Upload(n, d) for n, d in corpus().items() if n != "bridges.pdf"])
    await wait_ended(service, T, dataset.id)
    old_index = (await service.get_dataset(T, dataset.id)).active_index
    openai_server.hold_embeddings("embed2-dim48")
    updated = await service.update_dataset(T, dataset.id, DatasetUpdate(embedding_model="embed-model-2"))
    assert updated.embedding_model == "embed-model-2" and updated.building_index is not None
    assert updated.active_index.id == old_index.id
    await asyncio.to_thread(openai_server.wait_held, 1)
    request = SearchRequest(dataset_ids=[dataset.id], query="How do I brew green tea?", mode="semantic", top_k=1)
    during = await service.search(T, request)
    assert during.hits and during.hits[0].source_name == "tea.md"
    openai_server.release_embeddings()
    documents = await wait_ended(service, T, dataset.id)
    assert all(d.status == DocumentStatus.ready for d in documents)
    now = await service.get_dataset(T, dataset.id)
    assert now.building_index is None and now.active_index.embedding_model == "embed-model-2"
    assert now.active_index.dimension == 48
    after = await service.search(T, request)
    assert after.hits[0].source_name == "tea.md"
    models = [r.body["model"] for r in openai_server.requests if r.path == "/v1/embeddings"]
    assert models[-1] == "embed2-dim48"


@BOTH_STORES
async def test_delete_a_document_and_a_dataset(service, openai_server):
    dataset = await semantic_dataset(service)
    outcomes = await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"]),
                                                           Upload("rockets.txt", corpus()["rockets.txt"])])
    await wait_ended(service, T, dataset.id)
    tea = outcomes[0].document
    await service.delete_document(T, dataset.id, tea.id)
    with pytest.raises(DocumentNotFound):
        await service.get_document(T, dataset.id, tea.id)
    result = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="green tea", mode="hybrid"))
    assert all(h.source_name != "tea.md" for h in result.hits)
    assert [d.source_name for d in await service.list_documents(T, dataset.id)] == ["rockets.txt"]
    with pytest.raises(DocumentNotFound):
        await service.get_document("tenant-b", dataset.id, outcomes[1].document.id)
    await service.delete_dataset(T, dataset.id)
    with pytest.raises(DatasetNotFound):
        await service.get_dataset(T, dataset.id)


async def test_follow_reports_progress_until_ready(service, openai_server):
    dataset = await semantic_dataset(service)
    openai_server.hold_embeddings()
    await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    seen = []

    async def watch():
        async for document in service.follow(T, dataset.id, poll_s=0.02):
            seen.append((document.status, document.chunks_done, document.chunk_count))

    watcher = asyncio.create_task(watch())
    await asyncio.to_thread(openai_server.wait_held, 1)
    openai_server.release_embeddings()
    await asyncio.wait_for(watcher, 30)
    assert seen[-1] == (DocumentStatus.ready, 8, 8)
    assert (DocumentStatus.embedding, 0, 8) in seen


class RecordingQueue:
    """An ingestion queue that only records what it was given (the test ingests by hand)."""

    def __init__(self):
        self.submitted = []

    async def submit(self, tenant_id, dataset_id, document_ids):
        self.submitted.extend(document_ids)


@BOTH_STORES
async def test_an_interrupted_ingestion_resumes_without_embedding_a_chunk_twice(make_service, openai_server):
    queue = RecordingQueue()
    service = make_service(queue=queue)
    dataset = await semantic_dataset(service)
    [outcome] = await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    assert queue.submitted == [outcome.document.id]
    openai_server.hold_embeddings(skip=1)  # the first batch of 4 is stored, the second held
    task = asyncio.create_task(service.ingest(T, outcome.document.id))
    await asyncio.to_thread(openai_server.wait_held, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    openai_server.release_embeddings()
    document = await service.get_document(T, dataset.id, outcome.document.id)
    assert (document.status, document.chunks_done, document.chunk_count) == (DocumentStatus.embedding, 4, 8)
    assert sum(openai_server.embedded.values()) == 4  # the held batch never reached anyone
    document = await service.ingest(T, outcome.document.id)
    assert document.status == DocumentStatus.ready and document.chunks_done == 8
    assert sum(openai_server.embedded.values()) == 8 and max(openai_server.embedded.values()) == 1
    assert len(openai_server.embedding_texts) == 12  # 4 + 4 (held, lost) + 4 again


async def test_a_document_held_by_another_worker_is_ingested_after_its_lease(make_service, knowledge_store,
                                                                           openai_server):
    import time

    service = make_service(queue=RecordingQueue())
    dataset = await semantic_dataset(service)
    [outcome] = await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"])])
    held_until = time.time() + 1.5
    assert await knowledge_store.claim_document(T, outcome.document.id, "other-worker", held_until)
    assert await service.resubmit_unfinished() == []  # its lease has not expired
    document = await service.ingest(T, outcome.document.id)
    assert document.status == DocumentStatus.ready
    assert openai_server.requests[0].received_at - time.monotonic() + time.time() >= held_until - 0.05


@BOTH_STORES
async def test_a_new_version_uploaded_during_an_ingestion_is_ingested_by_it(make_service, openai_server):
    service = make_service(queue=RecordingQueue())
    dataset = await semantic_dataset(service)
    [first] = await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    openai_server.hold_embeddings()
    task = asyncio.create_task(service.ingest(T, first.document.id))
    await asyncio.to_thread(openai_server.wait_held, 1)
    changed = "\n\n".join(SECTIONS[:2] + ["# Part 2\n\nA brand new second part."])
    [second] = await service.add_documents(T, dataset.id, [Upload("guide.md", changed.encode())])
    assert second.created and second.document.id == first.document.id
    openai_server.release_embeddings()
    document = await asyncio.wait_for(task, 30)
    assert document.status == DocumentStatus.ready and document.chunk_count == 3
    result = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="brand new second part",
                                                   mode="full_text"))
    assert result.hits[0].text == "A brand new second part."
    assert {h.text for h in result.hits} <= {"A brand new second part.", *(s.split("\n\n")[1] for s in SECTIONS[:2])}


async def test_sweeping_gives_a_stopped_ingestion_to_the_queue_again(make_service, knowledge_store):
    import time

    queue = RecordingQueue()
    service = make_service(queue=queue)
    dataset = await semantic_dataset(service)
    [outcome] = await service.add_documents(T, dataset.id, [Upload("tea.md", corpus()["tea.md"])])
    assert await knowledge_store.claim_document(T, outcome.document.id, "dead-worker", time.time() + 60)
    assert await service.resubmit_unfinished() == []
    await knowledge_store.claim_document(T, outcome.document.id, "dead-worker", time.time() - 1)
    assert [d.id for d in await service.resubmit_unfinished()] == [outcome.document.id]
    assert queue.submitted == [outcome.document.id, outcome.document.id]


async def test_parent_child_embeds_children_and_search_returns_the_parent(service, openai_server):
    from schemas.knowledge import ParentChildSettings

    dataset = await semantic_dataset(service, chunk_tokens=64, overlap_tokens=0,
                                     parent_child=ParentChildSettings(child_tokens=16, child_overlap_tokens=0))
    text = ("Rocket engines burn liquid oxygen and kerosene in a chamber. The nozzle expands the hot gas. "
            "Thrust lifts the rocket off the pad. Stages drop away when their fuel is spent.")
    await service.add_text(T, dataset.id, "rockets", text)
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.ready and document.chunk_count == document.chunks_done > 1
    embedded = set(openai_server.embedded)
    assert len(embedded) == document.chunk_count and text not in embedded  # children only
    result = await service.search(T, SearchRequest(dataset_ids=[dataset.id], query="nozzle expands hot gas",
                                                   mode="semantic", top_k=1))
    assert result.hits[0].text == text  # the parent, not the child that matched


async def test_new_chunking_applies_when_a_document_is_reindexed(service, openai_server):
    dataset = await semantic_dataset(service)
    [outcome] = await service.add_documents(T, dataset.id, [Upload("faq.txt", b"alpha one\n===\nbeta two")])
    [document] = await wait_ended(service, T, dataset.id)
    assert document.chunk_count == 1
    await service.update_dataset(T, dataset.id, DatasetUpdate(chunking=ChunkingSettings(separators=["\n===\n"])))
    assert (await service.get_dataset(T, dataset.id)).chunking.separators == ["\n===\n"]
    queued = await service.reindex_document(T, dataset.id, outcome.document.id)
    assert queued.status == DocumentStatus.queued
    [document] = await wait_ended(service, T, dataset.id)
    assert document.status == DocumentStatus.ready and document.chunk_count == 2
    assert {"alpha one", "beta two"} <= set(openai_server.embedded)


async def test_a_model_answering_another_dimension_fails_the_document(service, openai_server):
    dataset = await semantic_dataset(service)
    await service.add_text(T, dataset.id, "first", "Green tea leaves are steamed.")
    await wait_ended(service, T, dataset.id)
    openai_server.embedding_dims["embed-dim32"] = 16  # the model behind the name changed
    await service.add_text(T, dataset.id, "second", "Black tea leaves are oxidised.")
    documents = {d.source_name: d for d in await wait_ended(service, T, dataset.id)}
    assert documents["second"].status == DocumentStatus.failed
    assert "embedding model 'embed-model' answered vectors of [16] dimensions" in documents["second"].error
    assert documents["first"].status == DocumentStatus.ready


async def test_a_worker_that_loses_its_lease_stops_and_leaves_the_document_to_the_new_holder(
        make_service, knowledge_store, openai_server):
    import time

    service = make_service(queue=RecordingQueue(), lease_s=0.6)
    dataset = await semantic_dataset(service)
    [outcome] = await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
    openai_server.hold_embeddings()
    task = asyncio.create_task(service.ingest(T, outcome.document.id))
    await asyncio.to_thread(openai_server.wait_held, 1)
    # as if this worker stalled past its lease: the lease ends, another takes the document over
    me, deadline = service.ingestor.owner_id, time.monotonic() + 10
    while True:
        await knowledge_store.claim_document(T, outcome.document.id, me, time.time() - 1)
        if await knowledge_store.claim_document(T, outcome.document.id, "new-holder", time.time() + 60):
            break
        assert time.monotonic() < deadline  # (a renewal came in between: again)
    document = await asyncio.wait_for(task, 10)
    assert document.status == DocumentStatus.embedding and document.chunks_done == 0
    openai_server.release_embeddings()
    assert sum(openai_server.embedded.values()) == 0


async def test_the_in_process_queue_ingests_four_documents_at_a_time_by_default():
    from engine.knowledge.service import LocalIngestionQueue

    running, most = 0, 0
    release = asyncio.Event()

    async def ingest(tenant_id: str, document_id: str) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1

    queue = LocalIngestionQueue(ingest)
    await queue.submit(T, "ds", [f"doc-{i}" for i in range(6)])
    for _ in range(20):
        await asyncio.sleep(0)
    assert (running, most, queue.pending) == (4, 4, 6)  # four run, two wait for a slot
    release.set()
    await queue.join()
    assert (running, most, queue.pending) == (0, 4, 0)
