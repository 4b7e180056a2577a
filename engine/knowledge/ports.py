"""The ports of knowledge bases: where datasets are stored, how text becomes vectors,
how documents are read and split, and how ingestion is scheduled.

The engine owns the algorithms (ingestion's diff-and-resume, retrieval's recall passes,
fusion, rerank and quote budget); these protocols are what they run on. Implementations:
``workers/knowledge`` (SQLite with sqlite-vec and FTS5; PostgreSQL with pgvector and
``tsvector``), ``nodes/knowledge`` (parsers, the splitter, the embeddings and rerank
clients of the model registry), and the ingestion queues (in-process tasks, or RQ).

Every store method names its tenant: a dataset, document or chunk of another tenant is
:class:`DatasetNotFound` / :class:`DocumentNotFound`, as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from schemas.knowledge import (
    Chunk,
    ChunkDraft,
    ChunkingSettings,
    Dataset,
    Document,
    IndexInfo,
    MetadataFilter,
    SearchRequest,
    SearchResult,
)

from ..errors import FlowloomError
from ..ports import StoreError

__all__ = [
    "ChunkToEmbed",
    "Chunker",
    "DatasetExists",
    "DatasetNotFound",
    "DimensionMismatch",
    "DocumentNotFound",
    "DocumentRejected",
    "Embedder",
    "EmbeddingBatch",
    "EmbeddingError",
    "IngestionQueue",
    "KnowledgeSearch",
    "KnowledgeStore",
    "ParsedDocument",
    "Parser",
    "RelevanceJudge",
    "Reranker",
    "ScoredChunk",
    "VectorSearchUnavailable",
]


class DatasetNotFound(StoreError, KeyError):
    """No dataset with that id for this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "dataset not found"


class DatasetExists(StoreError):
    """The tenant already has a dataset with that id."""


