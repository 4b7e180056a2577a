"""Wiring: the run service and its storage, built from :class:`~engine.settings.Settings`.

The one place that picks implementations for the engine's ports: the SQL run store
(``Settings.database_url``, else SQLite at ``<home>/flowloom.db``), node memory (Redis
with ``Settings.redis_url``, else files under ``<home>/memory``), the model registry
(``Settings.models``, else the bundled one, with the settings' environment and
base-URL override), the built-in node catalog and the
workflow directories for workflow tools. With ``Settings.redis_url`` the command
channel is Redis (:class:`~workers.redis_bus.RedisCommandChannel`: a stop reaches a
queued run's worker on any machine); without it, the SQL store. The CLI, the HTTP API
and the queue workers (``flowloom worker``) all use this function.

Knowledge bases (:func:`open_knowledge`): the knowledge store on the same PostgreSQL
database, or on SQLite in a file beside the run store's (:func:`knowledge_database_url`)
(:func:`workers.knowledge.open_knowledge_store`: SQLite with sqlite-vec and FTS5, or
PostgreSQL with pgvector), the parser, chunker, embedder, reranker and LLM relevance
judge of ``nodes.knowledge`` on the model registry, and the ingestion queue: tasks of this
process by default, RQ jobs for ``flowloom worker`` with ``Settings.redis_url``. The
embedding tokens of ingestion count in the tenant's daily token quota (the
``token_usage`` rows of :mod:`workers.sql.quotas`). The service is the run service's
``knowledge`` (what ``knowledge_retrieval`` nodes search) and the API's and CLI's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable

from sqlalchemy.engine import make_url

from engine.service import RunService, Stores
from engine.settings import Settings
from engine.workflow_store import WorkflowStore
from nodes import builtin_catalog
from nodes.model_registry import ModelRegistry, registry_for
from workers.memory import memory_store_for
from workers.redis_bus import RedisCommandChannel
from workers.sql import SqlStore, default_database_url
from workers.sql.chats import SqlChatStore
from workers.sql.quotas import SqlQuotaStore

if TYPE_CHECKING:
    from engine.knowledge.service import KnowledgeService
    from schemas.knowledge import SearchRequest, SearchResult

from .redaction import install as install_log_redaction

__all__ = ["KnowledgeOnDemand", "database_url", "knowledge_database_url", "open_knowledge", "open_service"]


def database_url(settings: Settings) -> str:
    """``settings.database_url``, else the embedded SQLite file under ``settings.home``."""
    return settings.database_url or default_database_url(settings.home)


def knowledge_database_url(settings: Settings) -> str:
    """Where the knowledge store lives: the run store's PostgreSQL database; for SQLite, a
    file of its own beside the run store's (``flowloom.db`` -> ``flowloom-knowledge.db``).

    Why not the same SQLite file: the knowledge store runs SQLite through ``sqlean`` (to
    load sqlite-vec), the run store through the interpreter's ``sqlite3`` - two copies of
    the SQLite library in one process. Their POSIX file locks are per process, so when one
    library closes the file it drops the other's locks, and concurrent writes of both
    (token usage, run events, during an ingestion) then lose committed rows (sqlite.org,
    "How To Corrupt An SQLite Database File", multiple copies of SQLite). Separate files
    share no lock.
    """
    url = database_url(settings)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return url
    path = Path(parsed.database)
    return parsed.set(database=str(path.with_name(f"{path.stem}-knowledge{path.suffix or '.db'}"))).render_as_string(
        hide_password=False)


def _usage_recorder(store: SqlStore) -> Callable[[str, int, float], Awaitable[None]]:
    """``on_usage(tenant_id, tokens, cost)`` of the knowledge service: the tokens count in
    the tenant's tokens per day (:mod:`api.quotas`)."""
    quotas = SqlQuotaStore(store)

    async def record(tenant_id: str, tokens: int, cost: float) -> None:
        await quotas.record_usage(tenant_id, None, "embedding", tokens, cost, now=time.time())

    return record


