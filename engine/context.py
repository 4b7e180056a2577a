"""What a node sees while it runs: frozen run deps apart from mutable run state.

- :class:`RunDeps` (frozen): settings, the event sink, the checkpoint hook and the
  ports a node may use (model registry, node memory, workflow source) - shared by
  every node of a run, never mutated.
- :class:`~schemas.run.RunState` (mutable): the variable pool and statuses.
- :class:`NodeContext`: both, plus this node's record and the cancellation token,
  handed to ``NodeExecutor.run``. Nothing is hidden in string-keyed dicts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from schemas.events import NodeDelta
from schemas.run import Interrupt, NodeRun, RunState
from schemas.types import NodeRunStatus, value_matches
from schemas.values import InputBinding

from .errors import ReferenceFailed, RunCancelledError
from .ports import CheckpointDelta, ModelCatalog, NodeMemory, WorkflowSource
from .references import render_template, resolve_value
from .settings import Settings, get_settings

if TYPE_CHECKING:
    from schemas.workflow import NodeBase

    from .compiler import CompiledPlan
    from .environment import Redactor, SecretStore
    from .knowledge.ports import KnowledgeSearch

__all__ = [
    "CancelToken",
    "Checkpoint",
    "EventSink",
    "InterruptRequested",
    "NodeContext",
    "NodeResult",
    "RunDeps",
]

T = TypeVar("T")
EventSink = Callable[[Any], None]
Checkpoint = Callable[[RunState, CheckpointDelta], Awaitable[None] | None]


class CancelToken:
    """Cooperative cancellation shared by a run and its nodes.

    ``cancel(reason)`` sets the flag, wakes waiters and calls registered callbacks
    (the scheduler registers one that cancels running node tasks, so a stop ends work
    in progress, not only between nodes).
    """

    __slots__ = ("_reason", "_callbacks", "_event")

    def __init__(self) -> None:
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], None]] = []
        self._event: asyncio.Event | None = None

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """The reason given to :meth:`cancel`."""
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Fire the token (idempotent; the first reason wins)."""
        if self._reason is not None:
            return
        self._reason = reason
        if self._event is not None:
            self._event.set()
        for callback in list(self._callbacks):
            callback(reason)

    def on_cancel(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` when the token fires (at once if it already has).

        Returns a function that unregisters the callback (idempotent), so short-lived
        watchers (one per model call, one per loop round) do not pile up on a long run.
        """
        if self._reason is not None:
            callback(self._reason)
            return lambda: None
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return unsubscribe

    def raise_if_cancelled(self, node_id: str | None = None) -> None:
        """Raise :class:`RunCancelledError` when fired."""
        if self._reason is not None:
            raise RunCancelledError(f"run cancelled: {self._reason}", node_id=node_id)

    async def wait(self) -> str:
        """Wait until the token fires; returns the reason."""
        if self._event is None:
            self._event = asyncio.Event()
            if self._reason is not None:
                self._event.set()
        await self._event.wait()
        return self._reason or "cancelled"


@dataclass(frozen=True, slots=True)
class RunDeps:
    """Frozen dependencies of a run, passed in by whoever starts it (CLI, API, worker).

    - ``on_event`` receives every event in order (sync; must not block).
    - ``checkpoint(state, delta)`` is awaited (when async) after every node resolves,
      before its successors start.
    - ``models``: the model registry LLM nodes call (None: the nodes' own default,
      built from ``settings``).
    - ``memory``: node memory for cross-run hints (None: nodes keep no memory).
    - ``workflows``: where workflow tools are found, by the run's tenant
      (:class:`~engine.ports.WorkflowSource`; None: the workflow files of
      ``settings.workflow_path``).
    - ``knowledge``: the tenant's knowledge bases, searched by retrieval nodes and
      dataset tools (None: those nodes fail naming the missing knowledge service).
    - ``secrets``: where the values of the workflow's secret environment variables are
      kept (:mod:`engine.environment`; None: a secret reads as ``""``).
    - ``redactor``: masks the run's secret values in its events and checkpoints; set by
      the runner from ``secrets`` (None: the run has none).
    """

    settings: Settings = field(default_factory=get_settings)
    on_event: EventSink | None = None
    checkpoint: Checkpoint | None = None
    models: ModelCatalog | None = None
    memory: NodeMemory | None = None
    workflows: WorkflowSource | None = None
    knowledge: KnowledgeSearch | None = None
    secrets: SecretStore | None = None
    redactor: Redactor | None = None


class InterruptRequested(Exception):
    """Raised by :meth:`NodeContext.interrupt`: the node needs a person's answer.

    Not an error: the scheduler records an :class:`~schemas.run.Interrupt`, emits an
    ``interrupt`` event and pauses the run when nothing else can run.
    """

    def __init__(self, kind: str, payload: dict[str, Any]):
        super().__init__(f"{kind} interrupt")
        self.kind = kind
        self.payload = payload


@dataclass(slots=True)
class NodeResult:
    """What a node returns: its outputs and the handles it takes (default ``out``)."""

    outputs: dict[str, Any]
    handles: tuple[str, ...] = ("out",)


class NodeContext:
    """Per node run: node, plan, run state, deps, cancel token, and helpers.

    Helpers record what they resolve in ``node_run.inputs`` so the node run keeps its
    resolved inputs even when the node fails afterwards.
    """

    __slots__ = ("node", "plan", "state", "deps", "cancel", "node_run", "_emit", "resume", "scheduler")

    def __init__(
        self,
        node: NodeBase,
        plan: CompiledPlan,
        state: RunState,
        deps: RunDeps,
        cancel: CancelToken,
        node_run: NodeRun,
        emit: Callable[..., None],
        resume: Interrupt | None = None,
        scheduler: Any = None,
    ) -> None:
        self.node = node
        self.plan = plan
        self.state = state
        self.deps = deps
        self.cancel = cancel
        self.node_run = node_run
        self._emit = emit
        #: the answered interrupt this run of the node resumes from (None on a first run)
        self.resume = resume
        #: the scheduler running this node (loop nodes run their bodies through it)
        self.scheduler = scheduler

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self.node.id

    def resolve(self, value: Any, *, record_as: str | None = None) -> Any:
        """Resolve a literal-or-reference value (refs at any depth); record it under ``record_as``.

        Raises:
            ReferenceFailed: the reference cannot be resolved (names it).
        """
        resolved = resolve_value(self.state, value, node_id=self.node.id)
        if record_as is not None:
            self.node_run.inputs[record_as] = resolved
        return resolved

    def bind(self, bindings: Sequence[InputBinding]) -> dict[str, Any]:
        """Resolve :class:`InputBinding` s into ``{name: value}`` applying default/required/type.

        Raises:
            ReferenceFailed: unresolvable reference, a required binding that is null
                (e.g. its source node was skipped), or a value of the wrong type.
        """
        values: dict[str, Any] = {}
        for binding in bindings:
            value = resolve_value(self.state, binding.value, node_id=self.node.id)
            if value is None:
                value = binding.default
            if value is None and binding.required:
                raise ReferenceFailed(
                    f"input {binding.name!r} is required but resolved to null"
                    + (
                        f" (reference {binding.value.ref!r} - was its node skipped?)"
                        if hasattr(binding.value, "ref")
                        else ""
                    ),
                    node_id=self.node.id,
                )
            if binding.type is not None and not value_matches(value, binding.type):
                raise ReferenceFailed(
                    f"input {binding.name!r} must be {binding.type.value}, got {type(value).__name__}: {value!r:.80}",
                    node_id=self.node.id,
                )
            values[binding.name] = value
            self.node_run.inputs[binding.name] = value
        return values

    def render(self, source: str, *, field: str = "template", extra: Mapping[str, Any] | None = None) -> str:
        """Render a template field of this node (sandboxed; strict undefined).

        Raises:
            TemplateFailed: names this node and ``field``.
        """
        settings = self.deps.settings
        return render_template(
            self.state,
            source,
            extra=extra,
            node_id=self.node.id,
            field=field,
            max_bytes=settings.max_template_output_bytes,
            max_memory_bytes=settings.max_template_memory_bytes,
            max_seconds=settings.max_template_seconds,
        )

    def delta(self, text: str, channel: str = "answer") -> None:
        """Stream ``text`` of this node while it runs.

        ``reasoning``: sent at once as a ``node_delta`` event. ``answer``: live text of the
        node's streamed output (its kind's ``streams`` trait), handed to the answer stream
        (engine/answers.py), which sends it when an answer template reads that output and
        it is the next segment, later when something before it is still pending, and not
        at all when no answer reads it. Outside a scheduler (a node run on its own) it is
        sent at once.
        """
        if not text:
            return
        if channel == "answer" and self.scheduler is not None:
            stream = self.scheduler.answer_stream
            if stream is not None:
                stream.delta(self.node.id, text)
            return
        self._emit(
            NodeDelta,
            node_id=self.node.id,
            node_run_id=self.node_run.id,
            attempt=self.node_run.attempts,
            channel=channel,
            text=text,
        )

    def child_scope(self, values: dict[str, Any]) -> RunState:
        """A child state for a nested run of this node's body (a loop round, an iteration
        item, a tool call) in which ``<this node>.<name>`` reads ``values``; other
        references fall back to the enclosing run (engine/loops.py)."""
        state = self.state.child()
        now = time.time()
        state.node_runs[self.node.id] = NodeRun(
            id=self.node_run.id,
            node_id=self.node.id,
            kind=self.node.type,
            status=NodeRunStatus.succeeded,
            outputs=values,
            started_at=now,
            finished_at=now,
        )
        return state

    def interrupt(self, kind: str, payload: dict[str, Any]) -> NoReturn:
        """Pause this node for a person's answer (``user_select``, ``form_input``, ``ask``, ...).

        The node runs again, with :attr:`resume` set, once the run is resumed with an
        answer to this interrupt.

        Raises:
            InterruptRequested: always.
        """
        raise InterruptRequested(kind, payload)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work in a thread so other nodes keep running."""
        return await asyncio.to_thread(fn, *args)
