"""Pure parts of retrieval ranking: recall lists, their fusion, the quote budget.

A *recall pass* is one ranked list of chunk keys with that pass's own scores, named
``semantic`` or ``full_text`` (its *kind*) - one per query, per dataset index for
vectors. Fusion merges the passes into one ranking:

- **RRF** (reciprocal rank fusion, as FastGPT merges its recalls): every pass where a
  chunk has rank ``r`` (from 1) adds ``1 / (k + r)``, ``k = 60``; the fused score is that
  sum divided by the most a chunk can get (``passes / (k + 1)``, the passes that could
  have found it), so it lies in (0, 1]:
  ``1.0`` is first in every pass. Agreement counts: a chunk that several phrasings of
  the question and both kinds of search find beats one that a single pass put first.
- **weighted** (as Dify's hybrid search): per kind the chunk's best score, normalised
  (semantic: the cosine similarity clamped to [0, 1]; full text: divided by the best
  full-text score of its pass, since BM25 has no fixed scale), then
  ``semantic_weight * semantic + (1 - semantic_weight) * full_text``; a kind that did
  not find the chunk counts 0. One kind alone (semantic or full-text search): its
  normalised score.

Both count only the passes that could have found a chunk (a pass names the datasets it
searched; a semantic pass one dataset's index): a chunk of a dataset without an embedding
model, in a hybrid search, is judged by full text alone, and the best chunk of each of
two datasets searched semantically reaches 1.0.

Ties keep the order the chunks were first seen in (stable sorts), so results are
deterministic for a deterministic store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "FULL_TEXT_NOISE",
    "RRF_K",
    "Fused",
    "RecallPass",
    "estimate_tokens",
    "fit_budget",
    "fuse_rrf",
    "fuse_weighted",
    "truncate_to_tokens",
]

#: The RRF constant (Cormack et al.; FastGPT uses 60 too): large enough that rank 1 and
#: rank 2 of one list differ little, so agreement between lists decides.
RRF_K = 60

#: the share of a full-text pass's best score under which a match is noise (see
#: :meth:`RecallPass.dedupe`): a real term match scores thousands of times a match of
#: words found in most chunks
FULL_TEXT_NOISE = 1e-3


@dataclass(slots=True)
class RecallPass:
    """One ranked recall list: ``kind`` (``semantic`` or ``full_text``), a ``name`` that
    says where it came from (shown in notes and records), and ``(key, score)`` best
    first. Keys are the returned chunk ids (a child already resolved to its parent);
    a key appears at most once (:meth:`dedupe` keeps its best-ranked occurrence)."""

    kind: str
    name: str
    items: list[tuple[str, float]] = field(default_factory=list)
    #: the datasets the pass searched (a semantic pass: one index's dataset); None: every
    #: chunk could have been found by it
    datasets: frozenset[str] | None = None

    def covers(self, dataset_id: str | None) -> bool:
        """Whether a chunk of ``dataset_id`` (None: unknown) could have been found here."""
        return self.datasets is None or dataset_id is None or dataset_id in self.datasets

    def dedupe(self) -> RecallPass:
        """Each key once, at its best rank; in a full-text pass, without the matches that
        scored under :data:`FULL_TEXT_NOISE` of the pass's best (returns ``self``).

        Why the second rule: such a match shares only words that are in most chunks, which
        BM25 weighs as nothing (SQLite's FTS5 gives them an IDF of 1e-6), yet by rank alone
        it would count in a fusion like a real match - RRF would put a chunk that semantic
        search ranked low and full text "found" by "of" and "days" next to the answer."""
        seen: set[str] = set()
        kept: list[tuple[str, float]] = []
        for key, score in self.items:
            if key not in seen:
                seen.add(key)
                kept.append((key, score))
        if self.kind == "full_text" and kept:
            floor = max(score for _, score in kept) * FULL_TEXT_NOISE
            if floor > 0:
                kept = [(key, score) for key, score in kept if score >= floor]
        self.items = kept
        return self


@dataclass(slots=True)
class Fused:
    """A chunk after fusion: its fused ``score`` in [0, 1] and each kind's best own
    score (``scores``: ``semantic`` cosine, ``full_text`` normalised to its pass)."""

    key: str
    score: float
    scores: dict[str, float] = field(default_factory=dict)


def _best_per_kind(passes: Sequence[RecallPass]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """(keys in first-seen order, kind -> key -> best normalised score). One loop per
    item with the normalisation inlined: a hybrid search fuses 80 candidates, and
    function calls per item made fusion a visible part of its time."""
    order: dict[str, None] = {}  # insertion-ordered set
    scores: dict[str, dict[str, float]] = {}
    for p in passes:
        top = max((s for _, s in p.items), default=0.0)
        kind_scores = scores.setdefault(p.kind, {})
        semantic = p.kind == "semantic"
        for key, raw in p.items:
            if key not in order:
                order[key] = None
            if semantic:
                norm = min(1.0, max(0.0, float(raw)))
            else:
                norm = min(1.0, max(0.0, float(raw) / top)) if top > 0 else 0.0
            best = kind_scores.get(key)
            kind_scores[key] = norm if best is None else max(norm, best)
    return list(order), scores


def _coverage(
    passes: Sequence[RecallPass], dataset_of: Mapping[str, str | None] | None
) -> Callable[[str], tuple[int, frozenset[str]]]:
    """key -> (how many passes with hits could have found it, the kinds of those passes),
    by its dataset (``dataset_of``; None or a key missing from it: every pass). A chunk
    of a dataset that no vector pass searched (no embedding model) is judged by the
    passes that could see it only, so it is not held below one that two kinds found."""
    everything = _uniform_coverage(passes, dataset_of)
    if everything is not None:
        return lambda key: everything
    counted = [p for p in passes if p.items]
    cache: dict[str | None, tuple[int, frozenset[str]]] = {}
    assert dataset_of is not None

    def of(key: str) -> tuple[int, frozenset[str]]:
        dataset_id = dataset_of.get(key)
        found = cache.get(dataset_id)
        if found is None:
            covering = [p for p in counted if p.covers(dataset_id)]
            found = cache[dataset_id] = (len(covering), frozenset(p.kind for p in covering))
        return found

    return of


def _uniform_coverage(
    passes: Sequence[RecallPass], dataset_of: Mapping[str, str | None] | None
) -> tuple[int, frozenset[str]] | None:
    """The coverage (:func:`_coverage`) every key has when it is the same for all: every
    pass with hits could have found every candidate (no ``dataset_of``, passes over every
    dataset, or every candidate's dataset searched by every pass: one dataset searched
    both ways, the common case). None when it depends on the key."""
    counted = [p for p in passes if p.items]
    everything = (len(counted), frozenset(p.kind for p in counted))
    if not dataset_of or all(p.datasets is None for p in counted):
        return everything
    present = set(dataset_of.values())
    if all(p.covers(dataset_id) for p in counted for dataset_id in present):
        return everything
    return None


def _kind_scores(passes: Sequence[RecallPass]) -> Callable[[str], dict[str, float]]:
    """key -> each kind's best normalised score of the key (the kinds in the order the
    passes first name them; a kind that did not find the key left out): what
    :func:`_best_per_kind` gives for one key, for the few keys fusion keeps."""
    kinds = list(dict.fromkeys(p.kind for p in passes))
    prepared: list[tuple[str, bool, float, dict[str, float]]] = []
    for p in passes:
        if not p.items:
            continue
        lookup = dict(p.items)
        if len(lookup) != len(p.items):  # a key twice: its best score
            lookup = {}
            for key, raw in p.items:
                lookup[key] = raw if key not in lookup else max(lookup[key], raw)
        prepared.append((p.kind, p.kind == "semantic", max(s for _, s in p.items), lookup))

    def of(key: str) -> dict[str, float]:
        best: dict[str, float] = {}
        for kind, semantic, top, lookup in prepared:
            raw = lookup.get(key)
            if raw is None:
                continue
            if semantic:
                norm = min(1.0, max(0.0, float(raw)))
            else:
                norm = min(1.0, max(0.0, float(raw) / top)) if top > 0 else 0.0
            old = best.get(kind)
            best[kind] = norm if old is None else max(norm, old)
        return {kind: best[kind] for kind in kinds if kind in best}

    return of


def fuse_rrf(
    passes: Sequence[RecallPass],
    k: int = RRF_K,
    dataset_of: Mapping[str, str | None] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Reciprocal rank fusion of ``passes`` (module docstring), best first. A chunk's sum
    is scaled by the most the passes that could have found it give (``dataset_of``:
    key -> dataset, see :func:`_coverage`). ``limit``: only the first ``limit`` of the
    ranking (the same as slicing it): a search fuses 80 candidates of two passes and
    keeps ``top_k``, so only those are built into :class:`Fused`, and each kind's
    score is looked up for those only."""
    counted = [p for p in passes if p.items]
    if not counted:
        return []
    totals: dict[str, float] = {}  # insertion order: keys first-seen, which ties keep
    get = totals.get
    for p in counted:
        rank = k
        for key, _ in p.items:
            rank += 1
            totals[key] = get(key, 0.0) + 1.0 / rank
    uniform = _uniform_coverage(passes, dataset_of)
    if uniform is not None:
        top, most = k + 1, max(uniform[0], 1)
        # ``v if v < 1.0 else 1.0`` is min(1.0, v) without a call per candidate
        score = {key: v if (v := total * top / most) < 1.0 else 1.0 for key, total in totals.items()}
    else:
        coverage = _coverage(passes, dataset_of)
        score = {key: min(1.0, total * (k + 1) / max(coverage(key)[0], 1)) for key, total in totals.items()}
    ranked = sorted(score, key=score.__getitem__, reverse=True)  # stable: ties keep first-seen order
    if limit is not None:
        ranked = ranked[: max(limit, 0)]
    own = _kind_scores(passes)
    return [Fused(key, score[key], own(key)) for key in ranked]


