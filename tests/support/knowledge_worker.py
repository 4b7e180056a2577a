"""``python -m tests.support.knowledge_worker --name NAME``: a real RQ worker process
(:class:`~workers.rq.worker.FlowloomWorker` with a :class:`~workers.rq.runtime.WorkerRuntime`)
whose run service carries a knowledge service ingesting through RQ, composed from the
environment as a deployment composes it (``FLOWLOOM_DATABASE_URL``, ``FLOWLOOM_REDIS_URL``,
``FLOWLOOM_MODELS``, ``FLOWLOOM_LEASE_TTL``): the knowledge store on the database, the
registry's embedder, :class:`~workers.rq.knowledge.RQIngestionQueue`, batches of 4 chunks.

Tests of queued ingestion start it to kill it mid-ingestion; it serves the same queues
and jobs as ``flowloom worker``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from typing import AsyncIterator

from engine.knowledge.service import KnowledgeService
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes import builtin_catalog
from nodes.knowledge.chunking import TextChunker
from nodes.knowledge.embeddings import RegistryEmbedder
from nodes.knowledge.parsing import DocumentParser
from nodes.model_registry import registry_for
from workers.knowledge import open_knowledge_store
from workers.redis_bus import RedisCommandChannel
from workers.rq.knowledge import RQIngestionQueue
from workers.sql import SqlStore
from workers.sql.chats import SqlChatStore

#: chunks per embeddings request of the test workers (several batches per document)
BATCH_SIZE = 4


@contextlib.asynccontextmanager
async def open_service(settings: Settings) -> AsyncIterator[RunService]:
    assert settings.database_url and settings.redis_url
    registry = registry_for(settings)
    store = await SqlStore.open(settings.database_url)
    knowledge_store = await open_knowledge_store(settings.database_url, settings.home)
    commands = RedisCommandChannel(settings.redis_url)
    queue = RQIngestionQueue(settings.redis_url)
    knowledge = KnowledgeService(store=knowledge_store, parser=DocumentParser(), chunker=TextChunker(),
                                 embedder=RegistryEmbedder(registry, backoff_s=0.05), queue=queue,
                                 lease_s=settings.lease_ttl, batch_size=BATCH_SIZE)
    try:
        yield RunService(catalog=builtin_catalog(), settings=settings, models=registry, knowledge=knowledge,
                         stores=Stores(runs=store, events=store, commands=commands, chats=SqlChatStore(store)))
    finally:
        await knowledge.aclose()
        queue.close()
        await commands.close()
        await knowledge_store.close()
        await store.close()


def main() -> None:
    from redis import Redis

    from workers.rq.queues import queue_names
    from workers.rq.runtime import WorkerRuntime, install_runtime
    from workers.rq.worker import LOG_DATE_FORMAT, LOG_FORMAT, FlowloomWorker

    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    name = parser.parse_args().name
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    settings = Settings()
    connection = Redis.from_url(settings.redis_url, socket_connect_timeout=2)
    worker = FlowloomWorker(queue_names(), connection=connection, name=name)
    runtime = WorkerRuntime(settings, open_service, sweep_s=0.2, name=name)
    runtime.start()
    install_runtime(runtime)
    try:
        worker.work(logging_level="INFO", date_format=LOG_DATE_FORMAT, log_format=LOG_FORMAT)
    finally:
        install_runtime(None)
        runtime.stop()


if __name__ == "__main__":
    main()
