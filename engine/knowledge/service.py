"""The knowledge-base facade the API, the CLI and nodes use: :class:`KnowledgeService`.

It owns the rules around the store: a dataset names an embedding model of the registry
(or none: full-text search only); an upload is capped in size, parsed once (in a
thread), stored with its parsed text and handed to the ingestion queue; the same bytes
under the same name again change nothing (no ingestion, no embedding call); changing a
dataset's embedding model builds a new index while searches keep using the old one.

Ingestion runs where the queue puts it: :class:`LocalIngestionQueue` (tasks of this
process, at most ``concurrency`` at a time; the default) or the RQ queue of
``workers.rq`` (jobs carrying ids only, run by ``flowloom worker`` processes, which call
:meth:`KnowledgeService.ingest`). Search delegates to
:class:`engine.knowledge.retrieval.Retriever`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.knowledge import (
    Chunk,
    Dataset,
    DatasetCreate,
    DatasetUpdate,
    Document,
    DocumentStatus,
    SearchRequest,
    SearchResult,
)

from ..errors import FlowloomError
from .ingest import DEFAULT_BATCH_SIZE, DEFAULT_LEASE_S, Ingestor, UsageSink
from .ports import (
    Chunker,
    DatasetNotFound,
    DocumentNotFound,
    DocumentRejected,
    Embedder,
    IngestionQueue,
    KnowledgeStore,
    ParsedDocument,
    Parser,
    RelevanceJudge,
    Reranker,
)
from .scope import tenant_models_scope

__all__ = [
    "DEFAULT_INGEST_CONCURRENCY",
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "DocumentOutcome",
    "InvalidDataset",
    "KnowledgeService",
    "LocalIngestionQueue",
    "Upload",
    "duplicate_name",
]

logger = logging.getLogger("flowloom.knowledge")

#: the largest upload accepted by default (bytes)
DEFAULT_MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
#: documents :class:`LocalIngestionQueue` ingests at a time by default. Four, not two: a
#: document's steps follow each other (split in the splitting child, write its chunks,
#: embed, store the vectors), so with two at a time both were often waiting - one on the
#: splitting child, one on the embeddings endpoint - while the process idled; with four,
#: one is split while the others are stored and embedded (the bench's ingestion: ~1.4x
#: the chunks/s of two on two cores). Each holds one embeddings request in flight at most.
DEFAULT_INGEST_CONCURRENCY = 4
_ENDED = (DocumentStatus.ready, DocumentStatus.failed)
#: datasets a service remembers for searching ahead of their read (:meth:`KnowledgeService.search`)
_DATASETS_SEEN = 1024


class InvalidDataset(FlowloomError, ValueError):
    """A dataset's settings that cannot be used (an embedding model that is not one);
    ``field`` names the field (``embedding_model``)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Upload:
    """A file to add: its name (the extension must match the content), bytes and metadata."""

    name: str
    data: bytes
    metadata: dict[str, Any] = field(default_factory=dict)


def duplicate_name(name: str, others: list[str]) -> str:
    """The warning for a dataset named as ``others`` (their ids) are: ids tell datasets apart
    in workflows and commands, but the canvas lists and picks them by name."""
    return (
        f"another dataset of this tenant is named {name!r} too ({', '.join(others)}): the canvas "
        "lists datasets by name, where they look alike (workflows name them by id)"
    )


@dataclass
class DocumentOutcome:
    """What became of one upload: the document (None when rejected), whether it will be
    ingested (``created``: new, changed, or the same bytes as a document whose ingestion
    failed, which is retried: ``retried`` True), or why it was rejected. ``changed``: the
    document already there under this name got other bytes (it keeps its id)."""

    source_name: str
    document: Document | None
    created: bool
    error: DocumentRejected | None = None
    retried: bool = False
    changed: bool = False


