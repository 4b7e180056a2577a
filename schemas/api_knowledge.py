"""Request and response bodies of the knowledge-base routes (``/v1/datasets``).

The stored records (:mod:`schemas.knowledge`) carry the tenant; these bodies leave it
out (a caller only ever sees its own tenant's). Times are Unix seconds (float), sizes
bytes, chunk sizes tokens.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .knowledge import (
    Chunk,
    ChunkingSettings,
    ChunkKind,
    Dataset,
    Document,
    DocumentStatus,
    FusionMode,
    IndexInfo,
    MetadataField,
    MetadataFilter,
    RerankSettings,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchResult,
)

__all__ = [
    "ChunkOut",
    "ChunkPage",
    "DatasetList",
    "DatasetOut",
    "DatasetSearch",
    "DatasetSearchResult",
    "DocumentList",
    "DocumentOut",
    "DocumentProgress",
    "DocumentRejection",
    "DocumentText",
    "DocumentUploadItem",
    "DocumentUploadResult",
]


class DatasetOut(BaseModel):
    """A dataset: its settings, its indexes (``active_index``: what searches use;
    ``building_index``: being built after a change of embedding model) and counts."""

    id: str
    name: str
    description: str = ""
    embedding_model: str | None = None
    chunking: ChunkingSettings
    metadata_fields: list[MetadataField] = Field(default_factory=list)
    active_index: IndexInfo | None = None
    building_index: IndexInfo | None = None
    document_count: int = 0
    chunk_count: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetOut:
        return cls(**dataset.model_dump(exclude={"tenant_id"}))


class DatasetWarning(BaseModel):
    """Something that lets a dataset be made but will trouble it later.
    ``missing_api_key``: the embedding model's provider needs a key in ``variable``,
    which this deployment does not set; every document added before it is set fails
    at embedding. ``duplicate_name``: another dataset of the tenant has this name (the
    canvas picks datasets by name; ``variable`` is null)."""

    code: Literal["missing_api_key", "duplicate_name"]
    message: str
    field: str
    variable: str | None = None


class DatasetCreated(DatasetOut):
    """``POST /v1/datasets``: the new dataset, with what would make its documents fail."""

    warnings: list[DatasetWarning] = Field(default_factory=list)


class DatasetList(BaseModel):
    """``GET /v1/datasets``: the tenant's datasets by name."""

    datasets: list[DatasetOut]


class DocumentOut(BaseModel):
    """A document of a dataset and where its ingestion is: ``status`` (``queued``,
    ``parsing``, ``embedding``, ``ready``, ``failed`` with ``error``), ``chunks_done`` of
    ``chunk_count`` chunks embedded."""

    id: str
    dataset_id: str
    source_name: str
    content_type: str
    content_hash: str
    size_bytes: int = 0
    status: DocumentStatus
    error: str | None = None
    chunk_count: int = 0
    chunks_done: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def of(cls, document: Document) -> DocumentOut:
        return cls(**document.model_dump(exclude={"tenant_id"}))


class DocumentList(BaseModel):
    """``GET /v1/datasets/{id}/documents``: the dataset's documents, oldest first."""

    documents: list[DocumentOut]


