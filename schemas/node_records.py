"""What a node run records beyond its outputs: ``NodeRun.data``, typed per kind.

A node run's ``data`` is a JSON object whose keys are :class:`NodeDataKey` and whose
values are the records below; :data:`KIND_RECORDS` tells which keys each kind writes, so
a reader learns from this module what an agent, an iteration or an LLM node records.
The records are ``TypedDict`` s (plain dicts at run time): writers fill them in place
while a node runs (an agent's trace grows round by round and is kept when the node
fails), and a checkpoint stores them as they are. Every key of a record is optional
(a node that failed half-way wrote only some) and a record keeps keys it does not list,
so a record written by an older or newer version still loads.

The shapes, by kind:

- LLM nodes (``chat``): ``sent`` (the messages sent, secrets masked, long texts cut),
  ``chat`` (how the reply was built, and what had streamed when it failed: ``partial``),
  ``warnings``. ``classify_question``, ``extract_fields`` and ``query_extension`` each
  keep one record of the model's raw reply and how it was read. Token usage and cost are
  the node run's ``usage``, not part of ``data``.
- Agents (``agent``, ``tool_call``): ``agent`` (:class:`AgentRecord`: the trace, one
  :class:`AgentRound` per model call, the full tool results, notes, context
  checkpoints, and once it ends the stop reason and costs), ``agent_state`` (the loop's
  saved state while it waits for a person), ``tools`` (the tools offered), ``planning``
  (the planning agent's plan and gate), ``mcp_servers``; ``tool_call`` also keeps the
  node runs of graph tools (``tool_runs``), the runs of workflow tools
  (``workflow_runs``) and the answers to its confirmations.
- Containers: ``iteration`` keeps ``items``, ``loop`` keeps ``rounds`` (a
  :class:`BodyRun` each: index, status, the body's node runs); a loop drawn with
  back-edges (``loop_region``) keeps ``round_count``.
- ``code``: the language, the sandbox, the child's exit code, logs and time.
- ``http_request``: the request made, where it went, how much came back and which
  ``outputs`` paths could not be evaluated (``output_errors``).
- Any kind: ``warnings`` (:func:`warning_entry`), ``given`` (a single-node run's
  upstream node whose outputs were given), ``reused_from`` (a rerun copied this result).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, cast

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

__all__ = [
    "KIND_RECORDS",
    "AgentCallError",
    "AgentCheckpoint",
    "AgentNote",
    "AgentRecord",
    "AgentReply",
    "AgentRequestSummary",
    "AgentRound",
    "AgentToolRun",
    "BodyError",
    "BodyRun",
    "ChatRecord",
    "ClassifyRecord",
    "ConfirmationRecord",
    "ExtractRecord",
    "HttpConnection",
    "McpServerRecord",
    "NodeData",
    "NodeDataKey",
    "NodeWarningRecord",
    "OfferedTool",
    "PartialReply",
    "PlanningRecord",
    "QueryExtensionRecord",
    "RelevancePass",
    "RetrievalRecord",
    "ReusedFrom",
    "SentMessage",
    "SentRecord",
    "SentToolCall",
    "ToolRunRecord",
    "ToolSource",
    "UsageRecord",
    "WorkflowRunRecord",
    "agent_record",
    "agent_trace",
    "body_runs",
    "body_run",
    "warning_entry",
]

#: every record takes keys it does not list (a newer writer's), and keeps them
_OPEN = ConfigDict(extra="allow")


class NodeDataKey(StrEnum):
    """The keys of ``NodeRun.data``; :data:`KIND_RECORDS` says which kind writes which."""

    # any kind
    warnings = "warnings"
    given = "given"
    reused_from = "reused_from"
    # LLM nodes
    sent = "sent"
    chat = "chat"
    classify = "classify"
    extract = "extract"
    query_extension = "query_extension"
    # knowledge retrieval
    retrieval = "retrieval"
    relevance = "relevance"
    # agents
    agent = "agent"
    agent_state = "agent_state"
    tools = "tools"
    planning = "planning"
    mcp_servers = "mcp_servers"
    tool_runs = "tool_runs"
    tool_run_count = "tool_run_count"
    workflow_runs = "workflow_runs"
    confirmations = "confirmations"
    # containers
    items = "items"
    rounds = "rounds"
    round_count = "round_count"
    # code
    language = "language"
    sandbox = "sandbox"
    sandbox_warning = "sandbox_warning"
    pid = "pid"
    tool = "tool"
    exit_code = "exit_code"
    elapsed_ms = "elapsed_ms"
    stdout = "stdout"
    stderr = "stderr"
    logs_truncated = "logs_truncated"
    error = "error"
    ignored_outputs = "ignored_outputs"
    # http_request
    method = "method"
    url = "url"
    connections = "connections"
    status_code = "status_code"
    redirects = "redirects"
    response_bytes = "response_bytes"
    json_error = "json_error"
    output_errors = "output_errors"


_K = NodeDataKey
_AGENT = (_K.agent, _K.agent_state, _K.tools, _K.mcp_servers, _K.warnings)
_CODE = (
    _K.language,
    _K.sandbox,
    _K.sandbox_warning,
    _K.pid,
    _K.exit_code,
    _K.elapsed_ms,
    _K.stdout,
    _K.stderr,
)
#: kind -> the keys its node runs may have besides :data:`ANY_KIND` (a kind missing here records nothing more)
KIND_RECORDS: Mapping[str, tuple[NodeDataKey, ...]] = {
    "chat": (_K.sent, _K.chat, _K.warnings),
    "classify_question": (_K.classify, _K.warnings),
    "extract_fields": (_K.extract,),
    "query_extension": (_K.query_extension,),
    "knowledge_retrieval": (_K.retrieval, _K.relevance, _K.warnings),
    "agent": (*_AGENT, _K.planning),
    "tool_call": (*_AGENT, _K.tool_runs, _K.tool_run_count, _K.workflow_runs, _K.confirmations),
    "iteration": (_K.items,),
    "loop": (_K.rounds,),
    "loop_region": (_K.round_count,),
    "code": (*_CODE, _K.logs_truncated, _K.error, _K.ignored_outputs, _K.tool),
    "http_request": (
        _K.method,
        _K.url,
        _K.connections,
        _K.status_code,
        _K.redirects,
        _K.response_bytes,
        _K.json_error,
        _K.output_errors,
    ),
}
#: keys any kind's node run may have
ANY_KIND: tuple[NodeDataKey, ...] = (_K.given, _K.reused_from, _K.warnings)


# ---------------------------------------------------------------------------- any kind


@with_config(_OPEN)
class UsageRecord(TypedDict, total=False):
    """A :class:`~schemas.run.Usage` as a record keeps it (``Usage.model_dump()``):
    tokens, cost, latency (ms), calls, and whether a count was ``estimated``."""

    model: str | None
    tokens_in: int
    tokens_out: int
    token_source: str
    cost: float
    latency_ms: float
    calls: int
    estimated: bool


@with_config(_OPEN)
class NodeWarningRecord(TypedDict, total=False):
    """A degraded result the node went on with (also sent as a ``node_warning`` event):
    ``code`` is stable, ``message`` for people, ``details`` machine-readable."""

    code: str
    message: str
    details: dict[str, Any]


@with_config(_OPEN)
class ReusedFrom(TypedDict, total=False):
    """A rerun copied this node run from a past run: which one, and what it had spent
    (its usage, timings and attempts, not counted again in the new run)."""

    run_id: str
    node_run_id: str
    started_at: float | None
    finished_at: float | None
    attempts: int
    usage: UsageRecord | None


# ---------------------------------------------------------------------------- LLM nodes


@with_config(_OPEN)
class SentToolCall(TypedDict, total=False):
    name: str
    arguments: str


@with_config(_OPEN)
class SentMessage(TypedDict, total=False):
    """One message as sent to the model; ``truncated``: the length before it was cut."""

    role: str
    content: str
    truncated: int
    tool_calls: list[SentToolCall]


@with_config(_OPEN)
class SentRecord(TypedDict, total=False):
    """The messages an LLM node sent (newest kept; ``omitted``: older ones left out)."""

    messages: list[SentMessage]
    omitted: int


@with_config(_OPEN)
class PartialReply(TypedDict, total=False):
    """What had arrived when a streamed reply ended early, and why (``ended_by``)."""

    answer_chars: int
    reasoning_chars: int
    ended_by: str
    answer: str
    reasoning: str


@with_config(_OPEN)
class ChatRecord(TypedDict, total=False):
    """How a chat node's reply was built: where the quote went, how many messages (of
    history) were sent, the finish reason, the citation ids the answer used; ``partial``
    when the reply failed after text had arrived."""

    quote_role: str | None
    messages: int
    history_messages: int
    finish_reason: str | None
    cited: list[str]
    partial: PartialReply


@with_config(_OPEN)
class ClassifyRecord(TypedDict, total=False):
    """A classification: the ``protocol`` (``tool`` / ``prompt``), the model's ``raw``
    reply, the ``category`` taken and, when the fallback was, why."""

    protocol: str
    tool_choice_forced: bool
    previous: str | None
    raw: str
    category: str
    fallback_reason: str | None
    detail: str | None
    memory_error: str


@with_config(_OPEN)
class ExtractRecord(TypedDict, total=False):
    """A field extraction: the model's ``raw`` reply, fields it gave that were not
    declared (``ignored``), invalid ones (field -> why) or missing ones, and whether it
    ``success``-ed."""

    protocol: str
    raw: str
    reason: str
    detail: str
    ignored: list[str]
    invalid: dict[str, str]
    missing: list[str]
    success: bool


@with_config(_OPEN)
class QueryExtensionRecord(TypedDict, total=False):
    """A query extension: why it was ``skipped``, else the model's ``raw`` reply and how
    many queries it gave (``from_model``)."""

    skipped: str
    raw: str
    dropped_items: int
    reason: str
    detail: str
    from_model: int


@with_config(_OPEN)
class RetrievalRecord(TypedDict, total=False):
    """A knowledge search: the recall passes run, what it could not do as asked
    (``notes``), the hits kept and the search mode."""

    passes: dict[str, int]
    notes: list[str]
    hits: int
    mode: str


@with_config(_OPEN)
class RelevancePass(TypedDict, total=False):
    """A relevance check by a model: ``kept`` hits ``of`` the ones found."""

    model: str
    kept: int
    of: int


# ---------------------------------------------------------------------------- agents


@with_config(_OPEN)
class AgentRequestSummary(TypedDict, total=False):
    """What one model call of an agent sent: message count, estimated tokens, the tools
    offered, the tool choice and why the round was forced to answer (None: it was not)."""

    messages: int
    tokens_est: int
    tools: list[str]
    tool_choice: Any
    forced: Any
    hint: str | None


@with_config(_OPEN)
class AgentReply(TypedDict, total=False):
    """The model's reply in a round: its text, finish reason, reasoning length, calls."""

    text: str
    finish_reason: str | None
    reasoning_chars: int
    tool_calls: list[dict[str, Any]]


