"""Pure ranking functions of retrieval: RRF, weighted fusion, the token budget."""

import random

import pytest

from engine.knowledge.fusion import (
    FULL_TEXT_NOISE,
    RRF_K,
    RecallPass,
    estimate_tokens,
    fit_budget,
    fuse_rrf,
    fuse_weighted,
    truncate_to_tokens,
)


def test_rrf_agreement_between_kinds_beats_a_single_first_place():
    semantic = RecallPass("semantic", "s", [("a", 0.9), ("b", 0.8), ("c", 0.7)])
    full_text = RecallPass("full_text", "f", [("c", 12.0), ("d", 9.0), ("b", 3.0)])
    fused = fuse_rrf([semantic, full_text])
    order = [f.key for f in fused]
    # c: ranks 3 and 1; b: ranks 2 and 3; a: rank 1 in one kind only.
    assert order == ["c", "b", "a", "d"]
    best = 2 / (RRF_K + 1)
    assert fused[0].score == pytest.approx((1 / (RRF_K + 3) + 1 / (RRF_K + 1)) / best)
    assert fused[2].score == pytest.approx((1 / (RRF_K + 1)) / best)
    assert fused[0].scores == {"semantic": 0.7, "full_text": 1.0}


def test_full_text_matches_of_common_words_only_are_not_ranked_as_matches():
    # BM25 gives a word found in most chunks almost no weight: such a match is noise, and
    # by rank alone RRF would count it like a real one.
    full_text = RecallPass("full_text", "f", [("a", 4.2), ("b", 4.2e-6), ("a", 1.0), ("c", 4.2 * FULL_TEXT_NOISE)])
    assert full_text.dedupe().items == [("a", 4.2), ("c", 4.2 * FULL_TEXT_NOISE)]
    semantic = RecallPass("semantic", "s", [("a", 0.3), ("b", 2e-6)]).dedupe()
    assert semantic.items == [("a", 0.3), ("b", 2e-6)]  # cosines are kept whatever they are
    fused = fuse_rrf([semantic, RecallPass("full_text", "f", [("a", 5.0), ("b", 1e-6)]).dedupe()])
    assert [f.key for f in fused] == ["a", "b"] and fused[1].score == pytest.approx(0.5 * (RRF_K + 1) / (RRF_K + 2))
    # Only common words matched anywhere: nothing stands out, every match is kept.
    assert len(RecallPass("full_text", "f", [("a", 1e-6), ("b", 1e-6)]).dedupe().items) == 2


def test_rrf_counts_agreement_across_queries_and_first_everywhere_scores_one():
    # Three phrasings put "x" first semantically; full text puts "y" first once.
    passes = [RecallPass("semantic", f"s{i}", [("x", 0.9), ("y", 0.5)]) for i in range(3)]
    passes.append(RecallPass("full_text", "f", [("y", 5.0), ("x", 1.0)]))
    fused = fuse_rrf(passes)
    assert [f.key for f in fused] == ["x", "y"]
    assert fused[0].score == pytest.approx((3 / 61 + 1 / 62) / (4 / 61))
    assert fused[1].score == pytest.approx((3 / 62 + 1 / 61) / (4 / 61))
    # first in one query's passes only loses to a chunk second in both queries' passes
    split = [RecallPass("semantic", "s1", [("a", 0.9), ("b", 0.8)]), RecallPass("semantic", "s2", [("c", 0.9),
                                                                                                     ("b", 0.8)])]
    assert [f.key for f in fuse_rrf(split)][0] == "b"
    only = fuse_rrf([RecallPass("semantic", "s", [("x", 0.9)])])
    assert only[0].score == pytest.approx(1.0)


def test_rrf_of_nothing_is_empty():
    assert fuse_rrf([]) == []
    assert fuse_rrf([RecallPass("semantic", "s", [])]) == []


def test_weighted_normalises_full_text_by_its_pass_and_weights_kinds():
    semantic = RecallPass("semantic", "s", [("a", 0.8), ("b", 0.2), ("c", -0.3)])
    full_text = RecallPass("full_text", "f", [("b", 10.0), ("c", 5.0)])
    fused = {f.key: f for f in fuse_weighted([semantic, full_text], 0.7)}
    assert fused["a"].score == pytest.approx(0.7 * 0.8)
    assert fused["b"].score == pytest.approx(0.7 * 0.2 + 0.3 * 1.0)
    assert fused["c"].score == pytest.approx(0.3 * 0.5)  # negative cosine clamps to 0
    assert [f.key for f in fuse_weighted([semantic, full_text], 0.7)] == ["a", "b", "c"]
    assert [f.key for f in fuse_weighted([semantic, full_text], 0.1)] == ["b", "c", "a"]


