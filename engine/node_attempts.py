"""Running one node for the scheduler: its node run, its attempts within their limits and
timeouts, retries, the error strategy, a question for a person, and how it ends (the
rules are the scheduler's: engine/scheduler.py, rules 5 to 9).

:class:`NodeAttempts` is a part of :class:`~engine.scheduler.Scheduler` (a mixin): the
scheduler's state - plan, run state, limits, the dirty set, its checkpoint and end - is
declared here for reading, and set by the scheduler.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from schemas.events import InterruptEvent, NodeStarted
from schemas.run import Interrupt, NodeRun, RunState
from schemas.types import NodeRunStatus
from schemas.workflow import ErrorStrategy

from .context import CancelToken, InterruptRequested, NodeContext, NodeResult, RunDeps
from .errors import NodeFailed, NodeTimeout, RunCancelledError, RunError, RunLimitExceeded
from .run_records import error_record, size_over, wrap_error
from .telemetry import NOOP_SPAN, Span, run_scope, telemetry

if TYPE_CHECKING:
    from schemas.workflow import RunLimits

    from .compiler import CompiledPlan, NodePlan
    from .scheduler import Scheduler, Scope

__all__ = ["NodeAttempts"]

#: node-run statuses of a node that has not finished (restarted when its run is restored)
UNFINISHED = (NodeRunStatus.running, NodeRunStatus.pending)


class _Stop(Exception):
    """Internal: the run is ending (failure, limit or cancel); unwind node tasks."""


class NodeAttempts:
    """Running one node (module docstring)."""

    plan: CompiledPlan
    state: RunState
    deps: RunDeps
    cancel: CancelToken
    scope: Scope | None
    root: Scheduler
    _limits: RunLimits
    _ready: dict[str, None]
    _answers: dict[str, Interrupt]
    _ending: RunError | None
    _loop_deadline: float
    _dirty: dict[str, None]
    _output_bytes: int
    _pure: frozenset[str]
    _announced: dict[str, NodeRun]
    _started: dict[str, NodeRun]

    if TYPE_CHECKING:  # the scheduler's own parts

        def _emit(self, cls: type[Any], **fields: Any) -> None: ...
        async def _checkpoint(self) -> None: ...
        def _end(self, error: RunError) -> None: ...
        def _close(
            self, run: NodeRun, status: NodeRunStatus, error: BaseException | None, keep_error: bool = False
        ) -> None: ...
        def _resolve_edges(self, node_plan: NodePlan, handles: Any, out: list[str]) -> None: ...
        def _node_run_id(self, nid: str) -> str: ...

    async def _run_node_attempts(self, nid: str) -> list[str]:
        """Run one node (all attempts, error strategy); returns nodes made ready."""
        node_plan = self.plan.nodes[nid]
        self._ready.pop(nid, None)
        scope = run_scope.set((self.state.tenant_id, self.state.run_id, nid))  # what its log records carry
        try:
            # the node's span, current while it runs: its model calls, requests and (in a
            # loop) its body's nodes nest under it; it reads the node run's end when it closes
            with telemetry().node_span(self.state, nid, node_plan.node.type) as span:
                run, base, ctx, record = self._begin(node_plan)
                if record:  # rule 9: the store knows the node started before its effects begin
                    await self._checkpoint()
                span.node_run(run)
                outcome = await self._attempts(node_plan, run, base, ctx, span)
                if outcome is None:
                    return []  # waiting for a person's answer
                return await self._conclude(node_plan, run, *outcome)
        finally:
            run_scope.reset(scope)

    def _begin(self, node_plan: NodePlan) -> tuple[NodeRun, int, NodeContext, bool]:
        """The node run a node starts (or, resumed, continues) with, its attempts before
        this start, its context, and whether a checkpoint must store the start before the
        node runs (rule 9: the caller takes it); ``node_started`` is emitted.

        Not a coroutine: most starts take no checkpoint, and a coroutine per node start
        is a frame and an await the fan-out's thousand parallel nodes each pay."""
        state, node = self.state, node_plan.node
        nid = node.id
        started = time.time()
        answered = self._answers.pop(nid, None)
        if answered is not None:
            # Resuming: the same node run continues with its answer, which is used once.
            run = state.node_runs[nid]
            run.status = NodeRunStatus.running
            run.waited_s += max(0.0, started - answered.created_at)
            state.interrupts.pop(answered.id, None)
            base, record = run.attempts - 1 if run.attempts else 0, False
        else:
            run, base, record = self._open_node_run(nid, node.type, started)
        root = self.root
        root._started[run.id] = run
        if root._emit_fn is None:  # no sink: the event is never built, its number is still taken
            root.state.seq += 1
        else:
            self._emit(NodeStarted, node_id=nid, node_run_id=run.id, kind=node.type, attempt=base + 1)
        if record:
            self._dirty[nid] = None
        return (
            run,
            base,
            NodeContext(node, self.plan, state, self.deps, self.cancel, run, self._emit, answered, self),
            record,
        )

    async def _attempts(
        self, node_plan: NodePlan, run: NodeRun, base: int, ctx: NodeContext, span: Span = NOOP_SPAN
    ) -> tuple[NodeResult | None, BaseException | None] | None:
        """Rule 5: attempt the node until it succeeds or its retries are spent; returns
        ``(result, None)`` or ``(None, last error)``, None when it asks a person (it waits).
        Each failed attempt that another follows is a ``flowloom.retry`` event of ``span``
        (the node's), with the attempt's number and its error's reason code.

        Raises:
            _Stop: the run is ending (a limit, a cancel, a failure elsewhere).
        """
        node = node_plan.node
        nid = node.id
        result: NodeResult | None = None
        error: BaseException | None = None
        attempts = 1 + node.max_retries
        for attempt in range(attempts):
            if self._ending is not None:
                raise _Stop
            counters = self.root.state
            counters.node_executions += 1
            if counters.node_executions > self._limits.max_node_executions:
                self._end(
                    RunLimitExceeded(
                        f"run reached max_node_executions={self._limits.max_node_executions} at node {nid!r}",
                        node_id=nid,
                        reason="max_node_executions",
                    )
                )
                self._close(run, NodeRunStatus.cancelled, None)
                raise _Stop
            run.attempts = base + attempt + 1
            run.retries = attempt
            try:
                return await self._attempt(node_plan, ctx), None
            except asyncio.CancelledError:
                # Cancelled by _end (failure elsewhere, limit, cancel token): record and unwind.
                # A node cut by the run's wall time failed because of it; others were cancelled.
                cut = isinstance(self._ending, RunLimitExceeded) and self._ending.reason == "max_wall_time"
                self._close(run, NodeRunStatus.failed if cut else NodeRunStatus.cancelled, self._ending)
                if self._ending is None:
                    raise
                raise _Stop from None
            except RunLimitExceeded as exc:
                self._end(exc)
                self._close(run, NodeRunStatus.failed, exc)
                raise _Stop from None
            except InterruptRequested as request:
                if self.scope is not None:
                    return None, RunError(
                        f"node {nid!r} asks a question inside loop {self.scope.loop_id!r}: "
                        "interrupts are not supported inside loops",
                        node_id=nid,
                        reason="interrupt_in_loop",
                    )
                self._interrupt(run, request)
                await self._checkpoint()
                return None
            except Exception as exc:
                error = exc
                if isinstance(exc, RunCancelledError):
                    break
            if attempt + 1 < attempts:
                reason = getattr(error, "reason", None) or "node_error"
                span.event(
                    "flowloom.retry", {"flowloom.attempt": run.attempts, "flowloom.error.reason": str(reason)}
                )
            if attempt + 1 < attempts and node.retry_interval > 0:
                try:
                    await asyncio.sleep(node.retry_interval)
                except asyncio.CancelledError:
                    self._close(run, NodeRunStatus.cancelled, self._ending)
                    raise _Stop from None
        return result, error

    async def _conclude(
        self, node_plan: NodePlan, run: NodeRun, result: NodeResult | None, error: BaseException | None
    ) -> list[str]:
        """Record how the node ended, resolve its edges (rules 2, 3, 5) and checkpoint
        (rules 7, 9); returns the nodes made ready.

        Raises:
            _Stop: the node failed under ``fail`` (the run ends).
        """
        node = node_plan.node
        nid = node.id
        ready: list[str] = []
        if node_plan.members and self.scope is None:  # a loop region moved its rounds' node runs here
            # only those that ran: a round that failed early never reached the later members
            runs = self.state.node_runs
            self._dirty.update(dict.fromkeys(m for m in node_plan.members if m in runs))
        if error is None and result is not None:
            run.outputs = result.outputs
            run.handles = list(result.handles)
            self._close(run, NodeRunStatus.succeeded, None)
            self._resolve_edges(node_plan, result.handles, ready)
        else:
            assert error is not None
            handles = self._apply_strategy(node_plan, run, error)
            if handles is None:
                cancelled = isinstance(error, RunCancelledError)
                self._close(run, NodeRunStatus.cancelled if cancelled else NodeRunStatus.failed, error)
                self._end(error if isinstance(error, RunError) else wrap_error(error, nid))
                raise _Stop
            self._resolve_edges(node_plan, handles, ready)
        if ready:
            self._ready.update(dict.fromkeys(ready))
        if node.type not in self._pure or node_plan.members:  # rule 7; a loop region holds other nodes
            # nested or without a hook _checkpoint does nothing: not even its coroutine is made
            if self.scope is None and self.deps.checkpoint is not None:
                if self._ending is None:
                    for target in ready:  # rule 9: their start rides on this checkpoint
                        if self.plan.nodes[target].node.type not in self._pure:
                            self._announce(target)
                await self._checkpoint()
        return ready

    def _open_node_run(self, nid: str, kind: str, started: float) -> tuple[NodeRun, int, bool]:
        """The node run a (not resumed) node starts with: ``(run, attempts before this
        start, whether a checkpoint must record the start before the node runs)``.

        Rule 9: an unfinished node run restored from the store (``running``: a process that
        died had started it) counts its attempts on, and a node with effects has its start
        stored - by the checkpoint that made it ready (:meth:`_announce`), or by one of its
        own - so every later restore counts this attempt too."""
        state = self.state
        announced = self._announced.pop(nid, None)
        if announced is not None and state.node_runs.get(nid) is announced:
            announced.started_at = started
            return announced, announced.attempts - 1, False
        before = state.node_runs.get(nid)
        base = before.attempts if before is not None and before.status in UNFINISHED else 0
        run = NodeRun.started(self._node_run_id(nid), nid, kind, started, base)
        if self.scope is not None:
            run.loop_id, run.iteration = self.scope.loop_id, self.scope.iteration
        state.node_runs[nid] = run
        record = self.scope is None and kind not in self._pure and self.deps.checkpoint is not None
        if record:
            run.attempts = base + 1
        return run, base, record

    def _announce(self, nid: str) -> None:
        """Rule 9: record node ``nid`` (with effects, just made ready) as started in the
        checkpoint about to be taken, so it needs no checkpoint of its own before it runs."""
        before = self.state.node_runs.get(nid)
        base = before.attempts if before is not None and before.status in UNFINISHED else 0
        run = NodeRun.started(
            self._node_run_id(nid), nid, self.plan.nodes[nid].node.type, time.time(), base + 1
        )
        self.state.node_runs[nid] = run
        self._dirty[nid] = None
        self._announced[nid] = run

    async def _attempt(self, node_plan: NodePlan, ctx: NodeContext) -> NodeResult:
        node = node_plan.node
        self.cancel.raise_if_cancelled(node.id)
        if node.timeout is None:
            # The run's wall time is enforced by the deadline timer (_on_deadline), which
            # cancels running nodes; no per-node timer needed on this hot path.
            result = await node_plan.executor.run(ctx)
            if result.outputs:
                self._check_size(result.outputs, node.id)
            return result
        loop_deadline = self._loop_deadline
        node_deadline = asyncio.get_running_loop().time() + node.timeout
        try:
            async with asyncio.timeout_at(min(node_deadline, loop_deadline)):
                result = await node_plan.executor.run(ctx)
            if result.outputs:
                self._check_size(result.outputs, node.id)
            return result
        except TimeoutError:
            if node_deadline < loop_deadline:
                raise NodeTimeout(
                    f"node {node.id!r} timed out after {node.timeout}s", node_id=node.id
                ) from None
            raise RunLimitExceeded(
                f"run reached max_wall_time={self._limits.max_wall_time}s while node {node.id!r} was running",
                node_id=node.id,
                reason="max_wall_time",
            ) from None

    def _check_size(self, outputs: dict[str, Any], nid: str) -> None:
        """Fail the attempt when the outputs pass ``max_node_output_bytes`` (what one node run
        may hold in the run state and the run record).

        Raises:
            NodeFailed: reason ``output_too_large``, naming the cap.
        """
        settings = self.deps.settings
        cap = settings.max_node_output_bytes
        size = size_over(outputs, cap)
        if size > cap:
            raise NodeFailed(
                f"node {nid!r} produced outputs of more than {cap} bytes; the cap "
                f"max_node_output_bytes is {cap}",
                node_id=nid,
                reason="output_too_large",
            )
        # The whole run record is bounded too: many nodes under the per-node cap (a loop of
        # ten thousand rounds) must not grow one run without limit.
        root = self.root
        root._output_bytes += size
        if root._output_bytes > settings.max_run_output_bytes:
            raise NodeFailed(
                f"node {nid!r} would bring the run's outputs past {settings.max_run_output_bytes} "
                "bytes; the cap max_run_output_bytes bounds one run record",
                node_id=nid,
                reason="run_too_large",
            )

    def _interrupt(self, run: NodeRun, request: InterruptRequested) -> None:
        """Record a pending interrupt; the node waits and its outgoing edges stay pending."""
        state = self.state
        run.status = NodeRunStatus.waiting
        if self.scope is None:
            self._dirty[run.node_id] = None
        interrupt = Interrupt(
            id=f"{run.id}:{run.attempts}:{state.seq + 1}",
            node_id=run.node_id,
            node_run_id=run.id,
            kind=request.kind,
            payload=request.payload,
            created_at=time.time(),
        )
        state.interrupts[interrupt.id] = interrupt
        self._emit(
            InterruptEvent,
            interrupt_id=interrupt.id,
            node_id=run.node_id,
            node_run_id=run.id,
            attempt=run.attempts,
            kind=interrupt.kind,
            payload=interrupt.payload,
        )

    def _apply_strategy(self, node_plan: NodePlan, run: NodeRun, error: BaseException) -> list[str] | None:
        """Rule 5: returns the handles taken, or None when the run must fail."""
        node = node_plan.node
        run.error = error_record(error, node.id)
        if isinstance(error, RunCancelledError):
            return None
        if node.error_strategy is ErrorStrategy.error_branch:
            run.outputs = {"error": {"type": run.error.type, "message": run.error.message}}
            run.handles = ["error"]
            self._close(run, NodeRunStatus.failed, error, keep_error=True)
            return ["error"]
        if node.error_strategy is ErrorStrategy.default_output:
            handle = node.default_handle or (node.handles() or ["out"])[0]
            run.outputs = dict(node.default_output or {})
            run.handles = [handle]
            self._close(run, NodeRunStatus.succeeded, error, keep_error=True)
            return [handle]
        return None