class DocumentNotFound(StoreError, KeyError):
    """No document with that id in that dataset of this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "document not found"


class VectorSearchUnavailable(StoreError):
    """The store cannot hold or search vectors (PostgreSQL without the ``vector``
    extension): embedding datasets and semantic/hybrid search need it; full-text
    datasets and full-text search still work. The message names the extension."""


class DocumentRejected(FlowloomError):
    """A document that cannot be ingested: ``status`` 413 (over the size cap) or 422
    (a type that does not match its content, an encrypted or corrupt PDF, an empty
    document, an unsupported format); ``reason`` is a short code (``too_large``,
    ``type_mismatch``, ``encrypted``, ``corrupt``, ``empty``, ``unsupported``)."""

    def __init__(self, message: str, *, reason: str, status: int = 422):
        super().__init__(message)
        self.reason, self.status = reason, status


class EmbeddingError(FlowloomError):
    """An embeddings (or rerank) endpoint failed after its retries, or answered
    something that is not a vector per input; the message names the model."""


class RerankError(EmbeddingError):
    """A rerank endpoint failed after its retries, or answered no ranking of the
    documents sent; the message names the model. An :class:`EmbeddingError` too (both are
    a model endpoint of a search failing), told apart so an answer can name which."""


class DimensionMismatch(EmbeddingError):
    """The model answered vectors of another dimension than the index holds (the model
    behind the name changed): the index must be rebuilt (update the dataset's model)."""


# ----------------------------------------------------------------------------- store


class ScoredChunk:
    """A chunk found by one recall pass, with that pass's score (higher is better:
    cosine similarity in [-1, 1] for vectors, a BM25-based score for full text).

    ``ScoredChunk(chunk, score)`` holds a built chunk. A store may instead give what
    ranking reads - the chunk's ``id``, ``kind`` and ``parent_id`` - and a function
    that builds the chunk from its row (:meth:`deferred`): :attr:`chunk` builds it on
    first access, once. A hybrid search fuses two passes of 40 and returns 10, so most
    candidates are never built (validating a chunk costs microseconds, per candidate,
    on the thread that holds the interpreter)."""

    __slots__ = ("_build", "_chunk", "dataset_id", "id", "kind", "parent_id", "score")
    id: str
    kind: str  # a ChunkKind value (ChunkKind is a str enum)
    parent_id: str | None
    score: float
    #: the chunk's dataset (fusion asks which passes could have found it); None: not given
    dataset_id: str | None

    def __init__(self, chunk: Chunk, score: float):
        self._chunk: Chunk | None = chunk
        self._build: Callable[[], Chunk] | None = None
        self.id, self.kind, self.parent_id, self.score = chunk.id, chunk.kind, chunk.parent_id, score
        self.dataset_id = chunk.dataset_id

    @classmethod
    def deferred(
        cls,
        chunk_id: str,
        kind: str,
        parent_id: str | None,
        score: float,
        build: Callable[[], Chunk],
        dataset_id: str | None = None,
    ) -> ScoredChunk:
        """A scored chunk built by ``build()`` when :attr:`chunk` is first read; ``kind``,
        ``parent_id`` and ``dataset_id`` must be the built chunk's."""
        scored = cls.__new__(cls)
        scored._chunk, scored._build = None, build
        scored.id, scored.kind, scored.parent_id, scored.score = chunk_id, kind, parent_id, score
        scored.dataset_id = dataset_id
        return scored

    @property
    def chunk(self) -> Chunk:
        """The chunk (built now when it was deferred)."""
        if self._chunk is None:
            assert self._build is not None
            self._chunk, self._build = self._build(), None
        return self._chunk

    def __repr__(self) -> str:
        return f"ScoredChunk(id={self.id!r}, score={self.score!r})"


@runtime_checkable
class KnowledgeStore(Protocol):
    """Datasets, documents, chunks and vectors of every tenant (module docstring).

    Raises VectorSearchUnavailable from the vector methods when the store has no vector
    support; StoreError subclasses otherwise.

    A store may also say ``reads_side_by_side = True`` (PostgreSQL's pooled connections):
    reads sent together are answered together, so a search may run while its datasets are
    read (``KnowledgeService.search``). Absent: False.
    """

    vector_support: bool
    """False when vectors cannot be stored here (see :class:`VectorSearchUnavailable`)."""

    # datasets ------------------------------------------------------------------------
    async def create_dataset(self, dataset: Dataset) -> Dataset:
        """Insert ``dataset`` (its id and tenant set). Raises DatasetExists."""
        ...

    async def list_datasets(self, tenant_id: str) -> list[Dataset]:
        """The tenant's datasets by name, with document and chunk counts."""
        ...

    async def get_dataset(self, tenant_id: str, dataset_id: str, *, counts: bool = True) -> Dataset:
        """The dataset with its document and chunk counts (``counts`` False: both 0, not
        counted: a search needs only the settings and indexes, and counting a large
        dataset's chunks costs more than the search). Raises DatasetNotFound."""
        ...

    async def update_dataset(self, tenant_id: str, dataset_id: str, changes: dict[str, Any]) -> Dataset:
        """Set the given fields (``name``, ``description``, ``embedding_model``,
        ``chunking``, ``metadata_fields``); the dataset as it is now. Raises DatasetNotFound."""
        ...

    async def delete_dataset(self, tenant_id: str, dataset_id: str) -> None:
        """Delete the dataset with its documents, chunks, indexes and vectors. Raises DatasetNotFound."""
        ...

    # indexes -------------------------------------------------------------------------
    async def create_index(self, tenant_id: str, dataset_id: str, embedding_model: str) -> IndexInfo:
        """A new ``building`` index of the dataset for ``embedding_model`` (a building
        index that existed is retired with its vectors). Raises DatasetNotFound."""
        ...

    async def set_index_dimension(self, tenant_id: str, index_id: str, dimension: int) -> None:
        """Record the dimension of the index's vectors (set once, by the first batch)."""
        ...

    async def activate_index(self, tenant_id: str, dataset_id: str, index_id: str) -> None:
        """Make ``index_id`` the dataset's active index in one transaction; the previous
        active index is retired and its vectors deleted."""
        ...

    # documents -----------------------------------------------------------------------
    async def put_document(
        self, document: Document, content: ParsedDocument | None = None
    ) -> tuple[Document, bool]:
        """Add a document, or return the one there: a document of the dataset with the
        same ``source_name`` and ``content_hash`` is returned unchanged (False); one with
        the same source name and another hash is updated to this hash, size, type and
        metadata, status ``queued`` (True: it must be ingested again, keeping its id and
        the chunks whose text did not change); else inserted (True). ``content``: its
        parsed text, kept in the same transaction when True is returned (as
        :meth:`save_content` would)."""
        ...

    async def save_content(self, tenant_id: str, document_id: str, parsed: ParsedDocument) -> None:
        """Keep the document's parsed text (what ingestion splits, on any worker). Raises DocumentNotFound."""
        ...

    async def load_content(self, tenant_id: str, document_id: str) -> ParsedDocument:
        """The parsed text :meth:`save_content` kept. Raises DocumentNotFound."""
        ...

    async def get_document(self, tenant_id: str, document_id: str) -> Document:
        """Raises DocumentNotFound."""
        ...

    async def start_pass(self, tenant_id: str, document_id: str) -> tuple[Document, Dataset, ParsedDocument]:
        """What an ingestion pass starts from, in one transaction: the document as it was,
        its dataset and its parsed text, and the document set to ``parsing`` with its
        error cleared. Raises DocumentNotFound, DatasetNotFound."""
        ...

    async def finish_document(
        self, tenant_id: str, document_id: str, *, content_hash: str, chunk_count: int, owner_id: str
    ) -> Document | None:
        """End an ingestion in one transaction when the document's content hash is still
        ``content_hash``: status ``ready``, ``chunk_count`` and ``chunks_done`` set to
        ``chunk_count``, error cleared, and ``owner_id``'s lease released; the document
        as it is now. None, changing nothing, when another version was uploaded since.
        Raises DocumentNotFound."""
        ...

    async def list_documents(self, tenant_id: str, dataset_id: str, *, limit: int = 1000) -> list[Document]:
        """The dataset's documents, oldest first. Raises DatasetNotFound."""
        ...

    async def update_document(self, tenant_id: str, document_id: str, **fields: Any) -> Document:
        """Set ``status``, ``error``, ``chunk_count``, ``chunks_done`` or ``metadata``. Raises DocumentNotFound."""
        ...

    async def delete_document(self, tenant_id: str, document_id: str) -> None:
        """Delete the document with its chunks and vectors. Raises DocumentNotFound."""
        ...

    async def claim_document(
        self, tenant_id: str, document_id: str, owner_id: str, lease_until: float
    ) -> bool:
        """Become the document's ingester until ``lease_until`` (Unix seconds): allowed
        when nobody holds it, its lease expired, or ``owner_id`` holds it. False otherwise."""
        ...

    async def release_document(self, tenant_id: str, document_id: str, owner_id: str) -> None:
        """Give the document up (no-op when ``owner_id`` does not hold it)."""
        ...

    async def unfinished_documents(self, *, limit: int = 100) -> list[Document]:
        """Documents of any tenant that are not ``ready`` or ``failed`` and whose lease
        expired or was never taken (what a sweeper gives to ingestion again)."""
        ...

    # chunks and vectors ----------------------------------------------------------------
    async def replace_chunks(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft]
    ) -> list[Chunk]:
        """Make ``drafts`` the document's chunks in one transaction. A stored chunk whose
        ``text_hash`` and kind equal a draft's keeps its id and its vectors (it needs no
        new embedding); the others are deleted with their vectors. Returns the chunks in
        position order."""
        ...

    async def replace_chunks_for_pass(
        self, tenant_id: str, document_id: str, drafts: Sequence[ChunkDraft], index_ids: Sequence[str]
    ) -> dict[str, list[ChunkToEmbed]]:
        """An ingestion pass's :meth:`replace_chunks` and what follows it, in one
        transaction: ``drafts`` made the document's chunks as there (a stored chunk of the
        same ``text_hash`` and kind keeps its id and vectors), then per index of
        ``index_ids`` the searchable chunks (not parents) with no vector in it, in position
        order - every new chunk, and a kept one whose vector an interrupted pass did not
        store. With ``index_ids`` the document is set ``embedding``, ``chunk_count`` its
        searchable chunks and ``chunks_done`` those with a vector in the *last* index (the
        one progress follows). The chunks are not read back: a pass needs their ids and
        search texts only, and building every chunk again cost more than the writes.
        ``{index id: chunks to embed}``, every index of ``index_ids`` a key. Raises
        DocumentNotFound."""
        ...

    async def get_chunks(self, tenant_id: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with those ids (missing ones left out), with their document's
        source name and metadata."""
        ...

    async def document_chunks(
        self, tenant_id: str, document_id: str, *, offset: int = 0, limit: int = 50
    ) -> tuple[list[Chunk], int]:
        """One page of the document's chunks in position order (every kind: parents,
        children, QA pairs) and how many it has in all (0 for a document of another
        tenant or none)."""
        ...

    async def chunks_without_vector(
        self, tenant_id: str, index_id: str, document_id: str | None = None, *, limit: int = 1000
    ) -> list[Chunk]:
        """Searchable chunks (not parents) of the index's dataset (or of one document)
        that have no vector in ``index_id`` yet, in position order."""
        ...

    async def put_vectors(
        self, tenant_id: str, index_id: str, vectors: Sequence[tuple[str, Sequence[float]]]
    ) -> int:
        """Store ``(chunk id, vector)`` pairs in the index, in one transaction (a chunk
        that has one already keeps the new one); the number of chunks given a vector
        (a chunk of another dataset or tenant, or deleted meanwhile, is not one)."""
        ...

    async def search_vectors(
        self,
        tenant_id: str,
        index_id: str,
        vector: Sequence[float],
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` chunks of the index nearest to ``vector`` (cosine similarity, best
        first) whose document metadata passes ``filters``."""
        ...

    async def search_full_text(
        self,
        tenant_id: str,
        dataset_ids: Sequence[str],
        query: str,
        k: int,
        filters: Sequence[MetadataFilter] = (),
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks of the datasets for ``query`` by full text (BM25-based,
        best first; CJK text is matched too) whose document metadata passes ``filters``."""
        ...

    async def close(self) -> None:
        """Release connections and indexes."""
        ...


# ------------------------------------------------------------------------- processing


@dataclass(frozen=True, slots=True)
class ChunkToEmbed:
    """A searchable chunk that has no vector in an index yet: its id and the text the
    embedding model is given (its ``search_text``)."""

    id: str
    search_text: str


@dataclass(slots=True)
class ParsedDocument:
    """A document's text as a parser reads it. ``content_type``: the detected format;
    ``text``: Markdown-flavoured text (headings as ``#`` lines where the format has
    them); ``qa_pairs``: for a QA file, the ``(question, answer)`` pairs instead."""

    content_type: str
    text: str = ""
    qa_pairs: list[tuple[str, str]] | None = None


class Parser(Protocol):
    """Reads an uploaded file with the library for its format."""

    def parse(self, data: bytes, filename: str) -> ParsedDocument:
        """The document's text. Raises DocumentRejected (type mismatch, encrypted or
        corrupt file, empty document, unsupported format)."""
        ...


class Chunker(Protocol):
    """Splits a parsed document into chunks by a dataset's settings."""

    def split(self, document: ParsedDocument, settings: ChunkingSettings) -> list[ChunkDraft]:
        """The chunks in position order (QA pairs: one ``qa`` chunk per pair; parent-child:
        each parent followed by its children)."""
        ...


