"""The ports through which storage and control enter the engine.

The engine owns the run lifecycle but stores nothing itself: it talks to these
protocols, and implementations live outside it (``workers/``: SQL through SQLAlchemy Core,
node memory in local files or Redis). Every method is async; every query names its
tenant, so one store serves many tenants without leaking rows between them.

- :class:`RunStore`: runs, their node runs, the workflow documents they ran, owner
  leases (one process executes a run at a time) and retention.
- :class:`EventLog`: the durable events of a run (everything except text deltas),
  readable from a sequence number, so a watcher can catch up on what it missed.
- :class:`CommandChannel`: commands (cancel) sent to a run from any process.
- :class:`ChatStore`: chats and their messages; the messages of a chat become the
  ``sys.history`` of its next run.
- :class:`NodeMemory`: node memory, small JSON values kept across runs (hints such as
  a classifier's last category); never what a paused run needs to continue.
- :class:`ModelCatalog`: the model names the compiler checks references against, and
  the key variable each model's provider needs (validation warns when it is unset).
- :class:`KeyStore`: tenants and their API keys (stored hashed, shown once).
- :class:`WorkflowRepo`: a tenant's saved workflows, drafts and published versions;
  :class:`WorkflowSource`: where a workflow used as a tool is found (the tenant's
  published workflows in the server, workflow files for the command line).
- :class:`Launcher`: starts an execution of an accepted run - a task of this process,
  or a job on a queue for a worker (:class:`Launch` says which run).
- :class:`EventFeed`: a run's events from another process (a worker's, another API
  replica's), text deltas included, with the durable log behind it.
- :class:`Admission`: the quotas a run start or continuation passes first.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from schemas.launch import Published
from schemas.records import (
    ApiKey,
    Chat,
    ChatMessage,
    OwnerInfo,
    RunCommand,
    RunSummary,
    Tenant,
    WorkflowRecord,
    WorkflowVersion,
)
from schemas.run import NodeRun, RunState
from schemas.types import RunStatus

from .errors import FlowloomError

__all__ = [
    "Admission",
    "EventFeed",
    "Launch",
    "Launcher",
    "QueueUnavailable",
    "ChatNotFound",
    "ChatStore",
    "CheckpointDelta",
    "CommandChannel",
    "EventLog",
    "KeyNotFound",
    "KeyStore",
    "NodeMemory",
    "ModelCatalog",
    "RunExists",
    "RunNotFound",
    "RunOwned",
    "RunStore",
    "LeaseLost",
    "NewRun",
    "Published",
    "StalePublished",
    "StaleVersion",
    "StoreError",
    "StoreUnavailable",
    "TenantModels",
    "TenantNotFound",
    "WorkflowExists",
    "WorkflowNotFound",
    "WorkflowRepo",
    "WorkflowSource",
    "node_memory_key",
]


class StoreError(FlowloomError):
    """A storage problem a person can act on (unreachable database, missing record)."""


class StoreUnavailable(StoreError):
    """The store cannot take the request now - unreachable, restarting, out of disk
    space, locked - though the same request may succeed later (nothing of it was written,
    or, when the connection broke at the commit, all of it). A run execution retries its
    checkpoints on it for ``Settings.store_retry_s`` before the run stops."""


class RunNotFound(StoreError, KeyError):
    """No run (or workflow document) with that id for this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


class RunExists(StoreError):
    """A run with that id already exists."""


class RunOwned(StoreError):
    """Another process owns the run (its lease has not expired); ``owner`` names it."""

    def __init__(self, message: str, owner: OwnerInfo | None = None):
        super().__init__(message)
        self.owner = owner


class LeaseLost(StoreError):
    """This process no longer owns the run (its lease expired and another took it)."""


