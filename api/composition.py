"""The composition root: every process's deployment - the run service, its storage, its
launcher, queue, feed and admission - built from :class:`~engine.settings.Settings`
(:func:`open_deployment`; the app installs it with :mod:`api.deployment`).

The one place that picks implementations for the engine's ports: the SQL run store
(``Settings.database_url``, else SQLite at ``<home>/flowloom.db``), node memory (Redis
with ``Settings.redis_url``, else files under ``<home>/memory``), the model registry
(``Settings.models``, else the bundled one, with the settings' environment and
base-URL override), the built-in node catalog and the source of workflow tools: the
tenant's saved and published workflows (:class:`~workers.sql.workflows.SqlWorkflowSource`,
the server's and the workers', so a tool never runs a file of the server's disk nor
another tenant's workflow), or for the command line's own runs the workflow files of
``Settings.workflow_path`` (:class:`~engine.workflow_files.WorkflowFiles`). Each tenant's runs use its own model registry
(:class:`~api.tenant_models.TenantModelSource`: the tenant's providers over the operator's). With ``Settings.redis_url`` the command
channel is Redis (:class:`~workers.redis_bus.RedisCommandChannel`: a stop reaches a
queued run's worker on any machine); without it, the SQL store. Executions in the
process are tasks of :class:`~api.inline.InlineLauncher`; with ``Settings.redis_url`` the
run service also has the RQ queue (:class:`~workers.rq.launcher.QueueLauncher`) and
follows runs executing elsewhere on their Redis streams. The CLI, the HTTP API and the
queue workers (``flowloom worker``) all use it.

Knowledge bases (:func:`open_knowledge`): the knowledge store on the same PostgreSQL
database, or on SQLite in a file beside the run store's (:func:`knowledge_database_url`)
(:func:`workers.knowledge.open_knowledge_store`: SQLite with sqlite-vec and FTS5, or
PostgreSQL with pgvector), the parser, chunker, embedder, reranker and LLM relevance
judge of ``nodes.knowledge`` on the model registry (each tenant's, for its datasets), and the ingestion queue: tasks of this
process by default, RQ jobs for ``flowloom worker`` with ``Settings.redis_url``. The
embedding tokens of ingestion count in the tenant's daily token quota (the
``token_usage`` rows of :mod:`workers.sql.quotas`). The service is the run service's
``knowledge`` (what ``knowledge_retrieval`` nodes search) and the API's and CLI's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from engine.ports import ChatStore, KeyStore, WorkflowRepo
from engine.service import RunService, Stores
from engine.settings import Settings
from engine.workflow_files import WorkflowFiles
from nodes import builtin_catalog
from nodes.llm.model_registry import ModelRegistry, registry_for
from workers.memory import node_memory_for
from workers.redis_bus import RedisCommandChannel, RedisEventBus
from workers.secret_box import secret_box_for
from workers.sql import SqlStore, default_database_url
from workers.sql.chats import SqlChatStore
from workers.sql.env_secrets import SqlSecretStore
from workers.sql.keys import SqlKeyStore
from workers.sql.model_overrides import SqlModelOverrideStore
from workers.sql.providers import SqlProviderStore
from workers.sql.workflows import SqlWorkflowSource, SqlWorkflowStore

if TYPE_CHECKING:
    from engine.knowledge.service import KnowledgeService
    from schemas.knowledge import SearchRequest, SearchResult
    from workers.rq.launcher import QueueLauncher

    from .quotas import Quotas

from .inline import InlineLauncher
from .model_overrides import OverriddenModelSource
from .redaction import install as install_log_redaction
from .tenant_models import TenantModelSource

__all__ = [
    "Deployment",
    "KnowledgeOnDemand",
    "database_url",
    "key_store_of",
    "knowledge_database_url",
    "open_deployment",
    "open_knowledge",
    "open_service",
]


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
    return parsed.set(
        database=str(path.with_name(f"{path.stem}-knowledge{path.suffix or '.db'}"))
    ).render_as_string(hide_password=False)


def _usage_recorder(store: SqlStore) -> Callable[[str, int, float], Awaitable[None]]:
    """``on_usage(tenant_id, tokens, cost)`` of the knowledge service: the tokens count in
    the tenant's tokens per day (:mod:`api.quotas`)."""
    # on use: a run that never opens the knowledge service loads no quota store
    from workers.sql.quotas import SqlQuotaStore

    quotas = SqlQuotaStore(store)

    async def record(tenant_id: str, tokens: int, cost: float) -> None:
        await quotas.record_usage(tenant_id, None, "embedding", tokens, cost, now=time.time())

    return record


