"""Retrieval: recall passes over a tenant's datasets, fusion, rerank, quote budget, citations.

:meth:`Retriever.search` runs, in order:

1. **Plan.** Each dataset is searched semantically (``semantic`` / ``hybrid`` mode) in
   its *active index* when it has one, the store holds vectors and the embedder knows
   the index's model; otherwise by full text, and a note names the dataset and why.
2. **Recall passes.** One query embedding per distinct embedding model (all queries in
   one batch), then per query: a vector pass per semantic dataset's index, and one
   full-text pass over the full-text datasets. Each pass fetches ``recall_k`` chunks.
   A *child* chunk (parent-child datasets) stands for its parent: the parent is what
   is returned, once, at the best rank any of its children reached.
3. **Threshold on recall.** Without a rerank model, ``score_threshold`` is the minimum
   cosine similarity of a semantic candidate (as FastGPT filters its embedding recall);
   full-text scores have no absolute scale and are not thresholded (a note says so in
   full-text mode). With weighted fusion it is the minimum fused score instead.
4. **Fusion** (:mod:`engine.knowledge.fusion`): RRF (k = 60) or weighted normalised scores.
5. **Rerank** with the request's rerank ``model`` (the score becomes the model's
   relevance, thresholded by ``score_threshold``, at most ``top_n`` kept), then the
   **LLM relevance pass** (``rerank.llm``: a chat model keeps only relevant chunks,
   order unchanged).
6. ``top_k``, then the **quote budget**: hits in rank order while their tokens fit
   ``max_quote_tokens`` (the first is always kept, cut to the budget when alone too big).
7. **Citations**: ids ``"1"``..``"n"`` in rank order, and the ``quote`` text: each hit as
   ``[n] source: <source name> > <heading path>`` then its text, blank-line separated.

A QA chunk is returned as its question and answer. Nothing here raises for a degraded
search (a missing index, a store without vectors, a rerank model not configured, an
embedding failure in hybrid mode): the search answers with what it could do and
``notes`` say what it could not. Raised: :class:`InvalidRerank` (before any model is
called) when ``rerank.model`` is not a rerank model or ``rerank.llm`` not a chat model;
``EmbeddingError`` when semantic mode cannot embed the query; store errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from schemas.knowledge import (
    Chunk,
    ChunkKind,
    Dataset,
    DocumentStatus,
    FusionMode,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchResult,
)

from ..errors import FlowloomError
from .fusion import RecallPass, estimate_tokens, fit_budget, fuse_rrf, fuse_weighted, truncate_to_tokens
from .ports import (
    Embedder,
    EmbeddingError,
    KnowledgeStore,
    RelevanceJudge,
    Reranker,
    ScoredChunk,
    VectorSearchUnavailable,
)

__all__ = [
    "FullTextAhead",
    "InvalidRerank",
    "Retriever",
    "format_quote",
    "hit_text",
    "quote_block",
    "recall_size",
]

T = TypeVar("T")

#: Most candidates a rerank model or the LLM pass sees (bounds their cost).
MAX_RERANK_CANDIDATES = 100
MAX_JUDGE_CANDIDATES = 40
#: documents of a dataset read to tell why a search found nothing (more: not told)
_READY_SCAN = 1000


class InvalidRerank(FlowloomError):
    """The request's ``rerank.model`` is not a rerank model, or its ``rerank.llm`` not a
    chat model (unknown, or a model of another type): the caller's input is wrong, so it
    is told which ``field`` (``"rerank.model"`` / ``"rerank.llm"``) before any model is
    called, not a model failure after the query was embedded."""

    def __init__(self, message: str, *, field: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def recall_size(request: SearchRequest, *, single_pass: bool = False) -> int:
    """Chunks each recall pass fetches: enough for fusion and rerank to choose from
    (four times ``top_k``, at least 20, at most 200). ``single_pass``: the search makes
    one recall pass of chunks that stand for themselves (one query, one semantic
    dataset, no parent-child, no rerank or relevance pass): its first ``top_k`` are the
    answer, so ``top_k`` are fetched (fewer rows read and hits built; the vector index's
    search breadth does not depend on it)."""
    if single_pass and request.rerank is None:
        return max(1, request.top_k)
    wanted = request.top_k * 4
    if request.rerank is not None and request.rerank.top_n:
        wanted = max(wanted, request.rerank.top_n * 2)
    return max(20, min(200, wanted))


def hit_text(chunk: Chunk) -> str:
    """What a hit quotes: a QA chunk's question and answer (its ``search_text`` is the
    question; the stored text is the pair, or the answer alone); any other chunk's text."""
    if chunk.kind == ChunkKind.qa and chunk.search_text and chunk.search_text.strip() not in chunk.text:
        return f"{chunk.search_text.strip()}\n{chunk.text}"
    return chunk.text


