"""Rows of the knowledge tables as records, for both stores (a row is anything read by
column name: ``sqlite3.Row`` / ``sqlean.Row`` or an asyncpg ``Record``)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from pydantic_core import from_json, to_json

from engine.knowledge.ports import ParsedDocument, ScoredChunk
from schemas.knowledge import Chunk, ChunkingSettings, Dataset, Document, IndexInfo, MetadataField

__all__ = [
    "CHUNK_COLUMNS",
    "UPDATABLE_DATASET_FIELDS",
    "UPDATABLE_DOCUMENT_FIELDS",
    "check_index_id",
    "chunk_from_row",
    "dataset_from_row",
    "document_from_row",
    "dumps",
    "index_from_row",
    "loads",
    "new_id",
    "parsed_from_row",
    "qa_json",
    "scored_from_row",
]

UPDATABLE_DATASET_FIELDS = frozenset(
    {"name", "description", "embedding_model", "chunking", "metadata_fields"}
)
UPDATABLE_DOCUMENT_FIELDS = frozenset({"status", "error", "chunk_count", "chunks_done", "metadata"})

_INDEX_ID = re.compile(r"^[0-9a-f]{32}$")

#: The columns every chunk query of both stores selects, **last** and in this order
#: (``c``: ``kb_chunks``, ``d``: its ``kb_documents`` row): :func:`chunk_from_row` reads
#: them by position from the end of the row, whatever a query selects before them.
CHUNK_COLUMNS = (
    "c.id, c.tenant_id, c.dataset_id, c.document_id, c.position, c.kind, c.text, c.search_text, "
    "c.text_hash, c.heading_path, c.parent_id, c.tokens, d.source_name, d.metadata AS doc_metadata"
)
_CHUNK_WIDTH = CHUNK_COLUMNS.count(",") + 1
#: where ``c.id``, ``c.dataset_id``, ``c.kind`` and ``c.parent_id`` are, counted from the end of a row
_ID_AT, _DATASET_AT = -_CHUNK_WIDTH, -_CHUNK_WIDTH + 2
_KIND_AT, _PARENT_AT = -_CHUNK_WIDTH + 5, -_CHUNK_WIDTH + 10


def new_id() -> str:
    """A new random id (32 hex digits) for an index or a chunk."""
    return uuid.uuid4().hex


def check_index_id(index_id: str) -> bool:
    """True for an id :func:`new_id` could have made (index ids appear in SQL text on PostgreSQL)."""
    return bool(_INDEX_ID.match(index_id or ""))


def dumps(value: Any) -> str:
    """JSON text of ``value`` (pydantic models included)."""
    return to_json(value).decode()


def loads(value: Any) -> Any:
    """A JSON column's value: text is parsed, an already decoded value is kept."""
    if value is None or not isinstance(value, (str, bytes)):
        return value
    return from_json(value)


def index_from_row(row: Any) -> IndexInfo:
    return IndexInfo(
        id=row["id"],
        embedding_model=row["embedding_model"],
        dimension=row["dimension"],
        state=row["state"],
        created_at=row["created_at"],
    )


def dataset_from_row(row: Any, indexes: list[IndexInfo]) -> Dataset:
    """A dataset with its active and building index (of ``indexes``, the dataset's own)."""
    by_state = {index.state: index for index in indexes}
    return Dataset(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        description=row["description"],
        embedding_model=row["embedding_model"],
        chunking=ChunkingSettings.model_validate(loads(row["chunking"])),
        metadata_fields=[MetadataField.model_validate(f) for f in loads(row["metadata_fields"]) or []],
        active_index=by_state.get("active"),
        building_index=by_state.get("building"),
        document_count=row["document_count"] or 0,
        chunk_count=row["chunk_count"] or 0,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def document_from_row(row: Any) -> Document:
    return Document(
        id=row["id"],
        tenant_id=row["tenant_id"],
        dataset_id=row["dataset_id"],
        source_name=row["source_name"],
        content_type=row["content_type"],
        content_hash=row["content_hash"],
        size_bytes=row["size_bytes"],
        status=row["status"],
        error=row["error"],
        chunk_count=row["chunk_count"],
        chunks_done=row["chunks_done"],
        metadata=loads(row["metadata"]) or {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def chunk_from_row(row: Any) -> Chunk:
    """A chunk from a row whose last columns are :data:`CHUNK_COLUMNS` (its document's
    ``source_name`` and metadata included). Read by position, and validated from one
    dict: a search builds up to a hundred chunks, and reading 14 columns by name (a
    linear, case-insensitive search of the names per column in ``sqlite3.Row``) and
    keyword construction cost three times as much."""
    (
        chunk_id,
        tenant_id,
        dataset_id,
        document_id,
        position,
        kind,
        text,
        search_text,
        text_hash,
        heading_path,
        parent_id,
        tokens,
        source_name,
        doc_metadata,
    ) = tuple(row)[-_CHUNK_WIDTH:]
    return Chunk.model_validate(
        {
            "id": chunk_id,
            "tenant_id": tenant_id,
            "dataset_id": dataset_id,
            "document_id": document_id,
            "position": position,
            "kind": kind,
            "text": text,
            "search_text": search_text,
            "text_hash": text_hash,
            "heading_path": loads(heading_path) or [],
            "parent_id": parent_id,
            "tokens": tokens,
            "metadata": loads(doc_metadata) or {},
            "source_name": source_name,
        }
    )


def scored_from_row(row: Any, score: float) -> ScoredChunk:
    """A search candidate from a row whose last columns are :data:`CHUNK_COLUMNS`: its
    id, dataset, kind and parent read now, its chunk built by :func:`chunk_from_row` only if the
    search returns it (:meth:`ScoredChunk.deferred`)."""
    return ScoredChunk.deferred(
        row[_ID_AT], row[_KIND_AT], row[_PARENT_AT], score, lambda: chunk_from_row(row), row[_DATASET_AT]
    )


def parsed_from_row(row: Any) -> ParsedDocument:
    qa = loads(row["parsed_qa"])
    return ParsedDocument(
        content_type=row["parsed_type"] or "",
        text=row["parsed_text"] or "",
        qa_pairs=[(q, a) for q, a in qa] if qa is not None else None,
    )


def qa_json(parsed: ParsedDocument) -> str | None:
    return dumps([list(p) for p in parsed.qa_pairs]) if parsed.qa_pairs is not None else None
