"""The run lifecycle: the one implementation of start, resume, answer, cancel, recover,
get, list and watch. The CLI calls it now; the API routes and queue jobs call the same
functions with ids only.

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
  fails with reason ``idle_timeout`` naming the interval and the node (:class:`_IdleWatch`).
- **Cancel from anywhere**: :meth:`RunService.cancel` sends a command; the executing
  process polls for it every tenth of a second, cancels the node in progress and ends the
  run ``cancelled`` exactly once. A paused run is cancelled directly.
- **Chats**: a run with a chat id gets the chat's earlier messages as ``sys.history``;
  every turn stores one user message and exactly one assistant message, with the
  partial text and the status when the turn was stopped or failed.
- **Events**: every event goes to the caller's iterator; every event but text deltas
  is also appended to the durable event log, so a watcher can replay from any sequence
  number (:meth:`RunService.watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Mapping

from schemas.events import NodeDelta, NodeFinished
from schemas.events import RunCancelled as RunCancelledEvent
from schemas.events import RunFailed as RunFailedEvent
from schemas.records import (
    DEFAULT_TENANT,
    ChatMessage,
    CommandKind,
    MessagePart,
    MessageStatus,
    OwnerInfo,
    RunCommand,
    RunSummary,
)
from schemas.run import NodeError, NodeRun, RunState
from schemas.types import NodeRunStatus, RunStatus

from .catalog import NodeCatalog
from .compiler import CompiledPlan, compile_workflow
from .context import CancelToken, RunDeps, WorkflowSource
from .errors import FlowloomError, UnknownInterrupt
from .leases import orphaned, owner_gone
from .ports import (
    ChatStore,
    CheckpointDelta,
    CommandChannel,
    EventLog,
    LeaseLost,
    MemoryStore,
    ModelCatalog,
    RunOwned,
    RunStore,
)
from .rerun import durable, seed_rerun
from .runner import answer_interrupts, new_run_state, stream_workflow
from .settings import Settings

__all__ = ["RunNotResumable", "RunService", "Stores", "bind_single_answer"]

#: seconds between two polls for commands (cancel is seen within this plus one node step)
COMMAND_POLL_S = 0.1
#: seconds between two polls of the event log by a watcher in another process
WATCH_POLL_S = 0.2
#: seconds between two reports of the same orphan by one watcher (:attr:`RunService.on_orphan`)
ORPHAN_REPORT_S = 1.0
_ENDED = frozenset({RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled})
#: workflow documents a service remembers by content hash (oldest dropped first)
_DOCS_MAX = 256


class RunNotResumable(FlowloomError):
    """The run is not in a state the request needs (e.g. resuming a finished run)."""


@dataclass(frozen=True, slots=True)
class Stores:
    """The storage ports a :class:`RunService` uses (one object may implement several)."""

    runs: RunStore
    events: EventLog
    commands: CommandChannel
    chats: ChatStore


#: durable events of a live execution kept in memory for watchers that join late
_RECENT_MAX = 10_000


@dataclass(slots=True)
class _Live:
    """A run executing in this process: its cancel token, its live watchers, and its recent
    durable events (a watcher that joins between two checkpoints finds there what the
    event log does not hold yet)."""

    token: CancelToken
    watchers: list[asyncio.Queue[Any]] = field(default_factory=list)
    recent: list[Any] = field(default_factory=list)


class RunService:
    """The run lifecycle over the storage ports (module docstring).

    ``catalog`` compiles workflows; ``models``, ``memory`` and ``workflows`` go to every
    run's :class:`RunDeps`. One service per process is enough; it is safe to use from
    many tasks at once.
    """

    def __init__(self, *, catalog: NodeCatalog, stores: Stores, settings: Settings,
                 models: ModelCatalog | None = None, memory: MemoryStore | None = None,
                 workflows: WorkflowSource | None = None, knowledge: Any = None) -> None:
        self.catalog = catalog
        self.stores = stores
        self.settings = settings
        self.models = models
        self.memory = memory
        self.workflows = workflows
        #: the knowledge search nodes get (``RunDeps.knowledge``; an ``engine.knowledge`` KnowledgeSearch)
        self.knowledge = knowledge
        self._live: dict[str, _Live] = {}
        self._docs: OrderedDict[tuple[str, str], Mapping[str, Any]] = OrderedDict()
        #: states and plans of runs prepared here and not executed yet (executing one needs no read of them)
        self._prepared: OrderedDict[str, tuple[RunState, CompiledPlan]] = OrderedDict()
        #: ``(tenant_id, run_id)`` of a run a watcher found orphaned (:func:`~engine.leases.orphaned`): the
        #: process's recovery loop (:mod:`engine.recovery`) sets it to continue that run now
        #: rather than at its next look; None: watchers wait for whoever recovers it
        self.on_orphan: Callable[[str, str], None] | None = None

    # ------------------------------------------------------------------ plans

    def compile(self, doc: Mapping[str, Any]) -> CompiledPlan:
        """Compile ``doc`` with this service's catalog and models. Raises CompileError."""
        return compile_workflow(doc, catalog=self.catalog, models=self.models)

    async def _plan_of(self, state: RunState) -> CompiledPlan:
        key = (state.tenant_id, state.workflow_hash)
        doc = self._docs.get(key)
        if doc is None:
            doc = await self.stores.runs.get_workflow(state.tenant_id, state.workflow_hash)
            self._keep_doc(key, doc)
        return self.compile(doc)

    def _keep_doc(self, key: tuple[str, str], doc: Mapping[str, Any]) -> None:
        """Remember a stored document by ``(tenant, content hash)``: a hash names one
        document for good, so a run started here needs no read of it to execute."""
        self._docs[key] = doc
        self._docs.move_to_end(key)
        while len(self._docs) > _DOCS_MAX:
            self._docs.popitem(last=False)

    # ------------------------------------------------------------------ start

    async def prepare(self, doc: Mapping[str, Any], inputs: Mapping[str, Any], *, tenant_id: str = DEFAULT_TENANT,
                      chat_id: str | None = None, user_id: str | None = None, message: str | None = None,
                      run_id: str | None = None, workflow_version: str | None = None,
                      history: list[dict[str, Any]] | None = None, plan: CompiledPlan | None = None) -> RunState:
        """Create a run (status ``pending``) without executing it; returns its state.
        ``plan``: the plan of ``doc`` when the caller compiled it already (:meth:`compile`).

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
        """
        plan = plan if plan is not None else self.compile(doc)
        values = dict(inputs)
        if message is not None and "query" not in values and any(v.name == "query" for v in plan.workflow.inputs):
            values["query"] = message
        history = await self._history(tenant_id, chat_id) if chat_id else (list(history) if history else None)
        state = new_run_state(plan, values, run_id=run_id, chat_id=chat_id, query=message, user_id=user_id,
                              history=history)
        state.tenant_id, state.workflow_version = tenant_id, workflow_version
        if (tenant_id, state.workflow_hash) not in self._docs:  # else stored already (documents stay)
            await self.stores.runs.put_workflow(tenant_id, doc)
            self._keep_doc((tenant_id, state.workflow_hash), doc)
        await self.stores.runs.create_run(state)
        if chat_id:
            await self._open_turn(state, message)
        self._prepared[state.run_id] = (state, plan)
        while len(self._prepared) > _DOCS_MAX:  # runs executed elsewhere (queued) leave theirs behind
            self._prepared.popitem(last=False)
        return state

    def start(self, doc: Mapping[str, Any], inputs: Mapping[str, Any], **kw: Any) -> AsyncIterator[Any]:
        """:meth:`prepare` then :meth:`execute`: the run's events as it runs (same errors)."""

        async def events() -> AsyncIterator[Any]:
            state = await self.prepare(doc, inputs, **kw)
            async for event in self.execute(state.tenant_id, state.run_id):
                yield event

        return events()

    async def rerun_from(self, tenant_id: str, run_id: str, node_id: str, doc: Mapping[str, Any], *,
                         workflow_version: str | None = None,
                         new_run_id: str | None = None) -> tuple[RunState, AsyncIterator[Any]]:
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
            raise RunNotResumable(f"run {run_id} is still {old.status.value}: rerun it once it has ended "
                                  f"(or stop it first)")
        plan = self.compile(doc)
        state = new_run_state(plan, old.inputs, run_id=new_run_id, query=old.sys.get("query") or None,
                              user_id=old.sys.get("user_id") or None, history=old.sys.get("history") or None)
        state.tenant_id, state.workflow_version = tenant_id, workflow_version
        first = seed_rerun(plan, old, state, node_id)
        await self.stores.runs.put_workflow(tenant_id, doc)
        await self.stores.runs.create_run(state)
        await self.stores.events.append(tenant_id, state.run_id, durable(first))

        async def events() -> AsyncIterator[Any]:
            for event in first:
                yield event
            async for event in self.execute(tenant_id, state.run_id, expect=RunStatus.running):
                yield event

        return state, events()

    # ------------------------------------------------------------------ continue

    def resume(self, tenant_id: str, run_id: str, answers: Mapping[str, Any],
               message: str | None = None) -> AsyncIterator[Any]:
        """Continue a paused run with ``answers`` (interrupt id -> answer); its events.

        In a chat, ``message`` (the text the person sent) is stored as the next turn.

        Raises (when iterated):
            RunNotFound, RunNotResumable (not paused), UnknownInterrupt, RunOwned.
        """
        return self.execute(tenant_id, run_id, answers=answers, expect=RunStatus.paused, message=message)

    async def answer_chat(self, tenant_id: str, chat_id: str, message: str) -> AsyncIterator[Any] | None:
        """The chat's paused run answered by ``message`` (the next message answers the
        pending question), or None when the chat has no run waiting for exactly one answer."""
        paused = await self.stores.runs.list_runs(tenant_id, status=RunStatus.paused, chat_id=chat_id, limit=1)
        if not paused or len(paused[0].pending_interrupts) != 1:
            return None
        interrupt_id = paused[0].pending_interrupts[0]["id"]
        return self.resume(tenant_id, paused[0].run_id, {interrupt_id: message}, message=message)

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

    # ------------------------------------------------------------------ execute

    async def execute(self, tenant_id: str, run_id: str, *, answers: Mapping[str, Any] | None = None,
                      expect: RunStatus | None = RunStatus.pending, message: str | None = None,
                      take_over: str | None = None) -> AsyncIterator[Any]:
        """Claim the run, execute it from its stored state and yield its events.

        ``expect``: the status the run must have (``pending`` for a new run, ``paused`` to
        resume); None accepts ``pending`` or ``running`` (recovery after a crash).
        ``take_over``: an owner id the run may be taken from (:meth:`recover`).
        Closing the iterator early cancels the run (it ends ``cancelled``).

        Raises:
            RunNotFound, RunNotResumable, UnknownInterrupt, RunOwned, LeaseLost.
        """
        runs = self.stores.runs
        prepared, plan = self._prepared.pop(run_id, (None, None)) if expect is RunStatus.pending else (None, None)
        owner, state = await self._claim(tenant_id, run_id, prepared, take_over)  # the state as of the claim
        try:
            allowed = {expect} if expect is not None else {RunStatus.pending, RunStatus.running}
            if state.status not in allowed:
                raise RunNotResumable(f"run {run_id} is {state.status.value}; expected "
                                      f"{' or '.join(sorted(s.value for s in allowed))}")
            if answers:
                answer_interrupts(state, answers)
            if state is not prepared or plan is None:
                plan = await self._plan_of(state)
        except BaseException:
            await runs.release(run_id, owner.id)
            raise
        chat_id = state.sys.get("chat_id")
        if state.status is RunStatus.paused and chat_id and (message is not None or (answers and chat_id != run_id)):
            # An answer given through resume (an option, a form) is the person's next turn
            # in the chat, as a typed message would be: the paused turn's message keeps
            # its question, and the continuation gets its own assistant message.
            await self._open_turn(state, message if message is not None else answer_text(answers or {}))
        token = CancelToken()
        live = self._live[run_id] = _Live(token)
        durable: list[Any] = []
        text: list[str] = []
        released: list[bool] = []  # the last checkpoint of an ended run gave the lease up
        idle = _IdleWatch(self.settings.run_idle_timeout_s, state, token, plan.catalog)
        deps = RunDeps(settings=self.settings, models=self.models, memory=self.memory, workflows=self.workflows,
                       knowledge=self.knowledge, on_event=lambda event: self._publish(live, durable, text, idle.seen(event)),
                       checkpoint=self._checkpointer(owner, durable, idle, released))
        helpers = [asyncio.create_task(self._heartbeat(run_id, owner, token)),
                   asyncio.create_task(self._watch_commands(run_id, token)),
                   asyncio.create_task(idle.watch())]
        try:
            async with contextlib.aclosing(stream_workflow(plan, state, deps=deps, cancel=token)) as events:
                async for event in events:
                    yield idle.seen(event)
        except (LeaseLost, RunOwned):
            raise  # another process owns the run now: nothing may be written for it here
        except Exception as exc:
            if await self._salvage(state, owner, exc, lambda event: self._publish(live, durable, text, event),
                                   durable):
                released.append(True)
            raise
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            del self._live[run_id]
            for queue in live.watchers:
                queue.put_nowait(None)
            await self._close_turn(state, "".join(text))
            if not released:
                await runs.release(run_id, owner.id)

    async def _salvage(self, state: RunState, owner: OwnerInfo, exc: BaseException, publish: Any,
                       durable: list[Any]) -> bool:
        """Store a run whose execution stopped on an unexpected error (a fault of the engine
        or of a store, not of a node) as failed, with ``engine_error``, so it never stays
        ``running`` with nobody executing it. Only the run's row and its pending events are
        written (the fault may lie in writing node runs); the node runs keep their last
        checkpoint. Returns True when stored (the lease then went with it); a store that
        fails again is left as it is for recovery, which finds the run unowned.
        """
        if state.status not in _ENDED:
            state.status, state.finished_at = RunStatus.failed, time.time()
            state.error = NodeError(type=type(exc).__name__, message=f"the run stopped on an internal error "
                                    f"({type(exc).__name__}); the log has the details", reason="engine_error")
            state.seq += 1
            publish(RunFailedEvent(seq=state.seq, run_id=state.run_id, ts=time.time(), reason="engine_error",
                                   error=state.error.model_dump()))
        batch, durable[:] = durable[:], []
        try:
            await self.stores.runs.checkpoint(state, CheckpointDelta([], len(state.history)), owner_id=owner.id,
                                              events=batch, release=True)
        except Exception:  # noqa: BLE001 - the original error is what the caller gets
            return False
        return True

    def _publish(self, live: _Live, durable: list[Any], text: list[str], event: Any) -> None:
        """Fan an event out: live watchers get everything; deltas are broadcast only (the
        final text is stored with the node run), other events go to the durable log."""
        if isinstance(event, NodeDelta):
            if event.channel == "answer":
                text.append(event.text)
        else:
            durable.append(event)
            live.recent.append(event)
            if len(live.recent) > _RECENT_MAX:
                del live.recent[: len(live.recent) - _RECENT_MAX]
        for queue in live.watchers:
            queue.put_nowait(event)

    def _checkpointer(self, owner: OwnerInfo, durable: list[Any], idle: "_IdleWatch", released: list[bool]) -> Any:
        """The run's checkpoint hook. The checkpoint of a run that ended is its last (nothing
        can continue an ended run), so it also gives the lease up, in the same transaction;
        a paused run keeps its lease until its turn is closed (a resume waits for that)."""
        runs = self.stores.runs

        async def checkpoint(state: RunState, delta: CheckpointDelta) -> None:
            idle.amend(state)
            batch = durable[:]  # the events buffered since the last checkpoint commit with it
            del durable[:]
            ended = state.status in _ENDED
            try:
                await runs.checkpoint(state, delta, owner_id=owner.id, events=batch, release=ended)
            except BaseException:
                durable[:0] = batch  # not stored: the next checkpoint carries them
                raise
            if ended:
                released.append(True)

        return checkpoint

    async def _claim(self, tenant_id: str, run_id: str, prepared: RunState | None = None,
                     take_over: str | None = None) -> tuple[OwnerInfo, RunState]:
        """Claim the run for this process and read its state in the same transaction (a
        state read before claiming may be stale by the time the claim succeeds: another
        process ran the run in between); a dead owner on this host is taken over at once.
        ``prepared``: the state :meth:`prepare` created here, used as it is when the run is
        still pending and unowned (then the stored state is that one: nothing to read).
        ``take_over``: an owner id taken over even while its lease runs (:meth:`recover`)."""
        owner = OwnerInfo(id=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(),
                          lease_until=time.time() + self.settings.lease_ttl)
        if (prepared is not None and prepared.tenant_id == tenant_id
                and await self.stores.runs.claim_if_pending(tenant_id, run_id, owner)):
            return owner, prepared
        try:
            return owner, await self.stores.runs.claim_and_load(tenant_id, run_id, owner)
        except RunOwned as exc:
            if exc.owner is None or not (owner_gone(exc.owner) or exc.owner.id == take_over):
                raise
            return owner, await self.stores.runs.claim_and_load(tenant_id, run_id, owner, take_from=exc.owner.id)

    async def _heartbeat(self, run_id: str, owner: OwnerInfo, token: CancelToken) -> None:
        """Renew the lease every third of its length; losing it cancels the run here, since
        another process now owns it and two executions must never interleave."""
        ttl = self.settings.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                await self.stores.runs.renew(run_id, owner.id, time.time() + ttl)
            except LeaseLost:
                token.cancel("this process lost ownership of the run (its lease expired)")
                return

    async def _watch_commands(self, run_id: str, token: CancelToken) -> None:
        """Poll the command channel; a cancel command fires the run's token."""
        after = 0
        while not token.cancelled:
            # Wait first: a command is seen within a poll interval either way, and a run that
            # ends within one (most runs without a model) never reads the channel.
            await asyncio.sleep(COMMAND_POLL_S)
            for command in await self.stores.commands.poll(run_id, after):
                after = max(after, command.id)
                if command.kind is CommandKind.cancel:
                    token.cancel(command.reason or "cancelled by request")

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
            await self.stores.commands.send(tenant_id, RunCommand(run_id=run_id, kind=CommandKind.cancel,
                                                                  reason=reason, created_at=time.time()))
            return summary
        return await self._cancel_idle(tenant_id, run_id, reason)

    async def _cancel_idle(self, tenant_id: str, run_id: str, reason: str) -> RunSummary:
        """End a pending or paused run that no process executes."""
        owner, state = await self._claim(tenant_id, run_id)
        try:
            state.status = RunStatus.cancelled
            now = state.finished_at = time.time()
            state.error = NodeError(type="RunCancelled", message=f"run cancelled: {reason}", reason="cancelled")
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
            ended = RunCancelledEvent(seq=state.seq, run_id=run_id, ts=now, reason=f"run cancelled: {reason}",
                                      elapsed_ms=elapsed)
            await self.stores.runs.checkpoint(state, CheckpointDelta(waiting, len(state.history)), owner_id=owner.id,
                                              events=[ended])
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

    async def node_runs(self, tenant_id: str, run_id: str) -> list[NodeRun]:
        """Every node run of the run, in start order. Raises RunNotFound."""
        await self.stores.runs.get_run(tenant_id, run_id)
        return await self.stores.runs.list_node_runs(tenant_id, run_id)

    async def workflow_of(self, tenant_id: str, run_id: str) -> dict[str, Any]:
        """The workflow document the run executes. Raises RunNotFound."""
        summary = await self.stores.runs.get_run(tenant_id, run_id)
        return await self.stores.runs.get_workflow(tenant_id, summary.workflow_hash)

    async def watch(self, tenant_id: str, run_id: str, after_seq: int = 0) -> AsyncIterator[dict[str, Any]]:
        """The run's events after ``after_seq`` as JSON objects: first the stored ones it
        missed, then live ones until the run ends or pauses. In the executing process live
        events include text deltas; elsewhere they come from the durable log (no deltas).

        A run nobody executes (its owner died: :func:`~engine.leases.orphaned`) is reported to
        :attr:`on_orphan`, at most every :data:`ORPHAN_REPORT_S`, and the watch goes on:
        once the run is recovered its new events follow the stored ones (live, deltas
        included, when the recovery executes it in this process), with no gap or repeat."""
        await self.stores.runs.get_run(tenant_id, run_id)  # RunNotFound for another tenant's run
        seen = after_seq
        reported = 0.0
        while True:
            live = self._live.get(run_id)
            queue: asyncio.Queue[Any] = asyncio.Queue()
            if live is not None:  # subscribe before reading, so nothing published meanwhile is lost
                live.watchers.append(queue)
            batch = await self.stores.events.read(tenant_id, run_id, seen)
            for event in batch:
                seen = event["seq"]
                yield event
            if live is not None:
                async for event in self._watch_live(live, queue, seen):
                    yield event
                return
            if not batch:
                summary = await self.stores.runs.get_run(tenant_id, run_id)
                if summary.status in _ENDED or summary.status is RunStatus.paused:
                    # the last checkpoint may have committed after the read above
                    for event in await self.stores.events.read(tenant_id, run_id, seen):
                        yield event
                    return
                now = time.time()
                if (self.on_orphan is not None and now - reported >= ORPHAN_REPORT_S
                        and orphaned(summary, now=now, pending_grace_s=self.settings.lease_ttl)):
                    reported = now
                    self.on_orphan(tenant_id, run_id)
                await asyncio.sleep(WATCH_POLL_S)

    async def _watch_live(self, live: _Live, queue: asyncio.Queue[Any], seen: int) -> AsyncIterator[dict[str, Any]]:
        try:
            for event in list(live.recent):  # durable events not in the log yet
                if event.seq > seen:
                    seen = event.seq
                    yield event.model_dump(mode="json")
            while (event := await queue.get()) is not None:
                if event.seq > seen:
                    seen = event.seq
                    yield event.model_dump(mode="json")
        finally:
            if queue in live.watchers:
                live.watchers.remove(queue)

    async def prune(self, tenant_id: str, older_than_days: float) -> int:
        """Delete runs that ended more than ``older_than_days`` days ago; returns how many."""
        return await self.stores.runs.prune(tenant_id, time.time() - older_than_days * 86400.0)

    # ------------------------------------------------------------------ chats

    async def _history(self, tenant_id: str, chat_id: str) -> list[dict[str, Any]]:
        """``sys.history``: the chat's messages with text, oldest first."""
        messages = await self.stores.chats.messages(tenant_id, chat_id, limit=200)
        return [{"role": m.role, "content": m.text} for m in messages if m.text]

    async def _open_turn(self, state: RunState, text: str | None) -> None:
        """A turn of a chat: the user's message, then the assistant message that the run fills."""
        now = time.time()
        chat_id = str(state.sys["chat_id"])
        if text:
            await self.stores.chats.add_message(ChatMessage(
                id=uuid.uuid4().hex, tenant_id=state.tenant_id, chat_id=chat_id, role="user", run_id=state.run_id,
                parts=[MessagePart(type="text", text=text)], created_at=now, updated_at=now))
        await self.stores.chats.add_message(ChatMessage(
            id=uuid.uuid4().hex, tenant_id=state.tenant_id, chat_id=chat_id, role="assistant", run_id=state.run_id,
            status=MessageStatus.streaming, created_at=now + 1e-6, updated_at=now))

    async def _close_turn(self, state: RunState, streamed: str) -> None:
        """Finish the turn's one assistant message: the answer (or what was streamed before a
        stop or failure), the reasoning, the tool calls, and a pending question."""
        chat_id = state.sys.get("chat_id")
        if not chat_id or state.sys.get("chat_id") == state.run_id:
            return
        messages = await self.stores.chats.messages(state.tenant_id, str(chat_id), limit=50)
        open_ = [m for m in messages if m.role == "assistant" and m.run_id == state.run_id
                 and m.status is MessageStatus.streaming]
        if not open_:
            return
        message = open_[-1]
        message.parts = _parts_of(state, streamed)
        message.status = _MESSAGE_STATUS.get(state.status, MessageStatus.failed)
        message.updated_at = time.time()
        await self.stores.chats.update_message(message)


