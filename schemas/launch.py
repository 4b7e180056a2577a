"""What a door asks of the run service's front door, and what it gets back.

Every way into a run - the HTTP routes, the OpenAI-compatible endpoint, MCP tool calls,
the CLI, a queue job - says what it wants as one of these records and hands it to
``RunService.launch``; the answer is a :class:`RunTicket`. The records carry only what
the person or client asked for; where the run executes is a :class:`Placement`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .types import RunStatus

__all__ = [
    "ContinueRun",
    "LaunchRequest",
    "Placement",
    "Published",
    "RerunRun",
    "ResumeRun",
    "RunNode",
    "RunTicket",
    "StartRun",
]


@dataclass(frozen=True, slots=True)
class Published:
    """The published version a run is started from, as the door read it (possibly from
    memory): workflow ``workflow_id``'s version ``version``, whose document has content
    hash ``doc_hash``. The run is created only while that version is still the published
    one (checked in the run's creating transaction), so a remembered version never
    starts a run of a version unpublished meanwhile."""

    workflow_id: str
    version: int
    doc_hash: str


@dataclass(frozen=True, slots=True)
class StartRun:
    """A new run of ``doc`` with ``inputs``.

    In a chat (``chat_id``) whose run waits for exactly one answer, ``message`` answers
    it instead (a chat turn: the paused run continues, no new run). ``history``
    (``[{"role", "content"}]``, oldest first) is ``sys.history`` of a run without a chat.
    ``run_id``: the new run's id (default: a fresh one). ``published``: ``doc`` is that
    published version (the run is created only while it still is: ``StalePublished``).
    ``checked``: ``(canonical JSON text of doc, the document caps it was found within)``
    from a door that checked ``doc`` before asking (``engine.documents.checked_document_text``):
    the compile uses the text instead of making it again when those caps are its own.
    """

    doc: Mapping[str, Any]
    inputs: Mapping[str, Any] = field(default_factory=dict)
    chat_id: str | None = None
    message: str | None = None
    user_id: str | None = None
    history: list[dict[str, Any]] | None = None
    workflow_version: str | None = None
    run_id: str | None = None
    published: Published | None = None
    checked: tuple[str, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class ResumeRun:
    """Answers to a paused run: ``answers`` (interrupt id -> answer), or one ``answer``
    to the one pending interrupt (``interrupt_id`` names it when several are pending).
    ``message``: in a chat, the text the person sent (stored as the next turn)."""

    run_id: str
    answers: Mapping[str, Any] | None = None
    answer: Any = None
    interrupt_id: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class RerunRun:
    """A new run of ``doc`` with the inputs of past run ``run_id``, reusing the past
    run's node runs before ``node_id``."""

    run_id: str
    node_id: str
    doc: Mapping[str, Any]
    workflow_version: str | None = None
    new_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class ContinueRun:
    """Execute a run already accepted: a queued new run, a paused run whose answers are
    stored, or a run whose process died (from its last checkpoint). ``take_over``: an
    owner id the run may be taken from while its lease runs (a recovery's placeholder
    for the job that carries it)."""

    run_id: str
    take_over: str | None = None


@dataclass(frozen=True, slots=True)
class RunNode:
    """A new run of ``doc`` that executes node ``node_id`` alone with ``values``
    (reference key -> value, e.g. ``{"start.query": "hi"}``); ``from_last``: the values
    the node's last run read fill in what ``values`` leaves out (engine/single_node.py)."""

    doc: Mapping[str, Any]
    node_id: str
    values: Mapping[str, Any] = field(default_factory=dict)
    from_last: bool = False
    workflow_version: str | None = None
    run_id: str | None = None


LaunchRequest = StartRun | ResumeRun | RerunRun | RunNode | ContinueRun


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a run executes. ``execution``: ``inline`` (a task of this process) or
    ``queued`` (a worker); None lets the deployment choose (queued when the caller does
    not wait, ``detached``, or the workflow drives agents; inline without a queue).
    ``priority``: the queue (``high``, ``default``, ``low``)."""

    execution: Literal["inline", "queued"] | None = None
    priority: str = "default"
    detached: bool = False


@dataclass(frozen=True, slots=True)
class RunTicket:
    """What a launch returns: the run, its chat, its status as of the launch, whether it
    went to the queue (a worker executes it), whether it continues an existing run, and
    ``after_seq``: the run's last event before this launch (following after it shows
    this launch's events only; 0 for a new run)."""

    run_id: str
    chat_id: str | None
    status: RunStatus
    queued: bool = False
    continued: bool = False
    after_seq: int = 0