def fuse_weighted(
    passes: Sequence[RecallPass], semantic_weight: float, dataset_of: Mapping[str, str | None] | None = None
) -> list[Fused]:
    """Weighted sum of normalised scores (module docstring), best first. A chunk that
    only one kind could have found (the only kind searched, or a dataset without an
    embedding model in a hybrid search: ``dataset_of``, see :func:`_coverage`) has that
    kind's normalised score alone: the weight of a kind that could not see it is no
    penalty."""
    order, scores = _best_per_kind(passes)
    coverage = _coverage(passes, dataset_of)
    both = {"semantic": semantic_weight, "full_text": 1.0 - semantic_weight}
    fused = []
    for key in order:
        own = {kind: found[key] for kind, found in scores.items() if key in found}
        kinds = coverage(key)[1]
        if len(kinds) > 1:
            total = sum(both.get(kind, 0.0) * value for kind, value in own.items())
        else:
            total = max(own.values(), default=0.0)
        fused.append(Fused(key, min(1.0, total), own))
    fused.sort(key=lambda f: -f.score)
    return fused


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` without a tokenizer: an ASCII character is a quarter
    token (rounded up), any other character one (CJK is about one token a character in
    common tokenizers; erring high keeps a budget safe)."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def truncate_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` whose :func:`estimate_tokens` is at most ``tokens``."""
    if estimate_tokens(text) <= tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def fit_budget(sizes: Iterable[int], budget: int) -> tuple[int, bool]:
    """How many of the leading items (token ``sizes``, best first) fit in ``budget``:
    ``(count, first_cut)``. Items are taken in order until the next one would overflow
    (a smaller one further down is not taken instead: the order is the ranking). The
    first item is always taken; ``first_cut`` says it alone is over the budget and must
    be cut to it. ``budget`` 0 means no budget (every item)."""
    sizes = list(sizes)
    if budget <= 0:
        return len(sizes), False
    used = 0
    for i, size in enumerate(sizes):
        if used + size > budget:
            if i == 0:
                return 1, True
            return i, False
        used += size
    return len(sizes), False
