"""Run events: the one typed stream consumed by the CLI, the API (SSE) and workers.

Every event has ``type``, ``seq`` (strictly increasing within a run, from 1),
``run_id`` and ``ts`` (Unix seconds). Node events carry ``node_id`` and
``node_run_id``. The engine builds events only when someone listens.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .types import NodeRunStatus, RunStatus

__all__ = [
    "Event",
    "EventBase",
    "InterruptEvent",
    "NodeDelta",
    "NodeFinished",
    "NodeStarted",
    "NodeWarning",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "event_adapter",
]


class EventBase(BaseModel):
    """Fields shared by every event."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    run_id: str
    ts: float


class RunStarted(EventBase):
    type: Literal["run_started"] = "run_started"
    workflow_id: str
    inputs: dict[str, Any]


class NodeStarted(EventBase):
    type: Literal["node_started"] = "node_started"
    node_id: str
    node_run_id: str
    kind: str
    attempt: int = 1
    loop_id: str | None = None
    iteration: int | None = None


class NodeDelta(EventBase):
    """Streamed text from a node: ``channel`` is ``answer`` or ``reasoning``.

    ``output``: in a workflow that ends in End nodes, the End output this text is part of
    (its name); null for the line break between two outputs and for answer-node text."""

    type: Literal["node_delta"] = "node_delta"
    node_id: str
    node_run_id: str
    channel: Literal["answer", "reasoning"] = "answer"
    text: str
    loop_id: str | None = None
    iteration: int | None = None
    output: str | None = None


class NodeFinished(EventBase):
    """A node run ended: succeeded, failed, skipped or cancelled."""

    type: Literal["node_finished"] = "node_finished"
    node_id: str
    node_run_id: str
    kind: str
    status: NodeRunStatus
    handles: list[str] = Field(default_factory=list)
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    elapsed_ms: float = 0.0
    loop_id: str | None = None
    iteration: int | None = None


class NodeWarning(EventBase):
    """A node went on with a degraded result and says so (it does not fail the node).

    ``code`` is stable (``classify_fallback``: the classifier's reply named no single
    category and the fallback branch was taken); ``message`` is for people (it names the
    node and the reason); ``details`` holds the machine-readable parts (for
    ``classify_fallback``: ``reason``, ``category``, ``detail``, ``raw``). The same entry
    is kept in the node run's ``data.warnings``.
    """

    type: Literal["node_warning"] = "node_warning"
    node_id: str
    node_run_id: str
    kind: str
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    loop_id: str | None = None
    iteration: int | None = None


class InterruptEvent(EventBase):
    """A node asks a person something; the run pauses once nothing else can run."""

    type: Literal["interrupt"] = "interrupt"
    interrupt_id: str
    node_id: str
    node_run_id: str
    kind: str
    payload: dict[str, Any]


class RunPaused(EventBase):
    """The run waits for answers to ``interrupts`` (ids); resume it with ``flowloom resume``."""

    type: Literal["run_paused"] = "run_paused"
    status: Literal[RunStatus.paused] = RunStatus.paused
    interrupts: list[dict[str, Any]]
    elapsed_ms: float = 0.0


class RunResumed(EventBase):
    """A paused run continues; ``answered`` lists the interrupt ids answered."""

    type: Literal["run_resumed"] = "run_resumed"
    answered: list[str]


class RunFinished(EventBase):
    type: Literal["run_finished"] = "run_finished"
    status: Literal[RunStatus.succeeded] = RunStatus.succeeded
    outputs: dict[str, Any]
    answer: str = ""
    elapsed_ms: float = 0.0


class RunFailed(EventBase):
    """The run failed; ``reason`` is machine-readable, ``error`` names the node where one is to blame."""

    type: Literal["run_failed"] = "run_failed"
    status: Literal[RunStatus.failed] = RunStatus.failed
    reason: str
    error: dict[str, Any]
    elapsed_ms: float = 0.0


class RunCancelled(EventBase):
    type: Literal["run_cancelled"] = "run_cancelled"
    status: Literal[RunStatus.cancelled] = RunStatus.cancelled
    reason: str = "cancelled"
    elapsed_ms: float = 0.0


Event = Annotated[
    RunStarted
    | NodeStarted
    | NodeDelta
    | NodeFinished
    | InterruptEvent
    | RunPaused
    | RunResumed
    | RunFinished
    | RunFailed
    | RunCancelled
    | NodeWarning,
    Field(discriminator="type"),
]


@functools.cache
def event_adapter() -> TypeAdapter[Any]:
    """The TypeAdapter for :data:`Event` (parsing JSON lines, JSON Schema). Built once per
    process: building it generates the union's schema, about 1 ms of CPU - more than a
    short run's whole execution - and every follow of a run asks for it."""
    return TypeAdapter(Event)