@contextlib.asynccontextmanager
async def open_knowledge(
    settings: Settings,
    registry: ModelRegistry,
    store: SqlStore,
    tenant_models: TenantModelSource | None = None,
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

    knowledge_store = await open_knowledge_store(
        knowledge_database_url(settings),
        settings.home,
        full_text_memory_bytes=settings.knowledge_full_text_memory_mb * 1024 * 1024,
    )
    queue = None
    if settings.redis_url:
        from workers.rq.knowledge import RQIngestionQueue

        queue = RQIngestionQueue(settings.redis_url)
    try:
        service = KnowledgeService(
            store=knowledge_store,
            parser=DocumentParser(),
            chunker=TextChunker(),
            embedder=RegistryEmbedder(registry),
            reranker=RegistryReranker(registry),
            judge=LLMRelevanceJudge(registry),
            queue=queue,
            max_document_bytes=settings.knowledge_max_document_bytes,
            on_usage=_usage_recorder(store),
            lease_s=settings.lease_ttl,
            tenant_models=tenant_models,
        )
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

    def __init__(
        self, opener: Callable[[], contextlib.AbstractAsyncContextManager[KnowledgeService]]
    ) -> None:
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


@dataclass(slots=True)
class Deployment:
    """Every part of one process's deployment, built by :func:`open_deployment`: the run
    service (with its launcher, queue, feed and admission), the stores beside it, the
    knowledge service (or its on-demand opener) and the settings."""

    settings: Settings
    service: RunService
    keys: KeyStore
    workflows: WorkflowRepo
    chats: ChatStore
    quotas: Quotas | None
    knowledge: Any
    launcher: InlineLauncher
    queue: QueueLauncher | None
    feed: RedisEventBus | None
    #: the tenants' model providers (``/v1/model-providers``) and the registries they make
    providers: SqlProviderStore | None = None
    tenant_models: TenantModelSource | None = None


@contextlib.asynccontextmanager
async def open_deployment(
    settings: Settings,
    *,
    knowledge_on_demand: bool = False,
    admission: bool = False,
    shutdown_grace_s: float | None = 5.0,
    workflow_files: bool = False,
) -> AsyncIterator[Deployment]:
    """The deployment ``settings`` name (module docstring); closes everything on exit.

    The database is created and migrated on first use (no setup step). Executions in
    this process are tasks of an :class:`~api.inline.InlineLauncher` (given
    ``shutdown_grace_s`` seconds at exit, then cancelled; None: left as they are - a
    worker that stops abandons its runs to the other workers' recovery, which continues
    them from their last checkpoint, rather than recording them cancelled). With ``Settings.redis_url``
    the run service's queue is RQ (:class:`~workers.rq.launcher.QueueLauncher`) and its
    feed the runs' Redis streams (:class:`~workers.redis_bus.RedisEventBus`).
    ``knowledge_on_demand``: the run service's ``knowledge`` is a :class:`KnowledgeOnDemand`
    (search only, opened by the first search) instead of the knowledge service itself,
    for commands that only run workflows. ``admission``: runs are admitted under the
    quotas (:mod:`api.quotas`; the HTTP API's). ``workflow_files``: workflow tools read
    the workflow files of ``settings.workflow_path`` (the command line's runs) instead of
    the tenant's published workflows (the server's and the workers').

    Raises:
        StoreError: the database cannot be reached or migrated (names the URL, password masked).
        ModelConfigError: the model registry file is invalid.
    """
    install_log_redaction()  # the HTTP clients' request logs name URLs, which may hold keys
    registry = registry_for(settings)
    store = await SqlStore.open(database_url(settings))
    memory = node_memory_for(settings)
    redis_url = settings.redis_url
    commands = RedisCommandChannel(redis_url) if redis_url else None
    queue = feed = None
    launcher = InlineLauncher()
    try:
        if redis_url:
            from workers.rq.launcher import QueueLauncher

            queue, feed = QueueLauncher(redis_url), RedisEventBus(redis_url)
        chats = SqlChatStore(store)
        saved = SqlWorkflowStore(store)
        stores = Stores(runs=store, events=store, commands=commands or store, chats=chats)
        quotas = None
        if admission:  # the API's: imported here, so a CLI run loads no FastAPI nor quota store
            from workers.sql.quotas import SqlQuotaStore

            from .quotas import Quotas

            quotas = Quotas(SqlQuotaStore(store), settings)
        providers = SqlProviderStore(store, lambda: secret_box_for(settings))
        # the tenant's providers over the operator's registry, then the tenant's overrides
        tenant_models = OverriddenModelSource(providers, SqlModelOverrideStore(store), registry, settings)
        async with contextlib.AsyncExitStack() as stack:
            if knowledge_on_demand:
                on_demand = KnowledgeOnDemand(
                    lambda: open_knowledge(settings, registry, store, tenant_models)
                )
                stack.push_async_callback(on_demand.aclose)
                knowledge: object = on_demand
            else:
                knowledge = await stack.enter_async_context(
                    open_knowledge(settings, registry, store, tenant_models)
                )
            service = RunService(
                catalog=builtin_catalog(),
                stores=stores,
                settings=settings,
                models=registry,
                memory=memory,
                workflows=WorkflowFiles.from_settings(settings)
                if workflow_files
                else SqlWorkflowSource(saved),
                knowledge=knowledge,
                launcher=launcher,
                queue=queue,
                feed=feed,
                admission=quotas,
                secrets=SqlSecretStore(store, lambda: secret_box_for(settings)),
                tenant_models=tenant_models,
            )
            try:
                yield Deployment(
                    settings,
                    service,
                    SqlKeyStore(store),
                    saved,
                    chats,
                    quotas,
                    knowledge,
                    launcher,
                    queue,
                    feed,
                    providers,
                    tenant_models,
                )
            finally:
                if shutdown_grace_s is not None:
                    await launcher.close(shutdown_grace_s)
    finally:
        with contextlib.suppress(Exception):
            await memory.close()
        with contextlib.suppress(Exception):  # the model clients this loop opened, closed on it
            await registry.aclose()
        if commands is not None:
            with contextlib.suppress(Exception):
                await commands.close()
        if queue is not None:
            with contextlib.suppress(Exception):
                queue.close()
        await store.close()


def key_store_of(service: RunService) -> KeyStore:
    """The key store on the database of ``service``'s run store (the CLI's key, quota
    and dataset commands, which open a run service only).

    Raises:
        TypeError: the run store is not the SQL store (the only one with keys today).
    """
    store = service.stores.runs
    if not isinstance(store, SqlStore):
        raise TypeError(f"API keys need the SQL run store, not {type(store).__name__}")
    return SqlKeyStore(store)


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings,
    *,
    knowledge_on_demand: bool = False,
    shutdown_grace_s: float | None = 5.0,
    workflow_files: bool = False,
) -> AsyncIterator[RunService]:
    """The run service of :func:`open_deployment` (the CLI's and the workers'; options as
    there); closes it on exit.

    Raises:
        StoreError: the database cannot be reached or migrated (names the URL, password masked).
        ModelConfigError: the model registry file is invalid.
    """
    async with open_deployment(
        settings,
        knowledge_on_demand=knowledge_on_demand,
        shutdown_grace_s=shutdown_grace_s,
        workflow_files=workflow_files,
    ) as deployment:
        yield deployment.service
