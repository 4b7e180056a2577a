"""Full-text terms shared by both stores, so SQLite and PostgreSQL match the same way.

Neither FTS5's ``unicode61`` tokenizer nor PostgreSQL's ``simple`` configuration splits
Chinese (or Japanese) text into words: a sentence would be one token that no query
matches. So text is tokenised here, before either database sees it: words are runs of
letters and digits, lower-cased; runs of CJK characters become each character plus each
pair of neighbouring characters (overlapping bigrams), which matches a CJK query word
without a dictionary and ranks adjacent pairs above scattered characters. The databases
then index the terms as they are (space-separated for FTS5, a ``tsvector`` literal with
positions for PostgreSQL) and a query is the OR of its terms, ranked by BM25 (SQLite) or
cover density (PostgreSQL).
"""

from __future__ import annotations

import re

__all__ = ["MAX_QUERY_TERMS", "fts5_query", "search_terms", "terms_text", "tsquery_literal",
           "tsvector_literal"]

#: A query's distinct terms beyond this many are dropped (a pasted page is not a query).
MAX_QUERY_TERMS = 256
#: A word longer than this is cut (a base64 blob is not a word).
MAX_TERM_CHARS = 64

_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(
    "([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+)")


def search_terms(text: str) -> list[str]:
    """The terms of ``text`` in order: lower-cased words, and for CJK runs each character
    followed by its bigram with the next (``"知识库"`` -> ``知 知识 识 识库 库``)."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        for i, part in enumerate(_CJK.split(word)):
            if not part:
                continue
            if i % 2 == 0:  # not CJK
                terms.append(part[:MAX_TERM_CHARS])
                continue
            for j, char in enumerate(part):
                terms.append(char)
                if j + 1 < len(part):
                    terms.append(part[j:j + 2])
    return terms


def terms_text(text: str) -> str:
    """The terms of ``text`` joined by spaces (what the FTS5 table indexes)."""
    return " ".join(search_terms(text))


def _query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(search_terms(query)))[:MAX_QUERY_TERMS]


def fts5_query(query: str) -> str | None:
    """An FTS5 MATCH expression: the OR of the query's terms, each quoted (terms hold
    only letters and digits, so quoting is safe). None: the query has no term."""
    terms = _query_terms(query)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


def tsquery_literal(query: str) -> str | None:
    """A ``tsquery`` literal (cast with ``::tsquery``, no stemming or stop words): the OR
    of the query's quoted terms. None: the query has no term."""
    terms = _query_terms(query)
    return " | ".join(f"'{t}'" for t in terms) if terms else None


#: PostgreSQL keeps positions up to this; later ones are clamped.
_MAX_POSITION = 16383
#: PostgreSQL keeps at most this many positions per lexeme.
_MAX_POSITIONS_PER_TERM = 255


def tsvector_literal(text: str) -> str:
    """A ``tsvector`` literal (cast with ``::tsvector``) of the terms of ``text`` with their
    positions, so ``ts_rank_cd`` can weigh how close the matched terms are."""
    positions: dict[str, list[int]] = {}
    for index, term in enumerate(search_terms(text), start=1):
        where = positions.setdefault(term, [])
        if len(where) < _MAX_POSITIONS_PER_TERM:
            where.append(min(index, _MAX_POSITION))
    return " ".join(f"'{term}':{','.join(map(str, dict.fromkeys(p)))}" for term, p in positions.items())
