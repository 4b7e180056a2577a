"""The data types and hooks of the agent loop kernel (:mod:`nodes.agent.loop`).

What a node hands the kernel and gets back, kept apart from the loop itself:

- the errors :class:`AgentNotConverged` (fail-closed: a loop without a real answer fails the node)
  and :class:`ToolSourceFailed` (a tool's source went away: the node fails, the model is not asked);
- tools: :class:`ToolSpec` (what is offered), :class:`ToolCallContext` (one requested
  call), :class:`ToolOutcome` (what a tool returns), :class:`RequestControl` (tools and
  ``tool_choice`` of the next request) and the batching rule :func:`batch_parallel_safe`;
- settings and state: :class:`LoopSettings` (the knobs), :class:`LoopState` (everything the
  loop knows; JSON round trip for pausing), :class:`LoopResult` and :func:`get_tool_result`
  (the full tool results);
- :class:`AgentHooks`, what a node injects (the nodes differ only by their hooks), with the
  default context fitting :func:`fit_rounds`.

Every public name here is re-exported by :mod:`nodes.agent.loop`; import them from there.
"""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.context import NodeContext
from engine.errors import NodeFailed
from schemas.node_records import AgentCheckpoint, AgentNote, AgentRound, AgentToolRun, ToolSource
from schemas.run import Usage

from ..llm.call import LLMBadRequest, LLMRequest, LLMResponse, call_llm, estimate_tokens
from ..llm.chat import registry_of

__all__ = [
    "AgentHooks",
    "AgentNotConverged",
    "LoopResult",
    "LoopSettings",
    "LoopState",
    "RequestControl",
    "Risk",
    "ToolCallContext",
    "ToolOutcome",
    "ToolRun",
    "ToolSourceFailed",
    "ToolSpec",
    "batch_parallel_safe",
    "fit_rounds",
    "get_tool_result",
    "maybe_await",
    "messages_tokens",
]

Risk = Literal["read", "write"]


# ============================================================================ errors


class AgentNotConverged(NodeFailed):
    """The loop could not end with a real answer; ``detail`` says how."""

    reason = "not_converged"

    def __init__(self, message: str, *, node_id: str | None = None, detail: str = "") -> None:
        super().__init__(message, node_id=node_id)
        self.detail = detail


class ToolSourceFailed(NodeFailed):
    """Where a tool lives went away during a call (an MCP server's process exited, its
    connection was lost): unlike a tool's error, nothing the model writes can fix it, so
    the kernel lets it fail the node instead of feeding it back as a result."""

    reason = "tool_source_failed"


# ============================================================================ tools


@dataclass(slots=True)
class ToolOutcome:
    """What a tool returns. ``content`` is the text the model sees (before truncation and
    fencing); ``is_error`` marks a failure reported to the model; ``stop`` ends the loop
    after this round; ``cost`` is added to the tool cost; ``data`` goes to the trace."""

    content: str
    is_error: bool = False
    stop: bool = False
    cost: float = 0.0
    data: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "is_error": self.is_error,
            "stop": self.stop,
            "cost": self.cost,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ToolOutcome:
        return cls(
            str(raw.get("content", "")),
            bool(raw.get("is_error")),
            bool(raw.get("stop")),
            float(raw.get("cost") or 0.0),
            raw.get("data"),
        )


ToolRun = Callable[[dict[str, Any], "ToolCallContext"], Awaitable[ToolOutcome | str]]


