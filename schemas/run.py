"""Run records: the node run and the run state (one plain, serialisable value).

:class:`RunState` holds everything needed to continue a run in another process: the
variable pool (global inputs, system variables, run variables and node outputs inside
node runs), node and edge statuses, the nodes ready to start, counters and the
deadline. The engine keeps no run state anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, Field, PrivateAttr, computed_field

from .events import Interrupt, NodeError
from .node_records import NodeData, UsageRecord
from .types import NodeRunStatus, RunStatus

# NodeError and Interrupt are the events' (schemas/events.py), named here too for the run state's readers
__all__ = ["EdgeStatus", "Interrupt", "NodeError", "NodeRun", "PendingContext", "RunState", "Usage"]


class EdgeStatus(StrEnum):
    """An edge is pending until its source resolves, then taken or skipped."""

    pending = "pending"
    taken = "taken"
    skipped = "skipped"


class Usage(BaseModel):
    """Model usage and cost of a node run: of its own model calls (LLM nodes) and, for a
    node that runs a body or another workflow (iteration, loop, agent, tool call), of
    every call made there too - so a run's totals count each call once, at any depth.

    ``token_source`` is ``provider`` when the server counted every call, else
    ``estimated`` (a local count of the text, completion tokens clamped to the request's
    ``max_tokens``); ``estimated`` says the same as a boolean, so a reader of the run
    record, the CLI or an API answer never takes an estimate for a count.
    """

    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    token_source: str = "provider"
    cost: float = 0.0
    latency_ms: float = 0.0
    calls: int = 0

    def record(self) -> UsageRecord:
        """This usage as a node record keeps it (``model_dump()``, the computed
        ``estimated`` included: :class:`~schemas.node_records.UsageRecord` lists the same
        fields)."""
        return cast(UsageRecord, self.model_dump())

    @classmethod
    def total(cls, usages: Iterable[Usage | None]) -> Usage:
        """The sum of calls: tokens, costs (each already priced on its own: tiered prices
        make "sum the tokens, price once" wrong), latency and call counts.
        ``token_source`` is ``"estimated"`` when any part was; ``model`` joins the
        distinct names (None when none has one)."""
        total = cls(tokens_in=0, tokens_out=0, cost=0.0, latency_ms=0.0, calls=0)
        models: list[str] = []
        for u in usages:
            if u is None:
                continue
            total.tokens_in += u.tokens_in
            total.tokens_out += u.tokens_out
            total.cost += u.cost
            total.latency_ms += u.latency_ms
            total.calls += u.calls
            if u.token_source != "provider":
                total.token_source = u.token_source
            for name in (u.model or "").split(", "):
                if name and name not in models:
                    models.append(name)
        total.model = ", ".join(models) or None
        return total

    @computed_field  # type: ignore[prop-decorator]  # pydantic's decorator over a property
    @property
    def estimated(self) -> bool:
        """True when some token count here was estimated, not reported by the server."""
        return self.token_source != "provider"


class PendingContext(BaseModel):
    """What a node paused mid-way (a planning agent asking or asking to confirm) needs to
    go on with the same message chain. It lives on the waiting node run, inside the run
    state, so it is checkpointed with the run and survives any process; node memory is
    never needed to resume.

    ``kind``: the interrupt kind (``ask``/``confirm``); ``pending_id``: tags the interrupt
    so an answer is matched to this pause; ``call_id``/``tool``/``arguments``: the tool
    call waiting for the person; ``payload``: what they were shown; ``messages``: the
    message list up to and including the assistant message with that call;
    ``loop_state``: the agent loop's serialised state; ``plan``/``counters``/``asks``:
    the node's plan, counters and questions answered so far.
    """

    kind: str
    pending_id: str
    node_run_id: str
    call_id: str = ""
    tool: str = ""
    arguments: str = "{}"
    payload: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    loop_state: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    counters: dict[str, Any] = Field(default_factory=dict)
    asks: list[dict[str, Any]] = Field(default_factory=list)
    created_at: float = 0.0


class NodeRun(BaseModel):
    """One execution of a node (all its attempts). Times are Unix seconds."""

    id: str
    node_id: str
    kind: str
    status: NodeRunStatus = NodeRunStatus.pending
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    handles: list[str] = Field(default_factory=list)
    error: NodeError | None = None
    attempts: int = 0
    retries: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    usage: Usage | None = None
    data: NodeData = Field(
        default_factory=lambda: NodeData(),
        description="what the node's kind records beyond its outputs (an agent's trace, an iteration's items, "
        "the messages an LLM node sent...): schemas/node_records.py",
    )
    loop_id: str | None = Field(default=None, description="loop node or loop region this run belongs to")
    iteration: int | None = Field(default=None, description="round / item index inside loop_id (from 0)")
    waited_s: float = Field(
        default=0.0, description="seconds this node run spent paused, waiting for a person"
    )
    pending: PendingContext | None = Field(
        default=None, description="what the node needs to continue after a pause"
    )

    def __setattr__(self, name: str, value: Any) -> None:
        """A field assignment stores the value and counts the field as set - what pydantic
        does for a model that neither validates assignments nor is frozen - in one call
        instead of pydantic's two (its ``__setattr__`` and a memoised handler): ≈0.16 µs
        against ≈0.21 µs, and the engine assigns about nine fields per node run (this
        and :class:`RunState`). Other names (private attributes, properties, unknown
        names and their errors) go through pydantic."""
        if name in _NODE_RUN_FIELDS:
            self.__dict__[name] = value
            self.__pydantic_fields_set__.add(name)
        else:
            super().__setattr__(name, value)

    @classmethod
    def started(cls, id: str, node_id: str, kind: str, started_at: float, attempts: int) -> NodeRun:
        """The node run the scheduler opens for a node it starts: equal to
        ``NodeRun(id=id, node_id=node_id, kind=kind, status=NodeRunStatus.running,
        started_at=started_at, attempts=attempts)``, ``model_fields_set`` included.

        Built without pydantic's validation (≈1 µs against ≈2.4 µs): the engine opens one
        per node of every run, and every value is already of its field's type - ids of the
        compiled plan, a ``time.time()`` float, an int count. tests/engine/test_node_run_records.py
        holds it equal to the validated construction, field by field."""
        return cls._trusted(id, node_id, kind, NodeRunStatus.running, started_at, None, attempts, _STARTED)

    @classmethod
    def skipped(cls, id: str, node_id: str, kind: str, at: float) -> NodeRun:
        """A skipped node's run, started and finished at ``at``: equal to ``NodeRun(id=id,
        node_id=node_id, kind=kind, status=NodeRunStatus.skipped, started_at=at,
        finished_at=at)``, built without validation for the reason :meth:`started` gives."""
        return cls._trusted(id, node_id, kind, NodeRunStatus.skipped, at, at, 0, _SKIPPED)

    @classmethod
    def _trusted(
        cls,
        id: str,
        node_id: str,
        kind: str,
        status: NodeRunStatus,
        started_at: float,
        finished_at: float | None,
        attempts: int,
        given: frozenset[str],
    ) -> NodeRun:
        """An instance holding every field (``given``: the names its ``model_fields_set``
        says were passed), laid out as pydantic's own ``__init__`` lays it out: the field
        values in ``__dict__`` in declaration order, no extra, no private values."""
        run = _new_object(cls)
        _set_slot(
            run,
            "__dict__",
            {
                "id": id,
                "node_id": node_id,
                "kind": kind,
                "status": status,
                "inputs": {},
                "outputs": None,
                "handles": [],
                "error": None,
                "attempts": attempts,
                "retries": 0,
                "started_at": started_at,
                "finished_at": finished_at,
                "usage": None,
                "data": {},
                "loop_id": None,
                "iteration": None,
                "waited_s": 0.0,
                "pending": None,
            },
        )
        _set_slot(run, "__pydantic_fields_set__", set(given))
        _set_slot(run, "__pydantic_extra__", None)
        _set_slot(run, "__pydantic_private__", None)
        return run


_new_object = object.__new__
_set_slot = object.__setattr__  # BaseModel's __setattr__ takes field names only
#: the fields :meth:`NodeRun.started` / :meth:`NodeRun.skipped` count as given
_STARTED = frozenset({"id", "node_id", "kind", "status", "started_at", "attempts"})
_SKIPPED = frozenset({"id", "node_id", "kind", "status", "started_at", "finished_at"})


class RunState(BaseModel):
    """The whole mutable state of a run; ``model_dump_json`` checkpoints it."""

    run_id: str
    workflow_id: str
    workflow_hash: str
    tenant_id: str = "default"
    workflow_version: str | None = Field(
        default=None, description="published version the run executes, if any"
    )
    status: RunStatus = RunStatus.pending
    inputs: dict[str, Any] = Field(default_factory=dict)
    sys: dict[str, Any] = Field(default_factory=dict)
    variables: dict[str, Any] = Field(default_factory=dict)
    conversation: dict[str, Any] = Field(
        default_factory=dict, description="conversation variables of this turn"
    )
    node_runs: dict[str, NodeRun] = Field(default_factory=dict, description="node id -> its node run")
    edges: dict[str, EdgeStatus] = Field(default_factory=dict)
    ready: list[str] = Field(
        default_factory=list,
        description="nodes whose upstream resolved, not yet started (written at each checkpoint; also derivable "
        "from edges, which is what a restore uses)",
    )
    node_executions: int = 0
    seq: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    deadline: float | None = Field(default=None, description="Unix seconds; max wall time")
    wall_time_left: float | None = Field(
        default=None, description="seconds of max_wall_time left when paused"
    )
    paused_at: float | None = Field(default=None, description="Unix seconds the run last paused")
    waited_s: float = Field(default=0.0, description="seconds spent paused, waiting for a person")
    outputs: dict[str, Any] = Field(default_factory=dict)
    answer: str = ""
    error: NodeError | None = None
    interrupts: dict[str, Interrupt] = Field(default_factory=dict, description="pending interrupts by id")
    history: list[NodeRun] = Field(default_factory=list, description="node runs of earlier loop rounds")

    #: the state a nested run (loop round, iteration item) falls back to for references
    _parent: RunState | None = PrivateAttr(default=None)
    #: environment variables (``env.NAME``), secrets decrypted: set by whoever executes the
    #: run from the workflow and the secret store, never part of a checkpoint
    _env: dict[str, Any] = PrivateAttr(default_factory=dict)

    def __setattr__(self, name: str, value: Any) -> None:
        """As :meth:`NodeRun.__setattr__` (the run's counters change per node)."""
        if name in _RUN_STATE_FIELDS:
            self.__dict__[name] = value
            self.__pydantic_fields_set__.add(name)
        else:
            super().__setattr__(name, value)

    @property
    def env(self) -> dict[str, Any]:
        """The run's environment variables (``env.NAME``; not stored with the state)."""
        return self._env

    @env.setter
    def env(self, values: dict[str, Any]) -> None:
        self._env = values

    def child(self) -> RunState:
        """A state for a nested run: its own node runs and edges; inputs, system, run and
        conversation variables shared with this one; references fall back to this state."""
        child = RunState(run_id=self.run_id, workflow_id=self.workflow_id, workflow_hash=self.workflow_hash)
        child.inputs, child.sys, child.variables = self.inputs, self.sys, self.variables
        child.conversation = self.conversation
        child._env = self._env
        child._parent = self
        return child

    def usage_totals(self) -> tuple[int, int, float]:
        """(tokens in, tokens out, cost) summed over every node run, earlier loop rounds
        included (a node running a body holds its body's usage: :class:`Usage`)."""
        tokens_in = tokens_out = 0
        cost = 0.0
        for run in (*self.node_runs.values(), *self.history):
            if run.usage is not None:
                tokens_in += run.usage.tokens_in
                tokens_out += run.usage.tokens_out
                cost += run.usage.cost
        return tokens_in, tokens_out, cost

    def spent(self) -> Usage | None:
        """What every node run here spent (earlier loop rounds included), summed; None
        when none used a model."""
        used = [run.usage for run in (*self.node_runs.values(), *self.history) if run.usage is not None]
        return Usage.total(used) if used else None

    def find_node_run(self, node_id: str) -> NodeRun | None:
        """The node run of ``node_id`` here or, failing that, in the enclosing states."""
        state: RunState | None = self
        while state is not None:
            run = state.node_runs.get(node_id)
            if run is not None:
                return run
            # ``_parent`` read from pydantic's private store: the attribute goes through
            # BaseModel.__getattr__, about 25x the cost of a field read, on every node event
            state = state.__pydantic_private__["_parent"]  # type: ignore[index]  # pydantic types it Optional; set for every model with private attributes
        return None

    def __repr__(self) -> str:
        # Short on purpose: a state holds every node's outputs, and asyncio/loggers repr
        # finished tasks (whose result is the state) - a full repr costs O(run size).
        return (
            f"RunState(run_id={self.run_id!r}, workflow_id={self.workflow_id!r}, status={self.status.value!r}, "
            f"node_runs={len(self.node_runs)}, seq={self.seq})"
        )


#: the field names whose assignment :meth:`NodeRun.__setattr__` / :meth:`RunState.__setattr__` stores directly
_NODE_RUN_FIELDS = frozenset(NodeRun.model_fields)
_RUN_STATE_FIELDS = frozenset(RunState.model_fields)
