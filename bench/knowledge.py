"""Knowledge-base benchmark: Flowloom's ingestion and search next to LangChain + Chroma.

Prints **one JSON line** on stdout (progress on stderr with ``-v``). One process, one
run, the same corpus, chunk size and embeddings server on both sides:

1. **Corpus** (``bench/_knowledge_corpus.py``): the pages of ``pydoc_data.topics`` and
   (full run) the standard library's docstrings, one document per topic / module.
2. **Ingestion** (chunks/s): an OpenAI-compatible ``/v1/embeddings`` server with no
   latency (``bench/_embed_server.py``, a child process, deterministic hashed
   bag-of-words vectors of 384 dimensions) serves both sides.
   *Flowloom*: ``KnowledgeService.add_documents`` (parser, token chunker, the registry's
   embeddings client over HTTP, the store) then waiting until every document is
   ``ready``, on SQLite and on PostgreSQL with pgvector.
   *LangChain*: ``RecursiveCharacterTextSplitter`` (its character size calibrated so it
   cuts the corpus into as many chunks as Flowloom's token chunker), Chroma's own
   ``OpenAIEmbeddingFunction`` against the same server (requests of the same 64 texts),
   ``collection.add`` in batches of Chroma's largest batch, as
   ``langchain_chroma.Chroma.from_documents`` does. Persistent client in a temp folder.
3. **Search** at 10k and 100k chunks: the corpus's chunks repeated (``(copy k)`` prefix)
   with vectors computed in-process by the server's own function and inserted directly
   through the store port (``replace_chunks`` + ``put_vectors``) and ``collection.add``
   (insert time reported, not a target). Latency of one query, p50/p99: Flowloom's
   ``KnowledgeService.search`` (semantic, hybrid) against Chroma's ``query`` (semantic:
   Chroma has no hybrid search), both embedding the query in-process with the same
   function and returning texts; also the store port alone (``search_vectors``) against
   Chroma's query by vector. Recall@10 of the semantic hits against exact cosine top-10
   (numpy), for both.
4. **Full text**: recall@10 (and MRR) of Flowloom's full-text search over the ingested
   dataset for 50 questions written from 50 topics (a hit: any chunk of that topic).

Modes: ``--smoke`` (8 documents, 1k chunks, for the test), ``--quick`` (topics only,
10k chunks), default full (topics + docstrings, 10k and 100k chunks). ``--database
sqlite|postgresql|both``. PostgreSQL is a pgserver (PostgreSQL with pgvector, PyPI
wheel) started in a temp folder and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _checkout import ROOT, machine, print_report, provenance, sibling

server_mod: Any = sibling("_embed_server")
corpus_mod: Any = sibling("_knowledge_corpus")

SCHEMA = "flowloom-bench-knowledge/1"
TENANT = "bench"
MODEL = "bench-embed"
DIM = server_mod.DIM
CHUNK_TOKENS = 128
OVERLAP_TOKENS = 16
EMBED_BATCH = 64  # texts per embeddings request, both sides (the registry's default max_batch)
TOP_K = 10
DOC_CHUNKS = 1000  # chunks per document when a search set is inserted through the store port

MODES: dict[str, dict[str, Any]] = {
    "smoke": {"documents": "smoke", "sizes": [1000], "queries": 20},
    "quick": {"documents": "topics", "sizes": [10_000], "queries": 100},
    "full": {"documents": "all", "sizes": [10_000, 100_000], "queries": 100},
}
VERBOSE = False


def log(message: str) -> None:
    if VERBOSE:
        print(f"[knowledge {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(samples_s) * 1000.0
    return {"p50": round(float(np.percentile(ms, 50)), 3), "p99": round(float(np.percentile(ms, 99)), 3)}


# ----------------------------------------------------------------------------- servers


def start_embed_server() -> tuple[subprocess.Popen[str], str]:
    """The embeddings server child process and its base URL (``http://127.0.0.1:PORT``)."""
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "_embed_server.py")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"embeddings server did not start (got {url!r})")
    return proc, url


