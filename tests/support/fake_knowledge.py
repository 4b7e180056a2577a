"""In-memory fakes of the knowledge ports retrieval reads (store search, embedder,
reranker, relevance judge), for unit tests of ranking without a database.

The fake store ranks honestly: vectors by cosine similarity, full text by the count of
query words a chunk's search text holds (a chunk with none is not found), so tests
assert on orders the data implies, not on canned answers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.knowledge.ports import EmbeddingBatch, EmbeddingError, ScoredChunk, VectorSearchUnavailable
from schemas.knowledge import Chunk, ChunkKind, Dataset, IndexInfo, MetadataFilter

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def dataset(ds_id: str, model: str | None = "emb", *, active: bool = True, tenant: str = "t1") -> Dataset:
    index = IndexInfo(id=f"idx-{ds_id}", embedding_model=model, state="active") if model and active else None
    return Dataset(id=ds_id, tenant_id=tenant, name=f"{ds_id} docs", embedding_model=model, active_index=index)


def chunk(chunk_id: str, text: str, *, ds: str = "ds1", doc: str = "doc1", position: int = 0,
          kind: ChunkKind = ChunkKind.text, search_text: str | None = None, parent: str | None = None,
          metadata: dict[str, Any] | None = None, tenant: str = "t1", tokens: int = 0) -> Chunk:
    return Chunk(id=chunk_id, tenant_id=tenant, dataset_id=ds, document_id=doc, position=position, kind=kind,
                 text=text, search_text=search_text if search_text is not None else text, text_hash=chunk_id,
                 parent_id=parent, metadata=metadata or {}, source_name=f"{doc}.md", tokens=tokens)


class WordEmbedder:
    """Embeds text as a normalised bag of its words over a fixed vocabulary (the words
    of every chunk added), so similar wording means a higher cosine."""

    def __init__(self, vocabulary: Sequence[str], models: Sequence[str] = ("emb",), fail: bool = False):
        self.vocabulary = sorted({w for text in vocabulary for w in words(text)})
        self.models, self.fail, self.calls = set(models), fail, []

    def has_model(self, model: str) -> bool:
        return model in self.models

    def vector(self, text: str) -> list[float]:
        bag = words(text)
        vec = [float(bag.count(w)) for w in self.vocabulary]
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingBatch:
        self.calls.append((model, list(texts)))
        if self.fail:
            raise EmbeddingError(f"embedding model {model!r} failed: scripted failure")
        return EmbeddingBatch([self.vector(t) for t in texts], tokens=sum(len(words(t)) for t in texts),
                              cost=0.001 * len(texts))


@dataclass
class FakeStore:
    """Chunks and their vectors per index; search only (what the retriever uses)."""

    chunks: dict[str, Chunk] = field(default_factory=dict)
    vectors: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    vector_support: bool = True
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def add(self, c: Chunk, embedder: WordEmbedder | None = None, index: str | None = None) -> Chunk:
        self.chunks[c.id] = c
        if embedder is not None and c.kind != ChunkKind.parent:
            self.vectors.setdefault(index or f"idx-{c.dataset_id}", {})[c.id] = embedder.vector(c.search_text)
        return c

    def _passes(self, c: Chunk, tenant_id: str, filters: Sequence[MetadataFilter]) -> bool:
        if c.tenant_id != tenant_id:
            return False
        for f in filters:
            value = c.metadata.get(f.field)
            if f.op == "eq" and value != f.value:
                return False
            if f.op == "in" and value not in (f.value or []):
                return False
        return True

    async def search_vectors(self, tenant_id: str, index_id: str, vector: Sequence[float], k: int,
                             filters: Sequence[MetadataFilter] = ()) -> list[ScoredChunk]:
        self.calls.append(("vectors", index_id))
        if not self.vector_support:
            raise VectorSearchUnavailable("the store has no vector extension")
        found = []
        for chunk_id, vec in self.vectors.get(index_id, {}).items():
            c = self.chunks[chunk_id]
            if self._passes(c, tenant_id, filters):
                found.append(ScoredChunk(c, sum(a * b for a, b in zip(vec, vector, strict=True))))
        found.sort(key=lambda sc: -sc.score)
        return found[:k]

    async def search_full_text(self, tenant_id: str, dataset_ids: Sequence[str], query: str, k: int,
                               filters: Sequence[MetadataFilter] = ()) -> list[ScoredChunk]:
        self.calls.append(("full_text", tuple(dataset_ids)))
        terms = set(words(query))
        found = []
        for c in self.chunks.values():
            if c.dataset_id in dataset_ids and c.kind != ChunkKind.parent and self._passes(c, tenant_id, filters):
                hits = sum(1 for w in words(c.search_text) if w in terms)
                if hits:
                    found.append(ScoredChunk(c, float(hits) * 3.5))
        found.sort(key=lambda sc: -sc.score)
        return found[:k]

    async def get_chunks(self, tenant_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        return [self.chunks[i] for i in chunk_ids if i in self.chunks and self.chunks[i].tenant_id == tenant_id]


class ScriptedReranker:
    """Scores a document by how many words of the query it holds, over its length
    (a real rerank model's scale: [0, 1]). ``models``: the rerank models it knows (None: any)."""

    def __init__(self, models: Sequence[str] | None = None) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.models = models

    def model_problem(self, model: str) -> str | None:
        return None if self.models is None or model in self.models else f"unknown rerank model {model!r}"

    async def rerank(self, model: str, query: str, documents: Sequence[str],
                     top_n: int | None = None) -> tuple[list[tuple[int, float]], int]:
        self.calls.append((model, query, len(documents)))
        terms = set(words(query))
        scored = []
        for i, doc in enumerate(documents):
            ws = words(doc)
            scored.append((i, sum(1 for w in ws if w in terms) / max(1, len(ws))))
        scored.sort(key=lambda p: -p[1])
        return (scored[:top_n] if top_n else scored), sum(len(words(d)) for d in documents)


class KeywordJudge:
    """Keeps the texts that contain ``keyword`` (stands in for the chat model's verdict)."""

    def __init__(self, keyword: str, models: Sequence[str] | None = None) -> None:
        self.keyword, self.calls, self.models = keyword, [], models

    def model_problem(self, model: str) -> str | None:
        return None if self.models is None or model in self.models else f"unknown chat model {model!r}"

    async def select(self, model: str, question: str, texts: Sequence[str]) -> tuple[list[int], dict[str, Any]]:
        self.calls.append((model, question, len(texts)))
        keep = [i for i, t in enumerate(texts) if self.keyword in t]
        return keep, {"tokens_in": 100, "tokens_out": 5, "cost": 0.01}


class FakeKnowledge:
    """A :class:`~engine.knowledge.ports.KnowledgeSearch` over a :class:`FakeStore`: the
    real Retriever on the datasets given (another tenant's dataset is not found)."""

    def __init__(self, store: FakeStore, datasets: Sequence[Dataset], embedder: Any = None, **ports: Any):
        from engine.knowledge.retrieval import Retriever

        self.retriever = Retriever(store=store, embedder=embedder, **ports)
        self.datasets = {(ds.tenant_id, ds.id): ds for ds in datasets}
        self.requests: list[tuple[str, Any]] = []

    async def search(self, tenant_id: str, request: Any) -> Any:
        from engine.knowledge.ports import DatasetNotFound

        self.requests.append((tenant_id, request))
        found = []
        for ds_id in request.dataset_ids:
            if (tenant_id, ds_id) not in self.datasets:
                raise DatasetNotFound(f"dataset {ds_id!r} not found")
            found.append(self.datasets[(tenant_id, ds_id)])
        return await self.retriever.search(tenant_id, request, found)
