"""The run lifecycle: the one implementation of start, resume, answer, cancel, recover,
get, list and watch (and a run of one node alone: :mod:`engine.node_runs`), and the front door every door uses: :meth:`RunService.launch` (a
start, a chat turn, a resume, a rerun or a continuation: admission, placement, launch)
and :meth:`RunService.follow` (a run's events, live or replayed, wherever it executes),
in :mod:`engine.frontdoor`. Executing a run (claim, heartbeat, command polling,
checkpoints, idle watch, the live hub) is :mod:`engine.execution`; chat transcripts
:mod:`engine.turns`.

What it guarantees, whatever process calls it:

- **Durable**: the workflow document, the inputs and every node's result are in the
  run store before the node's successors start (one checkpoint per node). A process
  killed at any point leaves a run that :meth:`RunService.recover` continues: finished
  nodes never run again, the node that was running runs again.
- **One owner at a time**: executing a run first claims it (a lease renewed while it
  runs). A second process gets :class:`~engine.ports.RunOwned` naming the owner. A
  lease expires after ``Settings.lease_ttl`` seconds without renewal, and at once when
  its owner was a process of this host that no longer exists.
- **Never idle forever**: a run that produces no event for ``Settings.run_idle_timeout_s``
  fails with reason ``idle_timeout`` naming the interval and the node (``engine.execution._IdleWatch``).
- **Cancel from anywhere**: :meth:`RunService.cancel` sends a command; the executing
  process polls for it every tenth of a second, cancels the node in progress and ends the
  run ``cancelled`` exactly once. A paused run is cancelled directly.
- **Chats**: a run with a chat id gets the chat's earlier messages as ``sys.history``;
  every turn stores one user message and exactly one assistant message, with the
  partial text and the status when the turn was stopped or failed.
- **A store that fails**: a checkpoint the store refuses for now (``StoreUnavailable``:
  a database restarting, a full disk) is retried for ``Settings.store_retry_s``; an end
  (finished, failed, cancelled, paused) is told to followers only once it is stored; an
  execution that cannot store its end raises ``RunInterrupted`` to its followers and
  this process stores the run ``failed`` (``store_error``) once the store is back
  (:mod:`engine.execution`).
- **Events**: every event goes to the caller's iterator; every event but text deltas
  is also appended to the durable event log, so a watcher can replay from any sequence
  number (:meth:`RunService.watch`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import time
import types
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.events import RunCancelled as RunCancelledEvent
from schemas.records import DEFAULT_TENANT, CommandKind, OwnerInfo, RunCommand, RunSummary
from schemas.run import NodeError, NodeRun, RunState
from schemas.types import NodeRunStatus, RunStatus

from .catalog import NodeCatalog
from .command_watch import CommandWatch
from .compiler import CompiledPlan, compile_workflow
from .documents import DocumentCaps, document_caps
from .environment import SecretStore
from .errors import UnknownInterrupt
from .execution import Executing, RunNotResumable, _Live
from .leases import owner_gone
from .node_runs import NodeRuns
from .ports import (
    Admission,
    ChatStore,
    CheckpointDelta,
    CommandChannel,
    EventFeed,
    EventLog,
    Launcher,
    ModelCatalog,
    NewRun,
    NodeMemory,
    Published,
    RunStore,
    TenantModels,
    WorkflowSource,
)
from .rerun import durable, seed_rerun
from .runner import new_run_state
from .settings import Settings, get_settings
from .single_node import single_node_plan
from .telemetry import TRACE_KEY, telemetry
from .turns import ChatTurns

if TYPE_CHECKING:
    from schemas.launch import LaunchRequest, Placement, RunTicket

__all__ = ["RunNotResumable", "RunService", "Stores", "bind_single_answer"]

_ENDED = frozenset({RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled})
#: workflow documents a service remembers by content hash (oldest dropped first)
_DOCS_MAX = 256


@dataclass(frozen=True, slots=True)
class Stores:
    """The storage ports a :class:`RunService` uses (one object may implement several)."""

    runs: RunStore
    events: EventLog
    commands: CommandChannel
    chats: ChatStore


@functools.cache
def _frontdoor() -> types.ModuleType:
    """:mod:`engine.frontdoor`, imported on first use as before, then found here: an import
    statement run per call costs the import system's lookup and a failed ``__path__`` read
    whose AttributeError message is built each time (two per blocking run start)."""
    from . import frontdoor

    return frontdoor


class RunService(Executing, ChatTurns, NodeRuns):
    """The run lifecycle over the storage ports (module docstring).

    ``catalog`` compiles workflows; ``models``, ``memory`` and ``workflows`` go to every
    run's :class:`RunDeps`. One service per process is enough; it is safe to use from
    many tasks at once.
    """

    def __init__(
        self,
        *,
        catalog: NodeCatalog,
        stores: Stores,
        settings: Settings,
        models: ModelCatalog | None = None,
        memory: NodeMemory | None = None,
        workflows: WorkflowSource | None = None,
        knowledge: Any = None,
        launcher: Launcher | None = None,
        queue: Launcher | None = None,
        feed: EventFeed | None = None,
        admission: Admission | None = None,
        secrets: SecretStore | None = None,
        tenant_models: TenantModels | None = None,
    ) -> None:
        self.catalog = catalog
        #: the secret values of environment variables (:mod:`engine.environment`; None: none)
        self.secrets = secrets
        self.stores = stores
        self.settings = settings
        self.models = models
        #: each tenant's models over ``models`` (None: every tenant runs with ``models``)
        self.tenant_models = tenant_models
        self.memory = memory
        self.workflows = workflows
        #: the knowledge search nodes get (``RunDeps.knowledge``; an ``engine.knowledge`` KnowledgeSearch)
        self.knowledge = knowledge
        #: the front door's ports (:meth:`launch`, :meth:`follow`): the launcher of executions
        #: in this process, the queue (None: everything executes here), the feed of runs
        #: executing elsewhere (None: the durable log) and the quotas (None: none)
        self.launcher, self.queue, self.feed, self.admission = launcher, queue, feed, admission
        #: executions in this process (the live hub), and those that ended lately (:mod:`engine.execution`)
        self._live: dict[str, _Live] = {}
        self._ended: OrderedDict[str, _Live] = OrderedDict()
        self._settling: dict[str, asyncio.Task[None]] = {}
        self._commands = CommandWatch(stores.commands)
        self._docs: OrderedDict[tuple[str, str], Mapping[str, Any]] = OrderedDict()
        #: the plan of each remembered document, with what it was compiled under (:meth:`_plan_of`)
        self._plans: dict[tuple[str, str], tuple[tuple[str, str, DocumentCaps], CompiledPlan]] = {}
        #: states and plans of runs prepared here and not executed yet (executing one needs no read of them)
        self._prepared: OrderedDict[str, tuple[RunState, CompiledPlan, OwnerInfo | None]] = OrderedDict()
        #: ``(tenant_id, run_id)`` of a run a watcher found orphaned (:func:`~engine.leases.orphaned`): the
        #: process's recovery loop (:mod:`engine.recovery`) sets it to continue that run now
        #: rather than at its next look; None: watchers wait for whoever recovers it
        self.on_orphan: Callable[[str, str], None] | None = None

    # ------------------------------------------------------------------ plans

    def compile(
        self,
        doc: Mapping[str, Any],
        models: ModelCatalog | None = None,
        checked: tuple[str, tuple[int, ...]] | None = None,
    ) -> CompiledPlan:
        """Compile ``doc`` with this service's catalog and ``models`` (a tenant's,
        :meth:`models_of`; default: this service's); ``checked``: the caller's caps check
        of ``doc`` (``StartRun.checked``). Raises CompileError."""
        return compile_workflow(
            doc, catalog=self.catalog, models=models if models is not None else self.models, checked=checked
        )

    async def models_of(self, tenant_id: str) -> ModelCatalog | None:
        """The models ``tenant_id``'s runs compile and call with: its own over the
        operator's when this service has ``tenant_models``, else ``models``."""
        if self.tenant_models is None:
            return self.models
        return await self.tenant_models.models_for(tenant_id)

    async def _plan_of(self, state: RunState) -> CompiledPlan:
        """The plan of the run's stored document. A hash names one document for good, so
        its plan is remembered beside it: a run of a known document is not hashed, checked
        against the caps and looked up in the compile cache again - unless the catalog,
        the tenant's models or the process's document caps changed since."""
        key = (state.tenant_id, state.workflow_hash)
        doc = self._docs.get(key)
        if doc is None:
            doc = await self.stores.runs.get_workflow(state.tenant_id, state.workflow_hash)
            self._keep_doc(key, doc)
        models = await self.models_of(state.tenant_id)
        used = models if models is not None else self.models
        stamp = (
            self.catalog.fingerprint,
            used.fingerprint if used is not None else "-",
            document_caps(get_settings()),
        )
        known = self._plans.get(key)
        if known is not None and known[0] == stamp:
            plan = known[1]
        else:
            plan = self.compile(doc, models)
            if key in self._docs:  # remembered as long as its document is
                self._plans[key] = (stamp, plan)
        node_id = state.sys.get("single_node")  # a run of one node (engine/single_node.py) runs only it
        return single_node_plan(plan, node_id) if isinstance(node_id, str) else plan

    def _keep_doc(self, key: tuple[str, str], doc: Mapping[str, Any]) -> None:
        """Remember a stored document by ``(tenant, content hash)``: a hash names one
        document for good, so a run started here needs no read of it to execute."""
        self._docs[key] = doc
        self._docs.move_to_end(key)
        while len(self._docs) > _DOCS_MAX:
            self._plans.pop(self._docs.popitem(last=False)[0], None)

    # ------------------------------------------------------------------ start

    async def prepare(
        self,
        doc: Mapping[str, Any],
        inputs: Mapping[str, Any],
        *,
        tenant_id: str = DEFAULT_TENANT,
        chat_id: str | None = None,
        user_id: str | None = None,
        message: str | None = None,
        run_id: str | None = None,
        workflow_version: str | None = None,
        history: list[dict[str, Any]] | None = None,
        plan: CompiledPlan | None = None,
        owner: OwnerInfo | None = None,
        published: Published | None = None,
        admission: Admission | None = None,
        durable: bool = True,
    ) -> RunState:
        """Create a run (status ``pending``) without executing it; returns its state.
        ``plan``: the plan of ``doc`` when the caller compiled it already (:meth:`compile`).

        The run, its document (when this service has not stored it) and its admission are
        one transaction (``RunStore.create_run``, or ``admission.admit(..., run=...)`` when
        an ``admission`` is given: a refusal stores nothing). ``owner``: the run is
        created claimed by it - the owner :meth:`execute` uses here, with no claim of its
        own (:meth:`new_owner`). ``published``: ``doc`` is that published version, and the
        run is created only while it still is (else StalePublished, nothing stored).
        ``durable`` False: the creation need not wait for the disk (:class:`~engine.ports.NewRun`).

        Stores the workflow document under its hash, the run with its validated inputs
        and, in a chat, the user's message and an empty assistant message (it exists
        before the model streams). ``message`` is the user's text: ``sys.query``, and
        the ``query`` input when the workflow declares one and it is not given.
        ``history`` (``[{"role", "content"}]``, oldest first) is ``sys.history`` of a run
        without a chat (a client that keeps the conversation itself, as OpenAI clients
        do); in a chat the chat's stored messages are the history and ``history`` is ignored.

        Raises:
            CompileError: the document does not compile.
            InvalidInputs: the inputs do not fit the workflow's declared inputs.
            the admission's refusal; RunExists; StalePublished.
        """
        plan = plan if plan is not None else self.compile(doc, await self.models_of(tenant_id))
        values = dict(inputs)
        if (
            message is not None
            and "query" not in values
            and any(v.name == "query" for v in plan.workflow.inputs)
        ):
            values["query"] = message
        history = await self._history(tenant_id, chat_id) if chat_id else (list(history) if history else None)
        held = await self._conversation(tenant_id, chat_id, plan) if chat_id else None
        state = new_run_state(
            plan,
            values,
            run_id=run_id,
            chat_id=chat_id,
            query=message,
            user_id=user_id,
            history=history,
            conversation=held,
        )
        state.tenant_id, state.workflow_version = tenant_id, workflow_version
        _keep_trace(state)
        stored = (tenant_id, state.workflow_hash) in self._docs  # documents stay: stored once is stored
        new = NewRun(state, owner, None if stored else doc, published, durable)
        if admission is not None:
            await admission.admit(tenant_id, plan.workflow.id, state.run_id, run=new)
        else:
            await self.stores.runs.create_run(
                state, owner=owner, doc=new.doc, published=published, durable=durable
            )
        self._keep_doc((tenant_id, state.workflow_hash), doc)
        if chat_id:
            try:
                await self._open_turn(state, message)
            except BaseException:
                if owner is not None:  # nothing executes it here: recovery may take it at once
                    with contextlib.suppress(Exception):
                        await self.stores.runs.release(state.run_id, owner.id)
                raise
        self._prepared[state.run_id] = (state, plan, owner)
        while len(self._prepared) > _DOCS_MAX:  # runs executed elsewhere (queued) leave theirs behind
            self._prepared.popitem(last=False)
        return state

    def start(self, doc: Mapping[str, Any], inputs: Mapping[str, Any], **kw: Any) -> AsyncIterator[Any]:
        """:meth:`prepare` then :meth:`execute`: the run's events as it runs (same errors)."""

        async def events() -> AsyncIterator[Any]:
            state = await self.prepare(doc, inputs, owner=self.new_owner(), **kw)  # executed here: no claim
            async for event in self.execute(state.tenant_id, state.run_id):
                yield event

        return events()

    async def rerun_from(
        self,
        tenant_id: str,
        run_id: str,
        node_id: str,
        doc: Mapping[str, Any],
        *,
        workflow_version: str | None = None,
        new_run_id: str | None = None,
    ) -> tuple[RunState, AsyncIterator[Any]]:
        """A new run of ``doc`` (the current draft) with the inputs of past run ``run_id``,
        reusing the past run's node runs strictly upstream of ``node_id`` (not executed
        again; marked in ``data["reused_from"]``, :mod:`engine.rerun`), executing
        ``node_id`` and what follows it. The past run is only read.

        Returns the new run's state (created, ``running``, its first events stored) and its
        events: ``run_started`` and the reused nodes' ``node_finished`` first, then the
        execution's. The state exists before the events are iterated, so a caller can
        name the run at once; errors are raised here, before anything is stored.
        ``new_run_id``: the new run's id (default: a fresh one).

        Raises:
            RunNotFound: no run ``run_id`` for the tenant.
            RunNotResumable: the past run is still pending or running.
            RerunRefused: ``node_id`` is unknown, inside a loop body, or not on the past run's path.
            CompileError, InvalidInputs: ``doc`` does not compile, or the past inputs do not fit it.
        """
        old = await self.stores.runs.load_run(tenant_id, run_id)
        if old.status in (RunStatus.pending, RunStatus.running):
            raise RunNotResumable(
                f"run {run_id} is still {old.status.value}: rerun it once it has ended (or stop it first)"
            )
        plan = self.compile(doc, await self.models_of(tenant_id))
        state = new_run_state(
            plan,
            old.inputs,
            run_id=new_run_id,
            query=old.sys.get("query") or None,
            user_id=old.sys.get("user_id") or None,
            history=old.sys.get("history") or None,
            conversation=old.conversation,
        )
        state.tenant_id, state.workflow_version = tenant_id, workflow_version
        _keep_trace(state)
        first = seed_rerun(plan, old, state, node_id)
        await self.stores.runs.put_workflow(tenant_id, doc)
        await self.stores.runs.create_run(state)
        await self.stores.events.append(tenant_id, state.run_id, durable(first))

        async def events() -> AsyncIterator[Any]:
            async for event in self.execute(tenant_id, state.run_id, expect=RunStatus.running, prelude=first):
                yield event

        return state, events()

    # ------------------------------------------------------------------ continue

    def resume(
        self, tenant_id: str, run_id: str, answers: Mapping[str, Any], message: str | None = None
    ) -> AsyncIterator[Any]:
        """Continue a paused run with ``answers`` (interrupt id -> answer); its events.

        In a chat, ``message`` (the text the person sent) is stored as the next turn.

        Raises (when iterated):
            RunNotFound, RunNotResumable (not paused), UnknownInterrupt, RunOwned.
        """
        return self.execute(tenant_id, run_id, answers=answers, expect=RunStatus.paused, message=message)

    def recover(self, tenant_id: str, run_id: str, *, take_over: str | None = None) -> AsyncIterator[Any]:
        """Continue a run whose process died (status ``running`` or ``pending``, owner gone)
        from its last checkpoint; its events.

        ``take_over``: an owner id this call may take the run from even while its lease
        runs - the placeholder owner a recovery left on a run it queued for the job that
        carries this id (:mod:`workers.rq.recovery`), so that job, and no other, continues it.

        Raises (when iterated):
            RunNotFound, RunNotResumable (paused or ended), RunOwned (a live owner).
        """
        return self.execute(tenant_id, run_id, expect=None, take_over=take_over)

    async def recoverable(self, tenant_id: str = DEFAULT_TENANT) -> list[RunSummary]:
        """Runs that are ``running``/``pending`` with no live owner (lease expired, or the
        owner was a process of this host that is gone)."""
        found = []
        for status in (RunStatus.running, RunStatus.pending):
            for summary in await self.stores.runs.list_runs(tenant_id, status=status, limit=1000):
                if owner_gone(summary.owner):
                    found.append(summary)
        return found

    # ------------------------------------------------------------------ cancel

    async def cancel(self, tenant_id: str, run_id: str, reason: str = "cancelled by request") -> RunSummary:
        """Stop a run from any process. A running run gets a cancel command (its owner ends
        it ``cancelled`` within about a second); a pending or paused run is ended here.

        Raises:
            RunNotFound; RunNotResumable when the run has already ended.
        """
        summary = await self.stores.runs.get_run(tenant_id, run_id)
        if summary.status in _ENDED:
            raise RunNotResumable(f"run {run_id} has already ended ({summary.status.value})")
        live = self._live.get(run_id)
        if live is not None:
            live.token.cancel(reason)
            return summary
        if summary.owner is not None and not owner_gone(summary.owner):
            await self.stores.commands.send(
                tenant_id,
                RunCommand(run_id=run_id, kind=CommandKind.cancel, reason=reason, created_at=time.time()),
            )
            return summary
        return await self._cancel_idle(tenant_id, run_id, reason)

    async def _cancel_idle(self, tenant_id: str, run_id: str, reason: str) -> RunSummary:
        """End a pending or paused run that no process executes."""
        owner, state = await self._claim(tenant_id, run_id)
        try:
            state.status = RunStatus.cancelled
            now = state.finished_at = time.time()
            state.error = NodeError(
                type="RunCancelledError", message=f"run cancelled: {reason}", reason="cancelled"
            )
            # The time a paused run waited for a person until this stop is waiting time, as
            # it is when the person answers: reported apart, never as run time.
            if state.paused_at is not None:
                state.waited_s += max(0.0, now - state.paused_at)
                state.paused_at = None
            asked = {i.node_run_id: i.created_at for i in state.interrupts.values()}
            waiting = [nid for nid, run in state.node_runs.items() if run.status is NodeRunStatus.waiting]
            for nid in waiting:
                run = state.node_runs[nid]
                run.status, run.finished_at = NodeRunStatus.cancelled, now
                if run.id in asked:
                    run.waited_s += max(0.0, now - asked[run.id])
            state.interrupts = {}
            # The event log ends with the run's end, as it does when a running run is stopped.
            state.seq += 1
            elapsed = max(0.0, now - (state.started_at or now) - state.waited_s) * 1000.0
            ended = RunCancelledEvent(
                seq=state.seq, run_id=run_id, ts=now, reason=f"run cancelled: {reason}", elapsed_ms=elapsed
            )
            await self.stores.runs.checkpoint(
                state, CheckpointDelta(waiting, len(state.history)), owner_id=owner.id, events=[ended]
            )
            telemetry().run_event(state.workflow_id, ended)  # ended here, not by an execution
            await self._close_turn(state, "")
        finally:
            await self.stores.runs.release(run_id, owner.id)
        return await self.stores.runs.get_run(tenant_id, run_id)

    # ------------------------------------------------------------------ read

    async def get(self, tenant_id: str, run_id: str) -> RunSummary:
        """The run's summary. Raises RunNotFound."""
        return await self.stores.runs.get_run(tenant_id, run_id)

    async def state(self, tenant_id: str, run_id: str) -> RunState:
        """The run's state as last checkpointed (inputs, outputs, answer, node runs). Raises RunNotFound."""
        return await self.stores.runs.load_run(tenant_id, run_id)

    async def detail(self, tenant_id: str, run_id: str) -> tuple[RunSummary, RunState, list[NodeRun]]:
        """The run's summary, state and every node run in start order, read together. Raises RunNotFound."""
        return await self.stores.runs.load_detail(tenant_id, run_id)

    async def list(self, tenant_id: str = DEFAULT_TENANT, **filters: Any) -> list[RunSummary]:
        """Runs, newest first (filters: status, workflow_id, chat_id, limit)."""
        return await self.stores.runs.list_runs(tenant_id, **filters)

    async def node_runs(self, tenant_id: str, run_id: str) -> builtins.list[NodeRun]:
        """Every node run of the run, in start order. Raises RunNotFound."""
        await self.stores.runs.get_run(tenant_id, run_id)
        return await self.stores.runs.list_node_runs(tenant_id, run_id)

    async def workflow_of(self, tenant_id: str, run_id: str) -> dict[str, Any]:
        """The workflow document the run executes. Raises RunNotFound."""
        summary = await self.stores.runs.get_run(tenant_id, run_id)
        return await self.stores.runs.get_workflow(tenant_id, summary.workflow_hash)

    # ------------------------------------------------------------------ the front door

    async def launch(
        self, tenant_id: str, request: LaunchRequest, placement: Placement | None = None
    ) -> RunTicket:
        """Start, resume (a chat turn among them), rerun or continue a run: admission,
        the stored change, then placement in this process or on the queue - the one way
        every door starts work (:func:`engine.frontdoor.launch`, which lists the errors)."""
        return await _frontdoor().launch(self, tenant_id, request, placement)

    def follow(self, tenant_id: str, run_id: str, after_seq: int = 0) -> AsyncIterator[Any]:
        """The run's events (event models) after ``after_seq``, live or replayed, until it
        ends or pauses, wherever it executes (:func:`engine.frontdoor.follow`).
        Raises RunNotFound (when iterated)."""
        return _frontdoor().follow(self, tenant_id, run_id, after_seq)

    async def follow_to_end(self, tenant_id: str, run_id: str) -> None:
        """Return once the run ends or pauses, as reading :meth:`follow` to its end does,
        without its events (:func:`engine.frontdoor.follow_to_end`). Raises as it."""
        await _frontdoor().follow_to_end(self, tenant_id, run_id)

    async def watch(self, tenant_id: str, run_id: str, after_seq: int = 0) -> AsyncIterator[dict[str, Any]]:
        """:meth:`follow` as JSON objects."""
        async for event in self.follow(tenant_id, run_id, after_seq):
            yield event.model_dump(mode="json")

    async def prune(self, tenant_id: str, older_than_days: float) -> int:
        """Delete runs that ended more than ``older_than_days`` days ago; returns how many."""
        return await self.stores.runs.prune(tenant_id, time.time() - older_than_days * 86400.0)


