"""Ingestion of one document: split its parsed text, keep what did not change, embed the rest.

:class:`Ingestor` runs on the ports only (store, chunker, embedder), anywhere a queue
puts it - a task of the API process or an RQ job on another machine - and can be run
again at any point after a crash:

1. **Lease**: the document is claimed (:meth:`KnowledgeStore.claim_document`) for
   ``lease_s`` seconds and the claim renewed every third of that while working. A
   document someone else holds is waited for (claimed again every third of a lease, at
   most every second):
   that ingestion may have loaded the content before a new version was uploaded, so
   this one must run after it, never instead of it. A worker that dies stops renewing;
   its lease runs out and the waiting (or the sweeper's) ingestion takes over.
2. **Split** (status ``parsing``): the text saved at upload is split by the dataset's
   chunking settings and :meth:`~KnowledgeStore.replace_chunks_for_pass` makes the drafts
   the document's chunks - a chunk whose text did not change keeps its id and its vectors -
   and lists, per index, the chunks without a vector there (one store call, which also
   sets the document ``embedding`` with its progress).
3. **Embed** (status ``embedding``): for each index of the dataset (the active one, and
   the one being built after a change of embedding model, each with its own model),
   the chunks without a vector there are embedded in batches of :attr:`batch_size`, and
   each batch is stored (:meth:`~KnowledgeStore.put_vectors`) before the next is asked
   for. So a crash loses at most the batch in flight, and a chunk whose vector is stored
   is never embedded again. ``chunks_done`` of ``chunk_count`` counts the vectors of the
   index being filled (the building one when there is one).
4. ``ready`` - or ``failed`` with the reason (an embedding error, a dimension mismatch).
   A full-text dataset (no embedding model) is ready after step 2. When the document's
   content hash changed meanwhile (a new version uploaded), steps 2-3 run again first.

When every chunk of a dataset has a vector in its building index, that index is
activated (searches switch to the new model at once; until then they use the old one).
Usage (tokens and cost of each batch) goes to ``on_usage(tenant_id, tokens, cost)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from schemas.knowledge import ChunkKind, Dataset, Document, DocumentStatus, IndexInfo

from .ports import (
    Chunker,
    ChunkToEmbed,
    DatasetNotFound,
    DimensionMismatch,
    DocumentNotFound,
    DocumentRejected,
    Embedder,
    EmbeddingError,
    KnowledgeStore,
)

__all__ = ["DEFAULT_BATCH_SIZE", "DEFAULT_LEASE_S", "Ingestor", "UsageSink"]

logger = logging.getLogger("flowloom.knowledge")

#: chunks embedded (and stored) per round: what a crash can lose at most
DEFAULT_BATCH_SIZE = 32
#: seconds a worker holds a document without renewing (renewed every third)
DEFAULT_LEASE_S = 30.0

UsageSink = Callable[[str, int, float], Any]
_ENDED = (DocumentStatus.ready, DocumentStatus.failed)
#: passes of one ingestion at most when new versions keep arriving (the next job takes over)
_MAX_PASSES = 3


class Ingestor:
    """Ingests documents (module docstring). ``owner_id``: who holds the leases (default:
    ``host.pid.random``, unique per process)."""

    def __init__(
        self,
        *,
        store: KnowledgeStore,
        chunker: Chunker,
        embedder: Embedder | None = None,
        on_usage: UsageSink | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
        owner_id: str | None = None,
    ) -> None:
        self.store, self.chunker, self.embedder, self.on_usage = store, chunker, embedder, on_usage
        self.lease_s, self.batch_size = lease_s, batch_size
        self.owner_id = owner_id or f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        self._activating = asyncio.Lock()

    async def ingest(self, tenant_id: str, document_id: str) -> Document:
        """Ingest the document (or continue a crashed ingestion) once no other worker holds
        it; the document as it ends (``ready`` or ``failed``), or as it is when this
        worker lost its lease midway (it stalled past the lease: the worker that took the
        document over finishes it). Raises DocumentNotFound (the document was deleted)."""
        while not await self.store.claim_document(
            tenant_id, document_id, self.owner_id, time.time() + self.lease_s
        ):
            await self.store.get_document(tenant_id, document_id)  # DocumentNotFound ends the wait
            await asyncio.sleep(min(self.lease_s / 3, 1.0))
        work = asyncio.ensure_future(self._ingest(tenant_id, document_id))
        renewal = asyncio.ensure_future(self._renew(tenant_id, document_id, work))
        released = False
        try:
            document, released = await work
            return document
        except asyncio.CancelledError:
            if not renewal.done() or renewal.cancelled() or renewal.result() is not True:
                raise  # cancelled from outside
            logger.warning(
                "document %s (tenant %s): lease lost to another worker; leaving it to that one",
                document_id,
                tenant_id,
            )
            return await self.store.get_document(tenant_id, document_id)
        finally:
            if not work.done():
                work.cancel()
            renewal.cancel()
            with contextlib.suppress(BaseException):
                await renewal
            if not released:  # a ready document's last write released it
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.store.release_document(tenant_id, document_id, self.owner_id))

    async def _renew(self, tenant_id: str, document_id: str, work: asyncio.Future[Any]) -> bool:
        """Renew the lease every third of it; when another worker holds the document now,
        cancel ``work`` and return True."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                held = await self.store.claim_document(
                    tenant_id, document_id, self.owner_id, time.time() + self.lease_s
                )
            except Exception:
                continue
            if not held:
                work.cancel()
                return True

    async def _ingest(self, tenant_id: str, document_id: str) -> tuple[Document, bool]:
        """``(the document as it ends, whether its lease was released with its last write)``."""
        finished: Document | None = None
        for _ in range(_MAX_PASSES):
            document, dataset, started_hash, searchable = await self._pass(tenant_id, document_id)
            if document.status == DocumentStatus.failed:
                return document, False
            # one write ends the document when its content did not change meanwhile: its
            # counts, ``ready`` and the lease given up
            finished = await self.store.finish_document(
                tenant_id,
                document_id,
                content_hash=started_hash,
                chunk_count=searchable,
                owner_id=self.owner_id,
            )
            if finished is not None:
                break
            logger.info(
                "document %s (tenant %s): a new version arrived during its ingestion; again",
                document_id,
                tenant_id,
            )
        assert dataset is not None  # set by every pass that did not fail
        released = finished is not None
        if finished is None:  # new versions kept arriving: ready as it is, the next job takes over
            finished = await self.store.update_document(
                tenant_id,
                document_id,
                status=DocumentStatus.ready,
                error=None,
                chunk_count=searchable,
                chunks_done=searchable,
            )
        if dataset.building_index is not None:
            await self._activate_if_built(tenant_id, dataset.id)
        return finished, released

    async def _pass(self, tenant_id: str, document_id: str) -> tuple[Document, Dataset | None, str, int]:
        """Split and embed once: ``(the document, its dataset, the content hash it started
        from, its searchable chunks)``; a failed document is returned failed, else as it
        was read at the start."""
        store = self.store
        started_hash = ""
        dataset: Dataset | None = None
        try:
            document, dataset, parsed = await store.start_pass(tenant_id, document_id)
            started_hash = document.content_hash
            drafts = await asyncio.to_thread(self.chunker.split, parsed, dataset.chunking)
            if not drafts:
                raise DocumentRejected(f"{document.source_name}: no text to index", reason="empty")
            searchable = sum(1 for d in drafts if d.kind != ChunkKind.parent)
            indexes = self._indexes(dataset)
            # the chunks written, each index's chunks without a vector listed and the
            # progress set, in one store call
            pending = await store.replace_chunks_for_pass(
                tenant_id, document_id, drafts, [index.id for index in indexes]
            )
            for i, index in enumerate(indexes):
                tracked = i == len(indexes) - 1  # progress follows the index being filled
                await self._embed_index(tenant_id, document_id, index, pending[index.id], searchable, tracked)
        except (DocumentNotFound, DatasetNotFound):
            raise DocumentNotFound(f"document {document_id!r} was deleted during its ingestion") from None
        except (EmbeddingError, DocumentRejected) as exc:
            logger.warning("document %s (tenant %s): ingestion failed: %s", document_id, tenant_id, exc)
            failed = await store.update_document(
                tenant_id, document_id, status=DocumentStatus.failed, error=str(exc)
            )
            return failed, dataset, started_hash, 0
        return document, dataset, started_hash, searchable

    @staticmethod
    def _indexes(dataset: Dataset) -> list[IndexInfo]:
        """The indexes to fill: the active one, then the building one (none: full text only)."""
        if dataset.embedding_model is None and dataset.building_index is None:
            return []
        return [i for i in (dataset.active_index, dataset.building_index) if i is not None]

    async def _embed_index(
        self,
        tenant_id: str,
        document_id: str,
        index: IndexInfo,
        missing: list[ChunkToEmbed],
        total: int,
        tracked: bool,
    ) -> None:
        """Embed ``missing`` (the document's chunks without a vector in ``index``, listed
        as the pass wrote them) batch by batch. When the store says it kept fewer vectors
        than asked they are listed again after their batches: any still there means the
        store kept none of them, which stops instead of paying again."""
        if self.embedder is None:
            raise EmbeddingError(f"no embedder is configured for embedding model {index.embedding_model!r}")
        store = self.store
        done = total - len(missing)
        dimension = index.dimension
        size = self.batch_size
        while missing:
            stored_all = True
            for start in range(0, len(missing), size):
                batch = missing[start : start + size]
                dimension, stored = await self._embed_batch(tenant_id, index, batch, dimension)
                stored_all = stored_all and stored == len(batch)
                done += len(batch)
                if tracked and start + size < len(missing):  # the last one's count is the ending write's
                    await store.update_document(tenant_id, document_id, chunks_done=min(done, total))
            if stored_all:  # the store kept every vector asked: nothing is left to list
                return
            listed = await store.chunks_without_vector(tenant_id, index.id, document_id, limit=total + 1)
            left = [ChunkToEmbed(c.id, c.search_text) for c in listed]
            if {c.id for c in left} & {c.id for c in missing}:
                raise EmbeddingError(
                    f"the vectors of embedding model {index.embedding_model!r} were not stored"
                )
            missing = left

    async def _embed_batch(
        self, tenant_id: str, index: IndexInfo, batch: Sequence[ChunkToEmbed], dimension: int | None
    ) -> tuple[int, int | None]:
        """Embed and store one batch; ``(the index's dimension, vectors the store kept)``
        (None: the store does not say). Raises DimensionMismatch."""
        assert self.embedder is not None
        result = await self.embedder.embed(index.embedding_model, [c.search_text for c in batch])
        if len(result.vectors) != len(batch):
            raise EmbeddingError(
                f"embedding model {index.embedding_model!r} answered {len(result.vectors)} "
                f"vectors for {len(batch)} texts"
            )
        got = {len(v) for v in result.vectors}
        if dimension is None:
            if len(got) != 1:
                raise DimensionMismatch(
                    f"embedding model {index.embedding_model!r} answered vectors of "
                    f"{sorted(got)} dimensions in one batch"
                )
            dimension = got.pop()
            await self.store.set_index_dimension(tenant_id, index.id, dimension)
        elif got != {dimension}:
            raise DimensionMismatch(
                f"embedding model {index.embedding_model!r} answered vectors of {sorted(got)} "
                f"dimensions; the index holds {dimension}: change the dataset's embedding "
                f"model to rebuild it"
            )
        stored = await self.store.put_vectors(
            tenant_id, index.id, [(c.id, v) for c, v in zip(batch, result.vectors, strict=True)]
        )
        if self.on_usage is not None:
            with contextlib.suppress(Exception):  # accounting must not fail an ingestion
                outcome = self.on_usage(tenant_id, result.tokens, result.cost)
                if asyncio.iscoroutine(outcome):
                    await outcome
        return dimension, stored if isinstance(stored, int) else None

    async def _activate_if_built(self, tenant_id: str, dataset_id: str) -> bool:
        """Activate the dataset's building index once every document is ingested and every
        searchable chunk has a vector there; True when it was activated here."""
        async with self._activating:
            dataset = await self.store.get_dataset(tenant_id, dataset_id)
            building = dataset.building_index
            if building is None:
                return False
            if await self.store.chunks_without_vector(tenant_id, building.id, None, limit=1):
                return False  # the cheap check first: it is what fails while a rebuild runs
            documents = await self.store.list_documents(tenant_id, dataset_id, limit=100_000)
            if any(d.status not in _ENDED for d in documents):
                return False
            await self.store.activate_index(tenant_id, dataset_id, building.id)
            logger.info(
                "dataset %s (tenant %s): index %s of %s is active",
                dataset_id,
                tenant_id,
                building.id,
                building.embedding_model,
            )
            return True

    async def activate_if_built(self, tenant_id: str, dataset_id: str) -> bool:
        """See :meth:`_activate_if_built` (the service calls it after a change of model
        on a dataset with nothing to embed)."""
        return await self._activate_if_built(tenant_id, dataset_id)