def stop_process(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class PgServer:
    """A PostgreSQL with pgvector from the ``pgserver`` wheel (Debian's has no pgvector),
    in its own temp folder, reached over a Unix socket there; stopped and deleted by
    :meth:`stop`. pgserver runs ``postgres`` as its own unprivileged user when we are root."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="flowloom-bench-knowledge-pg-")
        with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR under root (harmless)
            warnings.simplefilter("ignore")
            import pgserver

            self.server = pgserver.get_server(os.path.join(self.folder, "pgdata"), cleanup_mode="delete")
        self.url = self.server.get_uri()

    async def new_database(self, name: str) -> str:
        """A new database with the ``vector`` extension; its URL."""
        await _pg_execute(self.url, f'CREATE DATABASE "{name}"')
        base, _, query = self.url.partition("?")
        url = f"{base.rsplit('/', 1)[0]}/{name}?{query}"
        await _pg_execute(url, "CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def stop(self) -> None:
        try:
            self.server.cleanup()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


async def _pg_execute(url: str, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url, timeout=30)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


# ----------------------------------------------------------------------------- Flowloom parts


def registry(url: str) -> Any:
    """A model registry with one embedding model served by the bench's server."""
    from nodes.llm.model_registry import ModelRegistry, ModelSpec, ProviderSpec

    provider = ProviderSpec(name="bench", base_url=url + "/v1", api_key_env=None, api_key_optional=True)
    spec = ModelSpec(name=MODEL, provider="bench", type="embedding", max_context=8192, dimension=DIM,
                     max_batch=EMBED_BATCH)
    return ModelRegistry([provider], [spec], env={})


class LocalEmbedder:
    """An Embedder computing the server's vectors in-process (search timing without HTTP,
    the same work as Chroma's query with an in-process embedding function)."""

    def has_model(self, model: str) -> bool:
        return model == MODEL

    async def embed(self, model: str, texts: Sequence[str]) -> Any:
        from engine.knowledge.ports import EmbeddingBatch

        return EmbeddingBatch(vectors=server_mod.embed_texts(texts).tolist(), tokens=len(texts))


async def open_store(kind: str, where: str, home: str) -> Any:
    """A migrated Flowloom knowledge store (``workers.knowledge.open_knowledge_store``):
    ``sqlite`` (``where``: a file path) or ``postgresql`` (``where``: a database URL)."""
    from pathlib import Path

    from workers.knowledge import open_knowledge_store

    url = f"sqlite:///{where}" if kind == "sqlite" else where
    return await open_knowledge_store(url, Path(home))


def service(store: Any, embedder: Any) -> Any:
    from engine.knowledge.service import KnowledgeService
    from nodes.knowledge.chunking import TextChunker
    from nodes.knowledge.parsing import DocumentParser

    return KnowledgeService(store=store, parser=DocumentParser(), chunker=TextChunker(), embedder=embedder)


def chunking() -> Any:
    from schemas.knowledge import ChunkingSettings

    return ChunkingSettings(chunk_tokens=CHUNK_TOKENS, overlap_tokens=OVERLAP_TOKENS)


# ----------------------------------------------------------------------------- corpus


@dataclass
class Corpus:
    documents: list[tuple[str, str]]
    flowloom_chunks: list[str] = field(default_factory=list)  # Flowloom's chunk texts, document order
    langchain_chunk_chars: int = 0
    langchain_chunks: int = 0


def load_corpus(which: str) -> Corpus:
    """The documents to ingest; ``smoke``: the topics of the first 8 questions."""
    topics = corpus_mod.topic_documents()
    if which == "smoke":
        wanted = {f"topic-{t}.txt" for t, _ in corpus_mod.QUESTIONS[:8]}
        return Corpus([d for d in topics if d[0] in wanted])
    if which == "topics":
        return Corpus(topics)
    return Corpus(topics + corpus_mod.docstring_documents())


def flowloom_chunk_texts(documents: list[tuple[str, str]]) -> list[str]:
    """What Flowloom's parser and chunker make of the documents (not timed)."""
    from nodes.knowledge.chunking import TextChunker
    from nodes.knowledge.parsing import DocumentParser

    parser, chunker, settings = DocumentParser(), TextChunker(), chunking()
    out: list[str] = []
    for name, text in documents:
        out.extend(d.text for d in chunker.split(parser.parse(text.encode(), name), settings))
    return out


def langchain_splitter(chars: int) -> Any:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=chars, chunk_overlap=round(chars * OVERLAP_TOKENS / CHUNK_TOKENS))


