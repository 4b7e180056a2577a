"""Request and response bodies of the HTTP API (``/v1``).

These models are the API's contract: FastAPI validates requests with them and
publishes them in the OpenAPI document, from which the canvas generates its types.
They carry no secrets: an API key's plaintext appears once, in :class:`KeyCreated`;
run records leave out the owner lease (host and process of the executing server) and
the internal continuation state of paused nodes. Times are Unix seconds (float).

A request field the document calls integer, boolean or number is strict
(``Field(strict=True)``): ``true``, ``"yes"`` or ``"5"`` is a 422 naming the field, not
coerced (a quota of ``true`` tokens a day, an admin key from ``"yes"``); the OpenAPI
document is the same either way.

The workflow bodies live in :mod:`schemas.api_workflows` and the node kinds in
:mod:`schemas.api_node_kinds`; they are re-exported here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .api_node_kinds import KindLabel, NodeKindList, NodeKindOut
from .api_workflows import (
    MAX_NUMBER,
    ChatVariables,
    CodePackageOut,
    NodeScope,
    NodeScopeRequest,
    ScopeEntryOut,
    WorkflowCreated,
    WorkflowDetail,
    WorkflowImport,
    WorkflowImported,
    WorkflowInputOut,
    WorkflowList,
    WorkflowOut,
    WorkflowProblems,
    WorkflowPublish,
    WorkflowRollback,
    WorkflowRunCreate,
    WorkflowUpdate,
    WorkflowVersionList,
    WorkflowVersionOut,
)
from .api_workflows import NodeShapeOut as NodeShapeOut
from .events import PendingInterrupt
from .knowledge import QuotePiece, run_citations
from .node_records import NodeData
from .records import ApiKey, Chat, ChatMessage, MessagePart, MessageStatus, RunSummary
from .run import NodeError, NodeRun, RunState, Usage
from .types import NodeRunStatus, RunStatus

__all__ = [
    "MAX_NUMBER",
    "ChatDetail",
    "CodePackageOut",
    "ChatList",
    "ChatVariables",
    "ChatOut",
    "ChatRename",
    "MessageList",
    "MessageOut",
    "ErrorBody",
    "ErrorDetail",
    "OpenAIErrorBody",
    "OpenAIErrorDetail",
    "Health",
    "Readiness",
    "ReadinessCheck",
    "KeyCreate",
    "KeyCreated",
    "KeyList",
    "KeyOut",
    "NodeKindList",
    "KindLabel",
    "NodeKindOut",
    "NodeLastRun",
    "NodeReadOut",
    "NodeRunCreate",
    "NodeRunInfo",
    "NodeRunOut",
    "SingleNodeRunOut",
    "QuotaEffective",
    "QuotaList",
    "QuotaOut",
    "QuotaUpdate",
    "QuotaUsageOut",
    "RerunRequest",
    "ResumeRequest",
    "RunAccepted",
    "RunCreate",
    "RunDetail",
    "RunList",
    "RunOut",
    "NodeScope",
    "NodeScopeRequest",
    "ScopeEntryOut",
    "WorkflowCreated",
    "WorkflowDetail",
    "WorkflowImport",
    "WorkflowImported",
    "WorkflowInputOut",
    "WorkflowList",
    "WorkflowOut",
    "WorkflowProblems",
    "WorkflowPublish",
    "WorkflowRollback",
    "WorkflowRunCreate",
    "WorkflowUpdate",
    "WorkflowVersionList",
    "WorkflowVersionOut",
]


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``type`` (``unauthorized``, ``not_found``,
    ``invalid_workflow``, ``invalid_inputs``, ``invalid_request``, ``conflict``,
    ``forbidden``, ``store_error``, ``internal_error``), a readable ``message`` and, for
    invalid workflows, inputs or requests, every ``problem``."""

    type: str
    message: str
    problems: list[Any] | None = None


class ErrorBody(BaseModel):
    """The body of every error response, and the data of an SSE ``error`` event."""

    error: ErrorDetail