@with_config(_OPEN)
class AgentCallError(TypedDict, total=False):
    """A model call of an agent that failed: its reason, message and the text it had sent."""

    reason: str
    message: str
    partial_text: str | None


@with_config(_OPEN)
class AgentToolRun(TypedDict, total=False):
    """One tool call of a round: its id, tool name and arguments, how it went
    (``status``: ok / error / timeout / ...), the start of its result (``preview``) and
    its size, time and cost; ``data`` is what the tool adds. A call refused before it
    ran (unknown tool, bad arguments) also has its ``round``, its ``index`` in the
    round (from 0) and the ``error`` the model was told."""

    id: str
    name: str
    arguments: Any
    args: Any
    round: int
    index: int
    error: str | None
    status: str
    started_at: float
    elapsed_ms: float
    is_error: bool
    stop: bool
    cost: float
    chars: int
    truncated: bool
    preview: str
    data: Mapping[str, Any]


@with_config(_OPEN)
class AgentRound(TypedDict, total=False):
    """One model call of an agent loop (the agent's trace entry): the round, the request
    summary, the reply with its usage, cost and time, the tool calls it made, and what
    went wrong (``error``: the call failed; ``parse_error``: an unreadable reply;
    ``paused_on``: the call waiting for a person)."""

    round: int
    mode: str
    request: AgentRequestSummary
    parse_retry: int
    usage: UsageRecord
    cost: float
    elapsed_ms: float
    response: AgentReply
    error: AgentCallError
    tools: list[AgentToolRun]
    tool_cost: float
    paused_on: str | None
    loop_detected: str
    repairs: list[Any]
    parse_error: dict[str, Any]
    stop_rejected: Any


