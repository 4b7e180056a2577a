"""Quotes in chat prompts and the citations of an answer.

A chat node's ``quote`` resolves to text or to items (a retrieval node's ``chunks``,
strings, ``{content|text|q/a}`` objects, or a list of such lists when several searches
feed one answer). Items are numbered ``1..n`` in the order given (a chunk repeated by
two searches counts once), and that number is what the answer cites as ``[n]``; a
retrieval node's ``quote`` text keeps that node's own numbering, which is the same as
its ``chunks``' (so a reference to ``<node>.quote`` is read with ``<node>.chunks``).

:func:`cited_ids` reads ``[n]`` markers from an answer (``[1]``, ``[1][3]``,
``[1, 3]``, ``[1,2,3]``; an id that no quote item has is ignored);
:func:`answer_citations` decides what an answer's ``citations`` are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Set as AbstractSet
from typing import Any

from schemas.knowledge import QuotePiece

__all__ = [
    "PREVIEW_CHARS",
    "QuoteItem",
    "answer_citations",
    "cited_ids",
    "quote_items",
    "quote_role",
    "render_items",
]

#: Characters of a quote kept in a citation (records and events carry a preview).
PREVIEW_CHARS = 500

_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")


class QuoteItem:
    """One numbered quote item: its text, and the chunk it came from (None for plain items)."""

    __slots__ = ("citation_id", "text", "chunk")

    def __init__(self, citation_id: str, text: str, chunk: dict[str, Any] | None):
        self.citation_id, self.text, self.chunk = citation_id, text, chunk

    def piece(self) -> QuotePiece:
        c = self.chunk or {}
        score = c.get("score")
        return QuotePiece(
            citation_id=self.citation_id,
            chunk_id=str(c.get("chunk_id") or ""),
            dataset_id=str(c.get("dataset_id") or ""),
            document_id=str(c.get("document_id") or ""),
            source_name=str(c.get("source_name") or ""),
            position=int(c.get("position") or 0) if isinstance(c.get("position"), (int, float)) else 0,
            score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else 0.0,
            text=self.text[:PREVIEW_CHARS],
        )


def quote_role(configured: str, template: str, template_names: AbstractSet[str]) -> str:
    """Where the quote prompt goes, FastGPT's rule: the *user* message when the node asks
    for ``user`` or the quote template uses ``question`` (a template that restates the
    question replaces the user message, so it must be that message); else *system*."""
    return "user" if configured == "user" or "question" in template_names else "system"


def _is_chunk(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("text"), str) and "chunk_id" in item


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in ("content", "text"):
            if isinstance(item.get(key), str):
                return item[key]
        if isinstance(item.get("q"), str):
            return item["q"] + (f"\n{item['a']}" if isinstance(item.get("a"), str) and item["a"] else "")
    return json.dumps(item, ensure_ascii=False)


def quote_items(value: Any) -> list[QuoteItem]:
    """The numbered items of a list quote value (nested lists flattened in order, blank
    items and repeated chunks dropped). A string or null value has no items."""
    if not isinstance(value, list):
        return []
    flat: list[Any] = []

    def walk(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                flat.append(item)

    walk(value)
    return _number(flat)


def _number(flat: list[Any]) -> list[QuoteItem]:
    out: list[QuoteItem] = []
    seen: set[str] = set()
    for item in flat:
        if _is_chunk(item) and item.get("chunk_id"):
            if item["chunk_id"] in seen:
                continue
            seen.add(item["chunk_id"])
        text = _item_text(item).strip()
        if text:
            out.append(QuoteItem(str(len(out) + 1), text, item if _is_chunk(item) else None))
    return out


def render_items(items: list[QuoteItem]) -> str:
    """The quote text of ``items``: ``[n] text``, a chunk as ``[n] source: <name> > <headings>``
    then its text (the retrieval node's format), blank-line separated."""
    from engine.knowledge.retrieval import quote_block

    parts = []
    for item in items:
        chunk = item.chunk
        if chunk is not None and chunk.get("source_name"):
            headings = [str(h) for h in chunk.get("heading_path") or []]
            parts.append(quote_block(item.citation_id, str(chunk["source_name"]), headings, item.text))
        else:
            parts.append(f"[{item.citation_id}] {item.text}")
    return "\n\n".join(parts)


def cited_ids(answer: str) -> list[str]:
    """The citation ids ``answer`` names, in first-cited order, each once."""
    out: list[str] = []
    for match in _MARKER.finditer(answer):
        for part in match.group(1).split(","):
            cid = str(int(part.strip()))
            if cid not in out:
                out.append(cid)
    return out


def answer_citations(answer: str, items: list[QuoteItem]) -> tuple[list[QuotePiece], bool]:
    """``(citations, cited)``: the quote items the answer cites, in citation order, when it
    cites any that exist (``cited`` True); else every item given (``cited`` False), since
    the answer was written from all of them and a reader should still see its sources."""
    by_id = {item.citation_id: item for item in items}
    cited = [by_id[cid] for cid in cited_ids(answer) if cid in by_id]
    if cited:
        return [item.piece() for item in cited], True
    return [item.piece() for item in items], False
