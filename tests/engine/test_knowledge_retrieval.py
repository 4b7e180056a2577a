"""Retriever over fakes of the ports: passes, fusion, parents, QA, rerank, judge,
threshold, top_k, budget, citations and notes."""

from dataclasses import dataclass, field

import pytest

from engine.knowledge.ports import EmbeddingError, ScoredChunk, VectorSearchUnavailable
from engine.knowledge.retrieval import InvalidRerank, Retriever
from engine.ports import StoreError
from schemas.knowledge import ChunkKind, MetadataFilter, RerankSettings, SearchRequest
from tests.support.fake_knowledge import (
    FakeStore,
    KeywordJudge,
    ScriptedReranker,
    WordEmbedder,
    chunk,
    dataset,
)

TEXTS = {
    "c1": "Refunds are paid within 14 days of a return.",
    "c2": "Shipping to Europe takes five working days.",
    "c3": "A refund needs the original receipt.",
    "c4": "Our office is closed on public holidays.",
}


def build(*, vector_support=True, fail=False):
    embedder = WordEmbedder(list(TEXTS.values()) + ["refund policy receipt how long"], fail=fail)
    store = FakeStore(vector_support=vector_support)
    for i, (cid, text) in enumerate(TEXTS.items()):
        store.add(chunk(cid, text, position=i, doc="handbook"), embedder)
    return store, embedder


async def test_hybrid_search_numbers_citations_and_quotes_sources():
    store, embedder = build()
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="how long do refunds take", top_k=3), [dataset("ds1")])
    assert [h.chunk_id for h in result.hits][0] == "c1"
    assert [h.citation_id for h in result.hits] == ["1", "2", "3"][: len(result.hits)]
    assert result.quote.startswith("[1] source: handbook.md\nRefunds are paid within 14 days")
    assert "semantic[ds1, q1]" in result.passes and "full_text[q1]" in result.passes
    assert result.embedding_tokens > 0 and result.cost > 0
    assert result.notes == []
    assert all(0 < h.score <= 1 for h in result.hits)


async def test_one_embedding_call_per_model_for_all_queries():
    store, embedder = build()
    store.add(chunk("d1", "refund receipt rules", ds="ds2"), embedder, index="idx-ds2")
    request = SearchRequest(dataset_ids=["ds1", "ds2"], query="refund", queries=["receipt", "refund"], top_k=5)
    result = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1"), dataset("ds2")])
    assert embedder.calls == [("emb", ["refund", "receipt"])]
    assert sorted(result.passes) == ["full_text[q1]", "full_text[q2]", "semantic[ds1, q1]", "semantic[ds1, q2]",
                                     "semantic[ds2, q1]", "semantic[ds2, q2]"]
    ids = [h.chunk_id for h in result.hits]
    assert len(ids) == len(set(ids)) and {"c1", "c3", "d1"} <= set(ids)


async def test_dataset_without_index_is_searched_by_full_text_and_named():
    store, embedder = build()
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode="semantic"),
        [dataset("ds1", model=None)])
    assert [h.chunk_id for h in result.hits] == ["c3"]
    assert embedder.calls == []
    assert result.notes == ["dataset 'ds1' (ds1 docs) has no embedding model: searched by full text instead "
                            "of semantically"]
    pending = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund", mode="semantic"), [dataset("ds1", active=False)])
    assert "has no ready index yet" in pending.notes[0]
    assert "flowloom datasets reindex ds1 --failed" in pending.notes[0]
    # A dataset made without a model is full-text by design: the default hybrid search of
    # it is not degraded and says nothing; one whose index is missing still says so.
    hybrid = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt"), [dataset("ds1", model=None)])
    assert [h.chunk_id for h in hybrid.hits] == ["c3"] and hybrid.notes == []
    waiting = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund"), [dataset("ds1", active=False)])
    assert "has no ready index yet" in waiting.notes[0]


async def test_a_vector_pass_the_store_refuses_falls_back_to_full_text_and_other_errors_propagate():
    store, embedder = build()

    async def unavailable(*args, **kwargs):
        raise VectorSearchUnavailable("no vector extension here")

    store.search_vectors = unavailable  # the store said it had vectors, its one vector pass says not
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode="semantic"), [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"]
    assert result.notes == ["dataset 'ds1' (ds1 docs): no vector extension here; searched by full text instead"]

    async def broken(*args, **kwargs):
        raise StoreError("the disk is gone")

    store.search_vectors = broken
    for mode in ("semantic", "hybrid"):  # hybrid: its full-text pass, already running, is let go
        with pytest.raises(StoreError, match="the disk is gone"):
            await Retriever(store=store, embedder=embedder).search(
                "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode=mode), [dataset("ds1")])


async def test_store_without_vectors_and_unknown_model_fall_back_with_notes():
    store, embedder = build(vector_support=False)
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode="semantic"), [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"] and "without vector search" in result.notes[0]
    store, embedder = build()
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode="semantic"), [dataset("ds1", "other")])
    assert "'other', which is not configured" in result.notes[0]