def test_weighted_with_one_kind_is_that_kinds_score():
    fused = fuse_weighted([RecallPass("full_text", "f", [("a", 4.0), ("b", 2.0)])], 0.9)
    assert [(f.key, f.score) for f in fused] == [("a", 1.0), ("b", 0.5)]


def test_recall_pass_dedupe_keeps_the_best_ranked_occurrence():
    p = RecallPass("semantic", "s", [("parent", 0.9), ("x", 0.8), ("parent", 0.7)]).dedupe()
    assert p.items == [("parent", 0.9), ("x", 0.8)]


def test_fit_budget_stops_at_the_first_item_that_overflows():
    assert fit_budget([100, 200, 50], 320) == (2, False)  # 50 would fit but comes after the overflow
    assert fit_budget([100, 200], 300) == (2, False)
    assert fit_budget([500, 10], 300) == (1, True)
    assert fit_budget([500, 10], 0) == (2, False)
    assert fit_budget([], 100) == (0, False)


def test_token_estimate_and_truncation():
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("退款政策") == 4
    text = "word " * 100
    cut = truncate_to_tokens(text, 10)
    assert estimate_tokens(cut) <= 10 and text.startswith(cut) and len(cut) > 30
    assert truncate_to_tokens("short", 10) == "short"


def test_a_chunk_is_scored_against_the_passes_that_could_have_found_it():
    # Two datasets: "kb" has vectors, "hb" is full text only. Its exact match "h1" was
    # first in the only pass that could see it.
    semantic = RecallPass("semantic", "semantic[kb, q1]", [("k1", 0.62), ("k2", 0.41)], frozenset({"kb"}))
    full_text = RecallPass("full_text", "full_text[q1]", [("h1", 8.0), ("k1", 2.0)], frozenset({"kb", "hb"}))
    dataset_of = {"k1": "kb", "k2": "kb", "h1": "hb"}
    weighted = {f.key: f.score for f in fuse_weighted([semantic, full_text], 0.7, dataset_of)}
    assert weighted["h1"] == pytest.approx(1.0)  # not capped at 1 - semantic_weight = 0.3
    assert weighted["k1"] == pytest.approx(0.7 * 0.62 + 0.3 * 2.0 / 8.0)
    assert weighted["k2"] == pytest.approx(0.7 * 0.41)  # a kind that could see it and did not counts 0
    rrf = {f.key: f.score for f in fuse_rrf([semantic, full_text], dataset_of=dataset_of)}
    assert rrf["h1"] == pytest.approx(1.0)  # first in every pass that could see it
    assert rrf["k1"] == pytest.approx((1 / (RRF_K + 1) + 1 / (RRF_K + 2)) * (RRF_K + 1) / 2)
    # Without datasets, every pass counts for every chunk, as before.
    blind = {f.key: f.score for f in fuse_weighted([semantic, full_text], 0.7)}
    assert blind["h1"] == pytest.approx(0.3)


def test_two_datasets_searched_semantically_each_reach_one_for_their_best():
    a = RecallPass("semantic", "semantic[a, q1]", [("a1", 0.9)], frozenset({"a"}))
    b = RecallPass("semantic", "semantic[b, q1]", [("b1", 0.8)], frozenset({"b"}))
    fused = fuse_rrf([a, b], dataset_of={"a1": "a", "b1": "b"})
    assert [f.score for f in fused] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_rrf_with_a_limit_is_the_head_of_the_full_ranking():
    rng = random.Random(5)
    for _ in range(300):
        keys = [f"k{i}" for i in range(rng.randint(1, 30))]
        passes = [
            RecallPass(kind, f"{kind}{n}", [(key, rng.choice([0.5, rng.random()])) for key in rng.sample(keys, rng.randint(0, len(keys)))],
                       frozenset(rng.sample(["a", "b"], rng.randint(1, 2))))
            for n, kind in enumerate(rng.choices(["semantic", "full_text"], k=rng.randint(1, 4)))
        ]
        dataset_of = {key: rng.choice(["a", "b", None]) for key in keys}
        full = fuse_rrf(passes, dataset_of=dataset_of)
        for limit in (0, 1, 3, len(keys), len(keys) + 5):
            assert fuse_rrf(passes, dataset_of=dataset_of, limit=limit) == full[:limit]
