"""Executing a run: the part of the run lifecycle that runs in the process holding the run.

:class:`Executing` (a base of :class:`~engine.service.RunService`) claims the run (a
lease renewed every third of ``Settings.lease_ttl`` while it runs; losing it cancels
the execution here), watches the command channel for a stop (one poll for every run
executing here, :mod:`engine.command_watch`), drives the scheduler, and
puts its side jobs on the one event stream: every event passes the idle watch
(:class:`_IdleWatch`), goes to the process's live hub (:class:`_Live`: watchers and
followers in this process, text deltas included) and, but for text deltas, to the
durable log with the next checkpoint - an end only once that checkpoint is stored, so
nobody is told an end the store does not hold; a store that is away is waited out for
``Settings.store_retry_s``; an unexpected error is salvaged into a failed run, and when
even that cannot be stored the execution is interrupted (:class:`RunInterrupted`) and
the run stored failed once the store is back.
The service's verbs (start, resume, recover, launch...) all end here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from schemas.events import NodeDelta, NodeFinished, RunFinished, RunPaused
from schemas.events import RunCancelled as RunCancelledEvent
from schemas.events import RunFailed as RunFailedEvent
from schemas.records import OwnerInfo
from schemas.run import NodeError, RunState
from schemas.types import NodeRunStatus, RunStatus

from .catalog import NodeCatalog
from .command_watch import COMMAND_POLL_S, CommandWatch
from .context import CancelToken, RunDeps
from .deferred import Deferred, stop_all
from .errors import FlowloomError
from .leases import owner_gone
from .ports import CheckpointDelta, LeaseLost, RunOwned, StoreError, StoreUnavailable
from .runner import answer_interrupts, stream_workflow
from .telemetry import telemetry
from .turns import answer_text

if TYPE_CHECKING:
    from .compiler import CompiledPlan
    from .context import WorkflowSource
    from .environment import SecretStore
    from .ports import ModelCatalog, NodeMemory
    from .service import Stores
    from .settings import Settings

__all__ = ["COMMAND_POLL_S", "Executing", "RunInterrupted", "RunNotResumable"]

logger = logging.getLogger("flowloom.engine")

_ENDED = frozenset({RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled})
#: executions that ended here kept for followers that come late (oldest dropped first)
_ENDED_KEPT = 256
#: seconds an ended execution stays in the hub for followers that come late
_ENDED_KEPT_S = 60.0


#: the events that tell how an execution ended (or paused): told once the checkpoint storing them committed
_TERMINAL = (RunFinished, RunFailedEvent, RunCancelledEvent, RunPaused)
#: seconds before the first retry of a checkpoint the store refused, and at most between two
_RETRY_FIRST_S, _RETRY_MAX_S = 0.05, 1.0


class RunNotResumable(FlowloomError):
    """The run is not in a state the request needs (e.g. resuming a finished run)."""


class RunInterrupted(StoreError):
    """The run's store failed while it executed and stayed away longer than
    ``Settings.store_retry_s``, so its execution stopped without being able to store how
    it ended: its outcome is not decided yet. The process stores it ``failed`` (reason
    ``store_error``) once the store is back, unless recovery continued it first; follow
    the run again for its outcome. ``run_id``: the run; ``public``: the message without
    the store's own words (a database path or host is for the operator's log)."""

    def __init__(self, run_id: str, store_error: StoreError) -> None:
        self.run_id = run_id
        then = (
            "this process stores it failed once the store is back (if it stops first, recovery continues "
            "the run) - follow the run again for its outcome"
        )
        self.public = (
            f"run {run_id} was interrupted: its store failed while it ran, and how the run ended could "
            f"not be stored; {then}"
        )
        super().__init__(
            f"run {run_id} was interrupted: its store failed ({store_error}); how the run ended could "
            f"not be stored; {then}"
        )


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
    #: queues of followers (and :func:`engine.frontdoor.follow_to_end`'s end watchers):
    #: each event, then None at the execution's end, through ``put_nowait``
    watchers: list[Any] = field(default_factory=list)
    #: a deque bounded by :data:`_RECENT_MAX`: a list trimmed at its front moved all of
    #: its 10,000 items per event once full (20,000 events for a 10,000-node run)
    recent: deque[Any] = field(default_factory=lambda: deque(maxlen=_RECENT_MAX))
    #: terminal events (:data:`_TERMINAL`) waiting for the checkpoint that stores them
    held: list[Any] = field(default_factory=list)
    #: the store failure the execution stopped waiting out (its next checkpoints get one try)
    store_down: StoreError | None = None
    #: the run status its chat turn was closed with (None: not closed yet)
    turn_closed: RunStatus | None = None
    error: BaseException | None = None
    over: bool = False
    over_at: float = 0.0


class Executing:
    """Execution of a run by the service (module docstring). Uses the service's
    ``stores``, ``settings``, models, memory, workflows and knowledge."""

    stores: Stores
    settings: Settings
    #: the secret values of environment variables (:mod:`engine.environment`)
    secrets: SecretStore | None
    memory: NodeMemory | None
    workflows: WorkflowSource | None
    knowledge: Any
    _live: dict[str, _Live]
    _ended: OrderedDict[str, _Live]
    #: runs whose interrupted execution's end this process stores once the store is back
    _settling: dict[str, asyncio.Task[None]]
    _prepared: OrderedDict[str, tuple[RunState, CompiledPlan, OwnerInfo | None]]
    #: the command channel watched for every run executing here, in one poll (:mod:`engine.command_watch`)
    _commands: CommandWatch

    if TYPE_CHECKING:  # the service's own parts (engine/service.py, engine/turns.py)

        async def models_of(self, tenant_id: str) -> ModelCatalog | None: ...
        async def _plan_of(self, state: RunState) -> CompiledPlan: ...
        async def _open_turn(self, state: RunState, text: str | None) -> None: ...
        async def _close_turn(self, state: RunState, streamed: str, *, reclose: bool = False) -> None: ...

    async def execute(
        self,
        tenant_id: str,
        run_id: str,
        *,
        answers: Mapping[str, Any] | None = None,
        expect: RunStatus | None = RunStatus.pending,
        message: str | None = None,
        take_over: str | None = None,
        prelude: Sequence[Any] = (),
    ) -> AsyncIterator[Any]:
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
        if run_id in self._settling:
            raise RunOwned(
                f"run {run_id}: this process is still storing how its execution ended "
                f"(its store failed while it ran)"
            )
        prepared, plan, held = (
            self._prepared.pop(run_id, (None, None, None))
            if expect is RunStatus.pending
            else (None, None, None)
        )
        owner, state = await self._claim(
            tenant_id, run_id, prepared, take_over, held
        )  # the state as of the claim
        try:
            allowed = {expect} if expect is not None else {RunStatus.pending, RunStatus.running}
            if expect is None and any(i.answered for i in state.interrupts.values()):
                allowed.add(RunStatus.paused)  # answered before it was queued: continue it
            if state.status not in allowed:
                raise RunNotResumable(
                    f"run {run_id} is {state.status.value}; expected "
                    f"{' or '.join(sorted(s.value for s in allowed))}"
                )
            if answers:
                answer_interrupts(state, answers)
            if state is not prepared or plan is None:
                plan = await self._plan_of(state)
            models = await self.models_of(tenant_id)
        except BaseException:
            await runs.release(run_id, owner.id)
            raise
        chat_id = state.sys.get("chat_id")
        if (
            state.status is RunStatus.paused
            and chat_id
            and (message is not None or (answers and chat_id != run_id))
        ):
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
        deps = RunDeps(
            settings=self.settings,
            models=models,
            memory=self.memory,
            workflows=self.workflows,
            knowledge=self.knowledge,
            secrets=self.secrets,
            on_event=lambda event: self._publish(live, durable, text, idle.seen(event)),
            checkpoint=self._checkpointer(owner, live, durable, text, idle, released),
        )
        # Both helpers begin with a wait (a third of the lease, the idle interval): as timers
        # until then, so a run that ends first creates no task for them (engine.deferred).
        pause = self.settings.lease_ttl / 3
        helpers = [Deferred(pause, lambda: self._heartbeat(run_id, owner, token, waited=pause))]
        if idle.seconds > 0:
            helpers.append(Deferred(idle.last + idle.seconds - time.monotonic(), idle.watch))
        self._commands.watch(run_id, token)
        ending: Any = None
        live.recent.extend(prelude)
        try:
            for event in prelude:
                yield event
            async with contextlib.aclosing(stream_workflow(plan, state, deps=deps, cancel=token)) as events:
                async for event in events:
                    event = idle.seen(event)
                    if isinstance(event, _TERMINAL):
                        ending = event  # the last event, stored by the last checkpoint: told after it
                        continue
                    yield event
            if ending is not None:
                yield ending
        except (LeaseLost, RunOwned) as exc:
            live.error = exc
            raise  # another process owns the run now: nothing may be written for it here
        except Exception as exc:
            live.error = exc
            if await self._salvage(
                state, owner, exc, live, lambda event: self._publish(live, durable, text, event), durable
            ):
                released.append(True)
            elif isinstance(exc, StoreError):
                live.error = self._interrupted(state, owner, exc, durable)
                raise live.error from exc
            raise
        finally:
            await self._wind_up(live, owner, helpers, "".join(text), bool(released))

    async def _wind_up(
        self, live: _Live, owner: OwnerInfo, helpers: list[Deferred], text: str, released: bool
    ) -> None:
        """The end of an execution, however it ended: its helpers stopped, the chat turn
        closed, the lease given up (unless the last checkpoint did), then its followers ended."""
        state = live.state
        assert state is not None
        self._commands.unwatch(state.run_id)
        await stop_all(helpers)
        try:
            # An interrupted run keeps its owner: the settling writes its end and lets it go.
            interrupted = isinstance(live.error, RunInterrupted)
            with _unless(interrupted):
                if live.turn_closed is not state.status:  # not closed yet, or its end changed since
                    await self._close_turn(state, text, reclose=live.turn_closed is not None)
            if not released and not interrupted:
                await self.stores.runs.release(state.run_id, owner.id)
        finally:
            # Followers end once the turn is closed and the lease given up: what they
            # read next (the run, the chat, a resume) finds the execution over.
            del self._live[state.run_id]
            self._keep_ended(state.run_id, live)
            for queue in live.watchers:
                queue.put_nowait(None)

    def _keep_ended(self, run_id: str, live: _Live) -> None:
        """Keep an ended execution in the hub for a while (at most :data:`_ENDED_KEPT`, for
        :data:`_ENDED_KEPT_S` seconds): a follower that asks right after the run ended
        replays its events from memory (the durable ones: a replay is the log's)."""
        live.over, live.over_at = True, time.monotonic()
        self._ended[run_id] = live
        self._ended.move_to_end(run_id)
        while self._ended and (
            len(self._ended) > _ENDED_KEPT
            or next(iter(self._ended.values())).over_at < live.over_at - _ENDED_KEPT_S
        ):
            self._ended.popitem(last=False)

    async def _salvage(
        self,
        state: RunState,
        owner: OwnerInfo,
        exc: BaseException,
        live: _Live,
        publish: Any,
        durable: list[Any],
    ) -> bool:
        """Store a run whose execution stopped on an unexpected error (a fault of the engine
        or of a store, not of a node) as failed - with ``store_error`` when a store failed,
        else ``engine_error`` - so it never stays ``running`` with nobody executing it.
        Only the run's row and its pending events are written (the fault may lie in
        writing node runs), but for a store that was unavailable: then the node runs too.
        The end is told (the held terminal event) only once stored. Returns True when
        stored (the lease then went with it); a store that fails again is left as it is.
        """
        if state.status not in _ENDED:
            store = isinstance(exc, StoreError)
            state.status, state.finished_at = RunStatus.failed, time.time()
            message = (
                f"the run stopped: its store failed ({exc})"
                if store
                else f"the run stopped on an internal error ({type(exc).__name__}); the log has the details"
            )
            state.error = NodeError(
                type=type(exc).__name__, message=message, reason="store_error" if store else "engine_error"
            )
            state.seq += 1
            publish(
                RunFailedEvent(
                    seq=state.seq,
                    run_id=state.run_id,
                    ts=time.time(),
                    reason=state.error.reason,
                    error=state.error.model_dump(),
                )
            )
        batch, durable[:] = durable[:], []
        try:
            await self.stores.runs.checkpoint(
                state, _salvage_delta(state, exc), owner_id=owner.id, events=batch, release=True
            )
        except Exception:
            durable[:0] = batch
            return False
        self._tell_held(live)
        return True

    def _interrupted(
        self, state: RunState, owner: OwnerInfo, exc: StoreError, durable: list[Any]
    ) -> RunInterrupted:
        """The error followers get when the store could not take how the execution ended:
        nothing of the end was told, and a task of this process stores it (the run
        ``failed``, with the events not stored yet) once the store takes writes again -
        the run keeps this owner meanwhile, so no other execution reuses the sequence
        numbers its followers saw - unless another process took the run over first."""
        run_id = state.run_id
        batch = list(durable)
        self._settling[run_id] = asyncio.get_running_loop().create_task(
            self._settle(state, owner, exc, batch), name=f"store how run {run_id} ended"
        )
        return RunInterrupted(run_id, exc)

    async def _settle(self, state: RunState, owner: OwnerInfo, exc: StoreError, batch: list[Any]) -> None:
        """Write the ended state of an interrupted run (:meth:`_interrupted`) until the store
        takes it; gives up when the run is no longer this owner's (LeaseLost) or the store
        refuses the write for good (not StoreUnavailable)."""
        delay = _RETRY_FIRST_S
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                try:
                    await self.stores.runs.checkpoint(
                        state, _salvage_delta(state, exc), owner_id=owner.id, events=batch, release=True
                    )
                except StoreUnavailable:
                    continue
                except StoreError as error:
                    logger.warning(
                        "run %s: how its interrupted execution ended was not stored (%s)", state.run_id, error
                    )
                    return
                logger.warning(
                    "run %s: the store is back; the interrupted run is stored %s",
                    state.run_id,
                    state.status.value,
                )
                return
        finally:
            self._settling.pop(state.run_id, None)
            self._ended.pop(state.run_id, None)  # a follower now reads what the store holds

    def _publish(self, live: _Live, durable: list[Any], text: list[str], event: Any) -> None:
        """Fan an event out: live watchers and the hub's recent events get everything;
        deltas stay in memory only (the final text is stored with the node run), other
        events go to the durable log. A terminal event (:data:`_TERMINAL`) is held until
        the checkpoint that stores it commits: a client told a run failed (or succeeded)
        must find it so in the store, whatever the store does meanwhile."""
        telemetry().run_event(live.state.workflow_id if live.state is not None else "", event)
        if isinstance(event, NodeDelta):
            if event.channel == "answer":
                text.append(event.text)
        else:
            durable.append(event)
        if isinstance(event, _TERMINAL):
            live.held.append(event)
            return
        self._tell(live, event)

    @staticmethod
    def _tell(live: _Live, event: Any) -> None:
        live.recent.append(event)  # the oldest one drops out past _RECENT_MAX
        for queue in live.watchers:
            queue.put_nowait(event)

    def _tell_held(self, live: _Live) -> None:
        """Tell the terminal events a committed checkpoint stored."""
        held, live.held = live.held, []
        for event in held:
            self._tell(live, event)

    def _checkpointer(
        self,
        owner: OwnerInfo,
        live: _Live,
        durable: list[Any],
        text: list[str],
        idle: _IdleWatch,
        released: list[bool],
    ) -> Any:
        """The run's checkpoint hook. The checkpoint of a run that ended is its last (nothing
        can continue an ended run), so it also gives the lease up, in the same transaction;
        a paused run keeps its lease until its turn is closed (a resume waits for that).
        The chat turn of a run that ended is closed before that checkpoint: whoever reads
        the run ended then finds its answer in the chat too. A store that is unavailable
        is waited out (:meth:`_stored`)."""
        runs = self.stores.runs

        async def checkpoint(state: RunState, delta: CheckpointDelta) -> None:
            idle.amend(state)
            if live.state is not None and state is not live.state:  # a copy with its secrets masked
                idle.amend(live.state)
            batch = durable[:]  # the events buffered since the last checkpoint commit with it
            del durable[:]
            ended = state.status in _ENDED
            if ended and live.turn_closed is None:
                await self._close_turn(state, "".join(text))
                live.turn_closed = state.status
            began = time.perf_counter()
            try:
                await self._stored(
                    live,
                    idle,
                    lambda: runs.checkpoint(state, delta, owner_id=owner.id, events=batch, release=ended),
                )
                telemetry().checkpoint(time.perf_counter() - began)
            except BaseException:
                durable[:0] = batch  # not stored: the next checkpoint carries them
                raise
            if ended:
                released.append(True)
            self._tell_held(live)

        return checkpoint

    async def _stored(self, live: _Live, idle: _IdleWatch, write: Any) -> None:
        """``write()`` (a checkpoint), retried while the store is unavailable (a database
        restarting, a full disk), for ``Settings.store_retry_s`` seconds - the run pauses
        meanwhile, its lease kept by the heartbeat - then StoreUnavailable is raised and the
        run stops; once it stopped waiting, later checkpoints get one try each. A write
        retried is the same write: the store applies it once (rows upserted, events by seq)."""
        wait = 0.0 if live.store_down is not None else self.settings.store_retry_s
        deadline, delay = time.monotonic() + wait, _RETRY_FIRST_S
        while True:
            try:
                await write()
            except StoreUnavailable as exc:
                if time.monotonic() + delay > deadline:
                    live.store_down = exc
                    raise
                if delay == _RETRY_FIRST_S:
                    logger.warning(
                        "run %s: its store failed (%s); retrying for up to %gs",
                        live.state.run_id if live.state is not None else "?",
                        exc,
                        wait,
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                idle.last = time.monotonic()  # waiting for the store is not the run being idle
                continue
            live.store_down = None
            return

    def executing_count(self) -> int:
        """How many runs this process executes now (the live hub's runs)."""
        return len(self._live)

    def executes(self, run_id: str) -> bool:
        """True while this process executes run ``run_id`` (its heartbeat keeps the lease)."""
        return run_id in self._live

    def new_owner(self) -> OwnerInfo:
        """An owner for an execution in this process: a fresh id, this host and pid, a lease
        of ``Settings.lease_ttl`` seconds from now."""
        return OwnerInfo(
            id=uuid.uuid4().hex,
            host=socket.gethostname(),
            pid=os.getpid(),
            lease_until=time.time() + self.settings.lease_ttl,
        )

    async def _claim(
        self,
        tenant_id: str,
        run_id: str,
        prepared: RunState | None = None,
        take_over: str | None = None,
        held: OwnerInfo | None = None,
    ) -> tuple[OwnerInfo, RunState]:
        """Claim the run for this process and read its state in the same transaction (a
        state read before claiming may be stale by the time the claim succeeds: another
        process ran the run in between); a dead owner on this host is taken over at once.
        ``prepared``: the state :meth:`prepare` created here, used as it is when the run is
        still pending and unowned (then the stored state is that one: nothing to read).
        ``take_over``: an owner id taken over even while its lease runs (:meth:`recover`).
        ``held``: the owner ``prepared`` was created claimed by (``prepare(owner=...)``): it
        is this execution's, with nothing to write - unless a third of its lease went by
        before the execution started, when it is renewed first (the heartbeat renews a
        third of a lease later; LeaseLost when another process took the run meanwhile)."""
        if held is not None and prepared is not None and prepared.tenant_id == tenant_id:
            ttl = self.settings.lease_ttl
            if held.lease_until - time.time() < ttl * 2 / 3:
                held = held.model_copy(update={"lease_until": time.time() + ttl})
                await self.stores.runs.renew(run_id, held.id, held.lease_until)
            return held, prepared
        owner = self.new_owner()
        if (
            prepared is not None
            and prepared.tenant_id == tenant_id
            and await self.stores.runs.claim_if_pending(tenant_id, run_id, owner)
        ):
            return owner, prepared
        try:
            return owner, await self.stores.runs.claim_and_load(tenant_id, run_id, owner)
        except RunOwned as exc:
            if exc.owner is None or not (owner_gone(exc.owner) or exc.owner.id == take_over):
                raise
            return owner, await self.stores.runs.claim_and_load(
                tenant_id, run_id, owner, take_from=exc.owner.id
            )

    async def _heartbeat(
        self, run_id: str, owner: OwnerInfo, token: CancelToken, *, waited: float = 0.0
    ) -> None:
        """Renew the lease every third of its length; losing it cancels the run here, since
        another process now owns it and two executions must never interleave. ``waited``:
        seconds of the first pause already waited (by the :class:`Deferred` that started it)."""
        ttl = self.settings.lease_ttl
        pause = ttl / 3 - waited
        while True:
            if pause > 0:
                await asyncio.sleep(pause)
            try:
                await self.stores.runs.renew(run_id, owner.id, time.time() + ttl)
            except LeaseLost:
                token.cancel("this process lost ownership of the run (its lease expired)")
                return
            except StoreError:  # the store is away: keep the lease as soon as it is back
                pause = min(ttl / 3, _RETRY_MAX_S)
                continue
            pause = ttl / 3


def _salvage_delta(state: RunState, exc: BaseException) -> CheckpointDelta:
    """What a salvage writes besides the run row: every node run when the store was
    unavailable (they are sound, only their checkpoint failed), else none (the fault may
    lie in writing them)."""
    if isinstance(exc, StoreUnavailable):
        return CheckpointDelta(list(state.node_runs), 0)
    return CheckpointDelta([], len(state.history))


def _unless(store_away: bool) -> Any:
    """A context ignoring StoreError when ``store_away`` (the write is left to the settling)."""
    return contextlib.suppress(StoreError) if store_away else contextlib.nullcontext()


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

    def __init__(
        self, seconds: float, state: RunState, token: CancelToken, catalog: NodeCatalog | None = None
    ) -> None:
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
            running = {
                nid: run for nid, run in self.state.node_runs.items() if run.status is NodeRunStatus.running
            }
            if any(self._quiet_by_nature(run.kind) for run in running.values()):
                self.last = time.monotonic()
                continue
            self.nodes = list(running)
            where = f" while node(s) {', '.join(map(repr, self.nodes))} were running" if self.nodes else ""
            message = (
                f"run produced no event for {self.seconds:g}s (run_idle_timeout_s={self.seconds:g}){where}; "
                f"it was stopped"
            )
            self.error = NodeError(
                type="RunIdleTimeout",
                message=message,
                reason="idle_timeout",
                node_id=self.nodes[0] if self.nodes else None,
            )
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
            changed = RunFailedEvent(
                seq=event.seq,
                run_id=event.run_id,
                ts=event.ts,
                reason="idle_timeout",
                error=self.error,
                elapsed_ms=event.elapsed_ms,
            )
        elif (
            isinstance(event, NodeFinished)
            and event.status is NodeRunStatus.cancelled
            and event.loop_id is None
            and event.node_id in self.nodes
        ):
            changed = event.model_copy(update={"status": NodeRunStatus.failed, "error": self.error})
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