def calibrate_langchain(corpus: Corpus) -> None:
    """The character size at which LangChain's splitter cuts the corpus into as many
    chunks as Flowloom's token chunker (bisection; tiktoken is not installed, so its
    token-counting constructor cannot be used): same corpus, same chunk count, the same
    mean chunk size."""
    target = len(corpus.flowloom_chunks)

    def count(chars: int) -> int:
        splitter = langchain_splitter(chars)
        return sum(len(splitter.split_text(text)) for _, text in corpus.documents)

    low, high = 64, 8 * CHUNK_TOKENS * 4
    while high - low > 1:
        mid = (low + high) // 2
        if count(mid) > target:
            low = mid
        else:
            high = mid
    best = min((low, high), key=lambda c: abs(count(c) - target))
    corpus.langchain_chunk_chars, corpus.langchain_chunks = best, count(best)


# ----------------------------------------------------------------------------- ingestion


def ingest_langchain(corpus: Corpus, url: str, folder: str) -> dict[str, Any]:
    """Split, embed over HTTP and add to a persistent Chroma collection (timed from the
    first split to the last add; the client and collection are made before)."""
    import chromadb
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import OpenAIEmbeddingFunction

    os.environ["CHROMA_OPENAI_API_KEY"] = "bench-key"  # the server checks no key; the client needs one
    client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
    embed_fn = OpenAIEmbeddingFunction(model_name=MODEL, api_base=url + "/v1",
                                       api_key_env_var="CHROMA_OPENAI_API_KEY")
    collection = client.create_collection("ingest", configuration={"hnsw": {"space": "cosine"}},
                                          embedding_function=None)
    max_batch = client.get_max_batch_size()
    splitter = langchain_splitter(corpus.langchain_chunk_chars)
    gc.collect()
    start = time.perf_counter()
    texts: list[str] = []
    metadatas: list[dict[str, Any]] = []
    for name, text in corpus.documents:
        for piece in splitter.split_text(text):
            texts.append(piece)
            metadatas.append({"source": name})
    vectors: list[Any] = []
    for i in range(0, len(texts), EMBED_BATCH):
        vectors.extend(embed_fn(texts[i:i + EMBED_BATCH]))
    for i in range(0, len(texts), max_batch):
        collection.add(ids=[f"c{j}" for j in range(i, min(i + max_batch, len(texts)))],
                       embeddings=vectors[i:i + max_batch], documents=texts[i:i + max_batch],
                       metadatas=metadatas[i:i + max_batch])
    seconds = time.perf_counter() - start
    assert collection.count() == len(texts)
    return _rate(len(texts), sum(map(len, texts)), seconds)


def _rate(chunks: int, chars: int, seconds: float) -> dict[str, Any]:
    return {"chunks": chunks, "seconds": round(seconds, 3), "chunks_per_s": round(chunks / seconds, 1),
            "chars_per_s": round(chars / seconds, 1)}