class _IdleWatch:
    """The run's idle watchdog: a run that produces no event (text deltas included) for
    ``seconds`` (``Settings.run_idle_timeout_s``; 0: off) is ended *failed*, with reason
    ``idle_timeout`` and a message naming the interval and the node(s) then running - a
    model provider that sent its headers and then nothing must not hold the run, its
    lease or a client's stream forever.

    Only silence while nothing but *streaming* work runs counts: a node whose kind streams
    nothing (a code node computing for minutes, an HTTP call, a sleep) is quiet by nature
    and bounded by its own timeout, so while one runs the watchdog waits (``catalog``'s
    ``streams`` trait tells the kinds apart; containers are judged by what runs inside).

    It stops the run through the run's cancel token (the scheduler then cancels the
    node in progress, closes the node runs and checkpoints, exactly as for a stop) and
    turns that cancellation into the failure it is, at the two boundaries the service
    owns: every event passes :meth:`seen` (``run_cancelled`` becomes ``run_failed``, the
    stopped nodes' ``node_finished`` says ``failed`` with the idle error) and every
    checkpoint passes :meth:`amend` (the run and those node runs are stored ``failed``).
    """

    __slots__ = ("seconds", "state", "token", "catalog", "last", "error", "nodes", "_changed")

    def __init__(self, seconds: float, state: RunState, token: CancelToken,
                 catalog: NodeCatalog | None = None) -> None:
        self.seconds, self.state, self.token, self.catalog = seconds, state, token, catalog
        self.last = time.monotonic()
        self.error: NodeError | None = None
        self.nodes: list[str] = []
        self._changed: dict[int, Any] = {}

    async def watch(self) -> None:
        """Until the run produced nothing for ``seconds``; then fail it (class docstring)."""
        if self.seconds <= 0:
            return
        while not self.token.cancelled:
            left = self.last + self.seconds - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
                continue
            running = {nid: run for nid, run in self.state.node_runs.items() if run.status is NodeRunStatus.running}
            if any(self._quiet_by_nature(run.kind) for run in running.values()):
                self.last = time.monotonic()
                continue
            self.nodes = list(running)
            where = f" while node(s) {', '.join(map(repr, self.nodes))} were running" if self.nodes else ""
            message = (f"run produced no event for {self.seconds:g}s (run_idle_timeout_s={self.seconds:g}){where}; "
                       f"it was stopped")
            self.error = NodeError(type="RunIdleTimeout", message=message, reason="idle_timeout",
                                   node_id=self.nodes[0] if self.nodes else None)
            self.token.cancel(message)
            return

    def _quiet_by_nature(self, kind: str) -> bool:
        """True for a leaf kind that streams nothing (class docstring); unknown kinds are not."""
        spec = self.catalog.get(kind) if self.catalog is not None else None
        return spec is not None and spec.streams is None and not spec.container

    def seen(self, event: Any) -> Any:
        """``event``, noted as activity; after an idle stop, as the failure it reports (the
        same object whichever path asks, so the log and the live stream agree)."""
        self.last = time.monotonic()
        if self.error is None:
            return event
        seq = getattr(event, "seq", None)
        if seq in self._changed:
            return self._changed[seq]
        changed = event
        if isinstance(event, RunCancelledEvent):
            changed = RunFailedEvent(seq=event.seq, run_id=event.run_id, ts=event.ts, reason="idle_timeout",
                                     error=self.error.model_dump(), elapsed_ms=event.elapsed_ms)
        elif (isinstance(event, NodeFinished) and event.status is NodeRunStatus.cancelled and event.loop_id is None
              and event.node_id in self.nodes):
            changed = event.model_copy(update={"status": NodeRunStatus.failed, "error": self.error.model_dump()})
        if changed is not event:
            self._changed[event.seq] = changed
        return changed

    def amend(self, state: RunState) -> None:
        """After an idle stop: the run and the node runs it stopped are ``failed`` with the idle error."""
        if self.error is None:
            return
        if state.status is RunStatus.cancelled:
            state.status, state.error = RunStatus.failed, self.error
        for nid in self.nodes:
            run = state.node_runs.get(nid)
            if run is not None and run.status is NodeRunStatus.cancelled:
                run.status, run.error = NodeRunStatus.failed, self.error


