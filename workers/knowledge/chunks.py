"""Replacing a document's chunks, for both stores: which stored chunks the new drafts
keep (same text and kind: their vectors stay valid, so a re-chunked document embeds only
what changed), which are new and which are dropped. Pure: the stores run the SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.knowledge import ChunkDraft, ChunkKind

from .rows import dumps, new_id

__all__ = ["ChunkPlan", "plan_chunks"]


@dataclass
class ChunkPlan:
    """What :func:`plan_chunks` decided, as parameter tuples for the stores' statements.

    ``dropped``: ids of stored chunks no draft took (to delete); ``updates``: per kept
    chunk ``(position, text, heading_path JSON, parent_id, tokens, id)``; ``inserts``: per
    new chunk ``(id, tenant_id, dataset_id, document_id, kind, search_text, text_hash,
    search terms, position, text, heading_path JSON, parent_id, tokens)``, the search
    terms None for parent chunks (only their children are searched)."""

    dropped: list[str] = field(default_factory=list)
    updates: list[tuple[Any, ...]] = field(default_factory=list)
    inserts: list[tuple[Any, ...]] = field(default_factory=list)


def plan_chunks(
    stored: Iterable[Any],
    drafts: Sequence[ChunkDraft],
    *,
    tenant_id: str,
    dataset_id: str,
    document_id: str,
    search_terms: Callable[[str], Any],
) -> ChunkPlan:
    """Match ``drafts`` against the document's ``stored`` chunks (rows with ``id``,
    ``text_hash`` and ``kind``, in position order): a draft takes the first unclaimed
    stored chunk of its text hash and kind, else gets a new id. A draft's ``parent``
    (a position) becomes the id of the chunk at that position. ``search_terms`` makes a
    new chunk's full-text column from its search text (the store's dialect)."""
    kept: dict[tuple[str, str], list[str]] = {}
    for row in stored:
        kept.setdefault((row["text_hash"], row["kind"]), []).append(row["id"])
    ids: list[str] = []
    fresh: set[str] = set()
    hashes = [draft.text_hash for draft in drafts]  # a property: SHA-256 at each read
    for draft, text_hash in zip(drafts, hashes, strict=True):
        same = kept.get((text_hash, str(draft.kind)))
        if same:
            ids.append(same.pop(0))
        else:
            ids.append(new_id())
            fresh.add(ids[-1])
    plan = ChunkPlan(dropped=[i for group in kept.values() for i in group])
    by_position = {draft.position: chunk_id for draft, chunk_id in zip(drafts, ids, strict=True)}
    for draft, chunk_id, text_hash in zip(drafts, ids, hashes, strict=True):
        parent_id = by_position.get(draft.parent) if draft.parent is not None else None
        common = (draft.position, draft.text, dumps(draft.heading_path), parent_id, draft.tokens)
        if chunk_id not in fresh:
            plan.updates.append((*common, chunk_id))
            continue
        terms = None if draft.kind == ChunkKind.parent else search_terms(draft.search_text)
        plan.inserts.append(
            (
                chunk_id,
                tenant_id,
                dataset_id,
                document_id,
                str(draft.kind),
                draft.search_text,
                text_hash,
                terms,
                *common,
            )
        )
    return plan