async def ingest_flowloom(corpus: Corpus, svc: Any, *, collect: bool = True) -> tuple[dict[str, Any], str]:
    """``add_documents`` then wait until every document is ``ready`` (timed from the
    upload; the dataset is created before): the service's own in-process queue (four
    documents at a time, its default) is joined. ``collect``: a full garbage collection
    first, before the clock (a caller timing CPU collects before its own clock). Returns
    the figures and the dataset id."""
    from engine.knowledge.service import Upload
    from schemas.knowledge import DatasetCreate, DocumentStatus

    dataset = await svc.create_dataset(TENANT, DatasetCreate(name="ingest", embedding_model=MODEL,
                                                              chunking=chunking()))
    uploads = [Upload(name=name, data=text.encode()) for name, text in corpus.documents]
    if collect:
        gc.collect()
    start = time.perf_counter()
    outcomes = await svc.add_documents(TENANT, dataset.id, uploads)
    rejected = [o.source_name for o in outcomes if o.error is not None]
    if rejected:
        raise RuntimeError(f"Flowloom rejected {len(rejected)} documents: {rejected[:5]}")
    join = getattr(svc.queue, "join", None)
    if join is not None:  # the in-process queue: wake exactly when its last task ends
        await join()
    else:
        async for _ in svc.follow(TENANT, dataset.id, poll_s=0.02):
            pass
    seconds = time.perf_counter() - start
    documents = await svc.list_documents(TENANT, dataset.id)
    failed = [d.source_name for d in documents if d.status != DocumentStatus.ready]
    if failed:
        raise RuntimeError(f"{len(failed)} documents did not become ready: {failed[:5]}")
    chunks = sum(d.chunk_count for d in documents)
    return _rate(chunks, sum(len(t) for _, t in corpus.documents), seconds), dataset.id


async def full_text_questions(svc: Any, dataset_id: str, corpus: Corpus) -> dict[str, Any]:
    """Recall@10 and MRR@10 of full-text search for the questions whose topic is in the
    corpus (a hit: a chunk of the topic's document among the first 10)."""
    from schemas.knowledge import SearchMode, SearchRequest

    names = {name for name, _ in corpus.documents}
    asked = [(f"topic-{topic}.txt", q) for topic, q in corpus_mod.QUESTIONS if f"topic-{topic}.txt" in names]
    found, reciprocal = 0, 0.0
    for source, question in asked:
        result = await svc.search(TENANT, SearchRequest(dataset_ids=[dataset_id], query=question,
                                                        mode=SearchMode.full_text, top_k=TOP_K,
                                                        max_quote_tokens=200_000))
        ranks = [i for i, hit in enumerate(result.hits[:TOP_K]) if hit.source_name == source]
        if ranks:
            found += 1
            reciprocal += 1.0 / (ranks[0] + 1)
    return {"questions": len(asked), "recall_at_10": round(found / len(asked), 3),
            "mrr_at_10": round(reciprocal / len(asked), 3)}


# ----------------------------------------------------------------------------- search


@dataclass
class SearchSet:
    """``size`` chunk texts with their vectors, the queries with theirs, and each query's
    exact cosine top-10 (by brute force) with its 10th similarity."""

    texts: list[str]
    vectors: np.ndarray
    queries: list[str]
    query_vectors: np.ndarray
    exact_kth: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def recall(self, query: int, found: Sequence[int]) -> float:
        """Share of the exact top-10 found: a found chunk counts when its similarity
        reaches the 10th exact one (equal similarities are interchangeable)."""
        sims = self.vectors[list(found[:TOP_K])] @ self.query_vectors[query] if len(found) else np.zeros(0)
        return float(np.sum(sims >= self.exact_kth[query] - 1e-5)) / TOP_K


def make_search_set(base: list[str], size: int, queries: int) -> SearchSet:
    texts = list(corpus_mod.search_texts(base, size))
    vectors = server_mod.embed_texts(texts).astype(np.float32)
    rng = np.random.default_rng(7)
    asked = [q for _, q in corpus_mod.QUESTIONS][:queries]
    while len(asked) < queries:  # the opening words of random chunks
        asked.append(" ".join(base[int(rng.integers(len(base)))].split()[:12]))
    qvecs = server_mod.embed_texts(asked).astype(np.float32)
    sims = vectors @ qvecs.T  # (size, queries)
    kth = -np.partition(-sims, TOP_K - 1, axis=0)[TOP_K - 1]
    return SearchSet(texts, vectors, asked, qvecs, kth)