class Health(BaseModel):
    """``GET /health``: the service answers."""

    status: Literal["ok"] = "ok"
    version: str


class ReadinessCheck(BaseModel):
    """One dependency of ``GET /ready``: whether it answered, and if not what to look at."""

    ok: bool
    message: str = Field(default="", description="why it is not ready (the server log has the details)")


class Readiness(BaseModel):
    """``GET /ready``: whether the server can take work now (200 ``ready``, else 503
    ``not_ready``). ``checks``: ``store`` (the run store answers a query) and, when
    ``FLOWLOOM_REDIS_URL`` is set, ``redis`` (it answers a ping)."""

    status: Literal["ready", "not_ready"]
    version: str
    checks: dict[str, ReadinessCheck]


# ---------------------------------------------------------------------------- runs


class RunCreate(BaseModel):
    """``POST /v1/runs``: run a workflow document (the builder's path).

    ``response_mode``: ``blocking`` answers with the finished (or paused) run;
    ``streaming`` answers with the run's events as SSE (a first ``meta`` event names the
    run); ``async`` answers 202 with the run id at once. Either way the run executes in
    the server, not in the request: a client that goes away does not stop it.
    ``message`` is the user's text (``sys.query``, and the ``query`` input when the
    workflow declares one); with ``chat_id`` it is the next turn of that chat, and when
    the chat has a run waiting for one answer, it answers that run instead.
    """

    model_config = ConfigDict(extra="forbid")

    workflow: dict[str, Any] = Field(description="the workflow document (JSON)")
    inputs: dict[str, Any] = Field(default_factory=dict)
    response_mode: Literal["blocking", "streaming", "async"] = "blocking"
    chat_id: str | None = Field(default=None, min_length=1, max_length=200)
    message: str | None = None


class RerunRequest(BaseModel):
    """``POST /v1/runs/{id}/rerun``: a new run from node ``node_id`` of a past run, with
    the same inputs. The node runs strictly before ``node_id`` are reused (not executed
    again); ``node_id`` and what follows run with ``workflow`` when given, else the saved
    workflow's current draft (the run's ``workflow_id``), else the past run's own document.
    ``response_mode`` as for ``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")

    node_id: str = Field(min_length=1, max_length=200)
    response_mode: Literal["blocking", "streaming", "async"] = "blocking"
    workflow: dict[str, Any] | None = Field(
        default=None, description="the document to run (default: the draft)"
    )


class ResumeRequest(BaseModel):
    """``POST /v1/runs/{id}/resume``: the answers of a paused run's questions.

    Either ``answers`` (interrupt id -> answer) or ``answer`` (one answer; name its
    interrupt with ``interrupt_id`` when several are pending). ``message`` is the text a
    person sent in a chat (stored as the chat's next turn).
    """

    model_config = ConfigDict(extra="forbid")

    answers: dict[str, Any] | None = None
    answer: Any = None
    interrupt_id: str | None = None
    message: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ResumeRequest:
        given = self.model_fields_set
        if ("answers" in given) == ("answer" in given):
            raise ValueError("give either `answers` (interrupt id -> answer) or `answer`")
        if "answers" in given and (not self.answers or self.interrupt_id is not None):
            raise ValueError("`answers` must name at least one interrupt, without `interrupt_id`")
        return self


class RunOut(BaseModel):
    """A run as lists show it."""

    run_id: str
    workflow_id: str
    workflow_version: str | None = None
    workflow_hash: str
    status: RunStatus
    chat_id: str | None = None
    user_id: str | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = Field(default=None, description="wall time minus time waiting for a person")
    waited_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    usage_estimated: bool = Field(
        default=False,
        description="true when some token count of the run was "
        "estimated because the model server did not report it (tokens_in / tokens_out "
        "are then partly estimates; each node run's usage.estimated says which)",
    )
    error: NodeError | None = Field(default=None, description="why a failed or cancelled run ended")
    pending_interrupts: list[PendingInterrupt] = Field(
        default_factory=list, description="the questions a paused run waits for"
    )
    kind: str = Field(
        default="workflow",
        description="`workflow`, or `single_node`: one node run on its own "
        "(`POST /v1/workflows/{id}/nodes/{node_id}/run`)",
    )
    node_id: str | None = Field(default=None, description="the node a `single_node` run ran")
    preview: str | None = Field(
        default=None, description="the user's message, else the first input, as text (at most 120 characters)"
    )

    @classmethod
    def of(cls, summary: RunSummary) -> RunOut:
        """From the store's summary (the owner lease left out)."""
        return cls(**summary.model_dump(exclude={"owner", "tenant_id"}), duration_s=summary.duration_s)


class NodeRunOut(BaseModel):
    """One node run (loop rounds are separate node runs with ``loop_id``/``iteration``)."""

    id: str
    node_id: str
    kind: str
    status: NodeRunStatus
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
        description="what the node's kind records (schemas/node_records.py)",
    )
    loop_id: str | None = None
    iteration: int | None = None
    waited_s: float = 0.0
    duration_s: float | None = Field(
        default=None,
        description="seconds from start to end minus the time waiting for a person (None until it ends)",
    )
    reused_from: str | None = Field(
        default=None,
        description="a rerun reused this result: the id of the past "
        "run's node run it was copied from (not executed again; its usage, "
        "timings and attempts are in `data.reused_from`)",
    )

    @classmethod
    def of(cls, run: NodeRun) -> NodeRunOut:
        """From the engine's node run (its internal continuation state left out)."""
        mark = run.data.get("reused_from")
        duration = (
            max(0.0, run.finished_at - run.started_at - run.waited_s)
            if run.started_at is not None and run.finished_at is not None
            else None
        )
        return cls(
            **run.model_dump(exclude={"pending"}),
            duration_s=duration,
            reused_from=mark.get("node_run_id") if isinstance(mark, dict) else None,
        )