@with_config(_OPEN)
class AgentNote(TypedDict, total=False):
    """Something the loop noticed (a repeated call, tool-only rounds) and the next round's
    answer-only force it caused."""

    round: int
    reason: str
    tool: str
    message: str


@with_config(_OPEN)
class AgentCheckpoint(TypedDict, total=False):
    """Context fitting dropped old rounds: tokens before and after, the messages it
    dropped this time (``dropped``, as sent) and how many it has dropped in all."""

    round: int
    tokens_before: int
    tokens_after: int
    dropped: list[dict[str, Any]]
    dropped_total: int


@with_config(_OPEN)
class AgentRecord(TypedDict, total=False):
    """An agent loop's record (``agent``, ``tool_call``): ``mode`` (``native`` tool calls
    or the ``json`` protocol), ``trace`` (one :class:`AgentRound` per model call, filled
    while it runs), ``tool_results`` (full results by call id), ``notes``,
    ``checkpoints``; once it ends, ``stop_reason``, ``rounds``, ``model_cost``,
    ``tool_cost`` and ``counters``."""

    mode: str
    trace: list[AgentRound]
    tool_results: dict[str, str]
    notes: list[AgentNote]
    checkpoints: list[AgentCheckpoint]
    stop_reason: str
    rounds: int
    model_cost: float
    tool_cost: float
    counters: dict[str, int]