@dataclass(slots=True)
class EmbeddingBatch:
    """Vectors for a batch of texts, in input order, and what they cost."""

    vectors: list[list[float]]
    tokens: int = 0
    cost: float = 0.0


class Embedder(Protocol):
    """Turns texts into vectors with an embedding model of the registry."""

    def has_model(self, model: str) -> bool:
        """True when ``model`` is a registry model with an embeddings endpoint."""
        ...

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingBatch:
        """Vectors for ``texts`` (batched and retried inside). Raises EmbeddingError."""
        ...


class Reranker(Protocol):
    """Scores documents against a query with a rerank model of the registry."""

    def model_problem(self, model: str) -> str | None:
        """None when ``model`` is a rerank model it can call, else why not (unknown, or
        its actual type): checked before a search calls any model."""
        ...

    async def rerank(
        self, model: str, query: str, documents: Sequence[str], top_n: int | None = None
    ) -> tuple[list[tuple[int, float]], int]:
        """``([(input index, relevance in [0, 1])...] best first, tokens)``. Raises EmbeddingError."""
        ...


class RelevanceJudge(Protocol):
    """Asks a chat model which chunks are relevant to a question (the LLM pass)."""

    def model_problem(self, model: str) -> str | None:
        """None when ``model`` is a chat model it can call, else why not (unknown, or its
        actual type): checked before a search calls any model."""
        ...

    async def select(
        self, model: str, question: str, texts: Sequence[str]
    ) -> tuple[list[int], dict[str, Any]]:
        """``(indexes of the relevant texts, usage {"tokens_in", "tokens_out", "cost"})``."""
        ...


class IngestionQueue(Protocol):
    """Where ingestion of documents runs: tasks of this process, or RQ jobs."""

    async def submit(self, tenant_id: str, dataset_id: str, document_ids: Sequence[str]) -> None:
        """Schedule the documents' ingestion (each at most once at a time)."""
        ...


@runtime_checkable
class KnowledgeSearch(Protocol):
    """What nodes see of knowledge bases (``RunDeps.knowledge``): search only."""

    async def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        """Search the tenant's datasets. Raises DatasetNotFound, EmbeddingError."""
        ...