def bind_single_answer(state_or_summary: Any, answer: Any, interrupt_id: str | None = None) -> dict[str, Any]:
    """``{interrupt id: answer}`` for a run with pending interrupts; ``interrupt_id`` names
    one when several are pending.

    Raises:
        UnknownInterrupt: none pending, several pending and none named, or an unknown id.
    """
    pending = (
        [i.id for i in state_or_summary.pending_interrupts]
        if isinstance(state_or_summary, RunSummary)
        else list(state_or_summary.interrupts)
    )
    if interrupt_id is None:
        if len(pending) != 1:
            raise UnknownInterrupt(
                f"run {state_or_summary.run_id} has {len(pending)} pending interrupts "
                f"({', '.join(pending) or 'none'}); name one with --interrupt ID"
            )
        interrupt_id = pending[0]
    elif interrupt_id not in pending:
        raise UnknownInterrupt(
            f"run {state_or_summary.run_id}: no pending interrupt {interrupt_id!r} "
            f"(pending: {', '.join(pending) or 'none'})"
        )
    return {interrupt_id: answer}


def _keep_trace(state: RunState) -> None:
    """Store the current trace context (the request that creates the run) with the run, in
    ``sys`` (:data:`~engine.telemetry.TRACE_KEY`, W3C headers): every execution of the
    run - inline, by a worker, resumed later - continues that trace. Nothing when untraced."""
    carrier = telemetry().trace_context()
    if carrier:
        state.sys[TRACE_KEY] = carrier
