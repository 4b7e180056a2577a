"""Fixtures of the knowledge service tests: the real knowledge stores (SQLite, and
PostgreSQL with pgvector), the real parser, chunker and registry clients against the
scripted server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.knowledge.service import KnowledgeService
from nodes.knowledge.chunking import TextChunker
from nodes.knowledge.embeddings import RegistryEmbedder, RegistryReranker
from nodes.knowledge.parsing import DocumentParser

#: run a test on both stores: ``@BOTH_STORES`` (the others run on SQLite)
BOTH_STORES = pytest.mark.parametrize("knowledge_url", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def knowledge_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite file in the test's folder, or (``@BOTH_STORES``) also a fresh PostgreSQL
    database with pgvector (a sync fixture: the database is made outside the test's
    event loop)."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return f"sqlite:///{tmp_path / 'knowledge.db'}"
    return request.getfixturevalue("make_pgvector_database")()


@pytest.fixture
async def knowledge_store(knowledge_url: str, tmp_path: Path) -> AsyncIterator[Any]:
    """The knowledge store of :func:`knowledge_url`."""
    from workers.knowledge import open_knowledge_store

    url = knowledge_url
    store = await open_knowledge_store(url, tmp_path)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def make_service(knowledge_store: Any, scripted_registry: Any) -> AsyncIterator[Callable[..., KnowledgeService]]:
    made: list[KnowledgeService] = []

    def make(**options: Any) -> KnowledgeService:
        values: dict[str, Any] = dict(store=knowledge_store, parser=DocumentParser(), chunker=TextChunker(),
                                      embedder=RegistryEmbedder(scripted_registry, retries=1, backoff_s=0.01),
                                      reranker=RegistryReranker(scripted_registry, backoff_s=0.01), batch_size=4)
        service = KnowledgeService(**{**values, **options})
        made.append(service)
        return service

    try:
        yield make
    finally:
        for service in made:
            await service.aclose()


@pytest.fixture
def service(make_service: Callable[..., KnowledgeService]) -> KnowledgeService:
    return make_service()


async def wait_ended(service: KnowledgeService, tenant: str, dataset_id: str, timeout: float = 30.0) -> list[Any]:
    """The dataset's documents once every one is ready or failed (their ingestion tasks done)."""
    await service.queue.join()  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while True:
        documents = await service.list_documents(tenant, dataset_id)
        if all(d.status.value in ("ready", "failed") for d in documents):
            return documents
        assert time.monotonic() < deadline, [(d.source_name, d.status) for d in documents]
        await asyncio.sleep(0.02)