class ChromaSide:
    """The search set in a persistent Chroma collection (cosine HNSW, Chroma's defaults)."""

    def __init__(self, folder: str) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
        self.collection = self.client.create_collection("search", configuration={"hnsw": {"space": "cosine"}},
                                                        embedding_function=None)

    def insert(self, data: SearchSet) -> float:
        step = self.client.get_max_batch_size()
        start = time.perf_counter()
        for i in range(0, len(data.texts), step):
            end = min(i + step, len(data.texts))
            self.collection.add(ids=[str(j) for j in range(i, end)], embeddings=data.vectors[i:end],
                                documents=data.texts[i:end],
                                metadatas=[{"source": f"set-{j // DOC_CHUNKS}.txt"} for j in range(i, end)])
        return time.perf_counter() - start

    def query_text(self, text: str) -> list[int]:
        vector = server_mod.embed_text(text).astype(np.float32)
        return self.query_vector(vector)

    def query_vector(self, vector: np.ndarray) -> list[int]:
        found = self.collection.query(query_embeddings=[vector], n_results=TOP_K,
                                      include=["documents", "metadatas", "distances"])
        return [int(i) for i in found["ids"][0]]


class FlowloomSide:
    """The search set in a Flowloom store, inserted through the store port; searched by
    :class:`KnowledgeService` with :class:`LocalEmbedder`."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.svc = service(store, LocalEmbedder())
        self.position: dict[str, int] = {}
        self.dataset_id = self.index_id = ""

    async def insert(self, data: SearchSet) -> float:
        import hashlib
        import uuid

        from schemas.knowledge import ChunkDraft, Dataset, Document, DocumentStatus

        start = time.perf_counter()
        ds = await self.store.create_dataset(Dataset(id=f"search-{len(data.texts)}", tenant_id=TENANT,
                                                     name=f"search {len(data.texts)}", embedding_model=MODEL,
                                                     chunking=chunking()))
        index = await self.store.create_index(TENANT, ds.id, MODEL)
        await self.store.set_index_dimension(TENANT, index.id, DIM)
        self.dataset_id, self.index_id = ds.id, index.id
        for first in range(0, len(data.texts), DOC_CHUNKS):
            texts = data.texts[first:first + DOC_CHUNKS]
            doc = Document(id=uuid.uuid4().hex, tenant_id=TENANT, dataset_id=ds.id,
                           source_name=f"set-{first // DOC_CHUNKS}.txt", content_type="txt",
                           content_hash=hashlib.sha256("\n".join(texts).encode()).hexdigest(),
                           size_bytes=sum(map(len, texts)))
            doc, _ = await self.store.put_document(doc)
            drafts = [ChunkDraft(position=i, text=t, search_text=t, tokens=max(1, len(t) // 4))
                      for i, t in enumerate(texts)]
            chunks = await self.store.replace_chunks(TENANT, doc.id, drafts)
            pairs = []
            for chunk in chunks:
                row = first + chunk.position
                self.position[chunk.id] = row
                pairs.append((chunk.id, data.vectors[row].tolist()))
            await self.store.put_vectors(TENANT, index.id, pairs)
            await self.store.update_document(TENANT, doc.id, status=DocumentStatus.ready, chunk_count=len(texts),
                                             chunks_done=len(texts))
        await self.store.activate_index(TENANT, ds.id, index.id)
        return time.perf_counter() - start

    async def search(self, text: str, mode: str) -> list[int]:
        from schemas.knowledge import SearchMode, SearchRequest

        result = await self.svc.search(TENANT, SearchRequest(dataset_ids=[self.dataset_id], query=text,
                                                             mode=SearchMode(mode), top_k=TOP_K,
                                                             max_quote_tokens=200_000))
        return [self.position[hit.chunk_id] for hit in result.hits]

    async def search_full_text(self, text: str) -> list[int]:
        from engine.knowledge.retrieval import recall_size
        from schemas.knowledge import SearchRequest

        k = recall_size(SearchRequest(dataset_ids=[self.dataset_id], top_k=TOP_K))  # what hybrid's pass asks
        found = await self.store.search_full_text(TENANT, [self.dataset_id], text, k)
        return [self.position[s.chunk.id] for s in found]

    async def search_vector(self, vector: np.ndarray) -> list[int]:
        found = await self.store.search_vectors(TENANT, self.index_id, vector.tolist(), TOP_K)
        return [self.position[s.chunk.id] for s in found]


async def measure_search(data: SearchSet, chroma: ChromaSide, sides: dict[str, FlowloomSide],
                         warmup: int = 5) -> dict[str, Any]:
    """Per query, in turn: Chroma by text and by vector, then each Flowloom store by
    semantic and hybrid search, and its store port's vector and full-text passes (as
    hybrid runs them); latency p50/p99 and semantic recall@10."""
    out: dict[str, Any] = {}
    first = {}
    for name, side in sides.items():  # the first search of a store may build its in-memory graph
        t0 = time.perf_counter()
        await side.search(data.queries[0], "semantic")
        first[name] = round((time.perf_counter() - t0) * 1000, 1)
    for q in range(min(warmup, len(data.queries))):
        chroma.query_text(data.queries[q])
        for side in sides.values():
            await side.search(data.queries[q], "semantic")
            await side.search(data.queries[q], "hybrid")
    samples: dict[str, list[float]] = {}
    recalls: dict[str, list[float]] = {}

    def timed(key: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        samples.setdefault(key, []).append(time.perf_counter() - t0)
        return value

    async def atimed(key: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        t0 = time.perf_counter()
        value = await fn()
        samples.setdefault(key, []).append(time.perf_counter() - t0)
        return value

    gc.collect()
    for q, text in enumerate(data.queries):
        qvec = data.query_vectors[q]
        found = timed("chroma.semantic", functools.partial(chroma.query_text, text))
        recalls.setdefault("chroma", []).append(data.recall(q, found))
        timed("chroma.vector", functools.partial(chroma.query_vector, qvec))
        for name, side in sides.items():
            found = await atimed(f"{name}.semantic", functools.partial(side.search, text, "semantic"))
            recalls.setdefault(name, []).append(data.recall(q, found))
            await atimed(f"{name}.hybrid", functools.partial(side.search, text, "hybrid"))
            await atimed(f"{name}.vector", functools.partial(side.search_vector, qvec))
            await atimed(f"{name}.full_text", functools.partial(side.search_full_text, text))
    for key, values in samples.items():
        who, what = key.split(".", 1)
        row = out.setdefault(who, {})
        stats = percentiles(values)
        row[f"{what}_ms_p50"], row[f"{what}_ms_p99"] = stats["p50"], stats["p99"]
    for who, values in recalls.items():
        out[who]["recall_at_10"] = round(float(np.mean(values)), 4)
    for name, ms in first.items():
        out[name]["first_search_ms"] = ms
    out["queries"] = len(data.queries)
    return out


# ----------------------------------------------------------------------------- the run


def _target(value: float | None, target: str, met: bool | None) -> dict[str, Any]:
    return {"value": None if value is None else round(value, 4), "target": target, "met": bool(met)}


def targets(report: dict[str, Any]) -> dict[str, Any]:
    """Ingestion >= 2x LangChain's chunks/s per store; per search size and store, semantic
    and hybrid p50 <= Chroma's query p50 and semantic recall@10 >= 0.95."""
    out: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    ingest = report["ingest"]
    lc = ingest.get("langchain_chroma", {}).get("chunks_per_s")
    for kind in report["databases"]:
        rate = ingest.get(f"flowloom_{kind}", {}).get("chunks_per_s")
        ratio = rate / lc if rate and lc else None
        ratios[f"ingest_{kind}_vs_langchain"] = None if ratio is None else round(ratio, 3)
        out[f"ingest_{kind}_vs_langchain"] = _target(ratio, ">= 2", ratio is not None and ratio >= 2)
    for size, row in report["search"].items():
        chroma = row.get("chroma", {})
        for kind in report["databases"]:
            side = row.get(f"flowloom_{kind}")
            for what in ("semantic", "hybrid"):
                ratio = (side[f"{what}_ms_p50"] / chroma["semantic_ms_p50"]
                         if side and chroma.get("semantic_ms_p50") else None)
                ratios[f"search_{size}_{kind}_{what}_p50_vs_chroma"] = None if ratio is None else round(ratio, 3)
                out[f"search_{size}_{kind}_{what}_p50_vs_chroma"] = _target(ratio, "<= 1",
                                                                            ratio is not None and ratio <= 1)
            if side and chroma.get("vector_ms_p50"):
                ratios[f"search_{size}_{kind}_store_vector_p50_vs_chroma"] = round(
                    side["vector_ms_p50"] / chroma["vector_ms_p50"], 3)
            recall = side.get("recall_at_10") if side else None
            out[f"recall_{size}_{kind}"] = _target(recall, ">= 0.95", recall is not None and recall >= 0.95)
    report["ratios"] = ratios
    return out