@with_config(_OPEN)
class ToolSource(TypedDict, total=False):
    """Where a tool an agent is given comes from: ``kind`` (``graph``, ``http``,
    ``workflow``, ``builtin``, ``mcp``, ``dataset``, ``model_agent``, ``file_reader``,
    ``stop``, ``internal``) and what names it there - the graph tool's ``node`` and why
    it has its risk (``risk_why``), the HTTP operation (``method``, ``path``), the
    ``workflow``, the builtin or MCP ``tool`` with its ``provider`` or ``server`` and
    ``transport``, the ``datasets``, the ``model`` or the ``files``."""

    kind: str
    node: str
    risk_why: str
    method: str
    path: str
    workflow: str
    tool: str
    provider: str
    server: str
    transport: str
    datasets: list[str]
    model: str
    files: list[str]


@with_config(_OPEN)
class OfferedTool(ToolSource, total=False):
    """A tool an agent was given: its name, risk level (``read`` / ``write``; None:
    unknown, treated as ``write``), whether it may run beside others, and where it comes
    from (:class:`ToolSource`)."""

    name: str
    risk: str | None
    parallel_safe: bool


@with_config(_OPEN)
class PlanningRecord(TypedDict, total=False):
    """The planning agent's plan, whether a plan is required before it may answer
    (``plan_required``), the gate's decisions, its questions and confirmations, and the
    tools it dropped (and why)."""

    plan: dict[str, Any] | None
    plan_required: bool
    gate: list[dict[str, Any]]
    asks: list[dict[str, Any]]
    confirmations: list[dict[str, Any]]
    dropped_tools: list[str]


@with_config(_OPEN)
class McpServerRecord(TypedDict, total=False):
    """An MCP server an agent used: name, transport and the tools it listed."""

    name: str
    transport: str
    tools: list[str]


@with_config(_OPEN)
class ToolRunRecord(TypedDict, total=False):
    """A graph tool's run in a ``tool_call`` node: its number, tool, body node runs, error."""

    index: int
    tool: str
    node_runs: list[dict[str, Any]]
    error: str


@with_config(_OPEN)
class WorkflowRunRecord(TypedDict, total=False):
    """A workflow tool's run: the workflow, its pinned published version (absent: the
    published one), the child run's id and how it ended (``error``: why it did not
    succeed, as the model was told)."""

    workflow: str
    version: int
    run_id: str
    status: str
    error: str


@with_config(_OPEN)
class ConfirmationRecord(TypedDict, total=False):
    """A person's answer to a ``confirm`` question about a tool call."""

    tool: str | None
    call_id: str | None
    approved: bool


# ---------------------------------------------------------------------------- containers


@with_config(_OPEN)
class BodyError(TypedDict, total=False):
    type: str
    message: str
    node_id: str | None


@with_config(_OPEN)
class BodyRun(TypedDict, total=False):
    """One item of an iteration or one round of a loop: its index (from 0), how it ended
    and the node runs of its body (as JSON)."""

    index: int
    status: Literal["succeeded", "failed"]
    node_runs: list[dict[str, Any]]
    error: BodyError