class DocumentText(BaseModel):
    """``POST /v1/datasets/{id}/documents`` as JSON: one document given as its text
    (ingested as plain text / Markdown)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=500, description="the document's source name")
    text: str = Field(description="the document's text (Markdown headings split chunks)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="metadata searches can filter on")


class DocumentRejection(BaseModel):
    """Why one uploaded file was not kept: ``status`` 413 (over the per-document cap)
    or 422, ``reason`` (``too_large``, ``type_mismatch``, ``encrypted``, ``corrupt``,
    ``empty``, ``unsupported``, ``invalid_metadata``) and a message in plain words."""

    status: int
    reason: str
    message: str


class DocumentUploadItem(BaseModel):
    """What became of one file of an upload: ``created`` (new or changed content:
    queued for ingestion), ``unchanged`` (the dataset already holds these bytes under
    this name) or ``rejected`` (``error`` says why; the other files are kept)."""

    source_name: str
    outcome: Literal["created", "unchanged", "rejected"]
    document: DocumentOut | None = None
    error: DocumentRejection | None = None


class DocumentUploadResult(BaseModel):
    """``POST /v1/datasets/{id}/documents``: one item per file, in the order sent;
    ``accepted`` / ``rejected`` count them."""

    documents: list[DocumentUploadItem]
    accepted: int
    rejected: int


class DatasetSearch(BaseModel):
    """``POST /v1/datasets/{id}/search`` (hit testing): a search of this one dataset
    (:class:`~schemas.knowledge.SearchRequest` without ``dataset_ids``)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(default="", max_length=20_000)
    queries: list[str] = Field(default_factory=list, max_length=32)
    mode: SearchMode = SearchMode.hybrid
    fusion: FusionMode = FusionMode.rrf
    semantic_weight: float = Field(default=0.5, ge=0.0, le=1.0, strict=True)
    top_k: int = Field(default=5, ge=1, le=200, strict=True)
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0, strict=True)
    max_quote_tokens: int = Field(default=3000, ge=0, le=200_000, strict=True)
    rerank: RerankSettings | None = None
    filters: list[MetadataFilter] = Field(default_factory=list, max_length=32)

    def of_dataset(self, dataset_id: str) -> SearchRequest:
        """The engine's request for this dataset."""
        return SearchRequest(dataset_ids=[dataset_id], **self.model_dump())


class DatasetSearchResult(BaseModel):
    """The ranked hits (best first, ``score`` in [0, 1], ``scores`` per recall pass),
    the quote text a prompt would get, the queries searched, the mode, the tokens and
    cost its model calls spent (embeddings, rerank, LLM relevance pass), the chunks each
    recall pass found (``passes``) and what the search could not do as asked (``notes``)."""

    hits: list[SearchHit]
    quote: str = ""
    queries: list[str] = Field(default_factory=list)
    mode: SearchMode
    embedding_tokens: int = 0
    rerank_tokens: int = 0
    llm_tokens_in: int = 0
    llm_tokens_out: int = 0
    cost: float = 0.0
    passes: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, result: SearchResult) -> DatasetSearchResult:
        return cls(**result.model_dump())


class DocumentProgress(BaseModel):
    """The data of a ``progress`` event of ``GET /v1/datasets/{id}/events``: one
    document's ingestion as it moves on."""

    document_id: str
    source_name: str
    status: DocumentStatus
    chunks_done: int
    chunk_count: int
    error: str | None = None

    @classmethod
    def of(cls, document: Document) -> DocumentProgress:
        return cls(
            document_id=document.id,
            source_name=document.source_name,
            status=document.status,
            chunks_done=document.chunks_done,
            chunk_count=document.chunk_count,
            error=document.error,
        )


class ChunkOut(BaseModel):
    """One chunk of a document as the chunk preview shows it: ``position`` in the
    document, ``kind`` (``text``; ``parent`` / ``child`` in parent-child chunking, a
    child naming its ``parent_id``; ``qa``: a question-answer pair), the text returned
    to searches and the text searched (a QA pair's question), its heading path and size."""

    id: str
    position: int
    kind: ChunkKind
    text: str
    search_text: str
    heading_path: list[str] = Field(default_factory=list)
    parent_id: str | None = None
    tokens: int = 0

    @classmethod
    def of(cls, chunk: Chunk) -> ChunkOut:
        return cls(
            id=chunk.id,
            position=chunk.position,
            kind=chunk.kind,
            text=chunk.text,
            search_text=chunk.search_text,
            heading_path=list(chunk.heading_path),
            parent_id=chunk.parent_id,
            tokens=chunk.tokens,
        )


class ChunkPage(BaseModel):
    """``GET /v1/datasets/{id}/documents/{doc_id}/chunks``: ``chunks`` from ``offset``
    (at most ``limit``, in position order) of ``total``."""

    chunks: list[ChunkOut]
    offset: int
    limit: int
    total: int