async def _flowloom_ingest(kind: str, corpus: Corpus, url: str, where: str, home: str,
                           report: dict[str, Any]) -> Any:
    """Open the store, ingest the corpus, ask the questions; the store (None on failure)."""
    from nodes.knowledge.embeddings import RegistryEmbedder

    store = await open_store(kind, where, home)
    svc = service(store, RegistryEmbedder(registry(url)))
    log(f"flowloom {kind}: ingesting {len(corpus.documents)} documents")
    report["ingest"][f"flowloom_{kind}"], dataset_id = await ingest_flowloom(corpus, svc)
    log(f"flowloom {kind}: {report['ingest'][f'flowloom_{kind}']}")
    report["full_text"][f"flowloom_{kind}"] = await full_text_questions(svc, dataset_id, corpus)
    await store.delete_dataset(TENANT, dataset_id)  # leave the store to the search sets
    await svc.aclose()
    return store


async def _search_size(size: int, corpus: Corpus, queries: int, stores: dict[str, Any], folder: str,
                       report: dict[str, Any]) -> None:
    data = make_search_set(corpus.flowloom_chunks, size, queries)
    log(f"search {size}: inserting into Chroma")
    chroma = ChromaSide(os.path.join(folder, f"chroma-{size}"))
    inserted = {"chroma": chroma.insert(data)}
    sides: dict[str, FlowloomSide] = {}
    for kind, store in stores.items():
        log(f"search {size}: inserting into Flowloom {kind}")
        side = FlowloomSide(store)
        try:
            inserted[f"flowloom_{kind}"] = await side.insert(data)
        except Exception as error:
            report["errors"].append(f"flowloom {kind} search set {size}: {type(error).__name__}: {error}")
            continue
        sides[f"flowloom_{kind}"] = side
    log(f"search {size}: {len(data.queries)} queries")
    row = await measure_search(data, chroma, sides)
    for who, seconds in inserted.items():
        row[who]["insert_s"] = round(seconds, 2)
        row[who]["insert_chunks_per_s"] = round(size / seconds, 1)
    report["search"][str(size)] = row
    for side in sides.values():
        await side.store.delete_dataset(TENANT, side.dataset_id)
    del chroma
    gc.collect()


