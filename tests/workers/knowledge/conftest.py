"""Fixtures of the knowledge store tests: every test runs on SQLite (the run store's file
in the test's FLOWLOOM_HOME) and on a real PostgreSQL with pgvector (``pgserver``)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from schemas.knowledge import ChunkDraft, ChunkKind, Dataset, Document
from workers.knowledge import open_knowledge_store
from workers.sql.connect import default_database_url


@pytest.fixture(params=["sqlite", "pgvector"])
def knowledge_url(request) -> str:
    if request.param == "sqlite":
        return default_database_url(Path(os.environ["FLOWLOOM_HOME"]))
    return request.getfixturevalue("pgvector_database_url")


@pytest.fixture
async def kstore(knowledge_url):
    store = await open_knowledge_store(knowledge_url, Path(os.environ["FLOWLOOM_HOME"]))
    yield store
    await store.close()


@pytest.fixture
def tenant() -> str:
    """A tenant of its own per test (the PostgreSQL database is shared by the session)."""
    return f"t-{uuid.uuid4().hex[:8]}"


def dataset(tenant: str, dataset_id: str = "ds", **fields) -> Dataset:
    return Dataset(id=dataset_id, tenant_id=tenant, name=fields.pop("name", dataset_id), **fields)


def document(tenant: str, dataset_id: str, source: str, content: str = "v1", **fields) -> Document:
    return Document(id=fields.pop("id", uuid.uuid4().hex), tenant_id=tenant, dataset_id=dataset_id,
                    source_name=source, content_type="text", content_hash=f"hash-{content}",
                    size_bytes=len(content), created_at=time.time(), **fields)


def drafts(*texts: str, kind: ChunkKind = ChunkKind.text) -> list[ChunkDraft]:
    return [ChunkDraft(position=i, kind=kind, text=t, search_text=t, tokens=len(t.split()))
            for i, t in enumerate(texts)]
