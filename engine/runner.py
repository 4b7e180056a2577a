"""The engine's public entry points: start a run, stream its events, continue a saved one.

The CLI, the API and the workers all go through these functions.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import uuid
from collections.abc import AsyncGenerator, Mapping
from datetime import UTC, datetime
from typing import Any

from schemas.run import RunState
from schemas.types import RunStatus, VarType, value_matches
from schemas.workflow import InputVar

from .compiler import CompiledPlan
from .context import CancelToken, RunDeps
from .environment import release_environment, run_environment
from .errors import InvalidInputs, UnknownInterrupt
from .plain_errors import did_you_mean
from .scheduler import Scheduler
from .telemetry import run_scope, telemetry

__all__ = [
    "answer_interrupts",
    "coerce_input",
    "new_run_state",
    "run_workflow",
    "resume_run",
    "stream_workflow",
]

#: input names that mean the user's chat message (Dify's ``query``, FastGPT's ``userChatInput``)
_MESSAGE_NAMES = frozenset({"query", "question", "message", "userChatInput"})


def coerce_input(var: InputVar, text: str) -> Any:
    """Convert a command-line string to ``var``'s declared type (explicit, documented rules).

    string: as is. number: ``int`` when it is an integer literal, else ``float``.
    boolean: ``true/false/1/0/yes/no`` (case-insensitive). object/array/file: JSON.

    Raises:
        ValueError: the text does not convert; the message names the input.
    """
    kind = var.type
    try:
        if kind is VarType.string:
            return text
        if kind is VarType.number:
            try:
                return int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    raise ValueError("expected a number such as 3 or 2.5") from None
                if value != value or value in (float("inf"), float("-inf")):
                    raise ValueError("not a finite number") from None
                return value
        if kind is VarType.boolean:
            lowered = text.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError("expected true/false")
        return json.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"input {var.name!r}: cannot read {text!r} as {kind.value}: {exc}") from exc


def new_run_state(
    plan: CompiledPlan,
    inputs: Mapping[str, Any],
    *,
    run_id: str | None = None,
    chat_id: str | None = None,
    query: str | None = None,
    user_id: str | None = None,
    history: list[dict[str, Any]] | None = None,
    partial: bool = False,
    conversation: Mapping[str, Any] | None = None,
) -> RunState:
    """A fresh :class:`RunState` with validated inputs, defaults applied and system variables set.

    ``history`` is the chat so far, ``[{"role": "user"|"assistant", "content": str}, ...]``
    oldest first (``sys.history``); ``query`` defaults to the ``query`` input when present.
    ``partial``: ``inputs`` are the few a run of one node reads (engine/single_node.py):
    taken as given with the declared defaults, not checked against the declaration.
    ``conversation``: the values the chat holds (name -> value); each declared
    conversation variable starts from its value there, else from its default (names the
    workflow no longer declares are left out).

    Raises:
        InvalidInputs: every missing required input, wrongly typed or undeclared input,
            and every held conversation value that does not fit its declared type.
    """
    wf = plan.workflow
    problems: list[str] = []
    values: dict[str, Any] = {}
    declared = {v.name: v for v in wf.inputs}
    if partial:
        values = {v.name: v.default for v in wf.inputs if v.default is not None} | dict(inputs)
        declared = {}
    for name in inputs:
        if name not in declared and not partial:
            # a chat message sent as an input is the most common case: say where it goes
            hint = "; the user's message is the run's `message` (--message)" if name in _MESSAGE_NAMES else ""
            problems.append(
                f"{name!r} is not an input of workflow {wf.id!r}{did_you_mean(name, declared)} "
                f"(inputs: {', '.join(sorted(declared)) or 'none'})" + hint
            )
    for var in wf.inputs if not partial else ():
        value = inputs.get(var.name, var.default)
        if var.required and (value is None or value == ""):
            # an empty text answers no required question: Dify refuses it as missing, and so
            # does every door here (CLI, API, chat). Blank text is taken, as Dify takes it.
            given = ", but it was given empty" if value is not None else ""
            problems.append(f"{var.name!r} is required ({var.type.value}){given}")
        elif not value_matches(value, var.type):
            problems.append(f"{var.name!r} must be {var.type.value}, got {type(value).__name__}")
        values[var.name] = value
    held = conversation or {}
    kept: dict[str, Any] = {}
    for cvar in wf.conversation_variables:
        value = held.get(cvar.name, cvar.default)
        if not value_matches(value, cvar.type):
            problems.append(
                f"conversation variable {cvar.name!r} must be {cvar.type.value}, the chat holds "
                f"{type(value).__name__} (change it in the chat's variables)"
            )
        kept[cvar.name] = value
    if problems:
        raise InvalidInputs(problems)
    run_id = run_id or uuid.uuid4().hex
    if query is None and isinstance(values.get("query"), str):
        query = values["query"]
    return RunState(
        run_id=run_id,
        workflow_id=wf.id,
        workflow_hash=plan.content_hash,
        inputs=values,
        sys={
            "run_id": run_id,
            "chat_id": chat_id or run_id,
            "workflow_id": wf.id,
            "now": datetime.now(UTC).isoformat(),
            "query": query or "",
            "user_id": user_id or "",
            "history": list(history or []),
        },
        variables={v.name: v.default for v in wf.variables},
        conversation=kept,
    )


async def run_workflow(
    plan: CompiledPlan,
    inputs: Mapping[str, Any] | RunState,
    *,
    deps: RunDeps | None = None,
    cancel: CancelToken | None = None,
    **sys: Any,
) -> RunState:
    """Run ``plan`` to the end and return its final state (status, outputs, node runs).

    ``inputs`` is a mapping of global inputs or a prepared :class:`RunState`.
    Run failures do not raise: see ``state.status`` and ``state.error``.

    Raises:
        InvalidInputs: from :func:`new_run_state`.
    """
    state = inputs if isinstance(inputs, RunState) else new_run_state(plan, inputs, **sys)
    return await _traced(_run_scheduler(plan, state, deps or RunDeps(), cancel), plan.workflow.id, state)


async def _run_scheduler(
    plan: CompiledPlan, state: RunState, deps: RunDeps, cancel: CancelToken | None
) -> RunState:
    """Run the scheduler with the run's environment variables read for this execution
    (each start or resume reads them again: they are never part of a stored state) and
    its secrets masked in what it records (:mod:`engine.environment`)."""
    if not plan.workflow.environment:
        return await Scheduler(plan, state, deps, cancel).run()
    state.env, redactor = await run_environment(plan.workflow, state.tenant_id, deps.secrets)
    try:
        return await Scheduler(
            plan, state, dataclasses.replace(deps, redactor=redactor or None), cancel
        ).run()
    finally:
        release_environment(redactor)


def answer_interrupts(state: RunState, answers: Mapping[str, Any]) -> None:
    """Bind ``answers`` (interrupt id -> answer) to the run's pending interrupts.

    Raises:
        UnknownInterrupt: an id is not a pending interrupt of this run (the message lists them).
    """
    unknown = [iid for iid in answers if iid not in state.interrupts]
    if unknown:
        pending = ", ".join(state.interrupts) or "none"
        raise UnknownInterrupt(f"run {state.run_id}: no pending interrupt {unknown} (pending: {pending})")
    for iid, answer in answers.items():
        interrupt = state.interrupts[iid]
        interrupt.answered, interrupt.answer = True, answer


async def resume_run(
    plan: CompiledPlan,
    state: RunState,
    *,
    answers: Mapping[str, Any] | None = None,
    deps: RunDeps | None = None,
    cancel: CancelToken | None = None,
) -> RunState:
    """Continue a run from a checkpointed or paused state (possibly in another process).

    Finished nodes are not run again; nodes that were running when the checkpoint was
    taken are run again from the start; ``answers`` (interrupt id -> answer) resume the
    waiting nodes they belong to, and interrupts left unanswered keep the run paused.

    Raises:
        ValueError: the state belongs to another version of the workflow, or an answer
            names no pending interrupt.
    """
    if state.workflow_hash != plan.content_hash:
        raise ValueError(
            f"run {state.run_id} was started with workflow version {state.workflow_hash[:12]}, "
            f"not {plan.content_hash[:12]}"
        )
    if answers:
        answer_interrupts(state, answers)
    return await _traced(_run_scheduler(plan, state, deps or RunDeps(), cancel), plan.workflow.id, state)


async def stream_workflow(
    plan: CompiledPlan,
    inputs: Mapping[str, Any] | RunState,
    *,
    answers: Mapping[str, Any] | None = None,
    deps: RunDeps | None = None,
    cancel: CancelToken | None = None,
    **sys: Any,
) -> AsyncGenerator[Any, None]:
    """Run ``plan`` - or continue a saved/paused :class:`RunState` with ``answers`` - and
    yield its events in order (the one stream the CLI, API and workers consume).

    Closing the iterator early cancels the run.
    """
    queue = _Handoff()
    base = deps or RunDeps()
    outer = base.on_event

    def sink(event: Any) -> None:
        if outer is not None:
            outer(event)
        queue.put(event)

    token = cancel or CancelToken()
    run_deps = dataclasses.replace(base, on_event=sink)
    if isinstance(inputs, RunState) and inputs.status is not RunStatus.pending:
        coro = resume_run(plan, inputs, answers=answers, deps=run_deps, cancel=token)
    else:
        coro = run_workflow(plan, inputs, deps=run_deps, cancel=token, **sys)
    # The run's task (and every task it starts) logs with the run's scope; set around the
    # task's creation only, since a value set in this async generator would leak into its consumer.
    scope = run_scope.set((inputs.tenant_id, inputs.run_id, "")) if isinstance(inputs, RunState) else None
    try:
        task = asyncio.ensure_future(coro)
    finally:
        if scope is not None:
            run_scope.reset(scope)
    done = object()
    task.add_done_callback(lambda _t: queue.put(done))
    try:
        while True:
            event = await queue.get()
            if event is done:
                break
            yield event
        task.result()  # re-raise engine bugs; run failures are events
    finally:
        if not task.done():
            token.cancel("stream closed by consumer")
            await asyncio.gather(task, return_exceptions=True)


class _Handoff:
    """The run's events from its task to the one consumer of :func:`stream_workflow`, in
    order: a FIFO and at most one waiting consumer. An unbounded ``asyncio.Queue`` with a
    single getter does the same, paying per event for the bookkeeping of many getters and
    putters and of ``join`` (a run emits about three events per node)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Any) -> None:
        """Append ``item``; wake the consumer if it waits (never blocks)."""
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Any:
        """The oldest item, waiting for one if there is none. Cancelling the wait takes nothing."""
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        return self._items.popleft()


async def _traced(coro: Any, workflow_id: str, state: RunState) -> RunState:
    """Execute ``coro`` (a run of ``state``) within its run span, current in the run's
    task, so every node span nests under it; the span reads how the run ended from the
    state returned."""
    with telemetry().run_span(workflow_id, state) as span:
        final = await coro
        span.run_state(final)
        return final
