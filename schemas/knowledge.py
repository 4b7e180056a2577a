"""Knowledge bases: datasets, their documents and chunks, and what a search returns.

A *dataset* belongs to a tenant and holds *documents*; ingestion parses a document,
splits it into *chunks* and embeds them into the dataset's active *index* (one per
embedding model: changing the model builds a new index while searches keep answering
from the old one). A search returns *hits*: chunks with their scores and a citation id
that an answer can cite. Times are Unix seconds (float); sizes are bytes; chunk sizes
are tokens. The search request's models live in :mod:`schemas.knowledge_search` and are
re-exported here.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .knowledge_search import FusionMode, MetadataFilter, RerankSettings, SearchMode, SearchRequest

#: what a dataset id may hold (a word: workflows, URLs and commands name it unquoted)
_DATASET_ID = re.compile(r"[A-Za-z0-9_.-]+")
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]+")

__all__ = [
    "Chunk",
    "ChunkDraft",
    "ChunkKind",
    "ChunkingSettings",
    "Dataset",
    "DatasetCreate",
    "DatasetUpdate",
    "Document",
    "DocumentStatus",
    "FusionMode",
    "IndexInfo",
    "MetadataField",
    "MetadataFilter",
    "ParentChildSettings",
    "QuotePiece",
    "RerankSettings",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchResult",
    "run_citations",
]


class DocumentStatus(StrEnum):
    """Where a document is in ingestion. ``failed`` carries a reason on the document."""

    queued = "queued"
    parsing = "parsing"
    embedding = "embedding"
    ready = "ready"
    failed = "failed"


class ChunkKind(StrEnum):
    """``text``: a plain chunk (searched and returned); ``child``: a small chunk searched
    in place of its ``parent`` (returned instead of it); ``qa``: a question-answer pair,
    searched by its question, returned as question plus answer."""

    text = "text"
    parent = "parent"
    child = "child"
    qa = "qa"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParentChildSettings(_Model):
    """Search small chunks, return their parent: ``child_tokens`` is the searched size,
    the dataset's ``chunk_tokens`` the returned parent's."""

    child_tokens: int = Field(default=128, ge=16, le=4096)
    child_overlap_tokens: int = Field(default=16, ge=0, le=1024)


class ChunkingSettings(_Model):
    """How documents of a dataset are split (token counts of the cl100k tokenizer)."""

    chunk_tokens: int = Field(default=512, ge=32, le=8192, description="largest chunk, in tokens")
    overlap_tokens: int = Field(default=64, ge=0, le=2048, description="tokens shared by neighbouring chunks")
    separators: list[str] = Field(
        default_factory=list,
        description="extra split points tried before the splitter's own (paragraphs, lines, sentences)",
    )
    split_headings: bool = Field(
        default=True,
        description="start a new chunk at each Markdown heading and keep the heading path with every chunk",
    )
    parent_child: ParentChildSettings | None = None

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens ({self.overlap_tokens}) must be below chunk_tokens ({self.chunk_tokens})"
            )
        return self


class MetadataField(_Model):
    """A metadata field documents of the dataset may carry (filters name them)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: Literal["string", "number", "time"] = "string"


class IndexInfo(_Model):
    """One vector index of a dataset: the embedding model that built it, its dimension
    (known after the first embedding), and its state."""

    id: str
    embedding_model: str
    dimension: int | None = None
    state: Literal["building", "active", "retired"] = "building"
    created_at: float = 0.0


class DatasetCreate(_Model):
    """A new dataset. ``embedding_model`` is a model of the registry with an embeddings
    endpoint; None: full-text search only (no key, no model needed)."""

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=4000)
    embedding_model: str | None = Field(default=None, max_length=200)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    metadata_fields: list[MetadataField] = Field(default_factory=list, max_length=64)
    id: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",  # for clients: _id_form checks it first, in words
        description="the dataset id (default: generated)",
    )

    @field_validator("id", mode="before")
    @classmethod
    def _id_form(cls, value: Any) -> Any:
        """An id is a word of letters, digits, ``_``, ``.`` and ``-``: workflows, URLs and
        commands name it unquoted. A name given as the id (``My KB``) is told the slug."""
        if not isinstance(value, str) or _DATASET_ID.fullmatch(value):
            return value
        slug = _NOT_IN_ID.sub("-", value.strip().lower()).strip("-.")[:64]
        hint = f"; e.g. {slug!r}" if slug else ""
        raise ValueError(
            f"{value!r} is not a dataset id: use only letters, digits, '_', '.' and '-' (no spaces){hint}"
        )