async def run(mode: str, databases: list[str]) -> dict[str, Any]:
    cfg = MODES[mode]
    report: dict[str, Any] = {
        "bench": "knowledge", "schema": SCHEMA, "mode": mode, "quick": mode != "full", "databases": databases,
        "flowloom": provenance(("engine", "nodes", "workers", "schemas", "bench")),
        "machine": machine(("chromadb", "langchain-text-splitters", "semantic-text-splitter", "sqlite-vec",
                            "usearch", "pgvector", "pgserver", "openai", "numpy")),
        "settings": {"chunk_tokens": CHUNK_TOKENS, "overlap_tokens": OVERLAP_TOKENS, "dimension": DIM,
                     "embedding_batch": EMBED_BATCH, "top_k": TOP_K, "sizes": cfg["sizes"],
                     "queries": cfg["queries"]},
        "corpus": {}, "ingest": {}, "full_text": {}, "search": {}, "errors": [],
    }
    folder = tempfile.mkdtemp(prefix="flowloom-bench-knowledge-")
    proc, url = start_embed_server()
    pg: PgServer | None = None
    stores: dict[str, Any] = {}
    try:
        corpus = load_corpus(cfg["documents"])
        log(f"corpus: {len(corpus.documents)} documents; chunking with Flowloom's chunker")
        corpus.flowloom_chunks = flowloom_chunk_texts(corpus.documents)
        calibrate_langchain(corpus)
        report["corpus"] = {
            "documents": len(corpus.documents), "chars": sum(len(t) for _, t in corpus.documents),
            "sources": "pydoc_data.topics" + ("" if cfg["documents"] != "all" else " + stdlib docstrings"),
            "flowloom_chunks": len(corpus.flowloom_chunks), "langchain_chunks": corpus.langchain_chunks,
            "langchain_chunk_chars": corpus.langchain_chunk_chars,
            "flowloom_mean_chunk_chars": round(sum(map(len, corpus.flowloom_chunks)) / len(corpus.flowloom_chunks), 1),
        }
        log(f"langchain + chroma: ingesting ({corpus.langchain_chunks} chunks)")
        report["ingest"]["langchain_chroma"] = ingest_langchain(corpus, url, os.path.join(folder, "chroma-ingest"))
        log(f"langchain + chroma: {report['ingest']['langchain_chroma']}")
        for kind in databases:
            try:
                if kind == "postgresql":
                    pg = PgServer()
                    where = await pg.new_database("bench")
                else:
                    where = os.path.join(folder, "flowloom.db")
                stores[kind] = await _flowloom_ingest(kind, corpus, url, where, folder, report)
            except Exception as error:
                report["errors"].append(f"flowloom {kind} ingestion: {type(error).__name__}: {error}")
        for size in cfg["sizes"]:
            try:
                await _search_size(size, corpus, cfg["queries"], stores, folder, report)
            except Exception as error:
                report["errors"].append(f"search set {size}: {type(error).__name__}: {error}")
    finally:
        for store in stores.values():
            try:
                await store.close()
            except Exception as error:
                report["errors"].append(f"closing a store: {error}")
        if pg is not None:
            pg.stop()
        stop_process(proc)
        shutil.rmtree(folder, ignore_errors=True)
    report["targets"] = targets(report)
    report["all_targets_met"] = bool(report["targets"]) and all(t["met"] for t in report["targets"].values())
    return report


def main(argv: list[str] | None = None) -> int:
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="topics only, 10k chunks (a few minutes with PostgreSQL)")
    size.add_argument("--smoke", action="store_true", help="8 documents, 1k chunks (the test's run)")
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--sizes", help="search set sizes, comma-separated (default by mode: 1000 / 10000 / "
                                        "10000,100000)")
    parser.add_argument("--queries", type=int, help="timed queries per search set (default by mode: 20 / 100 / 100)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    VERBOSE = args.verbose
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.sizes:
        MODES[mode]["sizes"] = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.queries:
        MODES[mode]["queries"] = max(1, args.queries)
    databases = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    return print_report(lambda: asyncio.run(run(mode, databases)))


if __name__ == "__main__":
    sys.exit(main())
