"""Replacing a document's chunks, for both stores: which stored chunks the new drafts
keep (same text and kind: their vectors stay valid, so a re-chunked document embeds only
what changed), which are new and which are dropped. Pure: the stores run the SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.knowledge.ports import ChunkToEmbed
from schemas.knowledge import ChunkDraft, ChunkKind

from .rows import dumps, new_id

__all__ = ["ChunkPlan", "chunks_to_embed", "pass_progress", "plan_chunks"]


@dataclass
class ChunkPlan:
    """What :func:`plan_chunks` decided, as parameter tuples for the stores' statements.

    ``dropped``: ids of stored chunks no draft took (to delete); ``updates``: per kept
    chunk ``(position, text, heading_path JSON, parent_id, tokens, id)``; ``inserts``: per
    new chunk ``(id, tenant_id, dataset_id, document_id, kind, search_text, text_hash,
    search terms, position, text, heading_path JSON, parent_id, tokens)``, the search
    terms None for parent chunks (only their children are searched); ``ids``: each
    draft's chunk id, in the drafts' order."""

    dropped: list[str] = field(default_factory=list)
    updates: list[tuple[Any, ...]] = field(default_factory=list)
    inserts: list[tuple[Any, ...]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)


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
    plan = ChunkPlan(dropped=[i for group in kept.values() for i in group], ids=ids)
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


def chunks_to_embed(
    drafts: Sequence[ChunkDraft],
    plan: ChunkPlan,
    index_ids: Sequence[str],
    vectors: Iterable[tuple[str, str]],
) -> dict[str, list[ChunkToEmbed]]:
    """Per index of ``index_ids``, the drafts' searchable chunks (not parents) that have no
    vector there, in the drafts' order; ``vectors``: ``(index id, chunk id)`` of the
    vectors the document's kept chunks have (a new chunk has none: its id is new)."""
    held: dict[str, set[str]] = {index_id: set() for index_id in index_ids}
    for index_id, chunk_id in vectors:
        if index_id in held:
            held[index_id].add(chunk_id)
    searchable = [
        ChunkToEmbed(chunk_id, draft.search_text)
        for draft, chunk_id in zip(drafts, plan.ids, strict=True)
        if draft.kind != ChunkKind.parent
    ]
    return {index_id: [c for c in searchable if c.id not in have] for index_id, have in held.items()}


def pass_progress(
    drafts: Sequence[ChunkDraft], pending: dict[str, list[ChunkToEmbed]], index_ids: Sequence[str]
) -> tuple[int, int]:
    """``(chunk_count, chunks_done)`` a pass sets on its document: the searchable chunks
    (not parents), and those already with a vector in the last index of ``index_ids``
    (the one progress follows)."""
    searchable = sum(1 for d in drafts if d.kind != ChunkKind.parent)
    return searchable, searchable - len(pending[index_ids[-1]])
