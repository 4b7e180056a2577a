"""A knowledge base for retrieval tests: the real SQLite knowledge store and KnowledgeService,
one dataset ``policies`` (embedding model ``embed-model`` of the scripted registry) filled
with a short returns policy through the scripted server's /v1/embeddings."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from engine.knowledge.service import KnowledgeService
from nodes.knowledge.chunking import TextChunker
from nodes.knowledge.embeddings import RegistryEmbedder, RegistryReranker
from nodes.knowledge.parsing import DocumentParser
from schemas.knowledge import DatasetCreate

__all__ = ["POLICY", "POLICY_FLOW", "POLICY_QUESTION", "open_policy_kb", "wait_ready"]

POLICY = """# Returns policy

## Refunds
Refunds are paid to the original card within 14 days after the returned item arrives.
A refund needs the original receipt.

## Shipping
Parcels to Europe take five working days. Express shipping takes two days.

## Opening hours
The shop opens at nine and closes at six, Monday to Saturday.
"""


#: a question the policy's refunds section answers
POLICY_QUESTION = "refunds paid to the original card within how many days after the returned item arrives"

#: a workflow answering ``query`` from dataset ``policies`` of a registry whose chat model
#: is ``default``: start -> query extension -> knowledge retrieval (top 2) -> chat quoting
#: the chunks -> answer
POLICY_FLOW: dict[str, Any] = {
    "id": "kbqa", "name": "Policy answers", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [
        {"id": "start", "type": "start"},
        {"id": "qe", "type": "query_extension", "config": {"model": "default", "count": 2}},
        {"id": "kr", "type": "knowledge_retrieval", "config": {"datasets": ["policies"], "top_k": 2,
                                                                "queries": {"ref": "qe.queries"}}},
        {"id": "chat", "type": "chat", "config": {"model": "default", "quote": {"ref": "kr.quote"}}},
        {"id": "say", "type": "answer", "config": {"text": "{{ chat.answer }}"}},
    ],
    "edges": [{"id": "e1", "source": "start", "target": "qe"}, {"id": "e2", "source": "qe", "target": "kr"},
              {"id": "e3", "source": "kr", "target": "chat"}, {"id": "e4", "source": "chat", "target": "say"}],
}


async def wait_ready(service: KnowledgeService, tenant: str, dataset_id: str, timeout: float = 30.0) -> None:
    """Return once every document of the dataset is ready (fail naming a failed one)."""
    deadline = time.monotonic() + timeout
    while True:
        documents = await service.list_documents(tenant, dataset_id)
        if documents and all(d.status.value in ("ready", "failed") for d in documents):
            assert all(d.status.value == "ready" for d in documents), [(d.source_name, d.error) for d in documents]
            return
        assert time.monotonic() < deadline, [(d.source_name, d.status) for d in documents]
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def open_policy_kb(folder: Path, registry: Any, tenant: str = "t1", dataset_id: str = "policies",
                         database_url: str | None = None) -> AsyncIterator[KnowledgeService]:
    """The service with dataset ``dataset_id`` of ``tenant`` holding :data:`POLICY` as
    ``returns.md`` (small chunks: one section each), ingested; on ``database_url``
    (default: a SQLite file in ``folder``)."""
    from workers.knowledge import open_knowledge_store

    store = await open_knowledge_store(database_url or f"sqlite:///{folder / 'knowledge.db'}", folder)
    service = KnowledgeService(store=store, parser=DocumentParser(), chunker=TextChunker(),
                               embedder=RegistryEmbedder(registry, retries=1, backoff_s=0.01),
                               reranker=RegistryReranker(registry, backoff_s=0.01))
    try:
        await service.create_dataset(tenant, DatasetCreate(id=dataset_id, name="Policies", embedding_model="embed-model",
                                                           chunking={"chunk_tokens": 40, "overlap_tokens": 0}))
        await service.add_text(tenant, dataset_id, "returns.md", POLICY)
        await wait_ready(service, tenant, dataset_id)
        yield service
    finally:
        await service.aclose()
        await store.close()