class LocalIngestionQueue:
    """Ingestion as asyncio tasks of this process, ``concurrency`` documents at a time.

    A document submitted while it is being ingested is ingested once more after (its
    content may have changed since the running one loaded it). Errors are logged; the
    document itself records how it ended.
    """

    def __init__(
        self, ingest: Callable[[str, str], Awaitable[Any]], *, concurrency: int = DEFAULT_INGEST_CONCURRENCY
    ) -> None:
        self._ingest = ingest
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    async def submit(self, tenant_id: str, dataset_id: str, document_ids: Sequence[str]) -> None:
        """Schedule the documents' ingestion (returns at once)."""
        for document_id in document_ids:
            key = f"{tenant_id}/{document_id}"
            if key in self._tasks:
                self._again.add(key)
                continue
            self._tasks[key] = asyncio.get_running_loop().create_task(self._run(key, tenant_id, document_id))

    async def _run(self, key: str, tenant_id: str, document_id: str) -> None:
        try:
            while True:
                self._again.discard(key)
                async with self._slots:
                    try:
                        await self._ingest(tenant_id, document_id)
                    except DocumentNotFound:
                        return
                    except Exception:
                        logger.exception(
                            "ingestion of document %s (tenant %s) failed", document_id, tenant_id
                        )
                if key not in self._again:
                    return
        finally:
            self._tasks.pop(key, None)

    @property
    def pending(self) -> int:
        """Documents being (or waiting to be) ingested."""
        return len(self._tasks)

    async def join(self) -> None:
        """Wait until nothing is being ingested (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel what runs (its documents stay unfinished: a sweeper or a re-index continues them)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class KnowledgeService:
    """Datasets, documents and search of every tenant (module docstring). Implements
    :class:`~engine.knowledge.ports.KnowledgeSearch`.

    ``embedder``: None allows only full-text datasets; ``queue``: None runs ingestion as
    tasks of this process (:class:`LocalIngestionQueue`); ``max_document_bytes``: the
    upload cap (413 ``too_large`` above it); ``on_usage(tenant_id, tokens, cost)``: told
    the embedding usage of each ingestion batch; ``lease_s``: how long an ingesting
    worker holds a document without renewing (a dead worker's documents go to another
    after it).
    """

    def __init__(
        self,
        *,
        store: KnowledgeStore,
        parser: Parser,
        chunker: Chunker,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        judge: RelevanceJudge | None = None,
        queue: IngestionQueue | None = None,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        on_usage: UsageSink | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        batch_size: int | None = None,
        tenant_models: Any = None,
    ) -> None:
        self.store, self.parser, self.chunker = store, parser, chunker
        #: each tenant's models (a ``TenantModels``; None: the operator's only), set for
        #: every operation that checks or calls a model (:mod:`engine.knowledge.scope`)
        self.tenant_models = tenant_models
        self.embedder, self.reranker, self.judge = embedder, reranker, judge
        self.max_document_bytes, self.on_usage = max_document_bytes, on_usage
        self.ingestor = Ingestor(
            store=store,
            chunker=chunker,
            embedder=embedder,
            on_usage=on_usage,
            lease_s=lease_s,
            batch_size=batch_size or DEFAULT_BATCH_SIZE,
        )
        self.queue: IngestionQueue = queue if queue is not None else LocalIngestionQueue(self.ingest)
        self._retriever: Any = None
        #: (tenant, dataset id) -> the dataset as a search last read it (:meth:`search`)
        self._datasets_seen: dict[tuple[str, str], Dataset] = {}

    async def aclose(self) -> None:
        """Stop in-process ingestion tasks (the store is the caller's to close)."""
        if isinstance(self.queue, LocalIngestionQueue):
            await self.queue.aclose()

    # ------------------------------------------------------------------ datasets

    def _check_model(self, model: str | None) -> None:
        if model is None:
            return
        if self.embedder is None or not self.embedder.has_model(model):
            names = getattr(self.embedder, "names", None)
            known = ", ".join(names()) if callable(names) else ""
            raise InvalidDataset(
                f"embedding_model: {model!r} is not an embedding model of the model registry"
                f" (embedding models: {known or 'none'})",
                field="embedding_model",
            )
        if not self.store.vector_support:
            raise InvalidDataset(
                "embedding_model: this database cannot store vectors (PostgreSQL needs the "
                "vector extension); create the dataset without an embedding model for full-text "
                "search",
                field="embedding_model",
            )

    async def create_dataset(self, tenant_id: str, request: DatasetCreate) -> Dataset:
        """Create a dataset. Raises InvalidDataset (an embedding model that is not one),
        DatasetExists."""
        async with tenant_models_scope(self.tenant_models, tenant_id):
            self._check_model(request.embedding_model)
        now = time.time()
        dataset = Dataset(
            id=request.id or uuid.uuid4().hex,
            tenant_id=tenant_id,
            name=request.name,
            description=request.description,
            embedding_model=request.embedding_model,
            chunking=request.chunking,
            metadata_fields=request.metadata_fields,
            created_at=now,
            updated_at=now,
        )
        dataset = await self.store.create_dataset(dataset)
        if dataset.embedding_model is not None and dataset.active_index is None:
            index = dataset.building_index or await self.store.create_index(
                tenant_id, dataset.id, dataset.embedding_model
            )
            await self.store.activate_index(tenant_id, dataset.id, index.id)  # empty: complete already
            dataset = await self.store.get_dataset(tenant_id, dataset.id)
        return dataset

    async def namesakes(self, tenant_id: str, dataset: Dataset) -> list[str]:
        """The ids of the tenant's other datasets named as ``dataset`` is (case and outer
        spaces aside): allowed, but the canvas picks datasets by name, so the caller warns."""
        name = dataset.name.strip().casefold()
        return [
            d.id
            for d in await self.store.list_datasets(tenant_id)
            if d.id != dataset.id and d.name.strip().casefold() == name
        ]

    async def list_datasets(self, tenant_id: str) -> list[Dataset]:
        """The tenant's datasets by name."""
        return await self.store.list_datasets(tenant_id)

    async def get_dataset(self, tenant_id: str, dataset_id: str) -> Dataset:
        """Raises DatasetNotFound, naming the tenant's closest dataset id when the id looks
        like a typo of one (read only then: a lookup that finds costs nothing more)."""
        try:
            return await self.store.get_dataset(tenant_id, dataset_id)
        except DatasetNotFound as exc:
            from ..plain_errors import did_you_mean

            known = [d.id for d in await self.store.list_datasets(tenant_id)]
            raise DatasetNotFound(f"{exc}{did_you_mean(dataset_id, known)}") from None

    async def update_dataset(self, tenant_id: str, dataset_id: str, update: DatasetUpdate) -> Dataset:
        """Change the fields given. A new ``embedding_model`` builds a new index from every
        chunk of the dataset, activated when complete (searches use the old one meanwhile);
        ``clear_embedding_model`` makes the dataset full-text only. Raises
        DatasetNotFound, InvalidDataset."""
        current = await self.store.get_dataset(tenant_id, dataset_id)
        changes: dict[str, Any] = update.model_dump(
            exclude_unset=True, exclude_none=True, exclude={"clear_embedding_model", "embedding_model"}
        )
        if "chunking" in changes:
            changes["chunking"] = update.chunking
        if "metadata_fields" in changes:
            changes["metadata_fields"] = update.metadata_fields
        model = None if update.clear_embedding_model else (update.embedding_model or current.embedding_model)
        rebuild = model is not None and model != current.embedding_model
        if rebuild:
            async with tenant_models_scope(self.tenant_models, tenant_id):
                self._check_model(model)
        if model != current.embedding_model:
            changes["embedding_model"] = model
        dataset = await self.store.update_dataset(tenant_id, dataset_id, changes) if changes else current
        if rebuild:
            assert model is not None
            await self.store.create_index(tenant_id, dataset_id, model)
            documents = await self.store.list_documents(tenant_id, dataset_id, limit=100_000)
            if not await self.ingestor.activate_if_built(tenant_id, dataset_id) and documents:
                await self.queue.submit(tenant_id, dataset_id, [d.id for d in documents])
            dataset = await self.store.get_dataset(tenant_id, dataset_id)
        return dataset

    async def delete_dataset(self, tenant_id: str, dataset_id: str) -> None:
        """Delete the dataset with everything in it. Raises DatasetNotFound."""
        await self.store.delete_dataset(tenant_id, dataset_id)

    # ------------------------------------------------------------------ documents

    def _too_large(self, upload: Upload) -> DocumentRejected | None:
        if len(upload.data) <= self.max_document_bytes:
            return None
        mib = 1024 * 1024
        return DocumentRejected(
            f"{upload.name}: {len(upload.data) / mib:.1f} MiB is over the limit of "
            f"{self.max_document_bytes / mib:.1f} MiB per document",
            reason="too_large",
            status=413,
        )

    async def add_documents(
        self, tenant_id: str, dataset_id: str, uploads: Sequence[Upload]
    ) -> list[DocumentOutcome]:
        """Add files to a dataset; one outcome per upload, in order (a rejected file does
        not stop the others). New or changed documents are queued for ingestion; the same
        bytes under the same name again are returned with ``created`` False, except for a
        document whose ingestion failed: its cause (a missing provider key, a provider
        down) may be fixed since, so it is ingested again (``created`` and ``retried``).
        Raises DatasetNotFound."""
        await self.store.get_dataset(tenant_id, dataset_id, counts=False)
        outcomes: list[DocumentOutcome] = []
        # every upload parsed in one trip to a thread (not one per file)
        for upload, parsed in zip(uploads, await asyncio.to_thread(self._parse_all, uploads), strict=True):
            if isinstance(parsed, DocumentRejected):
                outcomes.append(DocumentOutcome(upload.name, None, False, parsed))
                continue
            outcomes.append(
                await self._put(tenant_id, dataset_id, upload.name, upload.data, parsed, upload.metadata)
            )
        queued = [o.document.id for o in outcomes if o.created and o.document is not None]
        if queued:
            await self.queue.submit(tenant_id, dataset_id, queued)
        return outcomes

    def _parse_all(self, uploads: Sequence[Upload]) -> list[ParsedDocument | DocumentRejected]:
        """Each upload parsed, or why it is rejected (too large, unreadable)."""
        out: list[ParsedDocument | DocumentRejected] = []
        for upload in uploads:
            rejected = self._too_large(upload)
            if rejected is None:
                try:
                    out.append(self.parser.parse(upload.data, upload.name))
                    continue
                except DocumentRejected as exc:
                    rejected = exc
            out.append(rejected)
        return out

    async def _put(
        self,
        tenant_id: str,
        dataset_id: str,
        name: str,
        data: bytes,
        parsed: ParsedDocument,
        metadata: dict[str, Any] | None,
    ) -> DocumentOutcome:
        now = time.time()
        draft = Document(
            id=uuid.uuid4().hex,
            tenant_id=tenant_id,
            dataset_id=dataset_id,
            source_name=name,
            content_type=parsed.content_type,
            content_hash=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            metadata=dict(metadata or {}),
            created_at=now,
            updated_at=now,
        )
        document, created = await self.store.put_document(draft, parsed)  # the text kept with it when created
        retried = not created and document.status == DocumentStatus.failed
        if retried:
            document = await self.store.update_document(
                tenant_id, document.id, status=DocumentStatus.queued, error=None
            )
            await self.store.save_content(tenant_id, document.id, parsed)
        changed = created and document.id != draft.id  # the store kept the id of the one replaced
        return DocumentOutcome(name, document, created or retried, retried=retried, changed=changed)

    async def add_text(
        self, tenant_id: str, dataset_id: str, name: str, text: str, metadata: dict[str, Any] | None = None
    ) -> DocumentOutcome:
        """Add raw text as a document called ``name`` (type ``text``); an outcome as
        :meth:`add_documents` gives (``error``: empty or too large). Raises DatasetNotFound."""
        await self.store.get_dataset(tenant_id, dataset_id)
        data = text.encode("utf-8", "surrogatepass")
        rejected = self._too_large(Upload(name, data))
        if rejected is None and not text.strip():
            rejected = DocumentRejected(f"{name}: the text is empty", reason="empty")
        if rejected is not None:
            return DocumentOutcome(name, None, False, rejected)
        parsed = ParsedDocument("text", text.replace("\r\n", "\n").strip("\n"))
        outcome = await self._put(tenant_id, dataset_id, name, data, parsed, metadata)
        if outcome.created and outcome.document is not None:
            await self.queue.submit(tenant_id, dataset_id, [outcome.document.id])
        return outcome

    async def list_documents(self, tenant_id: str, dataset_id: str) -> list[Document]:
        """The dataset's documents, oldest first. Raises DatasetNotFound."""
        return await self.store.list_documents(tenant_id, dataset_id)

    async def get_document(self, tenant_id: str, dataset_id: str, document_id: str) -> Document:
        """Raises DocumentNotFound (also for a document of another dataset)."""
        document = await self.store.get_document(tenant_id, document_id)
        if document.dataset_id != dataset_id:
            raise DocumentNotFound(f"document {document_id!r} not found in dataset {dataset_id!r}")
        return document

    async def document_chunks(
        self, tenant_id: str, dataset_id: str, document_id: str, *, offset: int = 0, limit: int = 50
    ) -> tuple[list[Chunk], int]:
        """A page of the document's chunks in position order and their total (chunk
        preview). Raises DocumentNotFound (also for a document of another dataset)."""
        await self.get_document(tenant_id, dataset_id, document_id)
        return await self.store.document_chunks(tenant_id, document_id, offset=offset, limit=limit)

    async def delete_document(self, tenant_id: str, dataset_id: str, document_id: str) -> None:
        """Delete the document with its chunks and vectors. Raises DocumentNotFound."""
        await self.get_document(tenant_id, dataset_id, document_id)
        await self.store.delete_document(tenant_id, document_id)

    async def reindex_document(self, tenant_id: str, dataset_id: str, document_id: str) -> Document:
        """Ingest the document again (by the dataset's current chunking settings; a failed
        one retried). Chunks that did not change keep their vectors. Raises DocumentNotFound."""
        await self.get_document(tenant_id, dataset_id, document_id)
        document = await self.store.update_document(
            tenant_id, document_id, status=DocumentStatus.queued, error=None
        )
        await self.queue.submit(tenant_id, dataset_id, [document_id])
        return document

    async def ingest(self, tenant_id: str, document_id: str) -> Document:
        """Ingest one document now (what a queue job runs; resumable, see
        :class:`~engine.knowledge.ingest.Ingestor`). Raises DocumentNotFound."""
        async with tenant_models_scope(self.tenant_models, tenant_id):
            return await self.ingestor.ingest(tenant_id, document_id)

    async def resubmit_unfinished(self, *, limit: int = 100) -> list[Document]:
        """Give documents whose ingestion stopped (their worker died: lease expired) to the
        queue again; the documents submitted. What a sweeper calls."""
        found = await self.store.unfinished_documents(limit=limit)
        by_dataset: dict[tuple[str, str], list[str]] = {}
        for document in found:
            by_dataset.setdefault((document.tenant_id, document.dataset_id), []).append(document.id)
        for (tenant_id, dataset_id), ids in by_dataset.items():
            await self.queue.submit(tenant_id, dataset_id, ids)
        return found

    async def follow(
        self, tenant_id: str, dataset_id: str, document_ids: Sequence[str] | None = None, poll_s: float = 0.2
    ) -> AsyncIterator[Document]:
        """Yield each document (of ``document_ids``, default all of the dataset) whenever
        its status or progress changes, until every one is ``ready`` or ``failed``.
        Raises DatasetNotFound."""
        seen: dict[str, tuple[Any, ...]] = {}
        wanted = set(document_ids) if document_ids is not None else None
        while True:
            documents = await self.store.list_documents(tenant_id, dataset_id, limit=100_000)
            if wanted is not None:
                documents = [d for d in documents if d.id in wanted]
            for document in documents:
                state = (document.status, document.chunks_done, document.chunk_count, document.error)
                if seen.get(document.id) != state:
                    seen[document.id] = state
                    yield document
            if all(d.status in _ENDED for d in documents):
                return
            await asyncio.sleep(poll_s)

    # ------------------------------------------------------------------ search

    async def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        """Search the tenant's datasets (:class:`engine.knowledge.retrieval.Retriever`).
        Raises DatasetNotFound, EmbeddingError.

        The datasets are read first, since what a search does follows from them (which
        index, which embedding model, parent-child or not). On a store that answers
        reads side by side (``reads_side_by_side``: PostgreSQL's pooled connections),
        when this process read the same datasets before, the search runs *ahead* with
        those while they are read again (:meth:`_search_ahead`): the read is a query to
        the server that otherwise stands before every search's own. (The SQLite store
        reads on one thread, the search's own reads behind the dataset's: nothing to
        gain there.) Otherwise a hybrid or full-text search's full-text pass, which does
        not depend on the datasets, still starts before they are read
        (:meth:`_search_after_read`)."""
        from .retrieval import Retriever  # the retrieval module is its own concern

        if self._retriever is None:
            self._retriever = Retriever(
                store=self.store, embedder=self.embedder, reranker=self.reranker, judge=self.judge
            )
        seen = self._datasets_seen
        guess = [seen.get((tenant_id, d)) for d in request.dataset_ids]
        ahead = getattr(self.store, "reads_side_by_side", False) and request.rerank is None
        if not ahead or any(ds is None for ds in guess):
            return await self._search_after_read(tenant_id, request)
        async with tenant_models_scope(self.tenant_models, tenant_id):
            return await self._search_ahead(tenant_id, request, [ds for ds in guess if ds is not None])

    async def _search_after_read(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        """The search of the datasets as read now. Its full-text pass, when it does not
        depend on them (hybrid and full-text mode: :meth:`Retriever.full_text_ahead`),
        starts first and runs while they are read: on SQLite, the read and the vector
        pass queue on the store's thread while full text reads on a thread of its own,
        and the full-text pass is the longer one. Not used: cancelled."""
        assert self._retriever is not None
        early = self._retriever.full_text_ahead(tenant_id, request)
        try:
            datasets = await self._read_datasets(tenant_id, request.dataset_ids)
            async with tenant_models_scope(self.tenant_models, tenant_id):
                return await self._retriever.search(tenant_id, request, datasets, ahead=early)
        finally:
            if early is not None and not early.used:
                early.task.cancel()
                await asyncio.gather(early.task, return_exceptions=True)

    async def _read_datasets(self, tenant_id: str, dataset_ids: Sequence[str]) -> list[Dataset]:
        """The datasets (without counts), remembered for the next search of them (at most
        :data:`_DATASETS_SEEN` in all: past that the memory starts again)."""
        datasets = [await self.store.get_dataset(tenant_id, d, counts=False) for d in dataset_ids]
        if len(self._datasets_seen) > _DATASETS_SEEN:
            self._datasets_seen.clear()
        for ds in datasets:
            self._datasets_seen[tenant_id, ds.id] = ds
        return datasets

    async def _search_ahead(
        self, tenant_id: str, request: SearchRequest, guess: list[Dataset]
    ) -> SearchResult:
        """The search of ``guess`` (the datasets as this process last read them), run
        while they are read again; its result when they are unchanged (equal in every
        field), else the search of the datasets as read. The answer is the one a search
        after the read gives, since a search depends on the store's rows and on the
        datasets only. Not for rerank requests (``search`` keeps those in order): a
        search ahead of a changed dataset is thrown away, and a rerank or relevance
        model would be paid for nothing; a query embedding may be (only when a dataset
        changed since this process last searched it)."""
        assert self._retriever is not None
        # the search's task starts at the next step of the loop, after this task sent its read
        ahead = asyncio.ensure_future(self._retriever.search(tenant_id, request, guess))
        try:
            datasets = await self._read_datasets(tenant_id, request.dataset_ids)
        except BaseException:
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)
            raise
        if datasets == guess:
            return await ahead
        ahead.cancel()
        await asyncio.gather(ahead, return_exceptions=True)
        return await self._retriever.search(tenant_id, request, datasets)