def quote_block(citation_id: str, source: str, heading_path: Sequence[str], text: str) -> str:
    """One numbered quote item: ``[n] source: <source> > <headings>`` then the text (the
    one format of the retrieval node's quote and of a chat node's quote items)."""
    where = " > ".join([source, *heading_path])
    return f"[{citation_id}] source: {where}\n{text.strip()}"


def format_quote(hits: Sequence[SearchHit]) -> str:
    """The quote text of ``hits`` (module docstring, step 7), blank-line separated."""
    return "\n\n".join(
        quote_block(h.citation_id, h.source_name or h.document_id, h.heading_path, h.text) for h in hits
    )


@dataclass(slots=True)
class _Recall:
    """What recall gathered: passes, the chunks their keys name (built only when a hit
    is made of one: see :class:`ScoredChunk`), notes, usage."""

    passes: list[RecallPass] = field(default_factory=list)
    chunks: dict[str, ScoredChunk] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    embedding_tokens: int = 0
    cost: float = 0.0


@dataclass(slots=True)
class FullTextAhead:
    """A full-text pass started before its datasets were read
    (:meth:`Retriever.full_text_ahead`): the dataset ids and ``k`` it searched with, and
    the task (one result list per query). :meth:`Retriever.search` takes its result when
    its plan asks for that same pass, else leaves it (the caller cancels it)."""

    dataset_ids: list[str]
    k: int
    task: asyncio.Future[list[Sequence[ScoredChunk]]]
    used: bool = False


def _label(dataset: Dataset) -> str:
    return (
        f"{dataset.id!r} ({dataset.name})"
        if dataset.name and dataset.name != dataset.id
        else repr(dataset.id)
    )


async def _side_by_side(calls: list[Coroutine[Any, Any, T]], *, return_exceptions: bool = False) -> list[Any]:
    """The results of ``calls`` in order, run side by side (:func:`asyncio.gather`); an
    ``Exception`` raised is returned in its place when ``return_exceptions``. A single
    call is awaited as it is, without a task around it: its store call is then sent in
    this step of the event loop, not in a later one. That keeps a search's vector pass
    from waiting behind its full-text pass: with the query embedded in-process, a task
    started the vector pass only after the loop ran again, while the full-text pass,
    started first, already held a thread and (in its Python parts) the interpreter."""
    if len(calls) != 1:
        return list(await asyncio.gather(*calls, return_exceptions=return_exceptions))
    if not return_exceptions:
        return [await calls[0]]
    try:
        return [await calls[0]]
    except Exception as error:
        return [error]