# ---------------------------------------------------------------------------- http


@with_config(_OPEN)
class HttpConnection(TypedDict, total=False):
    """A connection an HTTP request opened: the host asked for, the address connected to."""

    host: str
    address: str
    port: int


# ---------------------------------------------------------------------------- the record


@with_config(_OPEN)
class NodeData(TypedDict, total=False):
    """``NodeRun.data``: one key per :class:`NodeDataKey` (every key optional: a node run
    has the keys of its kind, :data:`KIND_RECORDS`)."""

    warnings: list[NodeWarningRecord]
    given: bool
    reused_from: ReusedFrom
    sent: SentRecord
    chat: ChatRecord
    classify: ClassifyRecord
    extract: ExtractRecord
    query_extension: QueryExtensionRecord
    retrieval: RetrievalRecord
    relevance: list[RelevancePass]
    agent: AgentRecord
    agent_state: dict[str, Any]
    tools: list[OfferedTool]
    planning: PlanningRecord
    mcp_servers: list[McpServerRecord]
    tool_runs: dict[str, ToolRunRecord]
    tool_run_count: int
    workflow_runs: dict[str, WorkflowRunRecord]
    confirmations: list[ConfirmationRecord]
    items: list[BodyRun]
    rounds: list[BodyRun]
    round_count: int
    language: str
    sandbox: str
    sandbox_warning: str
    pid: int
    tool: str
    exit_code: int | None
    elapsed_ms: float
    stdout: str
    stderr: str
    logs_truncated: bool
    error: dict[str, Any]
    ignored_outputs: list[str]
    method: str
    url: str
    connections: list[HttpConnection]
    status_code: int
    redirects: list[str]
    response_bytes: int
    json_error: str
    #: output name -> why its JSONPath could not be evaluated (the output is null)
    output_errors: dict[str, str]


# ---------------------------------------------------------------------------- helpers


def warning_entry(code: str, message: str, details: Mapping[str, Any] | None = None) -> NodeWarningRecord:
    """The ``warnings`` entry of a degraded result."""
    return NodeWarningRecord(code=code, message=message, details=dict(details or {}))


def agent_record(
    mode: str,
    trace: list[AgentRound],
    tool_results: dict[str, str],
    notes: list[AgentNote],
    checkpoints: list[AgentCheckpoint],
) -> AgentRecord:
    """The ``agent`` record an agent loop publishes when it starts: the lists given are
    the loop's own, so the record follows the loop as it runs (and is kept as far as it
    got when the node fails)."""
    return AgentRecord(
        mode=mode, trace=trace, tool_results=tool_results, notes=notes, checkpoints=checkpoints
    )


def body_run(index: int, node_runs: list[dict[str, Any]], error: BaseException | None) -> BodyRun:
    """The ``items`` / ``rounds`` entry of one item or round; ``error`` ended it (its
    ``node_id`` attribute, when it has one, names the node to blame)."""
    record = BodyRun(index=index, status="failed" if error else "succeeded", node_runs=node_runs)
    if error is not None:
        record["error"] = BodyError(
            type=type(error).__name__, message=str(error), node_id=getattr(error, "node_id", None)
        )
    return record


def agent_trace(data: Mapping[str, Any]) -> list[AgentRound]:
    """An agent's trace (one entry per model call) from a node run's ``data``; empty for
    a node run that is not an agent's. The one place readers (the service's chat
    messages, ``flowloom inspect``, the canvas) take an agent's trace from."""
    agent = data.get(NodeDataKey.agent)
    trace = agent.get("trace") if isinstance(agent, Mapping) else None
    if not isinstance(trace, list):
        return []
    # every key of a round is optional: any object read from a record is one
    return [cast(AgentRound, entry) for entry in trace if isinstance(entry, dict)]


def body_runs(data: Mapping[str, Any]) -> list[BodyRun]:
    """The items of an iteration or the rounds of a loop from a node run's ``data``."""
    for key in (NodeDataKey.items, NodeDataKey.rounds):
        kept = data.get(key)
        if isinstance(kept, list):
            # every key of a body run is optional: any object read from a record is one
            return [cast(BodyRun, entry) for entry in kept if isinstance(entry, dict)]
    return []