async def test_embedding_failure_fails_semantic_but_hybrid_keeps_full_text():
    store, embedder = build(fail=True)
    retriever = Retriever(store=store, embedder=embedder)
    with pytest.raises(EmbeddingError):
        await retriever.search("t1", SearchRequest(dataset_ids=["ds1"], query="refund", mode="semantic"),
                               [dataset("ds1")])
    result = await retriever.search("t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt"), [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"]
    assert "embedding the query with 'emb' failed" in result.notes[0]


async def test_children_resolve_to_their_parent_once():
    embedder = WordEmbedder(["refund receipt days return parent section"])
    store = FakeStore()
    store.add(chunk("p1", "PARENT: refund section with receipt and days", kind=ChunkKind.parent, position=0))
    store.add(chunk("k1", "refund receipt", kind=ChunkKind.child, parent="p1", position=1), embedder)
    store.add(chunk("k2", "refund days return", kind=ChunkKind.child, parent="p1", position=2), embedder)
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt"), [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["p1"]
    assert result.hits[0].text.startswith("PARENT")


@dataclass
class DeferringStore(FakeStore):
    """The fake store answering as the real stores do: each candidate's chunk is built
    only when read (``ScoredChunk.deferred``); ``built`` lists the chunks built."""

    built: list[str] = field(default_factory=list)

    def _defer(self, found):
        def build(c):
            self.built.append(c.id)
            return c

        return [ScoredChunk.deferred(sc.id, sc.kind, sc.parent_id, sc.score, lambda c=sc.chunk: build(c))
                for sc in found]

    async def search_vectors(self, *args, **kwargs):
        return self._defer(await super().search_vectors(*args, **kwargs))

    async def search_full_text(self, *args, **kwargs):
        return self._defer(await super().search_full_text(*args, **kwargs))


async def test_only_the_hits_chunks_are_built_and_children_still_resolve_to_parents():
    words = [f"refund receipt return days w{i}" for i in range(12)]
    embedder = WordEmbedder([*words, "PARENT: refund", "refund receipt child"])
    store = DeferringStore()
    for i, text in enumerate(words):
        store.add(chunk(f"c{i}", text, position=i), embedder)
    store.add(chunk("p1", "PARENT: refund", kind=ChunkKind.parent, position=20))
    store.add(chunk("k1", "refund receipt child", kind=ChunkKind.child, parent="p1", position=21), embedder)
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt child", top_k=3)
    result = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1")])
    eager = await Retriever(store=FakeStore(chunks=store.chunks, vectors=store.vectors), embedder=embedder).search("t1", request, [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in eager.hits]
    assert [h.score for h in result.hits] == [h.score for h in eager.hits]
    assert result.hits[0].chunk_id == "p1" and result.hits[0].text == "PARENT: refund"
    assert result.passes == eager.passes and result.passes["full_text[q1]"] == 13
    # the parent came from get_chunks; of the 26 candidates only the other two hits were built, once each
    assert sorted(store.built) == sorted(h.chunk_id for h in result.hits[1:])


async def test_qa_chunks_quote_question_and_answer():
    store = FakeStore()
    store.add(chunk("q1", "Within 14 days.", kind=ChunkKind.qa, search_text="How long do refunds take?"))
    result = await Retriever(store=store).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="refunds", mode="full_text"), [dataset("ds1", None)])
    assert result.hits[0].text == "How long do refunds take?\nWithin 14 days."


async def test_threshold_applies_to_semantic_similarity_and_top_k_cuts():
    store, embedder = build()
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt", mode="semantic", score_threshold=0.3, top_k=5)
    result = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"]  # the only chunk whose cosine reaches 0.3
    assert result.hits[0].scores["semantic"] >= 0.3
    loose = await Retriever(store=store, embedder=embedder).search(
        "t1", request.model_copy(update={"score_threshold": 0.0, "top_k": 2}), [dataset("ds1")])
    assert len(loose.hits) == 2
    full = await Retriever(store=store).search(
        "t1", request.model_copy(update={"mode": "full_text"}), [dataset("ds1", None)])
    assert any("not applied" in n for n in full.notes) and full.hits


async def test_weighted_fusion_threshold_on_fused_score():
    store, embedder = build()
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt", fusion="weighted", semantic_weight=0.5,
                            score_threshold=0.5)
    result = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"]
    assert result.hits[0].score >= 0.5