class RunDetail(RunOut):
    """A run with its inputs, outputs, answer and node runs; for a rerun
    (``POST /v1/runs/{id}/rerun``), ``rerun_of`` names the past run and ``rerun_from``
    the node it ran again from."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    answer: str = ""
    node_runs: list[NodeRunOut] = Field(default_factory=list)
    rerun_of: str | None = None
    rerun_from: str | None = None
    citations: list[QuotePiece] = Field(
        default_factory=list,
        description="the sources the answer cites (chat nodes' citations outputs, in run order)",
    )

    @classmethod
    def build(cls, summary: RunSummary, state: RunState, node_runs: list[NodeRun]) -> RunDetail:
        """From the summary, the checkpointed state and every node run."""
        listed = RunOut.of(summary).model_dump()
        # the node runs tell it while the run still runs (the stored flag is written at its end)
        listed["usage_estimated"] = listed["usage_estimated"] or any(
            run.usage is not None and run.usage.estimated for run in node_runs
        )
        return cls(
            **listed,
            inputs=state.inputs,
            outputs=state.outputs,
            answer=state.answer,
            node_runs=[NodeRunOut.of(run) for run in node_runs],
            rerun_of=state.sys.get("rerun_of"),
            rerun_from=state.sys.get("rerun_from"),
            citations=run_citations(node_runs),
        )


class RunList(BaseModel):
    """``GET /v1/runs``: newest first."""

    runs: list[RunOut]


class RunAccepted(BaseModel):
    """202: the run executes in the server; follow it at ``events_url``."""

    run_id: str
    chat_id: str | None = None
    status: RunStatus
    events_url: str


# ---------------------------------------------------------------------------- keys


class KeyCreate(BaseModel):
    """``POST /v1/keys``: a new key of the caller's tenant."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    admin: bool = Field(default=False, strict=True)
    app_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="scope the key to one app (default: the whole tenant)",
    )


class KeyOut(BaseModel):
    """An API key as listed (never its secret)."""

    id: str
    name: str
    prefix: str = Field(description="the visible part of the key: fl_<prefix>_...")
    app_id: str | None = None
    admin: bool = False
    created_at: float
    last_used_at: float | None = None
    revoked_at: float | None = None

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        """From the store's record."""
        return cls(**key.model_dump(exclude={"tenant_id"}))


