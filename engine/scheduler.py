"""The scheduler: runs a :class:`~engine.compiler.CompiledPlan` on asyncio.

Algorithm (the engine's contract; README "Scheduling rules"):

1. Every edge starts ``pending``. The start node is ready; every other node waits
   for all its incoming edges to resolve.
2. A node that finishes takes some of its output handles (``NodeResult.handles``).
   Each outgoing edge becomes ``taken`` when its ``sourceHandle`` was taken, else
   ``skipped``. A skipped or cancelled node skips all its outgoing edges.
3. When the last incoming edge of a node resolves: if at least one is ``taken`` the
   node becomes ready and runs (exactly once - a join of an if and an else side runs
   as soon as the taken side arrives and the other side is skipped); if all are
   ``skipped`` the node is skipped and rule 2 propagates the skip at once.
   A node with no incoming edges other than the start node is skipped
   (it is unreachable; the compiler warns).
4. Ready nodes run concurrently as asyncio tasks (bounded by ``max_concurrency``).
   A task that finishes a node continues with one of the nodes it made ready and
   spawns tasks for the others, so a chain costs no task creation per node.
5. Each attempt of a node counts against ``max_node_executions``; every attempt is
   bounded by the node's ``timeout`` and the run's deadline (``max_wall_time``),
   enforced inside the node by cancelling it, not only between nodes. A failed
   attempt is retried ``max_retries`` times after ``retry_interval`` seconds (an
   asyncio sleep: other nodes keep running). Then the error strategy applies:
   ``fail`` ends the run, ``error_branch`` takes the ``error`` handle with
   ``{"error": {...}}`` as outputs, ``default_output`` succeeds with the configured
   outputs.
6. The run fails on the first node failure under ``fail`` and on a limit; running
   nodes are then cancelled and recorded as ``cancelled``. Everything finished so
   far stays in the state. The cancellation token cancels running nodes the same way.
7. The run state is checkpointed (``RunDeps.checkpoint``) after every node resolves,
   before its successors start, with the node runs changed since the previous
   checkpoint (:class:`~engine.ports.CheckpointDelta`) - except after a node of a kind
   the catalog marks ``pure`` (no effect outside the run, so recomputing it is
   harmless): its node run rides on the next checkpoint (of a node with effects, of a
   pause, or of the run's end), and a run restored after a crash runs it again. A run
   of pure nodes only is thus stored once, at its end. Edge statuses are not part of
   a checkpoint: a restored run derives them from its node runs (:func:`derive_edges`).
8. A node may raise an interrupt (a question for a person): it waits, its outgoing
   edges stay pending, other branches go on; when nothing can run the run is
   ``paused``. :func:`engine.runner.resume_run` with an answer bound to the
   interrupt id runs that node again (same node run) with ``ctx.answer``; each
   answer is used once, and an interrupt left unanswered keeps the run paused.
9. A node with effects (not ``pure``) is stored as started, with its attempt counted,
   before it runs: by the checkpoint of the node with effects that made it ready, else
   by a checkpoint of its own. A run restored after a crash runs such a node again
   (same node run id, so the same idempotency key) and counts on from the stored
   attempts, so a node that ran twice says ``attempts: 2`` (a process that died in the
   instant between storing the start and starting it counts an attempt it never made).
   This also stores the run ``running`` before its first effect.

Running one node (its attempts, retries, error strategy, questions: rules 5, 8, 9) is
:mod:`engine.node_attempts`; node run ids, error records, output sizes and
:func:`derive_edges` are :mod:`engine.run_records`; what a person sees is
:mod:`engine.answers`.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

from schemas.events import (
    NodeFinished,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
)
from schemas.events import (
    RunCancelled as RunCancelledEvent,
)
from schemas.run import EdgeStatus, Interrupt, NodeRun, RunState, Usage
from schemas.types import NodeRunStatus, RunStatus

from .answers import AnswerStream
from .compiler import CompiledPlan, NodePlan
from .context import CancelToken, RunDeps
from .errors import RunCancelledError, RunError, RunLimitExceeded
from .node_attempts import NodeAttempts, _Stop
from .ports import CheckpointDelta, StoreError
from .run_records import derive_edges, error_record, id_part, size_over

_log = logging.getLogger("flowloom.engine")

__all__ = ["Scheduler", "derive_edges"]

_TAKEN, _SKIPPED, _PENDING = EdgeStatus.taken, EdgeStatus.skipped, EdgeStatus.pending


@dataclass(frozen=True, slots=True)
class Scope:
    """A nested run inside a run: one round of a loop or one item of an iteration.

    The nested scheduler runs a sub-plan over a child state whose references fall
    back to the parent state; events, counters, limits, the deadline and the
    cancellation token are the root run's. Node runs carry ``loop_id``/``iteration``.
    """

    root: Scheduler
    loop_id: str
    iteration: int


class Scheduler(NodeAttempts):
    """Executes one run of ``plan`` over ``state`` (fresh, or restored from a checkpoint).

    Use :func:`engine.runner.run_workflow` rather than this class directly; loops use
    :meth:`run_nested` to run their bodies.
    """

    def __init__(
        self,
        plan: CompiledPlan,
        state: RunState,
        deps: RunDeps,
        cancel: CancelToken | None = None,
        scope: Scope | None = None,
    ):
        self.plan = plan
        self.state = state
        self.deps = deps
        self.cancel = cancel or CancelToken()
        self.scope = scope
        self.root: Scheduler = scope.root if scope is not None else self
        self._emit_fn = deps.on_event
        self._limits = self.root.plan.workflow.limits
        # Derived from state.edges (rebuilt on restore): incoming edges still pending / taken.
        self._remaining: dict[str, int] = {}
        self._taken: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._queue: list[str] = []  # ready but waiting for a concurrency slot
        self._ready: dict[str, None] = {}  # ready, not started; materialised as state.ready at checkpoints
        self._answers: dict[str, Interrupt] = {}  # node id -> its answered interrupt (from state.interrupts)
        self._done: asyncio.Future[None] | None = None
        self._ending: RunError | None = None
        self.ending: RunError | None = None  # why a nested run ended (None: it succeeded)
        self._loop_deadline = 0.0
        self._unsubscribe: Any = lambda: None
        # Node runs changed since the last checkpoint (root scope only) and saved history length.
        self._dirty: dict[str, None] = {}
        self._history_saved = len(state.history)
        self._output_bytes = 0  # bytes of node outputs in this run so far (root scheduler only)
        # kinds whose node runs need no checkpoint of their own (rule 7)
        self._pure = plan.catalog.pure if plan.catalog is not None else frozenset()
        # nodes with effects whose start the last checkpoint recorded (rule 9), not started yet
        self._announced: dict[str, NodeRun] = {}
        #: node run id -> node run, of every node run started in this run (kept by the root
        #: scheduler): a node event's ``attempt`` is its node run's, at any depth
        self._started: dict[str, NodeRun] = {}
        #: the answer stream of this scope (engine/answers.py); None when nothing here is streamed
        self.answer_stream: AnswerStream | None = None
        self._parent_stream: AnswerStream | None = None  # the enclosing scope's, for a nested run

    # ------------------------------------------------------------------ events

    def _emit(self, cls: type[Any], **fields: Any) -> None:
        """Number and publish an event; without a sink only the sequence advances (hot path).

        Nested scopes number events in the root run's sequence and tag node events
        with their loop id and iteration; a node event not given its ``attempt`` gets
        its node run's attempt count.
        """
        if "node_run_id" in fields and "attempt" not in fields:
            run = self.root._started.get(fields["node_run_id"]) or self.state.find_node_run(fields["node_id"])
            fields["attempt"] = run.attempts if run is not None and run.id == fields["node_run_id"] else 1
        if self.scope is not None:
            if "node_id" in fields:
                fields["loop_id"], fields["iteration"] = self.scope.loop_id, self.scope.iteration
            self.root._emit(cls, **fields)
            return
        self.state.seq += 1
        if self._emit_fn is not None:
            if self.deps.redactor:  # the run's secret values never leave it in an event
                fields = self.deps.redactor.value(fields)
            self._emit_fn(cls(seq=self.state.seq, run_id=self.state.run_id, ts=time.time(), **fields))

    # ------------------------------------------------------------------- start

    def _rebuild_counts(self, fresh: bool) -> list[str]:
        """Recompute derived counters from ``state.edges``; returns the nodes to (re)start:
        every node whose upstream resolved with a taken edge but that has not finished
        (ready, or running when the checkpoint was taken)."""
        edges, runs = self.state.edges, self.state.node_runs
        if fresh and not runs:
            # A new run: every edge pending (just made by _prepare), no node run - the counts
            # follow from the plan, without a look at each edge (the walk below costs the
            # fan-out's join one step per incoming edge). The same counts, the same order.
            order, nodes, roots = self.plan.order, self.plan.nodes, self.plan.roots
            self._remaining = {nid: len(nodes[nid].in_edges) for nid in order}
            self._taken = dict.fromkeys(order, 0)
            return [nid for nid in order if nid in roots and not nodes[nid].in_edges]
        restart: list[str] = []
        for nid in self.plan.order:
            pending = taken = 0
            for eid in self.plan.nodes[nid].in_edges:
                status = edges[eid]
                if status is _PENDING:
                    pending += 1
                elif status is _TAKEN:
                    taken += 1
            self._remaining[nid] = pending
            self._taken[nid] = taken
            run = runs.get(nid)
            unfinished = run is None or run.status in (NodeRunStatus.running, NodeRunStatus.pending)
            if run is not None and run.status is NodeRunStatus.waiting:
                unfinished = nid in self._answers  # a waiting node runs again only once answered
            if unfinished and pending == 0 and (taken or nid in self.plan.roots):
                restart.append(nid)
        return restart

    async def run(self) -> RunState:
        """Run to the end; returns the final state. Never raises for run failures
        (they are in ``state.status`` / ``state.error`` and the events)."""
        state, loop = self.state, asyncio.get_running_loop()
        nested = self.scope is not None
        fresh = state.status is RunStatus.pending
        self._prepare(fresh, nested)
        self._answers = {i.node_id: i for i in state.interrupts.values() if i.answered}
        resumed = state.status is RunStatus.paused and bool(self._answers)
        state.status = RunStatus.running
        self._loop_deadline = (
            self.root._loop_deadline
            if nested
            else loop.time() + max(0.0, (state.deadline or 0.0) - time.time())
        )
        self._done = loop.create_future()
        self._unsubscribe = self.cancel.on_cancel(self._on_cancel)
        if fresh and not nested:
            self._emit(RunStarted, workflow_id=state.workflow_id, inputs=state.inputs)
        elif resumed:
            self._emit(RunResumed, answered=[i.id for i in self._answers.values()])
        if self.plan.stream is not None:
            self._open_stream()
        to_start = self._rebuild_counts(fresh)
        if fresh:
            # Rule 3: nodes with no incoming edges, other than the roots, can never run.
            for nid, node_plan in self.plan.nodes.items():
                if not node_plan.in_edges and nid not in self.plan.roots:
                    self._skip(nid, to_start)
        if self.answer_stream is not None:
            self._start_stream(fresh)
        self._ready.update(dict.fromkeys(to_start))
        # Nested scopes rely on the root's deadline timer, which cancels the root's tasks.
        timer = None if nested else loop.call_at(self._loop_deadline, self._on_deadline)
        try:
            self._start(to_start)
            if self._tasks and not self._done.done():
                await self._done
            elif not self._tasks and not self._done.done():
                self._done.set_result(None)
        except asyncio.CancelledError:
            # The task running this run was cancelled (a server shutting down, or the
            # loop node around a nested run): stop the nodes in progress too, record
            # the run as cancelled, then re-raise.
            self._end(
                RunCancelledError("run cancelled: the task running it was cancelled", reason="cancelled")
            )
            await self._finish()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return await self._finish()

    def _prepare(self, fresh: bool, nested: bool) -> None:
        """Times, deadline and edges of a fresh run; a paused one's waiting time; a restored
        one's edges (derived from its node runs) and the output bytes it holds."""
        state = self.state
        if fresh:
            state.started_at = time.time()
            state.edges = {
                eid: _PENDING for node_plan in self.plan.nodes.values() for eid in node_plan.in_edges
            }
            if not nested:
                state.deadline = state.started_at + self._limits.max_wall_time
        elif state.status is RunStatus.paused:
            # Time spent waiting for a person does not count against max_wall_time.
            state.deadline = time.time() + (state.wall_time_left or 0.0)
            if state.paused_at is not None:
                state.waited_s += max(0.0, time.time() - state.paused_at)
                state.paused_at = None
        if not fresh and not nested and not state.edges:
            derive_edges(self.plan, state)  # a run restored from storage: edges follow from node runs
        if not fresh and not nested:
            cap = self.deps.settings.max_run_output_bytes
            self._output_bytes = sum(
                size_over(run.outputs or {}, cap) for run in (*state.node_runs.values(), *state.history)
            )

    def _open_stream(self) -> None:
        """Build this scope's answer stream (it goes live in :meth:`_start_stream`)."""
        stream_plan = self.plan.stream
        assert stream_plan is not None
        if self.scope is None:
            self.answer_stream = AnswerStream.top(stream_plan, self.state, self._emit, self._node_run_id)
        else:
            parent = self._parent_stream
            self.answer_stream = (
                parent.nested(
                    stream_plan, self.state, self.scope.loop_id, self.scope.iteration, self._node_run_id
                )
                if parent is not None
                else None
            )

    def _start_stream(self, fresh: bool) -> None:
        """Start this scope's answer stream, after the skips of unreachable nodes (so an
        answer no edge leads to never speaks); a restored run replays its resolved nodes
        silently (their text is already in ``state.answer``)."""
        assert self.answer_stream is not None
        if fresh:
            self.answer_stream.start()
            return
        self.answer_stream.start(
            [
                run
                for nid in self.plan.order
                if (run := self.state.node_runs.get(nid)) is not None and run.finished_at is not None
            ],
            silent=True,
        )

    # ---------------------------------------------------------------- spawning

    def _start(self, node_ids: list[str]) -> None:
        """Start a task per node of ``node_ids`` (queued instead past ``max_concurrency``).

        The cyclic GC is paused while they are spawned (no await in between): each task
        brings about five containers (task, coroutine, context, handle, weak reference)
        that all live until it runs, so the young collections a batch would trigger - seven
        for the fan-out's 997 tasks, and the older collections they lead to - could free
        nothing. The collection is deferred to the batch's end, not skipped, and the pause
        lasts microseconds per task, never across an await (as the compiler's pause)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._spawn(node_ids)
        finally:
            if enabled:
                gc.enable()

    def _spawn(self, node_ids: list[str]) -> None:
        limit = self._limits.max_concurrency
        loop = asyncio.get_running_loop()
        for nid in node_ids:
            if self._ending is not None:
                return
            if limit is not None and len(self._tasks) >= limit:
                self._queue.append(nid)
                continue
            task = loop.create_task(self._task(nid))  # what ensure_future does, minus its checks
            self._tasks.add(task)
            if limit is not None:  # under a bound a task holds its slot until it is done, as it always has
                task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any] | None) -> None:
        """``task`` left the run: when it was the last, the run's wait ends. Called as the
        task's body ends (:meth:`_task`) or, for a task cancelled by :meth:`_end` or under
        a concurrency bound, as a done callback; a second call for a task is a no-op."""
        self._tasks.discard(task)
        if not self._tasks and self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def _task(self, nid: str | None) -> None:
        try:
            while nid is not None and self._ending is None:
                newly = await self._run_node_attempts(nid)
                if self._queue and self._limits.max_concurrency is not None:
                    newly = self._queue + newly
                    self._queue = []
                if newly:
                    nid = newly[0]
                    if len(newly) > 1:
                        self._start(newly[1:])
                else:
                    nid = None
        except _Stop:
            pass
        except Exception as exc:
            # Node errors never get here (the node's strategy took them). Swallowed, it
            # would let the run end as if nothing happened with a node run not stored;
            # the run fails instead, naming the fault's type, and the log keeps the rest.
            _log.exception("run %s: internal error after node %r", self.state.run_id, nid)
            if isinstance(
                exc, StoreError
            ):  # the store refused a checkpoint: say so (its message masks secrets)
                self._end(
                    RunError(
                        f"the run stopped after node {nid!r}: its store failed ({exc})",
                        node_id=nid,
                        reason="store_error",
                    )
                )
                return
            self._end(
                RunError(
                    f"the run stopped on an internal error ({type(exc).__name__}) after node {nid!r}; "
                    "the log has the details",
                    node_id=nid,
                    reason="engine_error",
                )
            )
        finally:
            # The task leaves the run as its body ends, not by a done callback: a callback
            # is a handle and a loop round per task (half the young collections of the
            # fan-out's run). A task cancelled before its first step never runs this, so
            # _end gives each task it cancels a callback; under max_concurrency the
            # callback from _start frees the slot, as it always has.
            if self._limits.max_concurrency is None:
                self._task_done(asyncio.current_task())

    # ---------------------------------------------------------------- resolving

    def _resolve_edges(
        self, node_plan: NodePlan, handles: tuple[str, ...] | list[str] | None, out: list[str]
    ) -> None:
        """Rule 2/3: mark outgoing edges; append nodes that became ready to ``out``."""
        edges, remaining, taken = self.state.edges, self._remaining, self._taken
        stack: list[tuple[NodePlan, Any]] = [(node_plan, handles)]
        while stack:
            current, current_handles = stack.pop()
            for eid, handle, target in current.out_edges:
                if current_handles is not None and handle in current_handles:
                    edges[eid] = _TAKEN
                    taken[target] += 1
                else:
                    edges[eid] = _SKIPPED
                remaining[target] -= 1
                if remaining[target] == 0:
                    if taken[target]:
                        out.append(target)
                    else:
                        self._mark_skipped(target)
                        stack.append((self.plan.nodes[target], None))
        if self.answer_stream is not None and self.answer_stream.opening:
            self.answer_stream.settle()

    def _mark_skipped(self, nid: str, plan: CompiledPlan | None = None) -> None:
        node_plan = (plan or self.plan).nodes[nid]
        run = NodeRun.skipped(self._node_run_id(nid), nid, node_plan.node.type, time.time())
        if self.scope is not None:
            run.loop_id, run.iteration = self.scope.loop_id, self.scope.iteration
        if (
            node_plan.members and node_plan.body is not None
        ):  # a skipped loop region skips the nodes inside it
            for member in node_plan.members:
                self._mark_skipped(member, node_plan.body)
        self.state.node_runs[nid] = run
        if self.scope is None:
            self._dirty[nid] = None
        self._emit(
            NodeFinished,
            node_id=nid,
            node_run_id=run.id,
            kind=run.kind,
            status=NodeRunStatus.skipped,
            attempt=0,
        )
        if self.answer_stream is not None and plan is None:
            self.answer_stream.resolved(run)

    def _node_run_id(self, nid: str) -> str:
        """Unique in the run: a node runs once per run of a DAG, once per round/item in a loop.

        ``<run id>:<node id>`` or ``<run id>:<loop id>#<iteration>:<node id>``, with ``%``,
        ``:`` and ``#`` in ids written ``%25``, ``%3A``, ``%23``: ids are free text, and
        interrupt ids and HTTP idempotency keys are built from node run ids, so two node
        runs must never share one (node ``L#0:x`` vs node ``x`` in round 0 of ``L``).
        """
        if self.scope is None:
            return f"{self.state.run_id}:{id_part(nid)}"
        return f"{self.root.state.run_id}:{id_part(self.scope.loop_id)}#{self.scope.iteration}:{id_part(nid)}"

    def _skip(self, nid: str, out: list[str]) -> None:
        self._mark_skipped(nid)
        self._resolve_edges(self.plan.nodes[nid], None, out)

    def _close(
        self, run: NodeRun, status: NodeRunStatus, error: BaseException | None, keep_error: bool = False
    ) -> None:
        if run.finished_at is not None:
            return
        now = time.time()
        run.status = status
        run.finished_at = now
        if self.scope is None:
            self._dirty[run.node_id] = None
        if error is not None and not keep_error:
            run.error = error_record(error, run.node_id)
        if status is NodeRunStatus.failed and run.error is not None:
            # for operators' logs (INFO: a failed node is the workflow's business, often handled by an error branch)
            _log.info(
                "node %r (%s) failed: %s: %s",
                run.node_id,
                run.kind,
                run.error.reason or run.error.type,
                run.error.message,
            )
        if self._emit_fn is None and self.scope is None:  # the hot path of _emit without a sink
            self.state.seq += 1
        else:  # (a nested scope numbers in the root's sequence, sink or not)
            self._emit(
                NodeFinished,
                node_id=run.node_id,
                node_run_id=run.id,
                kind=run.kind,
                status=status,
                handles=run.handles,
                outputs=run.outputs,
                error=run.error,
                elapsed_ms=max(0.0, now - (run.started_at or now) - run.waited_s) * 1000.0,
            )
        if self.answer_stream is not None:
            self.answer_stream.resolved(run)

    async def _checkpoint(self) -> None:
        hook = self.deps.checkpoint
        if hook is not None and self.scope is None:  # nested runs restart with their loop node
            state = self.state
            state.ready = list(self._ready)
            if self.answer_stream is not None and self.answer_stream.changed:
                state.answer = self.answer_stream.saved()
            delta = CheckpointDelta(list(self._dirty), self._history_saved)
            self._dirty = {}
            self._history_saved = len(state.history)
            try:
                result = hook(self.deps.redactor.state(state) if self.deps.redactor else state, delta)
                if inspect.isawaitable(result):
                    await result
            except BaseException:
                # Not stored: the next checkpoint carries these node runs again.
                self._dirty = {**dict.fromkeys(delta.node_ids), **self._dirty}
                self._history_saved = min(self._history_saved, delta.history_from)
                raise

    # ---------------------------------------------------------------- ending

    def _end(self, error: RunError) -> None:
        """Rule 6: remember why the run ends and cancel every other running node."""
        if self._ending is not None:
            return
        self._ending = error
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
                # one cancelled before its first step never runs its body, where tasks leave the run
                task.add_done_callback(self._task_done)

    def _on_cancel(self, reason: str) -> None:
        self._end(RunCancelledError(f"run cancelled: {reason}", reason="cancelled"))
        if not self._tasks and self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def run_nested(
        self, plan: CompiledPlan, state: RunState, loop_id: str, iteration: int
    ) -> Scheduler:
        """Run ``plan`` (a loop body or a loop region) over ``state`` (a child state whose
        references fall back to this run's) as round/item ``iteration`` of ``loop_id``.

        Returns the nested scheduler: its ``state`` holds the node runs, its ``ending``
        the error that stopped it (None when it succeeded).

        What the nested run's node runs spent (model usage) is added to the usage of the
        node run of ``loop_id`` here, however the nested run ended, so the run's totals
        and quotas count every model call at any depth once - except for a loop region,
        whose rounds' node runs move into this state themselves (engine/loops.py).
        """
        nested = Scheduler(plan, state, self.deps, self.cancel, Scope(self.root, loop_id, iteration))
        nested._parent_stream = self.answer_stream
        try:
            await nested.run()
        finally:
            owner_plan = self.plan.nodes.get(loop_id)
            owner = self.state.node_runs.get(loop_id)
            spent = state.spent()
            if spent is not None and owner is not None and owner_plan is not None and not owner_plan.members:
                owner.usage = Usage.total([owner.usage, spent])
        return nested

    def _on_deadline(self) -> None:
        # Ends the run at max_wall_time wherever it is: cancels running nodes (blocking
        # ones stop being awaited) and names them in the error.
        running = [nid for nid, run in self.state.node_runs.items() if run.status is NodeRunStatus.running]
        where = f" while node(s) {', '.join(map(repr, running))} were running" if running else ""
        self._end(
            RunLimitExceeded(
                f"run reached max_wall_time={self._limits.max_wall_time}s{where}",
                node_id=running[0] if running else None,
                reason="max_wall_time",
            )
        )
        if not self._tasks and self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def _finish(self) -> RunState:
        self._unsubscribe()
        state = self.state
        if self._tasks:  # wait for cancelled tasks to record themselves
            await asyncio.gather(*self._tasks, return_exceptions=True)
        state.finished_at = time.time()
        # Time spent waiting for a person is reported apart (waited_s), not as run time.
        elapsed = (
            max(0.0, state.finished_at - (state.started_at or state.finished_at) - state.waited_s) * 1000.0
        )
        ending = self._ending
        for run in list(state.node_runs.values()):
            if run.status is NodeRunStatus.running:
                self._close(run, NodeRunStatus.cancelled, ending)
        if self.answer_stream is not None:
            if ending is not None or not state.interrupts:
                self.answer_stream.finish()
            if self.scope is None:
                state.answer = self.answer_stream.saved()
        if ending is None and state.interrupts:
            state.status = RunStatus.paused
            state.paused_at = time.time()
            state.wall_time_left = max(0.0, (state.deadline or 0.0) - time.time())
            self._emit(
                RunPaused,
                interrupts=list(state.interrupts.values()),
                elapsed_ms=elapsed,
            )
            await self._checkpoint()
            return state
        if ending is None:
            pending = [nid for nid in self.plan.order if nid not in state.node_runs]
            if pending:  # pragma: no cover - would be an engine bug; fail loudly, never silently
                ending = RunError(f"scheduler stopped with unresolved nodes {pending}", reason="engine_error")
        if self.scope is not None:  # a nested run reports to its loop node, not as run events
            state.status = (
                RunStatus.succeeded
                if ending is None
                else RunStatus.cancelled
                if isinstance(ending, RunCancelledError)
                else RunStatus.failed
            )
            state.error = error_record(ending, ending.node_id) if ending is not None else None
            self.ending = ending
            return state
        if isinstance(ending, RunCancelledError):
            state.status = RunStatus.cancelled
            state.error = error_record(ending, ending.node_id)
            self._emit(RunCancelledEvent, reason=str(ending), elapsed_ms=elapsed)
        elif ending is not None:
            state.status = RunStatus.failed
            state.error = error_record(ending, ending.node_id)
            self._emit(RunFailed, reason=ending.reason, error=state.error, elapsed_ms=elapsed)
        else:
            state.status = RunStatus.succeeded
            self._collect_outputs()
            self._emit(RunFinished, outputs=state.outputs, answer=state.answer, elapsed_ms=elapsed)
        await self._checkpoint()
        return state

    def _collect_outputs(self) -> None:
        """The run's outputs, from the node runs of kinds whose catalog entry ``collects``
        them (a run of one node on its own, engine/single_node.py: that node's outputs). The answer is what the answer stream sent (engine/answers.py), set by
        :meth:`_finish`."""
        state, catalog = self.state, self.plan.catalog
        alone = state.node_runs.get(state.sys.get("single_node") or "") if self.scope is None else None
        if (
            alone is not None and alone.outputs is not None
        ):  # a node run on its own: its outputs are the run's
            state.outputs.update(alone.outputs)
            return
        collects = {k for k in catalog if catalog[k].collects == "outputs"} if catalog is not None else set()
        for run in state.node_runs.values():
            if run.kind in collects and run.status is NodeRunStatus.succeeded and run.outputs is not None:
                state.outputs.update(run.outputs)