class StalePublished(StoreError):
    """The version a run start named (:class:`Published`) is no longer the published one:
    nothing was stored; read the published version again and start again."""


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to create (:meth:`RunStore.create_run`'s arguments, for
    :meth:`Admission.admit`): its state, the owner it is created claimed by (None: nobody;
    the process that will execute it, so no claim follows), the workflow document to keep
    under the state's ``workflow_hash`` when it may not be stored yet (None: it is), and
    the published version it must still be (:class:`Published`; None: no condition).
    ``durable`` False: the creation may commit without waiting for the disk, for a run
    nobody is told about before its next commit, which waits for it (a store whose
    commits always wait, or never, ignores it)."""

    state: RunState
    owner: OwnerInfo | None = None
    doc: Mapping[str, Any] | None = None
    published: Published | None = None
    durable: bool = True


@dataclass(slots=True)
class CheckpointDelta:
    """What changed since the previous checkpoint of a run.

    ``node_ids``: keys of ``RunState.node_runs`` whose node run was created or changed;
    ``history_from``: index into ``RunState.history`` of the first entry not saved yet.
    Checkpoints carry a delta, not the whole state, so a run of N nodes costs O(N)
    writes in total instead of O(N^2). Edge statuses and the ready list are not saved:
    they follow from the node runs and the plan (the scheduler rebuilds them).
    """

    node_ids: list[str]
    history_from: int = 0


@runtime_checkable
class RunStore(Protocol):
    """Durable runs (see module docstring). ``LeaseLost``/``RunOwned``/``RunNotFound`` are
    the only errors callers are expected to handle; others mean the store is broken."""

    async def put_workflow(self, tenant_id: str, doc: Mapping[str, Any]) -> str:
        """Keep ``doc`` under its content hash (idempotent); returns the hash."""
        ...

    async def get_workflow(self, tenant_id: str, content_hash: str) -> dict[str, Any]:
        """The document kept under ``content_hash``. Raises RunNotFound."""
        ...

    async def create_run(
        self,
        state: RunState,
        *,
        owner: OwnerInfo | None = None,
        doc: Mapping[str, Any] | None = None,
        published: Published | None = None,
        durable: bool = True,
    ) -> object:
        """Insert a new run (inputs, system variables, status) owned by ``owner``, with
        ``doc`` kept under the state's ``workflow_hash`` (as :meth:`put_workflow`) when
        given, in one transaction: nothing of it is stored when any part fails. With
        ``published``, only while that version is still the published one. ``durable``:
        as :attr:`NewRun.durable`. What it returns is the store's own (callers of the port
        ignore it). Raises RunExists, StalePublished."""
        ...

    async def checkpoint(
        self,
        state: RunState,
        delta: CheckpointDelta,
        *,
        owner_id: str | None,
        events: Sequence[Any] = (),
        release: bool = False,
    ) -> None:
        """Commit the run's state, the node runs in ``delta`` and ``events`` (the durable
        events of that step, as for :meth:`EventLog.append`: ``node_delta`` events are
        skipped, an event already stored is ignored) in one transaction, so a watcher
        never sees an event whose node run is not stored, and one commit per node is enough.
        ``release``: the same transaction gives the run up (:meth:`release`), for the last
        checkpoint of a run that ended.

        With ``owner_id`` the write happens only while that owner holds the run; it does
        not extend the lease (:meth:`renew` does, from the executing process's heartbeat).
        Raises LeaseLost otherwise; without ``owner_id``, RunNotFound when the run does
        not exist. Either way nothing of the checkpoint is written.
        """
        ...

    async def load_run(self, tenant_id: str, run_id: str) -> RunState:
        """The run's state as last checkpointed (node runs and history included). Raises RunNotFound."""
        ...

    async def load_detail(self, tenant_id: str, run_id: str) -> tuple[RunSummary, RunState, list[NodeRun]]:
        """The run's summary, its state and every node run in start order (earlier loop
        rounds included), read together: what an answer about a finished run needs, in one
        read. Raises RunNotFound."""
        ...

    async def get_run(self, tenant_id: str, run_id: str) -> RunSummary:
        """The run's summary. Raises RunNotFound."""
        ...

    async def list_runs(
        self,
        tenant_id: str,
        *,
        status: RunStatus | None = None,
        workflow_id: str | None = None,
        chat_id: str | None = None,
        limit: int = 50,
    ) -> list[RunSummary]:
        """Newest first."""
        ...

    async def list_node_runs(self, tenant_id: str, run_id: str) -> list[NodeRun]:
        """Every saved node run of the run (earlier loop rounds included), in start order."""
        ...

    async def count_unended(self) -> dict[str, int]:
        """How many runs of **every tenant** are ``pending``, ``running`` and ``paused``
        (status -> count; a status with none is left out): the operator's gauges of active
        and paused runs, never a caller's request. Served by the status index, so its cost
        follows the number of unended runs, not of all runs."""
        ...

    async def list_unfinished(self, *, now: float, host: str, limit: int = 500) -> list[RunSummary]:
        """Candidates for crash recovery, of **every tenant** (the one cross-tenant read, for
        the recovery loop of a server or worker, never for a caller's request): runs
        ``pending`` or ``running`` whose lease expired before ``now`` (Unix seconds), that
        nobody holds, or whose owner is a process of ``host`` (the caller checks its pid),
        oldest first, at most ``limit``. Served by an index on ``(status, lease_until)``,
        so its cost follows the number of unfinished runs, not of all runs."""
        ...

    async def claim(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, *, take_from: str | None = None
    ) -> None:
        """Become the run's owner until ``owner.lease_until``: allowed when nobody owns it,
        the lease expired, ``owner.id`` already owns it, or the owner is ``take_from``
        (known to be gone). Raises RunOwned naming the current owner, RunNotFound."""
        ...

    async def claim_and_load(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, *, take_from: str | None = None
    ) -> RunState:
        """:meth:`claim`, then the run's state as :meth:`load_run` gives it, read in the
        same transaction (what the new owner continues from). Same errors as :meth:`claim`."""
        ...

    async def claim_if_pending(self, tenant_id: str, run_id: str, owner: OwnerInfo) -> bool:
        """Claim the run only while it is ``pending`` (never checkpointed) and nobody holds
        it; False when it is not, and then nothing changed. Raises nothing else."""
        ...

    async def renew(self, run_id: str, owner_id: str, lease_until: float) -> None:
        """Extend the lease. Raises LeaseLost when ``owner_id`` no longer owns the run."""
        ...

    async def release(self, run_id: str, owner_id: str) -> None:
        """Give the run up (no-op when ``owner_id`` does not own it)."""
        ...

    async def prune(self, tenant_id: str, finished_before: float) -> int:
        """Delete runs that ended before ``finished_before`` with their node runs, events
        and commands; returns how many runs were deleted. Paused and running runs stay."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class EventLog(Protocol):
    """Durable events of runs, ordered by their sequence number."""

    async def append(self, tenant_id: str, run_id: str, events: Sequence[Any]) -> None:
        """Append event models (each has ``seq``); an event already stored is ignored."""
        ...

    async def read(
        self, tenant_id: str, run_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Events with ``seq > after_seq`` as JSON objects, oldest first."""
        ...


@runtime_checkable
class CommandChannel(Protocol):
    """Commands to runs from any process; kept until the run ends (a late listener sees them).

    A channel that reads from a database may also offer ``async poll_many(runs: Mapping[str,
    int]) -> dict[str, list[RunCommand]]`` (run id -> the last command id it saw; the
    answer: run id -> its newer commands, oldest first): the process's executions are then
    polled in one read (:mod:`engine.command_watch`) instead of one read per run."""

    async def send(self, tenant_id: str, command: RunCommand) -> None:
        """Deliver ``command`` to its run. Raises RunNotFound."""
        ...

    async def poll(self, run_id: str, after_id: int = 0) -> list[RunCommand]:
        """Commands for ``run_id`` with ``id > after_id``, oldest first."""
        ...


@runtime_checkable
class ChatStore(Protocol):
    """Chats and their messages."""

    async def add_message(self, message: ChatMessage) -> None:
        """Insert a message (the chat is created with its first message)."""
        ...

    async def update_message(self, message: ChatMessage, variables: Mapping[str, Any] | None = None) -> None:
        """Replace a message's status and parts; with ``variables``, also set those of the
        chat's conversation variables (name -> value, others kept) in the same
        transaction, so a turn and the values it leaves are kept together or not at all."""
        ...

    async def chat_variables(self, tenant_id: str, chat_id: str) -> dict[str, Any]:
        """The conversation variables the chat holds (name -> value); empty for a chat
        that holds none or does not exist."""
        ...

    async def set_chat_variables(
        self, tenant_id: str, chat_id: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Set the chat's conversation variables of ``values`` (others kept); all it holds
        now. Raises ChatNotFound."""
        ...

    async def messages(self, tenant_id: str, chat_id: str, limit: int = 100) -> list[ChatMessage]:
        """The chat's last ``limit`` messages, oldest first."""
        ...

    async def list_chats(self, tenant_id: str, limit: int = 50, before: float | None = None) -> list[Chat]:
        """The tenant's chats, most recently changed first (``before``: only chats last
        changed before that time, the ``updated_at`` of the last chat of the previous page),
        each with its title (set, or the first user message cut short) and a preview of
        its newest message."""
        ...

    async def get_chat(self, tenant_id: str, chat_id: str) -> Chat:
        """The tenant's chat. Raises ChatNotFound, also for another tenant's chat."""
        ...

    async def rename_chat(self, tenant_id: str, chat_id: str, title: str | None) -> Chat:
        """Set the chat's title (None: back to the first user message); the chat as it is
        now. Raises ChatNotFound."""
        ...

    async def delete_chat(self, tenant_id: str, chat_id: str) -> None:
        """Delete the chat and its messages (its runs stay, with their own retention).
        Raises ChatNotFound."""
        ...


class ChatNotFound(StoreError, KeyError):
    """No chat with that id for this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "chat not found"


@runtime_checkable
class NodeMemory(Protocol):
    """Node memory: JSON values under string keys, with an optional time to live (seconds)."""

    async def get(self, key: str, default: Any = None) -> Any:
        """The value, or ``default`` when missing or expired."""
        ...

    async def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store a JSON value. Raises TypeError/ValueError for values that are not JSON."""
        ...

    async def delete(self, key: str) -> bool:
        """True when a live value was removed."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def node_memory_key(tenant_id: str, workflow_id: str, node_id: str, chat_id: str, slot: str = "state") -> str:
    """Key of one node's memory in one chat: ``node:<tenant>:<workflow>:<node>:<chat>:<slot>``.

    Namespaced by tenant and workflow so two tenants (or two workflows reusing a node id)
    never read each other's hints.
    """
    return f"node:{tenant_id}:{workflow_id}:{node_id}:{chat_id}:{slot}"


@runtime_checkable
class ModelCatalog(Protocol):
    """Model names the compiler checks ``model`` fields against, and what calling them
    needs from the environment (validation warns before a run fails on it)."""

    @property
    def fingerprint(self) -> str:
        """Changes whenever the set of models changes (part of the plan cache key)."""
        ...

    def has(self, name: str, kind: str | None = "chat") -> bool:
        """True when ``name`` is a model of the registry of type ``kind`` (``chat``,
        ``embedding``, ``rerank``; None: any type)."""
        ...

    def names(self, kind: str | None = "chat") -> list[str]:
        """The names of the models of type ``kind`` (None: every model)."""
        ...

    def required_key_env(self, name: str) -> str | None:
        """The environment variable that must hold an API key for a call to model ``name``
        to be sent, or None when none must (an unknown name, a provider that needs no key,
        or one whose key is optional, such as a local endpoint). Never the key itself."""
        ...

    def base_url_env(self, name: str) -> str | None:
        """The environment variable that sets the URL model ``name`` is served from, or None
        (an unknown name, or a URL fixed in the registry): a missing key can then be solved
        by pointing that variable at an endpoint of one's own, which needs no key."""
        ...


class TenantModels(Protocol):
    """The models a tenant's runs may name: the operator's registry plus the tenant's own
    providers and models (``/v1/model-providers``), which win over the operator's of the
    same name; ``default`` is the tenant's default chat model when it chose one."""

    async def models_for(self, tenant_id: str) -> ModelCatalog:
        """The tenant's models (the operator's registry when it has none of its own).
        Raises StoreError when they cannot be read."""
        ...


class KeyNotFound(StoreError, KeyError):
    """No API key with that id for this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "API key not found"


class TenantNotFound(StoreError, KeyError):
    """No tenant with that id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "tenant not found"


@runtime_checkable
class KeyStore(Protocol):
    """Tenants and their API keys.

    A key's plaintext (``fl_<prefix>_<secret>``) exists only in the return value of
    :meth:`create_key`; the store keeps its visible prefix and the SHA-256 of the
    secret, so a leaked database does not leak usable keys.
    """

    async def ensure_tenant(self, tenant_id: str, name: str = "") -> tuple[Tenant, bool]:
        """The tenant, created when missing; the flag is True when this call created it."""
        ...

    async def get_tenant(self, tenant_id: str) -> Tenant:
        """The tenant. Raises TenantNotFound."""
        ...

    async def examples_offered(self, tenant_id: str) -> bool:
        """True once the tenant was offered the bundled examples (``flowloom serve``
        saves them on its first start for the tenant, not after: a user may have
        deleted them)."""
        ...

    async def mark_examples_offered(self, tenant_id: str) -> None:
        """Mark the tenant offered the bundled examples."""
        ...

    async def create_key(
        self, tenant_id: str, *, name: str = "", admin: bool = False, app_id: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key of the tenant: its record and its plaintext (shown once, never stored).
        Raises TenantNotFound."""
        ...

    async def authenticate(self, plaintext: str) -> ApiKey | None:
        """The active key whose plaintext this is (looked up by its prefix, the secret's
        hash compared in constant time), its ``last_used_at`` set to now; None for a
        malformed, unknown or revoked key."""
        ...

    async def list_keys(self, tenant_id: str) -> list[ApiKey]:
        """The tenant's keys (revoked ones included), oldest first."""
        ...

    async def revoke_key(self, tenant_id: str, key_id: str) -> ApiKey:
        """Revoke the tenant's key (idempotent: a revoked key keeps its first revocation
        time). Raises KeyNotFound, also for another tenant's key."""
        ...


class WorkflowNotFound(StoreError, KeyError):
    """No saved workflow (or no version of it) with that id for this tenant."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "workflow not found"


class WorkflowExists(StoreError):
    """The tenant already has a workflow with that id."""


class StaleVersion(StoreError):
    """The draft changed since the caller read it: ``current_version`` is the draft's
    version now (the caller reloads, merges and retries with it)."""

    def __init__(self, message: str, current_version: int):
        super().__init__(message)
        self.current_version = current_version


@runtime_checkable
class WorkflowRepo(Protocol):
    """Saved workflows of a tenant: an editable draft with a version counter (for
    optimistic concurrency) and immutable published versions 1..n, the newest or a
    rolled-back one being what apps and keys run. Every method is scoped by tenant: a
    workflow of another tenant is :class:`WorkflowNotFound`, as one that does not exist.
    """

    async def create(self, tenant_id: str, doc: Mapping[str, Any]) -> WorkflowRecord:
        """Save ``doc`` as the draft (version 1) of workflow ``doc["id"]``. Raises WorkflowExists."""
        ...

    async def list(self, tenant_id: str, workflow_id: str | None = None) -> list[WorkflowRecord]:
        """The tenant's workflows (only ``workflow_id`` when given), by id."""
        ...

    async def get(self, tenant_id: str, workflow_id: str) -> WorkflowRecord:
        """The workflow with its draft. Raises WorkflowNotFound."""
        ...

    async def update_draft(
        self, tenant_id: str, workflow_id: str, doc: Mapping[str, Any], draft_version: int
    ) -> WorkflowRecord:
        """Replace the draft when its version is still ``draft_version``; the version
        goes up by one. Raises WorkflowNotFound, StaleVersion (naming the current version)."""
        ...

    async def delete(self, tenant_id: str, workflow_id: str) -> None:
        """Delete the workflow and its versions (its runs stay). Raises WorkflowNotFound."""
        ...

    async def publish(
        self, tenant_id: str, workflow_id: str, doc: Mapping[str, Any], note: str = ""
    ) -> WorkflowVersion:
        """Keep ``doc`` as the next version (1 for the first) and make it the published
        one. Raises WorkflowNotFound."""
        ...

    async def versions(self, tenant_id: str, workflow_id: str) -> builtins.list[WorkflowVersion]:
        """Every published version, oldest first, without documents. Raises WorkflowNotFound."""
        ...

    async def get_version(self, tenant_id: str, workflow_id: str, version: int) -> WorkflowVersion:
        """One version with its document. Raises WorkflowNotFound (also for a missing version)."""
        ...

    async def published(
        self, tenant_id: str, workflow_id: str, *, cached: bool = False
    ) -> WorkflowVersion | None:
        """The published version with its document, read in one go (what a run of the
        workflow needs); None when no version is published. Raises WorkflowNotFound.

        ``cached``: the version may come from memory without a read - for a run start
        only, whose creation checks it is still the published one (:class:`Published`;
        on :class:`StalePublished` the memory is forgotten and the next call reads)."""
        ...


@runtime_checkable
class WorkflowSource(Protocol):
    """Where a node that runs another workflow (a tool call's or agent's ``workflow_tools``)
    finds its document: by the calling run's tenant and the workflow id.

    Why a port of its own rather than :class:`WorkflowRepo`: a tool runs what the
    builder published, never a draft someone is editing, and the command line has no
    saved workflows at all (its source reads workflow files). The server's source
    (``workers.sql.workflows.SqlWorkflowSource``) reads the tenant's saved workflows;
    the command line's (:class:`engine.workflow_files.WorkflowFiles`) the workflow
    directories.
    """

    async def load(self, tenant_id: str, workflow_id: str, version: int | None = None) -> dict[str, Any]:
        """The document to run: version ``version`` of the tenant's workflow when given,
        else its published version.

        Raises:
            WorkflowNotFound: the tenant has no such workflow (a workflow of another
                tenant included), it has no published version, or no version
                ``version``; the message says which and how to fix it.
        """
        ...


# ------------------------------------------------------------------ front door


class QueueUnavailable(FlowloomError):
    """The run queue cannot be reached (its message names no address or password): the
    run was not queued, and a new run was ended ``cancelled`` (nothing would execute it)."""


@dataclass(frozen=True, slots=True)
class Launch:
    """One execution to start. ``events()`` opens the run service's events of it (what
    a launcher in this process drives); a queue launcher sends only the ids: the job
    continues the run from the store. ``first``: a new run (else a continuation);
    ``max_wall_time``: the workflow's limit in seconds (a job's timeout follows it)."""

    tenant_id: str
    run_id: str
    events: Callable[[], AsyncIterator[Any]]
    priority: str = "default"
    max_wall_time: float | None = None
    first: bool = True


class Launcher(Protocol):
    """Starts executions: in a task of this process, or as a job on a queue."""

    async def launch(self, launch: Launch) -> None:
        """Start ``launch``; returns once it executes (in-process: its first event is out,
        so the run is claimed) or is queued.

        Raises:
            in-process: what the execution raises before its first event (RunNotFound,
            RunNotResumable, UnknownInterrupt, RunOwned): nothing was executed.
            QueueUnavailable: the queue cannot be reached (nothing was queued).
        """
        ...


class EventFeed(Protocol):
    """A run's events as JSON objects, published by whichever process executes it."""

    def follow(
        self,
        tenant_id: str,
        run_id: str,
        after_seq: int,
        *,
        durable: Callable[[int], Awaitable[list[dict[str, Any]]]],
        ended: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[dict[str, Any]]:
        """The events with ``seq > after_seq`` in order, each once, until the run ends or
        pauses. ``durable(after)``: the durable log's events after ``after`` (what fills
        gaps the feed does not hold); ``ended()``: True once the run ended or paused."""
        ...


class Admission(Protocol):
    """Quotas: a run start or continuation is admitted before anything is stored."""

    async def admit(self, tenant_id: str, workflow_id: str, run_id: str, *, run: NewRun | None = None) -> Any:
        """Admit the run (counts it); returns a token for :meth:`release`. Raises the
        deployment's refusal (an error naming the quota, its limit and when to retry).

        ``run``: a new run to create with the admission (:meth:`RunStore.create_run`'s
        contract and errors). An admission kept in the run store's database does both in
        one transaction - a refusal or a failed creation leaves neither, and a start costs
        one commit; another admits, creates, and releases the admission when the
        creation fails."""
        ...

    async def release(self, admission: Any) -> None:
        """Give the slot of an admission whose run was never created back."""
        ...
