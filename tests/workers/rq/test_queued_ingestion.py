"""Queued ingestion of knowledge-base documents: RQ jobs run by real ``flowloom worker``
processes (batches of 32 chunks); a worker SIGKILLed while an embeddings request is in flight is noticed by the sweeper of
another, which continues the document from the vectors already stored - no text is
embedded twice and the document ends ready with every chunk embedded."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from engine.knowledge.service import KnowledgeService, Upload
from nodes.knowledge.chunking import TextChunker
from nodes.knowledge.embeddings import RegistryEmbedder
from nodes.knowledge.parsing import DocumentParser
from nodes.llm.model_registry import load_registry
from schemas.knowledge import DatasetCreate, DocumentStatus
from tests.support.knowledge_files import EMBEDDING_MODEL, knowledge_models
from tests.support.openai_server import TEST_API_KEY, TEST_KEY_ENV
from tests.workers.rq.conftest import Deployment
from workers.rq.knowledge import RQIngestionQueue

T = "default"
CHUNKS = 40  # one per section: a batch of 32, then one of 8
SECTIONS = [f"# Part {i}\n\nPart {i} explains topic number {i} in its own words." for i in range(CHUNKS)]


def busy_worker(deployment: Deployment) -> str:
    """The name of the worker executing a job now."""
    from redis import Redis
    from rq import Worker

    connection = Redis.from_url(deployment.redis_url)
    try:
        busy = [w.name for w in Worker.all(connection=connection) if w.get_current_job_id()]
    finally:
        connection.close()
    assert len(busy) == 1, busy
    return busy[0]


async def wait_document(service: KnowledgeService, dataset_id: str, document_id: str, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        document = await service.get_document(T, dataset_id, document_id)
        if document.status in (DocumentStatus.ready, DocumentStatus.failed):
            return document
        assert time.monotonic() < deadline, document
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_a_worker_killed_mid_ingestion_is_continued_by_another_without_embedding_twice(
        deployment, openai_server, monkeypatch):
    from workers.knowledge import open_knowledge_store

    models = knowledge_models(deployment.tmp / "models.toml", openai_server.base_url, TEST_KEY_ENV)
    deployment.env.update(FLOWLOOM_MODELS=str(models), **{TEST_KEY_ENV: TEST_API_KEY})
    monkeypatch.setenv(TEST_KEY_ENV, TEST_API_KEY)
    deployment.start_worker("k1")
    deployment.start_worker("k2")
    deployment.wait_for_workers("k1", "k2")

    from api.composition import knowledge_database_url

    store = await open_knowledge_store(knowledge_database_url(deployment.settings()), deployment.tmp / "home")
    queue = RQIngestionQueue(deployment.redis_url)
    registry = load_registry(models)
    service = KnowledgeService(store=store, parser=DocumentParser(), chunker=TextChunker(),
                               embedder=RegistryEmbedder(registry), queue=queue, lease_s=3)
    try:
        dataset = await service.create_dataset(T, DatasetCreate(name="Guide", embedding_model=EMBEDDING_MODEL))
        openai_server.hold_embeddings(skip=1)  # batch 1 (32 chunks) is stored, batch 2 is held
        [outcome] = await service.add_documents(T, dataset.id, [Upload("guide.md", "\n\n".join(SECTIONS).encode())])
        assert outcome.created
        await asyncio.to_thread(openai_server.wait_held, 1)
        victim = busy_worker(deployment)
        deployment.workers[victim].send_signal(signal.SIGKILL)
        deployment.workers[victim].wait(10)
        deadline = time.monotonic() + 10
        while openai_server.held:  # the held request notices its client is gone
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        openai_server.release_embeddings()
        middle = await service.get_document(T, dataset.id, outcome.document.id)
        assert middle.status == DocumentStatus.embedding and middle.chunks_done == 32

        document = await wait_document(service, dataset.id, outcome.document.id, timeout=60)
        assert document.status == DocumentStatus.ready, document.error
        assert document.chunk_count == document.chunks_done == CHUNKS
        survivor = next(name for name in deployment.workers if name != victim)
        assert f"document {outcome.document.id} (tenant {T}): its ingestion stopped" in deployment.log(survivor)
        chunk_texts = [f"Part {i}\nPart {i} explains topic number {i} in its own words." for i in range(CHUNKS)]
        assert dict(openai_server.embedded) == {text: 1 for text in chunk_texts}, "no text embedded twice"
        assert len(openai_server.embedding_texts) == CHUNKS + 8  # + the 8 whose answer never reached anyone
        assert await store.chunks_without_vector(T, (await service.get_dataset(T, dataset.id)).active_index.id) == []
    finally:
        queue.close()
        await store.close()
        await registry.aclose()