@dataclass(slots=True)
class ToolSpec:
    """A tool offered to the model.

    ``parameters`` is the JSON Schema of the arguments (an object schema); ``run(args,
    call)`` executes it. ``parallel_safe``: may run concurrently with other such calls
    when the hooks batch (:func:`batch_parallel_safe`). ``risk``: ``read`` / ``write`` /
    None (unknown - policies treat it as ``write``). ``timeout``: seconds per call (None:
    ``LoopSettings.tool_timeout``). ``meta``: where the tool comes from, kept in the node
    run's ``tools`` record.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    parallel_safe: bool = False
    risk: Risk | None = None
    timeout: float | None = None
    meta: ToolSource = field(default_factory=ToolSource)

    def openai_tool(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters or {"type": "object", "properties": {}},
            },
        }


@dataclass(slots=True)
class ToolCallContext:
    """One call the model asked for, as tools and hooks see it.

    ``arguments`` is the raw text the model sent; ``args`` the parsed object (``{}`` for
    empty arguments); ``error`` is set when the call cannot run (unknown tool, bad
    arguments) - then the kernel reports it without running anything. ``index`` is the
    call's position in its round.
    """

    ctx: NodeContext
    id: str
    name: str
    arguments: str
    args: dict[str, Any]
    round: int
    index: int
    loop: LoopState
    spec: ToolSpec | None = None
    error: str | None = None
    status: str = "ok"

    def to_dict(self) -> AgentToolRun:
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "args": self.args,
            "round": self.round,
            "index": self.index,
            "error": self.error,
            "status": self.status,
        }


@dataclass(slots=True)
class RequestControl:
    """What the next request offers: ``tools`` (None: every tool) and ``tool_choice``
    (None: the provider's ``auto``; ``"none"`` makes the round answer-only). ``hint`` is a
    user message sent with this round only (not kept in history)."""

    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    hint: str | None = None


def batch_parallel_safe(calls: Sequence[ToolCallContext]) -> list[list[ToolCallContext]]:
    """Groups for ``hooks.can_batch``: consecutive ``parallel_safe`` calls share a group, every
    other call (unknown tools included) is a group of its own. Order is kept."""
    groups: list[list[ToolCallContext]] = []
    for call in calls:
        safe = call.spec is not None and call.spec.parallel_safe and call.error is None
        if (
            safe
            and groups
            and groups[-1][-1].spec is not None
            and groups[-1][-1].spec.parallel_safe
            and groups[-1][-1].error is None
        ):
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


# ============================================================================ settings / state


@dataclass
class LoopSettings:
    """Knobs of one loop. ``model`` is a registry name.

    ``max_rounds``: model calls allowed (default 50); ``on_max_rounds``:
    ``answer`` makes the last round answer-only (a forced final answer), ``error`` lets it
    call tools and fails with ``not_converged`` if it does. ``tool_only_cap``: more than this
    many consecutive tool-only rounds force an answer-only round.
    ``repeat_limit``: that many identical calls (same tool, same arguments) in a row are a
    loop. ``max_result_chars``: tool results longer than this are cut for the model.
    ``tool_timeout``: seconds per tool call (None: none). ``max_parse_retries``: consecutive
    unreadable JSON-protocol replies tolerated (default 2). ``protocol``: ``auto``
    (native when the model has tool calling), ``native`` or ``json``. ``stream``: answer
    deltas of native rounds go to ``ctx.delta``. ``temperature``/``max_tokens``: None means
    the model's defaults (both are always sent, see :mod:`nodes.llm.call`). ``idle_timeout``:
    seconds a streamed reply may stay silent; None: the node's ``stream_idle_timeout``, else
    the model registry's (:func:`nodes.llm.chat.stream_idle_timeout`), bounded by the node's timeout.
    """

    model: str
    max_rounds: int = 50
    tool_only_cap: int = 5
    repeat_limit: int = 3
    max_result_chars: int = 8000
    tool_timeout: float | None = 60.0
    max_parse_retries: int = 2
    protocol: Literal["auto", "native", "json"] = "auto"
    on_max_rounds: Literal["answer", "error"] = "answer"
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = False
    idle_timeout: float | None = None
    max_retries: int = 3
    user_key: bool = False


def _new_counters() -> dict[str, int]:
    return {
        "tool_only": 0,
        "parse_retries": 0,
        "parse_failures": 0,
        "stop_rejections": 0,
        "tool_calls": 0,
        "tool_errors": 0,
        "model_calls": 0,
    }


@dataclass
class LoopState:
    """Everything the loop knows; :meth:`to_dict` is JSON and :meth:`from_dict` restores it.

    ``round``: rounds done (model calls that were not parse failures). ``counters``:
    ``tool_only`` (current tool-only streak), ``parse_retries`` (current streak of
    unreadable replies), ``parse_failures``, ``stop_rejections``, ``tool_calls``,
    ``tool_errors``, ``model_calls``. ``force``: why the next round is answer-only (None:
    it is not). ``recent_calls``: signatures of the last calls (loop detection).
    ``results``: full tool results by call id. ``notes``: loop detections, forced rounds.
    ``checkpoints``: what context fitting dropped. ``pending``: the paused round (see the
    module docstring). ``head``: how many opening messages compression never drops.
    ``extra``: free room for hooks (the planning agent's plan), saved as is.
    """

    messages: list[dict[str, Any]]
    mode: Literal["native", "json"] = "native"
    nonce: str = field(default_factory=lambda: secrets.token_hex(6))
    round: int = 0
    counters: dict[str, int] = field(default_factory=_new_counters)
    trace: list[AgentRound] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    tool_cost: float = 0.0
    force: str | None = None
    recent_calls: list[str] = field(default_factory=list)
    notes: list[AgentNote] = field(default_factory=list)
    checkpoints: list[AgentCheckpoint] = field(default_factory=list)
    pending: dict[str, Any] | None = None
    head: int = 0
    dropped: int = 0
    answer: str | None = None
    stop_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (lists copied; usage as dicts)."""
        return {
            "messages": [dict(m) for m in self.messages],
            "mode": self.mode,
            "nonce": self.nonce,
            "round": self.round,
            "counters": dict(self.counters),
            "trace": list(self.trace),
            "usage": [u.model_dump() for u in self.usage],
            "results": dict(self.results),
            "tool_cost": self.tool_cost,
            "force": self.force,
            "recent_calls": list(self.recent_calls),
            "notes": list(self.notes),
            "checkpoints": list(self.checkpoints),
            "pending": self.pending,
            "head": self.head,
            "dropped": self.dropped,
            "answer": self.answer,
            "stop_reason": self.stop_reason,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LoopState:
        """Restore :meth:`to_dict` output (e.g. from ``node_run.data["agent_state"]``)."""
        counters = _new_counters()
        counters.update(raw.get("counters") or {})
        return cls(
            messages=[dict(m) for m in raw.get("messages") or []],
            mode=raw.get("mode", "native"),
            nonce=raw.get("nonce") or secrets.token_hex(6),
            round=int(raw.get("round", 0)),
            counters=counters,
            trace=list(raw.get("trace") or []),
            usage=[Usage.model_validate(u) for u in raw.get("usage") or []],
            results=dict(raw.get("results") or {}),
            tool_cost=float(raw.get("tool_cost") or 0.0),
            force=raw.get("force"),
            recent_calls=list(raw.get("recent_calls") or []),
            notes=list(raw.get("notes") or []),
            checkpoints=list(raw.get("checkpoints") or []),
            pending=raw.get("pending"),
            head=int(raw.get("head", 0)),
            dropped=int(raw.get("dropped", 0)),
            answer=raw.get("answer"),
            stop_reason=raw.get("stop_reason"),
            extra=dict(raw.get("extra") or {}),
        )


@dataclass
class LoopResult:
    """How the loop ended.

    ``answer``: the final text (``""`` when a stop tool ended a round without text).
    ``messages``: the whole chain (system and opening messages included); ``trail``: the
    assistant/tool messages the loop added. ``usage``: model usage summed (each call
    priced on its own); ``cost = model_cost + tool_cost``. ``stop_reason``: ``answer``,
    ``stop_tool`` or ``max_rounds`` (the forced final answer of the last round).
    """

    answer: str
    messages: list[dict[str, Any]]
    trail: list[dict[str, Any]]
    trace: list[AgentRound]
    usage: Usage
    cost: float
    model_cost: float
    tool_cost: float
    stop_reason: str
    rounds: int
    state: LoopState
    results: dict[str, str]


def get_tool_result(record: Any, call_id: str) -> str | None:
    """The full (untruncated) result of tool call ``call_id`` from a node run, its ``data``,
    a :class:`LoopState` or a :class:`LoopResult`; None when unknown."""
    if isinstance(record, (LoopState, LoopResult)):
        return record.results.get(call_id)
    data = getattr(record, "data", record)
    if isinstance(data, Mapping):
        agent = data.get("agent")
        if isinstance(agent, Mapping):
            return (agent.get("tool_results") or {}).get(call_id)
    return None


# ============================================================================ hooks


async def maybe_await(value: Any) -> Any:
    """``value`` awaited when a hook returned an awaitable, else as is (hooks may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


class AgentHooks:
    """What a node injects into the kernel; every method may be sync or async.

    The defaults are the tool-call node's behaviour: run the tool's own ``run``, stop as
    soon as the model answers, offer every tool with ``auto`` choice, run calls one at a
    time, drop the oldest rounds when the context is too long, call the model with
    :func:`~nodes.llm.call.call_llm`.
    """

    async def run_tool(self, call: ToolCallContext, spec: ToolSpec, loop: LoopState) -> ToolOutcome:
        """Run one call (the kernel adds the timeout and turns exceptions into error results)."""
        result = await spec.run(call.args, call)
        return result if isinstance(result, ToolOutcome) else ToolOutcome(str(result))

    def may_stop(self, loop: LoopState, reply: LLMResponse) -> str | None:
        """None lets the loop end with ``reply``; a text is sent back as feedback instead."""
        return None

    def request_control(self, loop: LoopState) -> RequestControl:
        """Tools and ``tool_choice`` of the next request."""
        return RequestControl()

    def can_batch(self, calls: list[ToolCallContext], loop: LoopState) -> list[list[ToolCallContext]]:
        """Groups of calls; a group runs concurrently, groups in order. Default: serial."""
        return [[call] for call in calls]

    def compress(self, messages: list[dict[str, Any]], loop: LoopState) -> list[dict[str, Any]]:
        """The messages to send; the kernel's :func:`fit_rounds` by default (needs ``loop.budget``)."""
        return fit_rounds(messages, loop)

    async def call_model(
        self,
        ctx: NodeContext,
        request: LLMRequest,
        loop: LoopState,
        on_answer: Callable[[str], Any] | None,
        settings: LoopSettings,
    ) -> LLMResponse:
        """One model call (tests and the benchmark replace it with a fake model)."""
        return await call_llm(
            request,
            registry=registry_of(ctx),
            on_answer=on_answer,
            cancel=ctx.cancel,
            node_id=ctx.node_id,
            idle_timeout=settings.idle_timeout,
            max_retries=settings.max_retries,
            user_key=settings.user_key,
        )


# ============================================================================ context fitting (default compress)

_SIZES = "_sizes"


def messages_tokens(loop: LoopState, messages: list[dict[str, Any]]) -> int:
    """Estimated tokens of ``messages``, cached per message object on the loop."""
    cache: dict[int, tuple[dict[str, Any], int]] = loop.__dict__.setdefault(_SIZES, {})
    total = 3
    for message in messages:
        hit = cache.get(id(message))
        if hit is None or hit[0] is not message:
            size = estimate_tokens(message)
            cache[id(message)] = (message, size)
        else:
            size = hit[1]
        total += size
    return total


def fit_rounds(messages: list[dict[str, Any]], loop: LoopState) -> list[dict[str, Any]]:
    """Drop the oldest tool rounds until ``messages`` fit ``loop.budget`` tokens.

    The first ``loop.head`` messages (system prompt, opening messages) and the newest
    round are always kept; a round is an assistant message and the messages after it up
    to the next assistant message, so a tool result never loses the call it answers.
    One platform note after the head says how many messages were dropped. Each fit is
    recorded in ``loop.checkpoints`` with the dropped messages.

    Raises:
        LLMBadRequest: (``context_length_exceeded``) the head plus the newest round alone do not fit.
    """
    budget = loop.__dict__.get("budget")
    if budget is None:
        return messages
    before = messages_tokens(loop, messages)
    if before <= budget:
        return messages
    head = messages[: loop.head]
    rest = messages[loop.head :]
    if (
        rest
        and rest[0].get("role") == "user"
        and str(rest[0].get("content", "")).startswith("[platform note:")
    ):
        rest = rest[1:]  # the previous note is replaced below
    starts = [i for i, m in enumerate(rest) if m.get("role") == "assistant"]
    if not starts:
        raise LLMBadRequest(
            f"the opening messages alone need ~{before} tokens but the input budget is {budget}",
            reason="context_length_exceeded",
        )
    groups = [rest[s:e] for s, e in zip(starts, starts[1:] + [len(rest)], strict=True)]
    prefix = rest[: starts[0]]
    dropped: list[dict[str, Any]] = []
    while len(groups) > 1:
        dropped += groups.pop(0)
        note = {
            "role": "user",
            "content": f"[platform note: {loop.dropped + len(dropped)} earlier message(s) of "
            "this task were removed to fit the context window; their tool results "
            "are kept in the node run]",
        }
        candidate = head + [note] + prefix + [m for g in groups for m in g]
        if messages_tokens(loop, candidate) <= budget:
            loop.dropped += len(dropped)
            loop.checkpoints.append(
                {
                    "round": loop.round,
                    "tokens_before": before,
                    "tokens_after": messages_tokens(loop, candidate),
                    "dropped": dropped,
                    "dropped_total": loop.dropped,
                }
            )
            loop.__dict__[_SIZES] = {}
            return candidate
    raise LLMBadRequest(
        f"the opening messages and the newest tool round need ~{before} tokens but the model's "
        f"input budget is {budget}; lower max_result_chars or use a model with a larger context",
        reason="context_length_exceeded",
    )