class DatasetUpdate(_Model):
    """Changes to a dataset: only the fields given. A new ``embedding_model`` re-indexes
    the dataset (searches keep using the old index until the new one is ready); new
    ``chunking`` applies to documents added or re-indexed later."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=4000)
    embedding_model: str | None = Field(default=None, max_length=200)
    clear_embedding_model: bool = False
    chunking: ChunkingSettings | None = None
    metadata_fields: list[MetadataField] | None = Field(default=None, max_length=64)


class Dataset(_Model):
    """A dataset as stored. ``active_index``: the index searches use (None: full-text
    only, or nothing embedded yet); ``building_index``: an index being built after a
    change of embedding model."""

    id: str
    tenant_id: str
    name: str
    description: str = ""
    embedding_model: str | None = None
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    metadata_fields: list[MetadataField] = Field(default_factory=list)
    active_index: IndexInfo | None = None
    building_index: IndexInfo | None = None
    document_count: int = 0
    chunk_count: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0


class Document(_Model):
    """A document of a dataset. ``content_hash``: SHA-256 of the uploaded bytes (re-adding
    the same bytes under the same source name changes nothing); ``chunks_done`` of
    ``chunk_count`` are embedded into the index being filled (progress)."""

    id: str
    tenant_id: str
    dataset_id: str
    source_name: str
    content_type: str = Field(
        description="detected format: txt, markdown, html, pdf, docx, csv_qa, jsonl_qa, text"
    )
    content_hash: str
    size_bytes: int = 0
    status: DocumentStatus = DocumentStatus.queued
    error: str | None = Field(default=None, description="why it failed, in plain words")
    chunk_count: int = 0
    chunks_done: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0


class ChunkDraft(_Model):
    """A chunk as the splitter makes it, before it is stored. ``position``: order within
    the document (parents and children numbered in one sequence); ``parent``: the
    position of a child's parent; ``search_text``: what is embedded and indexed for full
    text (a QA pair's question; else ``text``)."""

    position: int
    kind: ChunkKind = ChunkKind.text
    text: str
    search_text: str
    heading_path: list[str] = Field(default_factory=list)
    parent: int | None = None
    tokens: int = 0

    @property
    def text_hash(self) -> str:
        """SHA-256 of what is embedded (an unchanged hash needs no new embedding)."""
        import hashlib

        return hashlib.sha256(self.search_text.encode("utf-8", "surrogatepass")).hexdigest()


class Chunk(_Model):
    """A stored chunk (see :class:`ChunkDraft`)."""

    id: str
    tenant_id: str
    dataset_id: str
    document_id: str
    position: int
    kind: ChunkKind = ChunkKind.text
    text: str
    search_text: str
    text_hash: str
    heading_path: list[str] = Field(default_factory=list)
    parent_id: str | None = None
    tokens: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict, description="the document's metadata")
    source_name: str = Field(default="", description="the document's source name (filled on read)")


class SearchHit(_Model):
    """A chunk found by a search. ``score`` is in [0, 1] (the fused or reranked score);
    ``scores`` has each recall pass's own (``semantic``, ``full_text``, ``rerank``);
    ``citation_id`` is what an answer cites (``[1]``...), stable within one search."""

    chunk_id: str
    dataset_id: str
    document_id: str
    source_name: str
    position: int
    text: str
    score: float
    scores: dict[str, float] = Field(default_factory=dict)
    heading_path: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    citation_id: str = ""
    tokens: int = 0


class QuotePiece(_Model):
    """A citation as an answer's events and records carry it: which hit ``[id]`` names."""

    citation_id: str
    chunk_id: str
    dataset_id: str
    document_id: str
    source_name: str
    position: int
    score: float
    text: str = Field(description="the quoted text (cut to a preview where records keep it)")


class SearchResult(_Model):
    """What a search returns: the hits (best first, within the quote budget), the quote
    text a chat prompt takes, the queries searched, and the embedding usage."""

    hits: list[SearchHit] = Field(default_factory=list)
    quote: str = ""
    queries: list[str] = Field(default_factory=list)
    mode: SearchMode = SearchMode.hybrid
    embedding_tokens: int = 0
    rerank_tokens: int = 0
    llm_tokens_in: int = Field(default=0, description="the LLM relevance pass's prompt tokens")
    llm_tokens_out: int = 0
    cost: float = Field(
        default=0.0, description="what the search's model calls cost (embeddings, relevance pass)"
    )
    passes: dict[str, int] = Field(
        default_factory=dict, description="each recall pass's name -> chunks it found"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="what the search could not do as asked (e.g. a "
        "dataset without an index searched by full text)",
    )


def run_citations(node_runs: Any) -> list[QuotePiece]:
    """The citations of a run's answers: the ``citations`` output of every succeeded node
    run that has one (chat nodes), in the order the node runs started, each piece once.
    ``node_runs``: NodeRun records (anything with ``status``, ``outputs``, ``started_at``)."""
    runs = sorted(
        (
            r
            for r in node_runs
            if str(getattr(r, "status", "")) == "succeeded"
            and isinstance((getattr(r, "outputs", None) or {}).get("citations"), list)
        ),
        key=lambda r: getattr(r, "started_at", None) or 0.0,
    )
    out: list[QuotePiece] = []
    seen: set[tuple[str, str, str]] = set()
    for run in runs:
        for item in run.outputs["citations"]:
            try:
                piece = QuotePiece.model_validate(item)
            except ValueError:
                continue  # a node's own output that only shares the name
            key = (piece.citation_id, piece.chunk_id, piece.text)
            if key not in seen:
                seen.add(key)
                out.append(piece)
    return out
