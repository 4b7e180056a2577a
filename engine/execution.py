"""Executing a run: the part of the run lifecycle that runs in the process holding the run.

:class:`Executing` (a base of :class:`~engine.service.RunService`) claims the run (a
lease renewed every third of ``Settings.lease_ttl`` while it runs; losing it cancels
the execution here), polls the command channel for a stop, drives the scheduler, and
puts its side jobs on the one event stream: every event passes the idle watch
(:class:`_IdleWatch`), goes to the process's live hub (:class:`_Live`: watchers and
followers in this process, text deltas included) and, but for text deltas, to the
durable log with the next checkpoint; an unexpected error is salvaged into a failed run.
The service's verbs (start, resume, recover, launch...) all end here.
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
from typing import TYPE_CHECKING, Any, AsyncIterator, Mapping, Sequence

from schemas.events import NodeDelta, NodeFinished
from schemas.events import RunCancelled as RunCancelledEvent
from schemas.events import RunFailed as RunFailedEvent
from schemas.records import CommandKind, OwnerInfo
from schemas.run import NodeError, RunState
from schemas.types import NodeRunStatus, RunStatus

from .catalog import NodeCatalog
from .context import CancelToken, RunDeps
from .errors import FlowloomError
from .leases import owner_gone
from .ports import CheckpointDelta, LeaseLost, RunOwned
from .runner import answer_interrupts, stream_workflow
from .turns import answer_text

if TYPE_CHECKING:
    from .service import Stores
    from .settings import Settings

__all__ = ["COMMAND_POLL_S", "Executing", "RunNotResumable"]

#: seconds between two polls for commands (cancel is seen within this plus one node step)
COMMAND_POLL_S = 0.1
_ENDED = frozenset({RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled})
#: executions that ended here kept for followers that come late (oldest dropped first)
_ENDED_KEPT = 256
#: seconds an ended execution stays in the hub for followers that come late
_ENDED_KEPT_S = 60.0


class RunNotResumable(FlowloomError):
    """The run is not in a state the request needs (e.g. resuming a finished run)."""


#: events of a live execution kept in memory for followers that join late (text deltas included)
_RECENT_MAX = 10_000


@dataclass(slots=True)
class _Live:
    """A run executing in this process (the live hub): its cancel token, its live
    watchers, its recent events - text deltas included - so a follower that joins late
    (between two checkpoints, or just after a fast run ended) finds there what the event
    log does not hold; the run's state as it executes, the error that stopped the
    execution (None: it ended, or paused, normally) and whether it is over."""

    token: CancelToken
    tenant_id: str = ""
    state: RunState | None = None
    watchers: list[asyncio.Queue[Any]] = field(default_factory=list)
    recent: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    over: bool = False
    over_at: float = 0.0


class Executing:
    """Execution of a run by the service (module docstring). Uses the service's
    ``stores``, ``settings``, models, memory, workflows and knowledge."""

    stores: "Stores"
    settings: "Settings"
    _live: dict[str, _Live]
    _ended: "OrderedDict[str, _Live]"

    async def execute(self, tenant_id: str, run_id: str, *, answers: Mapping[str, Any] | None = None,
                      expect: RunStatus | None = RunStatus.pending, message: str | None = None,
                      take_over: str | None = None, prelude: Sequence[Any] = ()) -> AsyncIterator[Any]:
        """Claim the run, execute it from its stored state and yield its events.

        ``prelude``: events the run produced before this execution and already stored (a
        rerun's first events): yielded first and held by the live hub with the rest, so a
        follower gets their text deltas too.

        ``expect``: the status the run must have (``pending`` for a new run, ``paused`` to
        resume); None accepts ``pending`` or ``running`` (recovery after a crash), and a
        ``paused`` run whose answers are stored (:meth:`RunService.launch` of a resume
        that a worker continues).
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
            if expect is None and any(i.answered for i in state.interrupts.values()):
                allowed.add(RunStatus.paused)  # answered before it was queued: continue it
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
        live = self._live[run_id] = _Live(token, tenant_id, state)
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
        live.recent.extend(prelude)
        try:
            for event in prelude:
                yield event
            async with contextlib.aclosing(stream_workflow(plan, state, deps=deps, cancel=token)) as events:
                async for event in events:
                    yield idle.seen(event)
        except (LeaseLost, RunOwned) as exc:
            live.error = exc
            raise  # another process owns the run now: nothing may be written for it here
        except Exception as exc:
            live.error = exc
            if await self._salvage(state, owner, exc, lambda event: self._publish(live, durable, text, event),
                                   durable):
                released.append(True)
            raise
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            try:
                await self._close_turn(state, "".join(text))
                if not released:
                    await runs.release(run_id, owner.id)
            finally:
                # Followers end once the turn is closed and the lease given up: what they
                # read next (the run, the chat, a resume) finds the execution over.
                del self._live[run_id]
                self._keep_ended(run_id, live)
                for queue in live.watchers:
                    queue.put_nowait(None)

    def _keep_ended(self, run_id: str, live: _Live) -> None:
        """Keep an ended execution in the hub for a while (at most :data:`_ENDED_KEPT`, for
        :data:`_ENDED_KEPT_S` seconds): a follower that asks right after the run ended
        replays its events from memory (the durable ones: a replay is the log's)."""
        live.over, live.over_at = True, time.monotonic()
        self._ended[run_id] = live
        self._ended.move_to_end(run_id)
        while self._ended and (len(self._ended) > _ENDED_KEPT
                               or next(iter(self._ended.values())).over_at < live.over_at - _ENDED_KEPT_S):
            self._ended.popitem(last=False)

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
        """Fan an event out: live watchers and the hub's recent events get everything;
        deltas stay in memory only (the final text is stored with the node run), other
        events go to the durable log."""
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