class KeyCreated(BaseModel):
    """201: the new key's record and its plaintext, shown this once (only a hash is kept)."""

    key: KeyOut
    secret: str = Field(
        description="the API key to send as `Authorization: Bearer <secret>`; not shown again"
    )


class KeyList(BaseModel):
    """``GET /v1/keys``: the tenant's keys, oldest first (revoked ones included)."""

    keys: list[KeyOut]


# --------------------------------------------------------------------------- chats


class ChatOut(BaseModel):
    """A chat as listed: ``title`` is the one set with ``PATCH``, or else the first user
    message cut short (``title_set`` says which; None before any user message);
    ``preview`` is the newest message cut short (its text, or the question it asks)."""

    id: str
    title: str | None = None
    title_set: bool = False
    created_at: float
    updated_at: float = Field(description="when the newest message was added")
    preview: str = ""
    preview_role: Literal["user", "assistant"] | None = None

    @classmethod
    def of(cls, chat: Chat) -> ChatOut:
        """From the store's record."""
        return cls(**chat.model_dump(exclude={"tenant_id"}))


class ChatList(BaseModel):
    """``GET /v1/chats``: the tenant's chats, most recently changed first.
    ``next_before``: pass it as ``before`` for the next page (None: this is the last)."""

    chats: list[ChatOut]
    next_before: float | None = None


class MessageOut(BaseModel):
    """A message of a chat. A user message has one ``text`` part. An assistant message is
    the answer of one run (``run_id``): parts ``reasoning``, ``tool_call`` (``data``: the
    call's ``id``, ``name``, ``arguments``) and ``tool_result`` (``text``: the start of the
    result; ``data``: ``id``, ``name``, ``is_error``) of an agent, ``text`` (the answer, or
    the partial text of a stopped or failed turn; a failed turn adds a part with
    ``data.error``) and ``interrupt``
    (``data``: the pending question: ``id``, ``kind``, ``payload``). ``status``:
    ``streaming`` while the run executes, then ``done``, ``paused``, ``failed`` or
    ``cancelled``."""

    id: str
    role: Literal["user", "assistant"]
    run_id: str | None = None
    status: MessageStatus
    text: str = Field(description="the text parts joined")
    parts: list[MessagePart]
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, message: ChatMessage) -> MessageOut:
        """From the store's record."""
        return cls(
            id=message.id,
            role=message.role,
            run_id=message.run_id,
            status=message.status,
            text=message.text,
            parts=message.parts,
            created_at=message.created_at,
            updated_at=message.updated_at,
        )


class MessageList(BaseModel):
    """``GET /v1/chats/{id}/messages``: the chat's last ``limit`` messages, oldest first."""

    messages: list[MessageOut]


class ChatDetail(ChatOut):
    """``GET /v1/chats/{id}``: the chat and its last messages, oldest first."""

    messages: list[MessageOut]


