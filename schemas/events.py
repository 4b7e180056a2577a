"""Run events: the one typed stream consumed by the CLI, the API (SSE) and workers.

Every event has ``type``, ``seq`` (strictly increasing within a run, from 1),
``run_id`` and ``ts`` (Unix seconds). Node events (:class:`NodeEvent`) carry
``node_id``, ``node_run_id`` and ``attempt`` (which attempt of the node run the event
belongs to), and ``loop_id``/``iteration`` inside a loop body. A failure is a
:class:`NodeError`, a question for a person an :class:`Interrupt` whose ``payload`` has
one shape per :class:`InterruptKind`. The engine builds events only when someone listens.

The HTTP API streams these events as server-sent events between a
:class:`RunStreamMeta` frame and a :class:`RunStreamDone` frame; :data:`Event` is also
the ``RunEvent`` schema of the OpenAPI document, from which the canvas's types are
generated.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from .nodes import FormField
from .types import NodeRunStatus, RunStatus

__all__ = [
    "AskPayload",
    "ChoiceOption",
    "ConfirmPayload",
    "Event",
    "EventBase",
    "FormInputPayload",
    "Interrupt",
    "InterruptEvent",
    "InterruptKind",
    "InterruptPayload",
    "NodeDelta",
    "NodeError",
    "NodeEvent",
    "NodeFinished",
    "NodeStarted",
    "NodeWarning",
    "PendingInterrupt",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "RunStreamDone",
    "RunStreamMeta",
    "UserSelectPayload",
    "event_adapter",
]


class NodeError(BaseModel):
    """An error attached to a node run or a failed run: ``type`` is the exception class
    name, ``reason`` a stable machine-readable code (``http_timeout``, ``cancelled``...),
    ``node_id`` the node to blame (None: the run as a whole) and ``details`` what the
    error knows beyond its message (the idle interval of an idle timeout, ...)."""

    type: str
    message: str
    node_id: str | None = None
    reason: str | None = None
    details: dict[str, Any] | None = None


class InterruptKind(StrEnum):
    """What a node asks a person: pick an option, fill a form, answer an agent's question,
    or allow an agent's tool call."""

    user_select = "user_select"
    form_input = "form_input"
    ask = "ask"
    confirm = "confirm"


class ChoiceOption(BaseModel):
    """One answer a person may pick: ``id`` is what to answer with, ``label`` what to show."""

    id: str
    label: str


class UserSelectPayload(BaseModel):
    """``user_select``: ``description`` (the rendered question) and the ``options``;
    ``error`` says why the last answer was refused."""

    description: str = ""
    options: list[ChoiceOption]
    error: str | None = None


class FormInputPayload(BaseModel):
    """``form_input``: ``description`` above the form and its ``fields``; ``errors`` lists
    what was wrong with the last answer."""

    description: str = ""
    fields: list[FormField]
    errors: list[str] | None = None


class AskPayload(BaseModel):
    """``ask``: an agent's ``question``, the ``options`` it offers (ids ``1``..) and the
    ``reason`` it cannot go on alone; ``pending_id`` ties the answer to the paused call."""

    question: str
    options: list[ChoiceOption] = Field(default_factory=list)
    reason: str = ""
    pending_id: str | None = None


class ConfirmPayload(BaseModel):
    """``confirm``: an agent wants to run the write-level ``tool`` with ``arguments``
    (as text); ``options`` are approve / reject, ``risk`` the tool's level, ``error``
    why the last answer was refused and ``pending_id`` ties the answer to the call."""

    question: str
    options: list[ChoiceOption] = Field(default_factory=list)
    tool: str = ""
    arguments: str = ""
    risk: str = "write"
    error: str | None = None
    pending_id: str | None = None


InterruptPayload = UserSelectPayload | FormInputPayload | AskPayload | ConfirmPayload

#: the payload model of each interrupt kind
_PAYLOADS: dict[str, type[BaseModel]] = {
    InterruptKind.user_select: UserSelectPayload,
    InterruptKind.form_input: FormInputPayload,
    InterruptKind.ask: AskPayload,
    InterruptKind.confirm: ConfirmPayload,
}


def _typed_payload(data: Any) -> Any:
    """Validate ``data["payload"]`` with the model of ``data["kind"]``: the payload union
    is told apart by a field beside it, which a pydantic discriminator cannot read."""
    if isinstance(data, dict) and isinstance(data.get("payload"), dict):
        model = _PAYLOADS.get(str(data.get("kind")))
        if model is not None:
            data = {**data, "payload": model.model_validate(data["payload"])}
    return data


