"""The front door of the run lifecycle: :func:`launch` and :func:`follow`, the two calls
every door makes (the HTTP routes, the OpenAI-compatible endpoint, MCP tool calls, the
CLI, a queue job). :class:`~engine.service.RunService` exposes them as its own
``launch`` and ``follow``.

**Launch** takes one of the requests of :mod:`schemas.launch` - a start, a chat turn
(a start in a chat whose run waits for one answer), a resume, a rerun, a run of one
node on its own, or the continuation of an accepted run - and does, in this order and nowhere else:

1. the checks that need no quota: the document compiles, the run is paused, the answers
   name pending interrupts and fit their questions (:func:`check_answers`);
2. admission under the quotas (the service's ``admission`` port);
3. the stored change: the run created, or the answers written into the run's state
   (a resume is part of the run: whatever process continues it reads them there).
   A new run's admission and creation are one transaction, the run created already
   claimed by this process when it executes here (no claim follows) and, for a published
   version, only while that version is still the published one;
4. placement: in a task of this process (the ``launcher`` port) or on the queue (the
   ``queue`` port), as :func:`placed_on_queue` decides;

and returns a :class:`~schemas.launch.RunTicket`.

**Follow** yields a run's events (event models) after a sequence number, until the run
ends or pauses: from this process's live hub when the run executes (or just ended)
here, text deltas included; else from the ``feed`` port (a worker's or another replica's
run, deltas included) with the durable log behind it; else from the durable log alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from schemas.launch import ContinueRun, Placement, RerunRun, ResumeRun, RunNode, RunTicket, StartRun
from schemas.run import RunState
from schemas.types import RunStatus

from .catalog import NodeCatalog
from .compiler import CompiledPlan
from .errors import FlowloomError, MissingModelKey, UnknownDatasets, UnknownInterrupt
from .execution import RunNotResumable, _Live
from .leases import orphaned
from .ports import CheckpointDelta, Launch, QueueUnavailable, RunOwned
from .shapes import plan_missing_keys, plan_searched_datasets, plan_unknown_datasets

if TYPE_CHECKING:
    from schemas.launch import LaunchRequest

    from .service import RunService

__all__ = [
    "InvalidAnswer",
    "check_answers",
    "drives_agents",
    "follow",
    "follow_to_end",
    "launch",
    "placed_on_queue",
]

#: seconds a queued resume waits for the process that paused the run to let it go
PAUSE_RELEASE_WAIT_S = 2.0
#: seconds between two polls of the event log by a follower with no feed
WATCH_POLL_S = 0.2
#: seconds between two reports of the same orphan by one follower (``RunService.on_orphan``)
ORPHAN_REPORT_S = 1.0
_ENDED = frozenset({RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled})
_ENDED_OR_PAUSED = _ENDED | {RunStatus.paused}


class InvalidAnswer(FlowloomError):
    """An answer that does not fit its question (not one of the options, a form field of
    the wrong type...). ``problems``: one message per problem, naming the options or
    fields; nothing was stored and the run stays paused."""

    def __init__(self, run_id: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"run {run_id}: the answer does not fit the question: " + "; ".join(problems))


# --------------------------------------------------------------------------- placement


def drives_agents(plan: CompiledPlan, catalog: NodeCatalog) -> bool:
    """True when a node of ``plan`` is of a kind that is a ``container`` and ``streams``
    (a model's answer, with tool calls as its body): runs that may take minutes."""
    for node in plan.workflow.nodes:
        spec = catalog.get(node.type)
        if spec is not None and spec.container and spec.streams is not None:
            return True
    return False


def placed_on_queue(service: RunService, plan: CompiledPlan | None, placement: Placement) -> bool:
    """Queued or in this process: never queued without a queue; else the caller's explicit
    choice; else queued when nobody waits for the run (``detached``) or the workflow
    drives agents (runs of minutes do not belong in an API process)."""
    if service.queue is None:
        return False
    if placement.execution is not None:
        return placement.execution == "queued"
    return placement.detached or (plan is not None and drives_agents(plan, service.catalog))


# --------------------------------------------------------------------------- answers


def _executor_of(plan: CompiledPlan, node_id: str) -> Any:
    """The executor of node ``node_id`` in ``plan`` or in a container's body (None: not found)."""
    found = plan.nodes.get(node_id)
    if found is not None:
        return found.executor
    for node_plan in plan.nodes.values():
        if node_plan.body is not None and (inner := _executor_of(node_plan.body, node_id)) is not None:
            return inner
    return None


def check_answers(plan: CompiledPlan, state: RunState, answers: dict[str, Any]) -> None:
    """Check each answer against its question before the run continues: a node kind that
    asks a person may say what fits (its executor's ``check_answer(answer) -> [problem]``:
    the options of a choice, the fields of a form).

    Raises:
        UnknownInterrupt: an answer to an interrupt that is not pending (409).
        InvalidAnswer: an answer that does not fit (422), naming the options or fields.
    """
    pending = {iid: i for iid, i in state.interrupts.items() if not i.answered}
    unknown = sorted(set(answers) - set(pending))
    if unknown:
        raise UnknownInterrupt(
            f"run {state.run_id}: no pending interrupt {unknown[0]!r} "
            f"(pending: {', '.join(sorted(pending)) or 'none'})"
        )
    problems: list[str] = []
    for iid, answer in answers.items():
        check = getattr(_executor_of(plan, pending[iid].node_id), "check_answer", None)
        if check is not None:
            problems += [f"node {pending[iid].node_id!r}: {p}" for p in check(answer)]
    if problems:
        raise InvalidAnswer(state.run_id, problems)


# --------------------------------------------------------------------------- launch


async def launch(
    service: RunService, tenant_id: str, request: LaunchRequest, placement: Placement | None = None
) -> RunTicket:
    """Admit, store and start ``request`` (module docstring); its ticket.

    Raises:
        CompileError, InvalidInputs: a start whose document or inputs do not fit (422).
        RunNotFound; RunNotResumable (not paused, still executing); UnknownInterrupt;
        InvalidAnswer; RerunRefused; NodeRunRefused, MissingNodeInputs (one node alone); RunOwned;
        the admission's refusal (a quota);
        QueueUnavailable: the queue cannot be reached (a new run is then ended ``cancelled``).
    """
    placement = placement or Placement()
    if isinstance(request, StartRun):
        if request.chat_id and request.message is not None:
            paused = await service.stores.runs.list_runs(
                tenant_id, status=RunStatus.paused, chat_id=request.chat_id, limit=1
            )
            if paused and len(paused[0].pending_interrupts) == 1:  # the message answers its question
                answers = {paused[0].pending_interrupts[0].id: request.message}
                # no check: in a chat an answer that does not fit is asked again, as a reply
                return await _resume(
                    service,
                    tenant_id,
                    ResumeRun(paused[0].run_id, answers=answers, message=request.message),
                    placement,
                    check=False,
                )
        return await _start(service, tenant_id, request, placement)
    if isinstance(request, ResumeRun):
        return await _resume(service, tenant_id, request, placement)
    if isinstance(request, RerunRun):
        return await _rerun(service, tenant_id, request, placement)
    if isinstance(request, RunNode):
        return await _run_node(service, tenant_id, request)
    return await _continue(service, tenant_id, request)


async def _admitted(
    service: RunService, tenant_id: str, workflow_id: str, run_id: str, store: Callable[[], Any]
) -> Any:
    """``await store()`` under an admission of the run: its slot is given back when nothing
    was stored (``store`` raised)."""
    port, admission = service.admission, None
    if port is not None:
        admission = await port.admit(tenant_id, workflow_id, run_id)
    try:
        return await store()
    except BaseException:
        if port is not None and admission is not None:
            await port.release(admission)
        raise


async def _unknown_datasets(service: RunService, tenant_id: str, plan: Any) -> list[Any]:
    """The ``unknown_dataset`` errors of ``plan`` (problems) for the datasets ``tenant_id``
    lacks. One read of the tenant's datasets, for plans that search any (the workers read
    the same store, so a queued run is checked here too); no knowledge bases here: not
    checked."""
    wanted = plan_searched_datasets(plan)
    knowledge = service.knowledge
    if not wanted or knowledge is None or not hasattr(knowledge, "list_datasets"):
        return []  # (a search-only stand-in, in tests of the engine alone)
    known = {d.id for d in await knowledge.list_datasets(tenant_id)}
    return [] if wanted <= known else plan_unknown_datasets(plan, known)


async def _start(service: RunService, tenant_id: str, request: StartRun, placement: Placement) -> RunTicket:
    """A new run: admitted, created (already claimed by this process when it executes
    here) and, for a published version, checked to still be the published one - all in
    one transaction (``RunService.prepare``); then launched here or queued.

    The start of a run executed here for a caller that follows it need not wait for the
    disk (``durable=False``): the caller hears of its outcome only after a later commit
    of the run (the checkpoint of a node with effects, its pause, its end), which waits
    for the disk and makes the start durable with it (a streaming caller sees the run's
    first events before that commit, as it sees a pure node's before the checkpoint that
    carries it). A queued or detached start is answered at once (202, a job), so it waits."""
    models = await service.models_of(tenant_id)
    # a document that does not compile takes no quota slot
    plan = service.compile(request.doc, models, request.checked)
    run_id = request.run_id or uuid.uuid4().hex
    queued = placed_on_queue(service, plan, placement)
    # Keys are checked where the run executes: a queued run's worker has its own
    # environment (an API process often holds no provider key at all).
    missing = []
    if not queued and models is not None:
        missing = plan_missing_keys(plan, models, service.settings.environ())
    # It would fail at the first of them, after the nodes before it ran. One refusal names
    # them all, as `flowloom run` does: fixing the key must not lead to a second refusal.
    unknown = await _unknown_datasets(service, tenant_id, plan)
    if missing:
        raise MissingModelKey(missing + unknown)
    if unknown:
        raise UnknownDatasets(unknown)
    await service.prepare(
        request.doc,
        request.inputs,
        tenant_id=tenant_id,
        chat_id=request.chat_id,
        message=request.message,
        user_id=request.user_id,
        history=request.history,
        workflow_version=request.workflow_version,
        run_id=run_id,
        plan=plan,
        owner=None if queued else service.new_owner(),
        published=request.published,
        admission=service.admission,
        durable=queued or placement.detached,
    )
    if queued:
        try:
            await _enqueue(service, tenant_id, run_id, plan, placement, first=True)
        except QueueUnavailable:
            # Nothing will execute it: end the stored run rather than leave it pending forever.
            try:
                await service.cancel(tenant_id, run_id, "the run queue was unreachable")
            except Exception:
                pass
            raise
        return RunTicket(run_id, request.chat_id, RunStatus.pending, queued=True)
    live = await _here(service, tenant_id, run_id, lambda: service.execute(tenant_id, run_id))
    return RunTicket(run_id, request.chat_id, _status(live, RunStatus.running))


async def _resume(
    service: RunService, tenant_id: str, request: ResumeRun, placement: Placement, check: bool = True
) -> RunTicket:
    from .service import bind_single_answer

    state = await service.stores.runs.load_run(tenant_id, request.run_id)
    if state.status is not RunStatus.paused:
        raise RunNotResumable(f"run {request.run_id} is {state.status.value}, not paused")
    if request.answers is not None:
        answers = dict(request.answers)
    else:
        pending = [i for i in state.interrupts.values() if not i.answered]
        answers = bind_single_answer(_Pending(request.run_id, pending), request.answer, request.interrupt_id)
    plan = await service._plan_of(state)
    if check:
        check_answers(plan, state, answers)
    chat_id = state.sys.get("chat_id") or None
    queued = placed_on_queue(service, plan, placement)

    async def store() -> None:
        if queued:
            await _store_answers(service, tenant_id, request.run_id, answers, request.message)

    await _admitted(service, tenant_id, state.workflow_id, request.run_id, store)
    if queued:
        try:
            await _enqueue(service, tenant_id, request.run_id, plan, placement, first=False)
        except QueueUnavailable:
            await _take_back(service, tenant_id, request.run_id, answers)  # the same answer may be sent again
            raise
        return RunTicket(
            request.run_id, chat_id, RunStatus.paused, queued=True, continued=True, after_seq=state.seq
        )
    live = await _here(
        service,
        tenant_id,
        request.run_id,
        lambda: service.resume(tenant_id, request.run_id, answers, message=request.message),
    )
    return RunTicket(
        request.run_id, chat_id, _status(live, RunStatus.running), continued=True, after_seq=state.seq
    )


class _Pending:
    """What :func:`~engine.service.bind_single_answer` reads of a run: its id and its
    pending interrupts (as a state's ``interrupts`` mapping)."""

    def __init__(self, run_id: str, pending: list[Any]) -> None:
        self.run_id, self.interrupts = run_id, {i.id: i for i in pending}


async def _store_answers(
    service: RunService, tenant_id: str, run_id: str, answers: dict[str, Any], message: str | None
) -> None:
    """Write the answers into the paused run's stored state (and, in a chat, open the
    person's turn), under the run's lease: the process that continues the run reads them
    with the run. Raises RunOwned while another process holds the run (its pause is
    still being closed), RunNotResumable when it is no longer paused."""
    from .runner import answer_interrupts
    from .turns import answer_text

    deadline = time.monotonic() + PAUSE_RELEASE_WAIT_S
    while True:
        try:
            owner, state = await service._claim(tenant_id, run_id)
            break
        except RunOwned:
            # The process that paused the run holds it until its turn is closed (a moment).
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    try:
        if state.status is not RunStatus.paused:
            raise RunNotResumable(f"run {run_id} is {state.status.value}, not paused")
        answer_interrupts(state, answers)
        chat_id = state.sys.get("chat_id")
        if chat_id and (message is not None or chat_id != run_id):
            await service._open_turn(state, message if message is not None else answer_text(answers))
        await service.stores.runs.checkpoint(
            state, CheckpointDelta([], len(state.history)), owner_id=owner.id, events=[]
        )
    finally:
        await service.stores.runs.release(run_id, owner.id)


async def _take_back(service: RunService, tenant_id: str, run_id: str, answers: dict[str, Any]) -> None:
    """Unanswer the interrupts of a resume that could not be queued: the run waits for
    its answers again (best effort: a store that fails here leaves them, and the next
    worker that continues the run uses them)."""
    try:
        owner, state = await service._claim(tenant_id, run_id)
    except Exception:
        return
    try:
        for iid in answers:
            if iid in state.interrupts:
                state.interrupts[iid].answered, state.interrupts[iid].answer = False, None
        await service.stores.runs.checkpoint(
            state, CheckpointDelta([], len(state.history)), owner_id=owner.id, events=[]
        )
    except Exception:
        pass
    finally:
        await service.stores.runs.release(run_id, owner.id)


async def _rerun(service: RunService, tenant_id: str, request: RerunRun, placement: Placement) -> RunTicket:
    new_id = request.new_run_id or uuid.uuid4().hex
    workflow_id = (
        str(request.doc.get("id") or "") or (await service.get(tenant_id, request.run_id)).workflow_id
    )
    state, events = await _admitted(
        service,
        tenant_id,
        workflow_id,
        new_id,
        lambda: service.rerun_from(
            tenant_id,
            request.run_id,
            request.node_id,
            request.doc,
            workflow_version=request.workflow_version,
            new_run_id=new_id,
        ),
    )
    live = await _here(service, tenant_id, state.run_id, lambda: events)
    return RunTicket(state.run_id, None, _status(live, RunStatus.running))


async def _run_node(service: RunService, tenant_id: str, request: RunNode) -> RunTicket:
    """One node alone (engine/single_node.py), admitted as any run start and executed
    here (a builder waits for it)."""
    new_id = request.run_id or uuid.uuid4().hex
    workflow_id = str(request.doc.get("id") or "")
    state, events = await _admitted(
        service,
        tenant_id,
        workflow_id,
        new_id,
        lambda: service.run_node(
            tenant_id,
            request.doc,
            request.node_id,
            request.values,
            from_last=request.from_last,
            workflow_version=request.workflow_version,
            run_id=new_id,
        ),
    )
    live = await _here(service, tenant_id, state.run_id, lambda: events)
    return RunTicket(state.run_id, None, _status(live, RunStatus.pending))


async def _continue(service: RunService, tenant_id: str, request: ContinueRun) -> RunTicket:
    live = await _here(
        service,
        tenant_id,
        request.run_id,
        lambda: service.recover(tenant_id, request.run_id, take_over=request.take_over),
    )
    chat_id = live.state.sys.get("chat_id") if live is not None and live.state is not None else None
    after = live.recent[0].seq - 1 if live is not None and live.recent else 0
    return RunTicket(
        request.run_id, chat_id or None, _status(live, RunStatus.running), continued=True, after_seq=after
    )


async def _here(
    service: RunService, tenant_id: str, run_id: str, events: Callable[[], AsyncIterator[Any]]
) -> _Live | None:
    """Start the execution in this process; the run's place in the live hub (None when it
    already left it)."""
    if service.launcher is None:
        raise RuntimeError("this run service has no launcher: RunService(launcher=...) starts executions")
    await service.launcher.launch(Launch(tenant_id, run_id, events))
    return service._live.get(run_id) or service._ended.get(run_id)


async def _enqueue(
    service: RunService, tenant_id: str, run_id: str, plan: CompiledPlan, placement: Placement, *, first: bool
) -> None:
    assert service.queue is not None
    await service.queue.launch(
        Launch(
            tenant_id,
            run_id,
            _nothing,
            priority=placement.priority,
            max_wall_time=plan.workflow.limits.max_wall_time,
            first=first,
        )
    )


def _nothing() -> AsyncIterator[Any]:
    raise RuntimeError("a queued run executes on a worker")


def _status(live: _Live | None, default: RunStatus) -> RunStatus:
    return live.state.status if live is not None and live.state is not None else default


# --------------------------------------------------------------------------- follow


async def follow(service: RunService, tenant_id: str, run_id: str, after_seq: int = 0) -> AsyncIterator[Any]:
    """The run's events (event models) after ``after_seq`` until it ends or pauses
    (module docstring). A run nobody executes (its owner died) is reported to the
    service's ``on_orphan``, at most every :data:`ORPHAN_REPORT_S`, and the follow goes
    on: once the run is recovered its new events follow, with no gap or repeat.

    Raises:
        RunNotFound: no run ``run_id`` for the tenant (before any event).
        the execution's error, when the execution followed in this process stopped on one.
    """
    from schemas.events import event_adapter

    live = service._live.get(run_id) or service._ended.get(run_id)
    adapter = event_adapter()
    if live is not None and live.tenant_id == tenant_id:
        over, seen = live.over, after_seq
        async for event in _follow_here(service, live, tenant_id, run_id, after_seq):
            seen = event.seq
            yield event
        if not over:
            return  # followed to the end (or pause) of the execution
        # The execution had ended before this follower came: the run may have moved on
        # since (a paused run stopped or answered): what the log holds after it.
        source = _follow_log(service, tenant_id, run_id, seen)
    else:
        await service.stores.runs.get_run(tenant_id, run_id)  # RunNotFound for another tenant's run
        if service.feed is not None:
            source = service.feed.follow(
                tenant_id,
                run_id,
                after_seq,
                durable=_durable(service, tenant_id, run_id),
                ended=_ended_check(service, tenant_id, run_id),
            )
        else:
            source = _follow_log(service, tenant_id, run_id, after_seq)
    try:
        async for data in source:
            yield adapter.validate_python(data)
    finally:
        await source.aclose()  # type: ignore[attr-defined]  # the feed's and the log's are async generators


async def follow_to_end(service: RunService, tenant_id: str, run_id: str) -> None:
    """Return once the run ends or pauses, as reading :func:`follow` to its end does (the
    same errors), without its events: a blocking start answers with the run, not them.

    A run executing here is waited for by a watcher of the live hub that takes only the
    execution's end (None), not a queue woken per event; any other run is followed.
    """
    live = service._live.get(run_id)
    if live is None or live.tenant_id != tenant_id or live.over:
        async for _event in follow(service, tenant_id, run_id):
            pass
        return
    watcher = _EndWatch(asyncio.get_running_loop().create_future())
    live.watchers.append(watcher)  # the execution tells its watchers its end with None
    try:
        await watcher.ended
    finally:
        if watcher in live.watchers:
            live.watchers.remove(watcher)
    if live.error is not None:
        raise live.error


class _EndWatch:
    """A live-hub watcher (``put_nowait`` as a queue's) that only marks the execution's end."""

    __slots__ = ("ended",)

    def __init__(self, ended: asyncio.Future[None]) -> None:
        self.ended = ended

    def put_nowait(self, event: Any) -> None:
        if event is None and not self.ended.done():
            self.ended.set_result(None)


async def _follow_here(
    service: RunService, live: _Live, tenant_id: str, run_id: str, seen: int
) -> AsyncIterator[Any]:
    """From the hub: the log's events the hub does not hold (an execution that continued
    a run holds only its own), the hub's recent ones, then live ones. A follower that
    comes while the execution runs gets everything, text deltas included: a launcher
    returns once the execution produced its first event, and the execution cannot end
    without suspending on a store first, so the door that launched it always subscribes
    in time."""
    from schemas.events import NodeDelta, event_adapter

    queue: asyncio.Queue[Any] = asyncio.Queue()
    subscribed = not live.over
    if subscribed:  # the execution ends its watchers' queues with None
        live.watchers.append(queue)  # subscribe before reading, so nothing published meanwhile is lost
    try:
        first = live.recent[0].seq if live.recent else None
        if first is None or first > seen + 1:
            adapter = event_adapter()
            for data in await _read_all(service, tenant_id, run_id, seen):
                if first is not None and data["seq"] >= first:
                    break
                seen = data["seq"]
                yield adapter.validate_python(data)
        for event in list(live.recent):
            # After the execution's end, a replay is what the log holds (text deltas are
            # live only): the same whichever process or moment replays it.
            if event.seq > seen and (subscribed or not isinstance(event, NodeDelta)):
                seen = event.seq
                yield event
        while subscribed and (event := await queue.get()) is not None:
            if event.seq > seen:
                seen = event.seq
                yield event
    finally:
        if queue in live.watchers:
            live.watchers.remove(queue)
    if live.error is not None:
        raise live.error


async def _read_all(service: RunService, tenant_id: str, run_id: str, after: int) -> list[dict[str, Any]]:
    """Every stored event after ``after`` (the log answers in pages)."""
    found: list[dict[str, Any]] = []
    while batch := await service.stores.events.read(tenant_id, run_id, after):
        found += batch
        after = batch[-1]["seq"]
    return found


def _durable(service: RunService, tenant_id: str, run_id: str) -> Callable[[int], Any]:
    async def durable(after: int) -> list[dict[str, Any]]:
        return await service.stores.events.read(tenant_id, run_id, after)

    return durable


def _ended_check(service: RunService, tenant_id: str, run_id: str) -> Callable[[], Any]:
    async def ended() -> bool:
        summary = await service.stores.runs.get_run(tenant_id, run_id)
        if service.on_orphan is not None and orphaned(
            summary, now=time.time(), pending_grace_s=service.settings.lease_ttl
        ):
            service.on_orphan(tenant_id, run_id)  # nobody executes it: recover it now, and keep following
        return summary.status in _ENDED_OR_PAUSED

    return ended


async def _follow_log(
    service: RunService, tenant_id: str, run_id: str, seen: int
) -> AsyncIterator[dict[str, Any]]:
    """From the durable log alone (no feed): polled until the run ends or pauses; a run
    recovered by this process meanwhile is followed from the hub, deltas included."""
    reported = 0.0
    while True:
        live = service._live.get(run_id)
        if live is not None:
            async for event in _follow_here(service, live, tenant_id, run_id, seen):
                yield event.model_dump(mode="json")
            return
        batch = await service.stores.events.read(tenant_id, run_id, seen)
        for event in batch:
            seen = event["seq"]
            yield event
        if batch:
            continue
        summary = await service.stores.runs.get_run(tenant_id, run_id)
        if summary.status in _ENDED_OR_PAUSED:
            # the last checkpoint may have committed after the read above
            for event in await service.stores.events.read(tenant_id, run_id, seen):
                yield event
            return
        now = time.time()
        if (
            service.on_orphan is not None
            and now - reported >= ORPHAN_REPORT_S
            and orphaned(summary, now=now, pending_grace_s=service.settings.lease_ttl)
        ):
            reported = now
            service.on_orphan(tenant_id, run_id)
        await asyncio.sleep(WATCH_POLL_S)
