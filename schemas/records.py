"""Durable records around a run: summaries, owners, commands, chats and their messages.

These are what the run store keeps next to the :class:`~schemas.run.RunState` and what
the CLI, the API and the canvas read back: a run summary per row of a run list, the
lease that says which process executes a run, commands sent to a running run from
another process, and the messages of a chat (each assistant message made of parts).
Times are Unix seconds (float).
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from .events import NodeError, PendingInterrupt
from .types import RunStatus

__all__ = [
    "CHAT_PREVIEW_CHARS",
    "CHAT_TITLE_CHARS",
    "DEFAULT_TENANT",
    "ApiKey",
    "Chat",
    "ChatMessage",
    "CommandKind",
    "MessagePart",
    "MessageStatus",
    "OwnerInfo",
    "RunCommand",
    "RunSummary",
    "Tenant",
    "WorkflowRecord",
    "WorkflowVersion",
    "clip",
]

#: The tenant of everything created without one (the CLI, an embedded deployment).
DEFAULT_TENANT = "default"


class OwnerInfo(BaseModel):
    """Who executes a run: a process on a host, holding a lease until ``lease_until``.

    ``id`` is unique per process and run attempt; ``host`` and ``pid`` let a process on
    the same host see at once that the owner is gone (its pid no longer exists) instead
    of waiting for the lease to expire.
    """

    id: str
    host: str = ""
    pid: int = 0
    lease_until: float = 0.0


class RunSummary(BaseModel):
    """One run as a list shows it (no node runs, no variable pool)."""

    run_id: str
    tenant_id: str = DEFAULT_TENANT
    workflow_id: str
    workflow_version: str | None = None
    workflow_hash: str
    status: RunStatus
    chat_id: str | None = None
    user_id: str | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    waited_s: float = Field(default=0.0, description="seconds spent paused, waiting for a person")
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    usage_estimated: bool = Field(
        default=False,
        description="some token count was estimated (the model "
        "server did not report it); known once the run no longer runs",
    )
    error: NodeError | None = Field(default=None, description="why a failed or cancelled run ended")
    owner: OwnerInfo | None = None
    pending_interrupts: list[PendingInterrupt] = Field(
        default_factory=list, description="the questions a paused run waits for"
    )
    kind: str = Field(
        default="workflow", description="``workflow``, or ``single_node``: one node run on its own"
    )
    node_id: str | None = Field(default=None, description="the node a ``single_node`` run ran")
    preview: str | None = Field(
        default=None, description="the user's message, else the first input, as text (at most 120 characters)"
    )

    @property
    def duration_s(self) -> float | None:
        """Wall time from start to end (or to now while it runs) minus time waiting for a person."""
        if self.started_at is None:
            return None
        end = self.finished_at if self.finished_at is not None else time.time()
        return max(0.0, end - self.started_at - self.waited_s)


class CommandKind(StrEnum):
    """What another process asks of a running run."""

    cancel = "cancel"


class RunCommand(BaseModel):
    """A command for one run, kept until the run ends so a late listener still sees it."""

    id: int = 0
    run_id: str
    kind: CommandKind
    reason: str = ""
    created_at: float = 0.0


class MessageStatus(StrEnum):
    """Lifecycle of a chat message; an assistant message exists before the model streams."""

    streaming = "streaming"
    done = "done"
    paused = "paused"
    failed = "failed"
    cancelled = "cancelled"


class MessagePart(BaseModel):
    """One part of a message: text, reasoning, a tool call, a tool result, an interrupt, or
    a citation (``data``: a :class:`~schemas.knowledge.QuotePiece`, a source the answer cites)."""

    type: Literal["text", "reasoning", "tool_call", "tool_result", "interrupt", "citation"]
    text: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """A message of a chat. A user message has one text part; an assistant message is
    the answer of one run (``run_id``) and ends with its status: one assistant message
    per turn, also for a stopped or failed turn (then with the partial text)."""

    id: str
    tenant_id: str = DEFAULT_TENANT
    chat_id: str
    role: Literal["user", "assistant"]
    run_id: str | None = None
    status: MessageStatus = MessageStatus.done
    parts: list[MessagePart] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def text(self) -> str:
        """The message's text parts joined (what ``sys.history`` carries)."""
        return "".join(part.text for part in self.parts if part.type == "text")


class Tenant(BaseModel):
    """A tenant: the owner of workflows, runs, chats and API keys. Every query of the
    API is scoped to the tenant of the key that makes it."""

    id: str
    name: str = ""
    created_at: float = 0.0


class ApiKey(BaseModel):
    """An API key as stored and listed: never its secret (only a SHA-256 hash of it is
    kept, and the plaintext is shown once, when the key is created).

    ``prefix`` is the visible part of the key (``fl_<prefix>_...``) that identifies it
    in lists and logs. ``app_id`` scopes the key to one app (None: the whole tenant);
    ``admin`` allows managing the tenant's keys. A key with ``revoked_at`` set no
    longer authenticates.
    """

    id: str
    tenant_id: str
    name: str = ""
    prefix: str
    app_id: str | None = None
    admin: bool = False
    created_at: float = 0.0
    last_used_at: float | None = None
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        """True while the key is not revoked."""
        return self.revoked_at is None


class Chat(BaseModel):
    """A chat as a list shows it: its title, when it started and last changed, and a
    preview of its newest message.

    ``title`` is the title set by a person, or else the first user message cut to
    :data:`CHAT_TITLE_CHARS` characters (``title_set`` says which); None for a chat with
    no user message yet. ``preview`` is the newest message's text cut to
    :data:`CHAT_PREVIEW_CHARS` characters, ``preview_role`` its role.
    """

    id: str
    tenant_id: str = DEFAULT_TENANT
    title: str | None = None
    title_set: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    preview: str = ""
    preview_role: Literal["user", "assistant"] | None = None


#: Longest title taken from a chat's first user message (longer ones are cut, with "...").
CHAT_TITLE_CHARS = 80
#: Longest preview of a chat's newest message.
CHAT_PREVIEW_CHARS = 160


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters (the last one an ellipsis when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


class WorkflowRecord(BaseModel):
    """A saved workflow: its editable ``draft`` (any document with an ``id``, valid or
    not), the draft's version (raised by one on every update; an update naming an older
    one is refused) and the published version apps and keys run (None: none yet)."""

    tenant_id: str = DEFAULT_TENANT
    id: str
    name: str = ""
    draft: dict[str, Any]
    draft_version: int = 1
    published_version: int | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


class WorkflowVersion(BaseModel):
    """A published, immutable version of a workflow: its number (1..n), the content
    hash of its document (kept in the store's workflow documents), a note and, when
    asked for one version, the document itself."""

    tenant_id: str = DEFAULT_TENANT
    workflow_id: str
    version: int
    doc_hash: str
    note: str = ""
    created_at: float = 0.0
    doc: dict[str, Any] | None = None
