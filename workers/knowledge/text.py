"""Full-text terms shared by both stores, so SQLite and PostgreSQL match the same way.

Neither FTS5's ``unicode61`` tokenizer nor PostgreSQL's ``simple`` configuration splits
Chinese (or Japanese) text into words: a sentence would be one token that no query
matches. So text is tokenised here, before either database sees it: words are runs of
letters and digits, lower-cased; runs of CJK characters become each character plus each
pair of neighbouring characters (overlapping bigrams), which matches a CJK query word
without a dictionary and ranks adjacent pairs above scattered characters. The databases
then index the terms as they are (space-separated for FTS5, a ``tsvector`` literal with
positions for PostgreSQL) and a query is the OR of its terms, ranked by BM25 (SQLite) or
``ts_rank`` (PostgreSQL).
"""

from __future__ import annotations

import re

__all__ = [
    "FULL_TEXT_POSTINGS",
    "MAX_QUERY_TERMS",
    "rarest_terms",
    "STOP_WORDS",
    "fts5_query",
    "query_terms",
    "search_terms",
    "terms_text",
    "tsquery_literal",
    "tsvector_literal",
]

#: A query's distinct terms beyond this many are dropped (a pasted page is not a query).
MAX_QUERY_TERMS = 256
#: A word longer than this is cut (a base64 blob is not a word).
MAX_TERM_CHARS = 64

_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(f"[{_CJK_CHARS}]")
#: a run of CJK characters, or a word without any
_TOKEN = re.compile(f"[{_CJK_CHARS}]+|[^\\W_{_CJK_CHARS}]+")


def search_terms(text: str) -> list[str]:
    """The terms of ``text`` in order: lower-cased words, and for CJK runs each character
    followed by its bigram with the next (``"知识库"`` -> ``知 知识 识 识库 库``)."""
    lowered = text.lower()
    if _CJK.search(lowered) is None:  # most text: words only
        return [w[:MAX_TERM_CHARS] for w in _WORD.findall(lowered)]
    terms: list[str] = []
    for token in _TOKEN.findall(lowered):
        if _CJK.match(token) is None:
            terms.append(token[:MAX_TERM_CHARS])
            continue
        for j, char in enumerate(token):
            terms.append(char)
            if j + 1 < len(token):
                terms.append(token[j : j + 2])
    return terms


def terms_text(text: str) -> str:
    """The terms of ``text`` joined by spaces (what the FTS5 table indexes)."""
    return " ".join(search_terms(text))


#: English words too common to tell chunks apart: left out of queries (not of the index),
#: since a query's OR would match nearly every chunk through them and rank them all.
STOP_WORDS = frozenset(
    """
a about after all also am an and any are as at be been being but by can could did do does doing for from
had has have having he her here hers him his how i if in into is it its itself just me more most my no nor
not of off on once only or other our ours out over own same she should so some such than that the their
theirs them then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours
""".split()
)


def query_terms(query: str) -> list[str]:
    """The distinct terms a query searches for: its terms without stop words and
    one-letter Latin words (all of them when nothing else is left), at most
    :data:`MAX_QUERY_TERMS`."""
    terms = list(dict.fromkeys(search_terms(query)))
    kept = [t for t in terms if t not in STOP_WORDS and (len(t) > 1 or not t.isascii())]
    return (kept or terms)[:MAX_QUERY_TERMS]


#: (term, chunk) postings a full-text search ranks at most: the query's rarest terms are
#: kept until their chunk counts reach this (at least the rarest one). Ranking costs
#: microseconds per matching chunk, and a query's common words would make a search rank
#: most of the corpus while adding little to the order (their IDF is low); the chunks
#: that match only common words are the ones left out.
FULL_TEXT_POSTINGS = 800


def rarest_terms(counts: dict[str, float], budget: int = FULL_TEXT_POSTINGS) -> list[str]:
    """The terms of ``counts`` (term -> chunks holding it, exact or estimated), rarest
    first, while their counts add up to at most ``budget`` (always the rarest one);
    terms no chunk holds are left out."""
    kept: list[str] = []
    total = 0.0
    for term in sorted((t for t, n in counts.items() if n > 0), key=counts.__getitem__):
        if kept and total + counts[term] > budget:
            break
        kept.append(term)
        total += counts[term]
    return kept


def fts5_query(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression: the OR of ``terms``, each quoted (terms hold only
    letters and digits, so quoting is safe). None: no term."""
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


def tsquery_literal(terms: list[str]) -> str | None:
    """A ``tsquery`` literal (cast with ``::tsquery``, no stemming): the OR of ``terms``
    quoted. None: no term."""
    return " | ".join(f"'{t}'" for t in terms) if terms else None


#: PostgreSQL keeps positions up to this; later ones are clamped.
_MAX_POSITION = 16383
#: PostgreSQL keeps at most this many positions per lexeme.
_MAX_POSITIONS_PER_TERM = 255


def tsvector_literal(text: str) -> str:
    """A ``tsvector`` literal (cast with ``::tsvector``) of the terms of ``text`` with their
    positions: ``ts_rank`` counts a term's occurrences by them (and ``ts_rank_cd``, or a
    phrase query, could weigh how close the matched terms are)."""
    positions: dict[str, list[str]] = {}
    for index, term in enumerate(search_terms(text)[:_MAX_POSITION], start=1):
        where = positions.get(term)
        if where is None:
            positions[term] = [str(index)]
        elif len(where) < _MAX_POSITIONS_PER_TERM:
            where.append(str(index))
    return " ".join([f"'{term}':{','.join(p)}" for term, p in positions.items()])