async def test_rerank_reorders_thresholds_and_limits():
    store, embedder = build()
    reranker = ScriptedReranker()
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt", top_k=5, score_threshold=0.1,
                            rerank=RerankSettings(model="rr", top_n=1))
    result = await Retriever(store=store, embedder=embedder, reranker=reranker).search("t1", request, [dataset("ds1")])
    assert reranker.calls and reranker.calls[0][:2] == ("rr", "refund receipt")
    assert [h.chunk_id for h in result.hits] == ["c3"] and "rerank" in result.hits[0].scores
    assert result.rerank_tokens > 0
    missing = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1")])
    assert any("rerank model 'rr' is not configured" in n for n in missing.notes)


async def test_llm_relevance_pass_keeps_relevant_chunks_and_counts_usage():
    store, embedder = build()
    judge = KeywordJudge("receipt")
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt", top_k=4, rerank=RerankSettings(llm="judge-m"))
    result = await Retriever(store=store, embedder=embedder, judge=judge).search("t1", request, [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["c3"]
    assert judge.calls[0][0] == "judge-m"
    assert (result.llm_tokens_in, result.llm_tokens_out) == (100, 5)
    assert result.cost == pytest.approx(0.001 + 0.01)


@pytest.mark.parametrize("rerank, field", [(RerankSettings(model="chat-m"), "rerank.model"),
                                           (RerankSettings(llm="embed-m"), "rerank.llm")])
async def test_a_rerank_model_it_cannot_call_is_invalid_rerank_naming_the_field_before_any_model_call(rerank, field):
    store, embedder = build()
    reranker, judge = ScriptedReranker(models=["rr"]), KeywordJudge("receipt", models=["judge-m"])
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt", rerank=rerank)
    with pytest.raises(InvalidRerank) as info:
        await Retriever(store=store, embedder=embedder, reranker=reranker, judge=judge).search(
            "t1", request, [dataset("ds1")])
    assert info.value.field == field and str(info.value).startswith(f"{field}: unknown ")
    assert embedder.calls == [] and reranker.calls == [] and judge.calls == [] and store.calls == []


async def test_quote_budget_keeps_leading_hits_and_cuts_an_oversized_first():
    store = FakeStore()
    store.add(chunk("a", "refund " * 40, tokens=80, position=0))
    store.add(chunk("b", "refund policy " * 10, tokens=40, position=1))
    req = SearchRequest(dataset_ids=["ds1"], query="refund", mode="full_text", max_quote_tokens=100)
    result = await Retriever(store=store).search("t1", req, [dataset("ds1", None)])
    assert [h.chunk_id for h in result.hits] == ["a"]
    assert any("1 more chunk(s) left out by max_quote_tokens" in n for n in result.notes)
    tight = await Retriever(store=store).search("t1", req.model_copy(update={"max_quote_tokens": 20}),
                                                [dataset("ds1", None)])
    assert len(tight.hits) == 1 and tight.hits[0].tokens <= 20 and "was cut" in " ".join(tight.notes)


async def test_filters_and_tenant_reach_the_store():
    store, embedder = build()
    store.add(chunk("m1", "refund receipt for members", metadata={"lang": "de"}), embedder)
    store.add(chunk("x1", "refund receipt other tenant", tenant="t2"), embedder)
    request = SearchRequest(dataset_ids=["ds1"], query="refund receipt",
                            filters=[MetadataFilter(field="lang", value="de")])
    result = await Retriever(store=store, embedder=embedder).search("t1", request, [dataset("ds1")])
    assert [h.chunk_id for h in result.hits] == ["m1"]


async def test_empty_query_searches_nothing():
    store, embedder = build()
    result = await Retriever(store=store, embedder=embedder).search(
        "t1", SearchRequest(dataset_ids=["ds1"], query="  "), [dataset("ds1")])
    assert result.hits == [] and store.calls == [] and result.notes


async def test_one_query_of_one_kind_keeps_its_own_scores_and_a_full_text_dataset_is_not_capped():
    store, embedder = build()
    store.add(chunk("h1", "Holiday: 28 paid days a year", ds="hb"))  # a dataset without vectors
    retriever = Retriever(store=store, embedder=embedder)
    semantic = await retriever.search("t1", SearchRequest(dataset_ids=["ds1"], query="refund receipt",
                                                          mode="semantic"), [dataset("ds1")])
    cosines = [h.scores["semantic"] for h in semantic.hits]
    assert [h.score for h in semantic.hits] == cosines and cosines == sorted(cosines, reverse=True)
    assert cosines[-1] < 0.5  # a weak hit looks weak, not near 1 as a rank-based score made it
    # Weighted hybrid over both datasets with a threshold: the full-text-only dataset's
    # exact match is judged by full text alone, so the threshold keeps it.
    mixed = await retriever.search("t1", SearchRequest(
        dataset_ids=["ds1", "hb"], query="holiday paid days", fusion="weighted", semantic_weight=0.7,
        score_threshold=0.5), [dataset("ds1"), dataset("hb", model=None)])
    assert mixed.hits and mixed.hits[0].chunk_id == "h1" and mixed.hits[0].score == pytest.approx(1.0)