class ChatRename(BaseModel):
    """``PATCH /v1/chats/{id}``: the chat's new title (null or blank: back to the first
    user message)."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(max_length=200)


# -------------------------------------------------------------------------- quotas


class QuotaUpdate(BaseModel):
    """``PUT /v1/quotas`` (the tenant) or ``PUT /v1/quotas/apps/{app_id}`` (one app):
    the scope's own limits, replacing what was set. ``null`` (or absent): no limit of
    its own (the tenant gets the operator's default; an app only the tenant's limit);
    ``0``: unlimited. ``runs_per_minute`` counts run starts and continuations in any 60
    seconds; ``tokens_per_day`` the model tokens (in + out) of the runs admitted since
    00:00 UTC."""

    model_config = ConfigDict(extra="forbid")

    runs_per_minute: int | None = Field(default=None, ge=0, le=1_000_000, strict=True)
    tokens_per_day: int | None = Field(default=None, ge=0, le=10**15, strict=True)


class QuotaEffective(BaseModel):
    """The limits that hold (``null``: unlimited) and where each comes from: ``own``
    (set for this scope), ``default`` (the operator's ``FLOWLOOM_QUOTA_*`` settings) or
    ``none`` (an app without its own limit)."""

    runs_per_minute: int | None
    tokens_per_day: int | None
    runs_per_minute_source: Literal["own", "default", "none"]
    tokens_per_day_source: Literal["own", "default", "none"]


class QuotaUsageOut(BaseModel):
    """What the scope used: run starts and continuations in the last 60 seconds, and
    tokens of the runs admitted since 00:00 UTC."""

    runs_last_minute: int
    tokens_today: int


class QuotaOut(BaseModel):
    """A scope's quota: the tenant's (``app_id`` null) or one app's. ``runs_per_minute``
    / ``tokens_per_day``: its own limits (null: none set); ``effective``: what holds;
    ``usage``: what was used; ``updated_at``: when its own limits were last set."""

    app_id: str | None = None
    runs_per_minute: int | None = None
    tokens_per_day: int | None = None
    updated_at: float | None = None
    effective: QuotaEffective
    usage: QuotaUsageOut


class QuotaList(BaseModel):
    """``GET /v1/quotas``: the tenant's quota and those of the apps that have their own."""

    tenant: QuotaOut
    apps: list[QuotaOut]


# ------------------------------------------------------------ OpenAI-compatible


class OpenAIErrorDetail(BaseModel):
    """An error of ``/v1/chat/completions`` and ``/v1/models`` in OpenAI's shape:
    ``type`` (``authentication_error``, ``invalid_request_error``, ``rate_limit_error``,
    ``server_error``...), ``code`` (``invalid_api_key``, ``model_not_found``,
    ``invalid_request``, ``chat_conflict``, ``quota_exceeded``, ``run_failed``...)."""

    message: str
    type: str
    code: str | None = None
    param: str | None = None
    problems: list[Any] | None = None


class OpenAIErrorBody(BaseModel):
    """The body of an error of the OpenAI-compatible routes (the ``openai`` SDK reads it)."""

    error: OpenAIErrorDetail


# ---------------------------------------------------------------------- one node alone


class NodeReadOut(BaseModel):
    """One reference a node reads (``GET/POST /v1/workflows/{id}/nodes/{node_id}/run``):
    ``key`` is what a value is given under (``start.query``, ``inputs.city``,
    ``sys.query``, ``vars.count``, ``iter.item``)."""

    key: str
    scope: Literal["node", "inputs", "sys", "vars"]
    node: str | None = Field(default=None, description="the node read (scope `node`)")
    field: str | None = Field(default=None, description="the output or variable read (None: the whole node)")
    type: str | None = Field(default=None, description="its declared type, when known")
    optional: bool = Field(default=False, description="it has a default: a value need not be given")


class NodeLastRun(BaseModel):
    """A node's latest node run among its workflow's runs, and the values its references
    had there (reference key -> value)."""

    run_id: str
    node_run: NodeRunOut
    values: dict[str, Any] = Field(default_factory=dict)


class NodeRunInfo(BaseModel):
    """``GET /v1/workflows/{id}/nodes/{node_id}/run``: what the node reads (in the draft),
    and its last run (None when it never ran)."""

    node_id: str
    reads: list[NodeReadOut]
    last: NodeLastRun | None = None


class NodeRunCreate(BaseModel):
    """``POST /v1/workflows/{id}/nodes/{node_id}/run``: run the node alone on the draft.
    ``inputs``: reference key -> value (``{"start.query": "hi"}``); ``from_last``: the
    values of the node's last run fill in the keys left out. A key the node does not
    read is ignored; a reference it reads with no value (and no default) is 422."""

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict)
    from_last: bool = Field(default=False, strict=True)


class SingleNodeRunOut(BaseModel):
    """The run of one node alone, once it ended: the run (kind ``single_node``, in the
    history as any run), and the node's run - status, outputs or error, duration, usage."""

    run_id: str
    node_id: str
    status: RunStatus
    node_run: NodeRunOut | None = None
    error: NodeError | None = None
    duration_s: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