class Retriever:
    """Searches datasets through the ports (module docstring). ``embedder`` None: only
    full-text search; ``reranker`` / ``judge`` None: a request asking for them gets a note."""

    def __init__(
        self,
        *,
        store: KnowledgeStore,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        judge: RelevanceJudge | None = None,
    ):
        self.store, self.embedder, self.reranker, self.judge = store, embedder, reranker, judge

    def full_text_ahead(self, tenant_id: str, request: SearchRequest) -> FullTextAhead | None:
        """Start the full-text pass a search of ``request`` will make, before its datasets
        are read, when that pass does not depend on them: in ``hybrid`` and ``full_text``
        mode every dataset of the request is searched by full text, with ``k``
        :func:`recall_size` (the pass is never the single one). None in ``semantic`` mode
        (which datasets fall back to full text follows from their indexes) or without a
        query. The pass is scoped by tenant and dataset ids like every store call, so a
        dataset that turns out not to exist (or another tenant's) finds nothing; the
        caller cancels the task when :meth:`search` did not use it (``used``)."""
        queries = request.all_queries()
        if request.mode == SearchMode.semantic or not queries or not request.dataset_ids:
            return None
        ids, k = list(request.dataset_ids), recall_size(request)
        return FullTextAhead(
            ids, k, asyncio.ensure_future(self._full_text(tenant_id, ids, queries, k, request))
        )

    async def search(
        self,
        tenant_id: str,
        request: SearchRequest,
        datasets: Sequence[Dataset],
        *,
        ahead: FullTextAhead | None = None,
    ) -> SearchResult:
        """Search ``datasets`` (the request's, already loaded for ``tenant_id``);
        ``ahead``: its full-text pass, started before the datasets were read
        (:meth:`full_text_ahead`), used when the plan makes that pass.
        Raises InvalidRerank (before any model call), EmbeddingError, store errors."""
        self._check_rerank(request)
        queries = request.all_queries()
        result = SearchResult(queries=queries, mode=request.mode)
        if not queries:
            result.notes.append("no query: nothing was searched")
            return result
        recall = await self._recall(tenant_id, request, list(datasets), queries, ahead)
        result.notes += recall.notes
        result.embedding_tokens, result.cost = recall.embedding_tokens, recall.cost
        result.passes = {p.name: len(p.items) for p in recall.passes}
        reranking = (
            request.rerank is not None and request.rerank.model is not None and self.reranker is not None
        )
        if not reranking:
            self._threshold_recall(request, recall.passes, result.notes)
        dataset_of = {key: found.dataset_id for key, found in recall.chunks.items()}
        # hits are built only for the candidates a later step can look at
        wanted = request.top_k
        if reranking:
            wanted = max(wanted, MAX_RERANK_CANDIDATES)
        elif request.rerank is not None and request.rerank.llm:
            wanted = max(wanted, 2 * max(request.top_k, 1))
        if request.fusion == FusionMode.weighted:
            fused = fuse_weighted(recall.passes, request.semantic_weight, dataset_of)
            if not reranking and request.score_threshold > 0:
                fused = [f for f in fused if f.score >= request.score_threshold]
        elif len(queries) == 1 and len({p.kind for p in recall.passes if p.items}) <= 1:
            # one query, one kind: nothing to fuse across, so each hit keeps its own pass's
            # score (the cosine; full text: over its pass's best), not a score of its rank
            fused = fuse_weighted(recall.passes, request.semantic_weight, dataset_of)
        else:
            fused = fuse_rrf(recall.passes, dataset_of=dataset_of, limit=wanted)
        hits = [self._hit(recall.chunks[f.key].chunk, f.score, f.scores) for f in fused[:wanted]]
        hits = await self._rerank(request, queries[0], hits, result)
        hits = (
            await self._judge(request, queries[0], hits[: max(request.top_k, 1) * 2], result)
            if request.rerank is not None and request.rerank.llm
            else hits
        )
        hits = self._budget(hits[: request.top_k], request.max_quote_tokens, result.notes)
        if not hits:  # say why when it is not the query: a dataset with nothing searchable yet
            result.notes += await self._nothing_ready(tenant_id, datasets)
        for n, hit in enumerate(hits, start=1):
            hit.citation_id = str(n)
        result.hits, result.quote = hits, format_quote(hits)
        return result

    async def _nothing_ready(self, tenant_id: str, datasets: Sequence[Dataset]) -> list[str]:
        """Notes for the datasets none of whose documents is ``ready`` (an empty answer
        there says nothing about the query): how many failed and how many are still being
        ingested. Read only after a search found no hit, so hits cost no extra query."""
        notes = []
        for ds in datasets:
            listed = await self.store.list_documents(tenant_id, ds.id, limit=_READY_SCAN)
            statuses = [d.status for d in listed]
            if not statuses or len(statuses) >= _READY_SCAN or DocumentStatus.ready in statuses:
                continue  # nothing to say, or too many documents to say it of all of them
            failed = statuses.count(DocumentStatus.failed)
            pending = len(statuses) - failed
            notes.append(
                f"dataset {_label(ds)} has nothing to search yet: none of its {len(statuses)} "
                f"document(s) is ready ({failed} failed, {pending} still being ingested; its "
                f"document list gives each one's status and error)"
            )
        return notes

    # ------------------------------------------------------------------ recall

    def _semantic_plan(
        self, request: SearchRequest, datasets: list[Dataset], notes: list[str]
    ) -> tuple[dict[str, list[Dataset]], list[Dataset]]:
        """(embedding model -> datasets searched by vector, datasets searched by full text)."""
        if request.mode == SearchMode.full_text:
            return {}, datasets
        by_model: dict[str, list[Dataset]] = {}
        full_text: list[Dataset] = []
        for ds in datasets:
            index = ds.active_index
            why = None
            if index is None:
                why = (
                    "has no embedding model"
                    if not ds.embedding_model
                    else "has no ready index yet (its documents are still being embedded, or "
                    f"their embedding failed: `flowloom datasets show {ds.id}` lists them, "
                    f"`flowloom datasets reindex {ds.id} --failed` embeds them again)"
                )
            elif not getattr(self.store, "vector_support", True):
                why = "is in a store without vector search"
            elif self.embedder is None or not self.embedder.has_model(index.embedding_model):
                why = f"needs embedding model {index.embedding_model!r}, which is not configured"
            if why is None and index is not None:
                by_model.setdefault(index.embedding_model, []).append(ds)
            else:
                full_text.append(ds)
                if request.mode == SearchMode.semantic or ds.embedding_model:
                    # a dataset made without a model is full-text by design: a hybrid search
                    # (the default) of it is not degraded, so it says nothing
                    notes.append(f"dataset {_label(ds)} {why}: searched by full text instead of semantically")
        if request.mode == SearchMode.hybrid:
            full_text = datasets
        return by_model, full_text

    async def _recall(
        self,
        tenant_id: str,
        request: SearchRequest,
        datasets: list[Dataset],
        queries: list[str],
        ahead: FullTextAhead | None = None,
    ) -> _Recall:
        """Every recall pass, in a fixed order (per model, dataset and query the vector
        passes, then per query the full-text pass). The store calls of one stage run
        concurrently (a pooled store answers them side by side); results are taken in
        that order, so the ranking does not depend on which answered first."""
        recall = _Recall()
        by_model, full_text = self._semantic_plan(request, datasets, recall.notes)
        single = (
            len(queries) == 1
            and not full_text
            and sum(map(len, by_model.values())) == 1
            and all(ds.chunking.parent_child is None for group in by_model.values() for ds in group)
        )
        k = recall_size(request, single_pass=single)
        # the full-text pass starts now: it runs while the query is embedded and searched by vector
        early_ids = [ds.id for ds in full_text]
        early = None
        if ahead is not None and early_ids and ahead.dataset_ids == early_ids and ahead.k == k:
            early, ahead.used = ahead.task, True  # started before the datasets were read
        elif early_ids:
            early = asyncio.ensure_future(self._full_text(tenant_id, early_ids, queries, k, request))
        try:
            if early is not None and by_model and not (ahead is not None and ahead.used):
                # one step of the loop: the full-text task sends its store call now, and this
                # task resumes in the same step, so an in-process embedding and the vector
                # pass's call follow before any other step (the two passes start together)
                await asyncio.sleep(0)
            await self._vector_passes(tenant_id, request, queries, by_model, full_text, k, recall)
        except BaseException:
            if early is not None:
                early.cancel()
                await asyncio.gather(early, return_exceptions=True)
            raise
        if full_text:
            ids = [ds.id for ds in full_text]
            if early is not None and ids == early_ids:
                texts = await early
            else:  # datasets fell back to full text: one pass over all of them, as planned
                if early is not None:
                    early.cancel()
                    await asyncio.gather(early, return_exceptions=True)
                texts = await self._full_text(tenant_id, ids, queries, k, request)
            for qi, found in enumerate(texts):
                recall.passes.append(
                    await self._pass("full_text", f"full_text[q{qi + 1}]", found, tenant_id, recall, set(ids))
                )
        return recall

    async def _full_text(
        self, tenant_id: str, dataset_ids: list[str], queries: list[str], k: int, request: SearchRequest
    ) -> list[Sequence[ScoredChunk]]:
        """One full-text search per query over ``dataset_ids`` (side by side)."""
        return await _side_by_side(
            [self.store.search_full_text(tenant_id, dataset_ids, q, k, request.filters) for q in queries]
        )

    async def _vector_passes(
        self,
        tenant_id: str,
        request: SearchRequest,
        queries: list[str],
        by_model: dict[str, list[Dataset]],
        full_text: list[Dataset],
        k: int,
        recall: _Recall,
    ) -> None:
        """Embed the queries once per model and search each semantic dataset's index; a
        dataset whose store cannot search vectors joins ``full_text`` (with a note)."""
        models = list(by_model)
        embedded = await _side_by_side(
            [self._embed(m, queries, by_model[m], request, recall, full_text) for m in models]
        )
        jobs = [
            (ds, index.id, qi, vector)
            for model, vectors in zip(models, embedded, strict=True)
            if vectors is not None
            for ds in by_model[model]
            if (index := ds.active_index) is not None
            for qi, vector in enumerate(vectors)
        ]
        found_all = await _side_by_side(
            [
                self.store.search_vectors(tenant_id, index_id, vector, k, request.filters)
                for _, index_id, _, vector in jobs
            ],
            return_exceptions=True,
        )
        unavailable: set[str] = set()
        for (ds, _, qi, _), found in zip(jobs, found_all, strict=True):
            if isinstance(found, VectorSearchUnavailable):
                if ds.id not in unavailable:
                    unavailable.add(ds.id)
                    recall.notes.append(f"dataset {_label(ds)}: {found}; searched by full text instead")
                    if ds not in full_text:
                        full_text.append(ds)
                continue
            if isinstance(found, BaseException):
                raise found
            if ds.id not in unavailable:
                name = f"semantic[{ds.id}, q{qi + 1}]"
                recall.passes.append(await self._pass("semantic", name, found, tenant_id, recall, {ds.id}))

    async def _embed(
        self,
        model: str,
        queries: list[str],
        group: list[Dataset],
        request: SearchRequest,
        recall: _Recall,
        full_text: list[Dataset],
    ) -> list[list[float]] | None:
        """The queries' vectors for ``model``. A failure fails a semantic search; in hybrid
        mode it is a note, and full text answers for ``group``."""
        assert self.embedder is not None
        try:
            batch = await self.embedder.embed(model, queries)
        except EmbeddingError as exc:
            if request.mode == SearchMode.semantic:
                raise
            names = ", ".join(_label(ds) for ds in group)
            recall.notes.append(
                f"embedding the query with {model!r} failed ({exc}); dataset(s) {names} "
                f"searched by full text instead"
            )
            for ds in group:
                if ds not in full_text:
                    full_text.append(ds)
            return None
        recall.embedding_tokens += batch.tokens
        recall.cost += batch.cost
        return batch.vectors

    async def _pass(
        self,
        kind: str,
        name: str,
        found: Sequence[ScoredChunk],
        tenant_id: str,
        recall: _Recall,
        datasets: set[str],
    ) -> RecallPass:
        """A recall pass of ``found``: children replaced by their parents (fetched once).
        Reads each candidate's id, kind and parent only: its chunk is built if it
        becomes a hit."""
        missing = {
            sc.parent_id
            for sc in found
            if sc.kind == ChunkKind.child and sc.parent_id and sc.parent_id not in recall.chunks
        }
        if missing:
            for parent in await self.store.get_chunks(tenant_id, sorted(missing)):
                recall.chunks[parent.id] = ScoredChunk(parent, 0.0)
        items: list[tuple[str, float]] = []
        chunks = recall.chunks
        for sc in found:
            key = sc.id
            if sc.kind == ChunkKind.child and sc.parent_id and sc.parent_id in chunks:
                key = sc.parent_id  # a child whose parent is gone is returned itself
            elif key not in chunks:
                chunks[key] = sc
            items.append((key, sc.score))
        return RecallPass(kind, name, items, frozenset(datasets)).dedupe()

    @staticmethod
    def _threshold_recall(request: SearchRequest, passes: list[RecallPass], notes: list[str]) -> None:
        if request.score_threshold <= 0 or request.fusion == FusionMode.weighted:
            return
        for p in passes:
            if p.kind == "semantic":
                p.items = [(key, score) for key, score in p.items if score >= request.score_threshold]
        if all(p.kind != "semantic" for p in passes) and passes:
            notes.append(
                f"score_threshold {request.score_threshold} not applied: full-text scores have no absolute "
                "scale (it applies to semantic similarity, a rerank score or a weighted fused score)"
            )

    @staticmethod
    def _hit(chunk: Chunk, score: float, scores: dict[str, float]) -> SearchHit:
        text = hit_text(chunk)
        tokens = chunk.tokens if chunk.tokens > 0 and chunk.kind != ChunkKind.qa else estimate_tokens(text)
        return SearchHit(
            chunk_id=chunk.id,
            dataset_id=chunk.dataset_id,
            document_id=chunk.document_id,
            source_name=chunk.source_name,
            position=chunk.position,
            text=text,
            score=round(score, 6),
            scores={k: round(v, 6) for k, v in scores.items()},
            heading_path=list(chunk.heading_path),
            metadata=dict(chunk.metadata),
            tokens=tokens,
        )

    # ------------------------------------------------------------ rerank and judge

    def _check_rerank(self, request: SearchRequest) -> None:
        """Raise InvalidRerank when a rerank model or relevance model named by the request
        is not one this retriever's reranker / judge can call (none configured: the
        search goes on with a note, as the module docstring says)."""
        settings = request.rerank
        if settings is None:
            return
        if settings.model and self.reranker is not None:
            problem = self.reranker.model_problem(settings.model)
            if problem:
                raise InvalidRerank(problem, field="rerank.model")
        if settings.llm and self.judge is not None:
            problem = self.judge.model_problem(settings.llm)
            if problem:
                raise InvalidRerank(problem, field="rerank.llm")

    async def _rerank(
        self, request: SearchRequest, query: str, hits: list[SearchHit], result: SearchResult
    ) -> list[SearchHit]:
        settings = request.rerank
        if settings is None or settings.model is None or not hits:
            return hits
        if self.reranker is None:
            result.notes.append(
                f"rerank model {settings.model!r} is not configured here: results are in fused order"
            )
            return hits
        candidates = hits[:MAX_RERANK_CANDIDATES]
        ranked, tokens = await self.reranker.rerank(
            settings.model, query, [h.text for h in candidates], top_n=settings.top_n
        )
        result.rerank_tokens += tokens
        out: list[SearchHit] = []
        for index, relevance in ranked:
            if not 0 <= index < len(candidates) or any(h is candidates[index] for h in out):
                continue  # an index the model made up, or one it named twice
            if relevance < request.score_threshold:
                continue
            hit = candidates[index]
            hit.scores["rerank"] = round(float(relevance), 6)
            hit.score = round(min(1.0, max(0.0, float(relevance))), 6)
            out.append(hit)
        out.sort(key=lambda h: -h.score)
        return out[: settings.top_n] if settings.top_n else out

    async def _judge(
        self, request: SearchRequest, question: str, hits: list[SearchHit], result: SearchResult
    ) -> list[SearchHit]:
        assert request.rerank is not None and request.rerank.llm is not None
        if not hits:
            return hits
        if self.judge is None:
            result.notes.append(
                f"the LLM relevance pass ({request.rerank.llm!r}) is not available here: "
                "chunks were not filtered by relevance"
            )
            return hits
        candidates = hits[:MAX_JUDGE_CANDIDATES]
        keep, usage = await self.judge.select(request.rerank.llm, question, [h.text for h in candidates])
        result.llm_tokens_in += int(usage.get("tokens_in", 0) or 0)
        result.llm_tokens_out += int(usage.get("tokens_out", 0) or 0)
        result.cost += float(usage.get("cost", 0.0) or 0.0)
        chosen = {i for i in keep if 0 <= i < len(candidates)}
        dropped = len(candidates) - len(chosen)
        if dropped:
            result.notes.append(f"the LLM relevance pass kept {len(chosen)} of {len(candidates)} chunks")
        return [h for i, h in enumerate(candidates) if i in chosen]

    @staticmethod
    def _budget(hits: list[SearchHit], budget: int, notes: list[str]) -> list[SearchHit]:
        count, cut = fit_budget([h.tokens for h in hits], budget)
        kept = hits[:count]
        if cut:
            kept[0].text = truncate_to_tokens(kept[0].text, budget)
            kept[0].tokens = estimate_tokens(kept[0].text)
            notes.append(f"the best chunk alone exceeds max_quote_tokens ({budget}): it was cut to fit")
        if count < len(hits):
            notes.append(f"{len(hits) - count} more chunk(s) left out by max_quote_tokens ({budget})")
        return kept