@contextlib.asynccontextmanager
async def open_knowledge(settings: Settings, registry: ModelRegistry, store: SqlStore
                         ) -> AsyncIterator[KnowledgeService]:
    """The knowledge service on the database of ``store`` (module docstring); stops its
    in-process ingestion tasks and closes its store on exit (an unfinished document is
    continued by the next process that sweeps: ``flowloom serve``, ``datasets add``).

    Raises:
        StoreError: the knowledge store cannot be opened (names the URL, password masked).
    """
    from engine.knowledge.service import KnowledgeService
    from nodes.knowledge.chunking import TextChunker
    from nodes.knowledge.embeddings import RegistryEmbedder, RegistryReranker
    from nodes.knowledge.parsing import DocumentParser
    from nodes.knowledge.relevance import LLMRelevanceJudge
    from workers.knowledge import open_knowledge_store

    knowledge_store = await open_knowledge_store(knowledge_database_url(settings), settings.home)
    queue = None
    if settings.redis_url:
        from workers.rq.knowledge import RQIngestionQueue

        queue = RQIngestionQueue(settings.redis_url)
    try:
        service = KnowledgeService(store=knowledge_store, parser=DocumentParser(), chunker=TextChunker(),
                                   embedder=RegistryEmbedder(registry), reranker=RegistryReranker(registry),
                                   judge=LLMRelevanceJudge(registry), queue=queue, max_document_bytes=settings.knowledge_max_document_bytes,
                                   on_usage=_usage_recorder(store), lease_s=settings.lease_ttl)
        try:
            yield service
        finally:
            await service.aclose()
    finally:
        if queue is not None:
            queue.close()
        await knowledge_store.close()


class KnowledgeOnDemand:
    """The knowledge search of a process that may never search - ``flowloom run`` of a
    workflow without a retrieval node or dataset tool: the knowledge service (its store,
    numpy, the HNSW library, the migration check) opens on the first :meth:`search`, so a
    command that needs none pays nothing for it. What nodes see of it is
    :class:`~engine.knowledge.ports.KnowledgeSearch` (``search`` only)."""

    def __init__(self, opener: Callable[[], contextlib.AbstractAsyncContextManager[KnowledgeService]]) -> None:
        self._opener = opener
        self._stack = contextlib.AsyncExitStack()
        self._service: KnowledgeService | None = None
        self._lock = asyncio.Lock()

    async def service(self) -> KnowledgeService:
        """The knowledge service, opened on the first call. Raises StoreError as :func:`open_knowledge`."""
        async with self._lock:
            if self._service is None:
                self._service = await self._stack.enter_async_context(self._opener())
            return self._service

    async def search(self, tenant_id: str, request: SearchRequest) -> SearchResult:
        """Search the tenant's datasets (:meth:`KnowledgeService.search`)."""
        return await (await self.service()).search(tenant_id, request)

    async def aclose(self) -> None:
        """Close the service when it was opened."""
        await self._stack.aclose()


@contextlib.asynccontextmanager
async def open_service(settings: Settings, *, knowledge_on_demand: bool = False) -> AsyncIterator[RunService]:
    """A :class:`RunService` over the stores ``settings`` name; closes them on exit.

    The database is created and migrated on first use (no setup step).
    ``knowledge_on_demand``: the run service's ``knowledge`` is a :class:`KnowledgeOnDemand`
    (search only, opened by the first search) instead of the knowledge service itself,
    for commands that only run workflows.

    Raises:
        StoreError: the database cannot be reached or migrated (names the URL, password masked).
        ModelConfigError: the model registry file is invalid.
    """
    install_log_redaction()  # the HTTP clients' request logs name URLs, which may hold keys
    registry = registry_for(settings)
    store = await SqlStore.open(database_url(settings))
    memory = memory_store_for(settings)
    commands = RedisCommandChannel(settings.redis_url) if settings.redis_url else store
    try:
        stores = Stores(runs=store, events=store, commands=commands, chats=SqlChatStore(store))
        async with contextlib.AsyncExitStack() as stack:
            if knowledge_on_demand:
                knowledge: object = KnowledgeOnDemand(lambda: open_knowledge(settings, registry, store))
                stack.push_async_callback(knowledge.aclose)  # type: ignore[attr-defined]
            else:
                knowledge = await stack.enter_async_context(open_knowledge(settings, registry, store))
            yield RunService(catalog=builtin_catalog(), stores=stores,
                             settings=settings, models=registry, memory=memory,
                             workflows=WorkflowStore.from_settings(settings), knowledge=knowledge)
    finally:
        with contextlib.suppress(Exception):
            await memory.close()
        with contextlib.suppress(Exception):  # the model clients this loop opened, closed on it
            await registry.aclose()
        if settings.redis_url:
            with contextlib.suppress(Exception):
                await commands.close()  # type: ignore[union-attr]
        await store.close()