class Interrupt(BaseModel):
    """A pause requested by a node: a question for a person.

    ``kind`` says what is asked and ``payload`` is what the person sees, one shape per
    kind (:data:`InterruptPayload`). The answer is bound to this ``id`` and used once:
    the node runs again with it and the interrupt is removed. ``created_at`` is Unix
    seconds; ``answered``/``answer`` are set while a resume binds the answer.
    """

    id: str
    node_id: str
    node_run_id: str
    kind: InterruptKind
    payload: InterruptPayload
    created_at: float = 0.0
    answered: bool = False
    answer: Any = None

    @model_validator(mode="before")
    @classmethod
    def payload_of_kind(cls, data: Any) -> Any:
        return _typed_payload(data)


class PendingInterrupt(BaseModel):
    """An unanswered question of a paused run, as a run list or summary shows it:
    ``payload`` has the shape of ``kind`` (:data:`InterruptPayload`); ``id`` is what an
    answer names."""

    id: str
    node_id: str
    kind: InterruptKind
    payload: InterruptPayload

    @model_validator(mode="before")
    @classmethod
    def payload_of_kind(cls, data: Any) -> Any:
        return _typed_payload(data)


class EventBase(BaseModel):
    """Fields shared by every event."""

    # every field is in every dumped event, so the output schema says so (``required``)
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    seq: int
    run_id: str
    ts: float


class NodeEvent(EventBase):
    """Fields of every node event. ``attempt``: the attempt of the node run this event
    belongs to (1 for the first; a retry or a resume counts on; 0 for a node skipped
    before it ran); ``loop_id``/``iteration``: the loop body and round (from 0) the node
    ran in, None outside loops."""

    node_id: str
    node_run_id: str
    attempt: int = Field(default=1, ge=0)
    loop_id: str | None = None
    iteration: int | None = None


class RunStarted(EventBase):
    type: Literal["run_started"] = "run_started"
    workflow_id: str
    inputs: dict[str, Any]


class NodeStarted(NodeEvent):
    """A node run starts (or, resumed with an answer, continues)."""

    type: Literal["node_started"] = "node_started"
    kind: str


class NodeDelta(NodeEvent):
    """Streamed text from a node: ``channel`` is ``answer`` or ``reasoning``.

    ``output``: in a workflow that ends in End nodes, the End output this text is part of
    (its name); null for the line break between two outputs and for answer-node text."""

    type: Literal["node_delta"] = "node_delta"
    channel: Literal["answer", "reasoning"] = "answer"
    text: str
    output: str | None = None


class NodeFinished(NodeEvent):
    """A node run ended: succeeded, failed, skipped or cancelled; ``attempt`` is its last."""

    type: Literal["node_finished"] = "node_finished"
    kind: str
    status: NodeRunStatus
    handles: list[str] = Field(default_factory=list)
    outputs: dict[str, Any] | None = None
    error: NodeError | None = None
    elapsed_ms: float = 0.0


class NodeWarning(NodeEvent):
    """A node went on with a degraded result and says so (it does not fail the node).

    ``code`` is stable (``classify_fallback``: the classifier's reply named no single
    category and the fallback branch was taken); ``message`` is for people (it names the
    node and the reason); ``details`` holds the machine-readable parts (for
    ``classify_fallback``: ``reason``, ``category``, ``detail``, ``raw``). The same entry
    is kept in the node run's ``data.warnings``.
    """

    type: Literal["node_warning"] = "node_warning"
    kind: str
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class InterruptEvent(NodeEvent):
    """A node asks a person something; the run pauses once nothing else can run.
    ``payload`` has the shape of ``kind`` (:data:`InterruptPayload`)."""

    type: Literal["interrupt"] = "interrupt"
    interrupt_id: str
    kind: InterruptKind
    payload: InterruptPayload

    @model_validator(mode="before")
    @classmethod
    def payload_of_kind(cls, data: Any) -> Any:
        return _typed_payload(data)


class RunPaused(EventBase):
    """The run waits for answers to ``interrupts``; resume it with ``flowloom resume``."""

    type: Literal["run_paused"] = "run_paused"
    status: Literal[RunStatus.paused] = RunStatus.paused
    interrupts: list[Interrupt]
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
    error: NodeError
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


class RunStreamMeta(BaseModel):
    """The first frame of a run's event stream (SSE ``event: meta``): the run and its chat."""

    run_id: str
    chat_id: str | None = None


class RunStreamDone(BaseModel):
    """The last frame of a run's event stream (SSE ``event: done``): how the run stands
    now (``paused`` when it waits for a person)."""

    run_id: str
    status: RunStatus


@functools.cache
def event_adapter() -> TypeAdapter[Any]:
    """The TypeAdapter for :data:`Event` (parsing JSON lines, JSON Schema). Built once per
    process: building it generates the union's schema, about 1 ms of CPU - more than a
    short run's whole execution - and every follow of a run asks for it."""
    return TypeAdapter(Event)
