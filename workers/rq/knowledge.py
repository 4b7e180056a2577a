"""Queued ingestion of knowledge-base documents on RQ.

:class:`RQIngestionQueue` is the engine's :class:`~engine.knowledge.ports.IngestionQueue`
for deployments with Redis: each document becomes one job of
:func:`workers.rq.jobs.ingest_document` carrying ``(tenant_id, dataset_id,
document_id)`` only - the document's bytes and parsed text stay in the database, where
every read is scoped by tenant. A ``flowloom worker`` runs the job with the knowledge
service of its runtime (:meth:`KnowledgeService.ingest
<engine.knowledge.service.KnowledgeService.ingest>`), which claims the document's lease
first: two jobs of one document never ingest it side by side, and a job for a document
that is already ready only checks that nothing is left to embed.

Crashes: a worker SIGKILLed mid-ingestion stops renewing its lease. :func:`sweep_unfinished`
(run by every worker at start and every few seconds, one worker at a time by a Redis
lock) enqueues again each unfinished document whose lease ran out and that did not
change for a lease's time, at most once per two leases; the worker taking the job
continues from the vectors already stored (no chunk is embedded twice).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from .queues import FAILURE_TTL_S, RESULT_TTL_S, queue_name

__all__ = ["INGEST_FUNCTION", "INGEST_TIMEOUT_S", "RQIngestionQueue", "enqueue_ingestion", "sweep_unfinished"]

logger = logging.getLogger("flowloom.worker")

INGEST_FUNCTION = "workers.rq.jobs.ingest_document"
#: seconds RQ lets one ingestion job run (a large PDF at a slow embedding endpoint)
INGEST_TIMEOUT_S = 3600
#: documents one sweep hands back at most
SWEEP_LIMIT = 100


def enqueue_ingestion(
    connection: Any, tenant_id: str, dataset_id: str, document_id: str, *, queue: str = "flowloom-default"
) -> str:
    """Enqueue the ingestion job of one document on ``queue``; returns the job's id.

    ``connection``: a sync ``redis.Redis``."""
    from rq import Queue

    job = Queue(queue, connection=connection).enqueue(
        INGEST_FUNCTION,
        tenant_id,
        dataset_id,
        document_id,
        job_id=f"ingest-{document_id}-{uuid.uuid4().hex[:8]}",
        job_timeout=INGEST_TIMEOUT_S,
        result_ttl=RESULT_TTL_S,
        failure_ttl=FAILURE_TTL_S,
        description=f"flowloom ingestion of document {document_id} ({tenant_id})",
    )
    return job.id


class RQIngestionQueue:
    """Ingestion as RQ jobs (module docstring). ``priority``: the queue the jobs go to
    (``high``, ``default``, ``low``)."""

    def __init__(self, redis_url: str, *, priority: str = "default") -> None:
        self.redis_url, self.queue = redis_url, queue_name(priority)
        self._connection: Any = None

    def _redis(self) -> Any:
        if self._connection is None:
            from redis import Redis

            self._connection = Redis.from_url(self.redis_url, socket_connect_timeout=2)
        return self._connection

    async def submit(self, tenant_id: str, dataset_id: str, document_ids: Sequence[str]) -> None:
        """Enqueue one job per document. Raises redis errors when Redis is unreachable
        (the documents stay ``queued``; the sweepers give them to the queue later)."""

        def enqueue() -> None:
            for document_id in document_ids:
                enqueue_ingestion(self._redis(), tenant_id, dataset_id, document_id, queue=self.queue)

        await asyncio.to_thread(enqueue)

    def close(self) -> None:
        """Close the Redis connection."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


async def sweep_unfinished(
    knowledge: Any, redis: Any, *, lease_s: float, namespace: str = "flowloom", limit: int = SWEEP_LIMIT
) -> list[str]:
    """One look for documents whose ingestion stopped (module docstring): the ids given
    to ``knowledge.queue`` again. ``knowledge``: a KnowledgeService; ``redis``: an
    asyncio Redis client; ``lease_s``: the documents' lease (what "stopped" waits for)."""
    if not await redis.set(f"{namespace}:knowledge-sweep", "1", nx=True, px=max(1, int(lease_s * 500))):
        return []  # another worker swept moments ago
    now = time.time()
    found = await knowledge.store.unfinished_documents(limit=limit)
    given: list[str] = []
    for document in found:
        if document.updated_at > now - lease_s:
            continue  # just queued, or its worker is only slow to renew: not stopped yet
        if not await redis.set(
            f"{namespace}:knowledge-resubmitted:{document.id}", "1", nx=True, ex=max(1, int(lease_s * 2))
        ):
            continue
        await knowledge.queue.submit(document.tenant_id, document.dataset_id, [document.id])
        given.append(document.id)
        logger.warning(
            "document %s (tenant %s): its ingestion stopped (%s); enqueued again to continue",
            document.id,
            document.tenant_id,
            document.status.value,
        )
    return given