def answer_text(answers: Mapping[str, Any]) -> str:
    """The answers to a run's interrupts as a chat message's text: a plain value as it is,
    a form's fields one ``name: value`` line each, a list comma-separated (several
    interrupts answered at once: their texts one per line)."""

    def one(value: Any) -> str:
        if isinstance(value, Mapping):
            return "\n".join(f"{k}: {one(v)}" for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return ", ".join(one(v) for v in value)
        return "" if value is None else str(value)

    return "\n".join(one(value) for value in answers.values())


_MESSAGE_STATUS = {RunStatus.succeeded: MessageStatus.done, RunStatus.paused: MessageStatus.paused,
                   RunStatus.cancelled: MessageStatus.cancelled, RunStatus.failed: MessageStatus.failed,
                   RunStatus.running: MessageStatus.failed}


def _parts_of(state: RunState, streamed: str) -> list[MessagePart]:
    """The assistant message's parts from the run: text, reasoning, tool calls, question."""
    parts: list[MessagePart] = []
    text = state.answer if state.status is RunStatus.succeeded else (state.answer or streamed)
    for run in state.node_runs.values():
        reasoning = (run.outputs or {}).get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(MessagePart(type="reasoning", text=reasoning))
        for step in (run.outputs or {}).get("trace") or []:
            if isinstance(step, dict) and step.get("tool"):
                parts.append(MessagePart(type="tool_call", data=step))
            elif isinstance(step, dict):
                parts += _tool_parts(step.get("tools") or [])
    if text:
        parts.append(MessagePart(type="text", text=text))
    for interrupt in state.interrupts.values():
        parts.append(MessagePart(type="interrupt", data=interrupt.model_dump(mode="json", exclude={"answer"})))
    if state.error is not None and state.status is not RunStatus.succeeded:
        parts.append(MessagePart(type="text", text="", data={"error": state.error.model_dump(mode="json")}))
    return parts


def _tool_parts(records: list[Any]) -> list[MessagePart]:
    """A ``tool_call`` and a ``tool_result`` part per call an agent round made (its trace
    entry's ``tools``): the call's id, tool name and arguments, then the result's preview
    (the first characters the model saw) with ``is_error``."""
    parts: list[MessagePart] = []
    for record in records:
        if not isinstance(record, dict):
            continue
        ids = {"id": record.get("id"), "name": record.get("name")}
        parts.append(MessagePart(type="tool_call", data={**ids, "arguments": record.get("arguments")}))
        if "preview" in record or "is_error" in record:
            parts.append(MessagePart(type="tool_result", text=str(record.get("preview") or ""),
                                     data={**ids, "is_error": bool(record.get("is_error"))}))
    return parts


def bind_single_answer(state_or_summary: Any, answer: Any, interrupt_id: str | None = None) -> dict[str, Any]:
    """``{interrupt id: answer}`` for a run with pending interrupts; ``interrupt_id`` names
    one when several are pending.

    Raises:
        UnknownInterrupt: none pending, several pending and none named, or an unknown id.
    """
    pending = ([i["id"] for i in state_or_summary.pending_interrupts]
               if isinstance(state_or_summary, RunSummary) else list(state_or_summary.interrupts))
    if interrupt_id is None:
        if len(pending) != 1:
            raise UnknownInterrupt(f"run {state_or_summary.run_id} has {len(pending)} pending interrupts "
                                   f"({', '.join(pending) or 'none'}); name one with --interrupt ID")
        interrupt_id = pending[0]
    elif interrupt_id not in pending:
        raise UnknownInterrupt(f"run {state_or_summary.run_id}: no pending interrupt {interrupt_id!r} "
                               f"(pending: {', '.join(pending) or 'none'})")
    return {interrupt_id: answer}

