"""The multi-round tool loop kernel shared by the tool-call node and the planning agent.

Written once (seed 000 §2.1 ``runAgentLoop``, §3.2.3, §5 ①): the nodes differ only by
the :class:`AgentHooks` they inject. :func:`run_agent_loop` runs rounds until a stop:

1. **Fit the context** (``hooks.compress``): when the request would not fit the
   model's input budget the oldest tool rounds are dropped (the system prompt and the
   opening messages stay); what was dropped is kept as a checkpoint in
   ``LoopState.checkpoints`` (and the node run).
2. **Ask the model** (``hooks.request_control`` picks the tools offered and
   ``tool_choice``; ``hooks.call_model`` sends it, by default :func:`nodes.llm.call_llm`).
   A round may be *answer-only*: the last allowed round (``max_rounds``), after more than
   ``tool_only_cap`` consecutive rounds of tool calls without answer text (seed 000
   §3.2.3: answer text resets the count), after ``repeat_limit`` identical calls in a row
   (a loop; the reason is recorded in ``LoopState.notes``), or when the hook says
   ``tool_choice="none"``. Native models get ``tool_choice: "none"`` (or no tools when the
   model does not take ``tool_choice``) plus a one-round hint; JSON-protocol models get
   :data:`~nodes.agent_protocol.LAST_ROUND_HINT` / ``FORCED_ANSWER_HINT``. A tool call on an
   answer-only round, or raw tool-call markup as a forced final answer, ends the node with
   :class:`AgentNotConverged` (reason ``not_converged``) - never a tool observation or markup
   returned as the answer (seed 001 §三, fail-closed).
3. **Run the tools** the model asked for. ``hooks.can_batch`` groups the calls: calls in
   one group run concurrently, groups run one after another (the default - the tool-call
   node's - is one call per group: serial, seed 000 §3.2.2). Results are appended in the
   original call order. Every tool error - an exception, a timeout, arguments that are not
   JSON or do not match the tool's schema, an unknown or not-offered tool - becomes that
   call's result with ``is_error`` (paired with its call id, the model's input for
   self-correction); only cancellation, run limits and interrupts propagate. Empty
   arguments mean ``{}``. Results longer than ``max_result_chars`` are cut to a head
   preview plus a platform note; the full text stays in ``LoopState.results`` (node run:
   ``data.agent.tool_results``, :func:`get_tool_result`). Each observation/error is then
   fenced on its own (truncate first, then fence; seed 001 §五).
4. **Decide**: no tool requested -> ``hooks.may_stop`` may return feedback, which goes back
   as a user message and the loop continues (seed 000 §3.3.3 stop gate), else the loop ends
   with the answer. A tool returning ``ToolOutcome(stop=True)`` ends it after its round
   (the stop tool, seed 000 §3.2.4). A tool or hook calling ``ctx.interrupt`` pauses it (see
   *Pausing*). A fired cancel token raises ``RunCancelled``.

**Models without native function calling** (``capabilities.tool_calling`` false, or
``LoopSettings.protocol="json"``) speak the JSON protocol of :mod:`nodes.agent_protocol`
with the same rounds: the reply is parsed by bracket balancing, a parse failure sends a
hint quoting the text around the error (or, for output cut by ``max_tokens``, asks for a
shorter reply) and is *not* a step: ``LoopState.counters["parse_retries"]`` counts
consecutive failures apart from rounds and more than ``max_parse_retries`` of them end the
node with :class:`AgentNotConverged` (seed 001 §三). The model's JSON is kept as an
assistant message and the fenced results go back as one user message (no ``tool`` role).

**Record** (seed 001 "tool_calls is a dead column", fixed): ``LoopState.trace`` has one
entry per model call - the request summary (messages, estimated tokens, tools offered,
tool_choice, why forced), the reply (text, finish reason, tool calls with arguments),
every tool run (arguments, status, preview, size, truncation, timing, cost), usage and
cost - and lives in ``ctx.node_run.data["agent"]`` while the loop runs, with the full tool
results, notes and checkpoints. Every model call is priced on its own and summed
(``sum_usage``; tiered prices make "sum tokens, price once" wrong, seed 000 §3.2.5);
tool costs are added separately: ``LoopResult.cost = model_cost + tool_cost``.

**Pausing and resuming** (seed 000 §3.3.4). A tool (or ``hooks.run_tool``) pauses the loop
by calling ``ctx.interrupt(kind, payload)``. The kernel lets the other calls of the same
group finish, records ``LoopState.pending`` (the round, the pending call id, the round's
calls and the outcomes already known), saves ``LoopState.to_dict()`` in
``ctx.node_run.data["agent_state"]`` and re-raises, so the scheduler pauses the run. To
continue the SAME message chain, restore the state (:meth:`LoopState.from_dict`) and call
``run_agent_loop(..., state=restored, tool_result=answer)``: the answer becomes the
pending call's tool result, the round's remaining calls run, and the loop goes on.

Errors: :class:`AgentNotConverged` (``NodeFailed``, reason ``not_converged``, ``detail``
one of ``parse_failed``, ``tool_call_on_last_round``, ``tool_call_on_forced_round``,
``tool_markup_answer``, ``max_rounds``); LLM errors from :mod:`nodes.llm` propagate.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Sequence, Union

from engine.context import InterruptRequested, NodeContext
from engine.errors import NodeFailed, RunCancelled, RunLimitExceeded
from schemas.run import Usage

from .agent_protocol import (
    FORCED_ANSWER_HINT,
    LAST_ROUND_HINT,
    fence_contract,
    fence_observation,
    looks_like_tool_markup,
    observations_message,
    parse_reply,
    protocol_prompt,
    safe_name,
    truncate_result,
    validate_args,
)
from .chat import add_usage, registry_of
from .llm import LLMBadRequest, LLMRequest, LLMResponse, call_llm, estimate_tokens, sum_usage

__all__ = [
    "AgentHooks",
    "AgentNotConverged",
    "LoopResult",
    "LoopSettings",
    "LoopState",
    "RequestControl",
    "ToolCallContext",
    "ToolOutcome",
    "ToolSpec",
    "batch_parallel_safe",
    "fit_rounds",
    "get_tool_result",
    "run_agent_loop",
]

Risk = Literal["read", "write"]


# ============================================================================ errors


class AgentNotConverged(NodeFailed):
    """The loop could not end with a real answer (seed 001 NOT_CONVERGED); ``detail`` says how."""

    reason = "not_converged"

    def __init__(self, message: str, *, node_id: str | None = None, detail: str = "") -> None:
        super().__init__(message, node_id=node_id)
        self.detail = detail


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
    data: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error, "stop": self.stop, "cost": self.cost,
                "data": self.data}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "ToolOutcome":
        return cls(str(raw.get("content", "")), bool(raw.get("is_error")), bool(raw.get("stop")),
                   float(raw.get("cost") or 0.0), raw.get("data"))


ToolRun = Callable[[dict[str, Any], "ToolCallContext"], Awaitable[Union[ToolOutcome, str]]]


@dataclass(slots=True)
class ToolSpec:
    """A tool offered to the model.

    ``parameters`` is the JSON Schema of the arguments (an object schema); ``run(args,
    call)`` executes it. ``parallel_safe``: may run concurrently with other such calls
    when the hooks batch (:func:`batch_parallel_safe`). ``risk``: ``read`` / ``write`` /
    None (unknown - policies treat it as ``write``). ``timeout``: seconds per call (None:
    ``LoopSettings.tool_timeout``). ``meta``: anything the caller wants to keep with it.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    parallel_safe: bool = False
    risk: Risk | None = None
    timeout: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def openai_tool(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters or {"type": "object", "properties": {}}}}


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
    loop: "LoopState"
    spec: ToolSpec | None = None
    error: str | None = None
    status: str = "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "args": self.args,
                "round": self.round, "index": self.index, "error": self.error, "status": self.status}


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
        if safe and groups and groups[-1][-1].spec is not None and groups[-1][-1].spec.parallel_safe \
                and groups[-1][-1].error is None:
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


# ============================================================================ settings / state


@dataclass
class LoopSettings:
    """Knobs of one loop. ``model`` is a registry name.

    ``max_rounds``: model calls allowed (default 50, seed 000 §3.2.2); ``on_max_rounds``:
    ``answer`` makes the last round answer-only (a forced final answer), ``error`` lets it
    call tools and fails with ``not_converged`` if it does. ``tool_only_cap``: more than this
    many consecutive tool-only rounds force an answer-only round (seed 000 §3.2.3).
    ``repeat_limit``: that many identical calls (same tool, same arguments) in a row are a
    loop. ``max_result_chars``: tool results longer than this are cut for the model.
    ``tool_timeout``: seconds per tool call (None: none). ``max_parse_retries``: consecutive
    unreadable JSON-protocol replies tolerated (seed 001 default 2). ``protocol``: ``auto``
    (native when the model has tool calling), ``native`` or ``json``. ``stream``: answer
    deltas of native rounds go to ``ctx.delta``. ``temperature``/``max_tokens``: None means
    the model's defaults (both are always sent, see :mod:`nodes.llm`).
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
    idle_timeout: float = 60.0
    max_retries: int = 3
    user_key: bool = False


def _new_counters() -> dict[str, int]:
    return {"tool_only": 0, "parse_retries": 0, "parse_failures": 0, "stop_rejections": 0, "tool_calls": 0,
            "tool_errors": 0, "model_calls": 0}


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
    trace: list[dict[str, Any]] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    tool_cost: float = 0.0
    force: str | None = None
    recent_calls: list[str] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    pending: dict[str, Any] | None = None
    head: int = 0
    dropped: int = 0
    answer: str | None = None
    stop_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (lists copied; usage as dicts)."""
        return {
            "messages": [dict(m) for m in self.messages], "mode": self.mode, "nonce": self.nonce,
            "round": self.round, "counters": dict(self.counters), "trace": list(self.trace),
            "usage": [u.model_dump() for u in self.usage], "results": dict(self.results),
            "tool_cost": self.tool_cost, "force": self.force, "recent_calls": list(self.recent_calls),
            "notes": list(self.notes), "checkpoints": list(self.checkpoints), "pending": self.pending,
            "head": self.head, "dropped": self.dropped, "answer": self.answer, "stop_reason": self.stop_reason,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "LoopState":
        """Restore :meth:`to_dict` output (e.g. from ``node_run.data["agent_state"]``)."""
        counters = _new_counters()
        counters.update(raw.get("counters") or {})
        return cls(
            messages=[dict(m) for m in raw.get("messages") or []], mode=raw.get("mode", "native"),
            nonce=raw.get("nonce") or secrets.token_hex(6), round=int(raw.get("round", 0)), counters=counters,
            trace=list(raw.get("trace") or []), usage=[Usage.model_validate(u) for u in raw.get("usage") or []],
            results=dict(raw.get("results") or {}), tool_cost=float(raw.get("tool_cost") or 0.0),
            force=raw.get("force"), recent_calls=list(raw.get("recent_calls") or []),
            notes=list(raw.get("notes") or []), checkpoints=list(raw.get("checkpoints") or []),
            pending=raw.get("pending"), head=int(raw.get("head", 0)), dropped=int(raw.get("dropped", 0)),
            answer=raw.get("answer"), stop_reason=raw.get("stop_reason"), extra=dict(raw.get("extra") or {}),
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
    trace: list[dict[str, Any]]
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


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class AgentHooks:
    """What a node injects into the kernel; every method may be sync or async.

    The defaults are the tool-call node's behaviour: run the tool's own ``run``, stop as
    soon as the model answers, offer every tool with ``auto`` choice, run calls one at a
    time, drop the oldest rounds when the context is too long, call the model with
    :func:`~nodes.llm.call_llm`.
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

    async def call_model(self, ctx: NodeContext, request: LLMRequest, loop: LoopState,
                         on_answer: Callable[[str], Any] | None, settings: LoopSettings) -> LLMResponse:
        """One model call (tests and the benchmark replace it with a fake model)."""
        return await call_llm(request, registry=registry_of(ctx), on_answer=on_answer, cancel=ctx.cancel,
                              node_id=ctx.node_id, idle_timeout=settings.idle_timeout,
                              max_retries=settings.max_retries, user_key=settings.user_key)


# ============================================================================ context fitting

_SIZES = "_sizes"


def _size_of(loop: LoopState, messages: list[dict[str, Any]]) -> int:
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
    before = _size_of(loop, messages)
    if before <= budget:
        return messages
    head = messages[:loop.head]
    rest = messages[loop.head:]
    if rest and rest[0].get("role") == "user" and str(rest[0].get("content", "")).startswith("[platform note:"):
        rest = rest[1:]  # the previous note is replaced below
    starts = [i for i, m in enumerate(rest) if m.get("role") == "assistant"]
    if not starts:
        raise LLMBadRequest(f"the opening messages alone need ~{before} tokens but the input budget is {budget}",
                            reason="context_length_exceeded")
    groups = [rest[s:e] for s, e in zip(starts, starts[1:] + [len(rest)])]
    prefix = rest[:starts[0]]
    dropped: list[dict[str, Any]] = []
    while len(groups) > 1:
        dropped += groups.pop(0)
        note = {"role": "user", "content": f"[platform note: {loop.dropped + len(dropped)} earlier message(s) of "
                                           "this task were removed to fit the context window; their tool results "
                                           "are kept in the node run]"}
        candidate = head + [note] + prefix + [m for g in groups for m in g]
        if _size_of(loop, candidate) <= budget:
            loop.dropped += len(dropped)
            loop.checkpoints.append({"round": loop.round, "tokens_before": before,
                                     "tokens_after": _size_of(loop, candidate), "dropped": dropped,
                                     "dropped_total": loop.dropped})
            loop.__dict__[_SIZES] = {}
            return candidate
    raise LLMBadRequest(f"the opening messages and the newest tool round need ~{before} tokens but the model's "
                        f"input budget is {budget}; lower max_result_chars or use a model with a larger context",
                        reason="context_length_exceeded")


# ============================================================================ the loop


def _signature(call: ToolCallContext) -> str:
    try:
        args = json.dumps(call.args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        args = call.arguments
    return f"{call.name}\x00{args}"


def _prepare_call(ctx: NodeContext, state: LoopState, raw_id: str, name: Any, arguments: Any, round_: int,
                  index: int, by_name: Mapping[str, ToolSpec], offered: set[str] | None,
                  truncated: bool) -> ToolCallContext:
    """Parse and check one requested call; errors are recorded on it, never raised."""
    text_args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    call = ToolCallContext(ctx, raw_id, name if isinstance(name, str) else safe_name(name), text_args, {},
                           round_, index, state)
    spec = by_name.get(call.name) if isinstance(name, str) else None
    if spec is None or (offered is not None and call.name not in offered):
        known = sorted(offered if offered is not None else by_name)
        why = "is not available in this step" if spec is not None else "does not exist"
        call.error = f"tool {safe_name(name)} {why}; available tools: {', '.join(known) or 'none'}"
        call.status = "unknown_tool"
        return call
    call.spec = spec
    if isinstance(arguments, dict):
        args: Any = arguments
    elif arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        args = {}
    else:
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as exc:
            cut = " (the reply hit max_tokens and the arguments were cut: send shorter arguments)" if truncated else ""
            call.error = f"arguments of {spec.name} are not valid JSON: {exc}{cut}"
            call.status = "invalid_arguments"
            return call
    if args is None:
        args = {}
    if not isinstance(args, dict):
        call.error = f"arguments of {spec.name} must be a JSON object, got {type(args).__name__}"
        call.status = "invalid_arguments"
        return call
    call.args = args
    problems = validate_args(spec.parameters, args)
    if problems:
        call.error = f"arguments of {spec.name} do not match its schema: " + "; ".join(problems[:10])
        call.status = "invalid_arguments"
    return call


async def _run_one(ctx: NodeContext, hooks: AgentHooks, call: ToolCallContext, settings: LoopSettings,
                   state: LoopState) -> tuple[ToolOutcome, dict[str, Any]]:
    """Run one call; every failure except cancel/limits/interrupts becomes an error outcome."""
    started = time.perf_counter()
    record: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments, "args": call.args,
                              "status": call.status, "started_at": time.time()}
    if call.error is not None:
        outcome = ToolOutcome(call.error, is_error=True)
    else:
        assert call.spec is not None
        timeout = call.spec.timeout if call.spec.timeout is not None else settings.tool_timeout
        try:
            if timeout is None:
                outcome = await hooks.run_tool(call, call.spec, state)
            else:
                async with asyncio.timeout(timeout):
                    outcome = await hooks.run_tool(call, call.spec, state)
            if not isinstance(outcome, ToolOutcome):
                outcome = ToolOutcome(str(outcome))
            record["status"] = "error" if outcome.is_error else "ok"
        except (InterruptRequested, RunCancelled, RunLimitExceeded):
            raise
        except TimeoutError:
            outcome = ToolOutcome(f"tool {call.name} timed out after {timeout:g}s", is_error=True)
            record["status"] = "timeout"
        except Exception as exc:  # noqa: BLE001 - a tool error is the model's input, never fatal by itself
            outcome = ToolOutcome(f"tool {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
            record["status"] = "exception"
    record["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
    return outcome, record


async def _run_calls(ctx: NodeContext, hooks: AgentHooks, calls: list[ToolCallContext], settings: LoopSettings,
                     state: LoopState, done: dict[int, tuple[ToolOutcome, dict[str, Any]]]) -> None:
    """Run every call not in ``done`` (by index) group by group; fills ``done``.

    Raises:
        InterruptRequested: a call paused; ``done`` holds the calls that finished, and
            ``state.pending`` names the one that paused.
    """
    todo = [c for c in calls if c.index not in done]
    if not todo:
        return
    groups = await _maybe_await(hooks.can_batch(todo, state))
    for group in groups:
        ctx.cancel.raise_if_cancelled(ctx.node_id)
        if len(group) == 1:
            call = group[0]
            try:
                done[call.index] = await _run_one(ctx, hooks, call, settings, state)
            except InterruptRequested:
                _set_pending(state, calls, done, call)
                raise
            continue
        results = await asyncio.gather(*(_run_one(ctx, hooks, c, settings, state) for c in group),
                                       return_exceptions=True)
        paused: ToolCallContext | None = None
        failure: BaseException | None = None
        for call, result in zip(group, results):
            if isinstance(result, InterruptRequested):
                paused = paused or call
                failure = failure or result
            elif isinstance(result, BaseException):
                raise result
            else:
                done[call.index] = result
        if paused is not None and failure is not None:
            _set_pending(state, calls, done, paused)
            raise failure
    for call in todo:  # a hook that left a call out of every group: the model still gets an answer for it
        if call.index not in done:
            done[call.index] = (ToolOutcome(f"tool {call.name} was not run (not scheduled by the loop's hooks)",
                                            is_error=True), {**call.to_dict(), "status": "not_scheduled"})


def _set_pending(state: LoopState, calls: list[ToolCallContext], done: dict[int, tuple[ToolOutcome, dict[str, Any]]],
                 paused: ToolCallContext) -> None:
    state.pending = {
        "round": paused.round, "call_id": paused.id, "tool": paused.name,
        "calls": [c.to_dict() for c in calls],
        "done": {str(i): {"outcome": o.to_dict(), "record": r} for i, (o, r) in done.items()},
    }


def _finish_round(ctx: NodeContext, state: LoopState, settings: LoopSettings, calls: list[ToolCallContext],
                  done: dict[int, tuple[ToolOutcome, dict[str, Any]]], entry: dict[str, Any]) -> bool:
    """Append the round's results in call order, record them, detect loops; True when a tool said stop."""
    blocks: list[str] = []
    stop = False
    records = entry.setdefault("tools", [])
    for call in calls:
        outcome, record = done[call.index]
        content = outcome.content if isinstance(outcome.content, str) else str(outcome.content)
        state.results[call.id] = content
        preview, note = truncate_result(content, settings.max_result_chars, call.id)
        block = fence_observation(call.id, call.name, preview, state.nonce, is_error=outcome.is_error, note=note)
        if state.mode == "native":
            state.messages.append({"role": "tool", "tool_call_id": call.id, "content": block})
        else:
            blocks.append(f"- call {safe_name(call.id)} ({safe_name(call.name)}):\n{block}")
        record.update(is_error=outcome.is_error, stop=outcome.stop, cost=outcome.cost, chars=len(content),
                      truncated=bool(note), preview=preview[:500])
        if outcome.data is not None:
            record["data"] = outcome.data
        records.append(record)
        state.tool_cost += outcome.cost
        state.counters["tool_calls"] += 1
        if outcome.is_error:
            state.counters["tool_errors"] += 1
        stop = stop or outcome.stop
        state.recent_calls.append(_signature(call))
    if blocks:
        state.messages.append({"role": "user", "content": observations_message(blocks)})
    limit = settings.repeat_limit
    if limit > 0:
        del state.recent_calls[:-limit]
        if len(state.recent_calls) == limit and len(set(state.recent_calls)) == 1:
            name = state.recent_calls[-1].split("\x00", 1)[0]
            note = {"round": state.round, "reason": "repeated_call", "tool": name,
                    "message": f"tool {name} was called {limit} times in a row with the same arguments; "
                               "the next round may only answer"}
            state.notes.append(note)
            entry["loop_detected"] = note["message"]
            state.force = "repeated_call"
            state.recent_calls.clear()
    entry["tool_cost"] = sum(r.get("cost", 0.0) for r in records)
    state.pending = None
    return stop


def _restore_calls(ctx: NodeContext, state: LoopState, by_name: Mapping[str, ToolSpec]) -> list[ToolCallContext]:
    calls = []
    for raw in (state.pending or {}).get("calls", []):
        call = ToolCallContext(ctx, raw["id"], raw["name"], raw.get("arguments", "{}"), raw.get("args") or {},
                               raw.get("round", state.round), raw["index"], state, by_name.get(raw["name"]),
                               raw.get("error"), raw.get("status", "ok"))
        if call.spec is None and call.error is None:
            call.error, call.status = f"tool {safe_name(call.name)} is no longer available", "unknown_tool"
        calls.append(call)
    return calls


def _setup_messages(messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec], state: LoopState,
                    settings: LoopSettings) -> None:
    """System prompt + contract (+ the JSON protocol); the opening messages become the head."""
    extra = fence_contract(state.nonce)
    if state.mode == "json":
        extra = protocol_prompt(tools, settings.max_rounds) + "\n\n" + extra
    out = [dict(m) for m in messages]
    if out and out[0].get("role") in ("system", "developer") and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{extra}" if out[0]["content"] else extra
    else:
        out.insert(0, {"role": "system", "content": extra})
    state.messages = out
    state.head = len(out)


def _answer_only(state: LoopState, settings: LoopSettings, control: RequestControl) -> str | None:
    if settings.on_max_rounds == "answer" and state.round >= settings.max_rounds - 1:
        return "max_rounds"
    if state.force is not None:
        return state.force
    if control.tool_choice == "none":
        return "hook"
    return None


_WHY = {"max_rounds": "the step limit is reached", "tool_only": "too many steps of tool calls without an answer",
        "repeated_call": "the same tool was called with the same arguments several times in a row",
        "hook": "the task is ready for its answer"}


async def run_agent_loop(
    ctx: NodeContext,
    *,
    settings: LoopSettings,
    messages: Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[ToolSpec],
    hooks: AgentHooks | None = None,
    state: LoopState | None = None,
    tool_result: ToolOutcome | str | None = None,
) -> LoopResult:
    """Run the loop (module docstring) from ``messages``, or continue ``state``.

    ``messages``: the opening messages (a system message first, if any; the fence contract
    - and for JSON-protocol models the protocol and tool list - is appended to it).
    ``state`` + ``tool_result``: continue a paused loop; ``tool_result`` answers the
    pending call. A state without a pending call just continues.

    Raises:
        AgentNotConverged: no real answer could be had (see module docstring).
        InterruptRequested: a tool paused the loop (state saved in ``node_run.data["agent_state"]``).
        RunCancelled: the run was cancelled.
        LLMError: the model call failed (after ``call_llm``'s retries).
    """
    hooks = hooks or AgentHooks()
    registry = registry_of(ctx)
    spec = registry.get(settings.model) if registry.has(settings.model) else None
    if spec is None:
        raise NodeFailed(f"model {settings.model!r} is not in the model registry (known: "
                         f"{', '.join(registry.names())})", node_id=ctx.node_id, reason="unknown_model")
    caps = spec.capabilities
    mode: Literal["native", "json"] = ("json" if settings.protocol == "json" or
                                       (settings.protocol == "auto" and not caps.tool_calling) else "native")
    by_name = {t.name: t for t in tools}
    if len(by_name) != len(tools):
        names = [t.name for t in tools]
        raise NodeFailed(f"duplicate tool names: {sorted({n for n in names if names.count(n) > 1})}",
                         node_id=ctx.node_id)
    if state is None:
        state = LoopState(messages=[], mode=mode)
        _setup_messages(messages or [], tools, state, settings)
    max_tokens = settings.max_tokens if settings.max_tokens is not None else spec.max_output_tokens
    max_tokens = min(max_tokens, spec.max_output_tokens)
    tool_tokens = estimate_tokens(json.dumps([t.openai_tool() for t in tools])) if (tools and state.mode == "native") else 0
    state.__dict__["budget"] = spec.max_context - max_tokens - tool_tokens
    data = ctx.node_run.data
    data["agent"] = {"mode": state.mode, "trace": state.trace, "tool_results": state.results, "notes": state.notes,
                     "checkpoints": state.checkpoints}
    on_answer = (lambda t: ctx.delta(t, "answer")) if settings.stream and state.mode == "native" else None
    openai_tools: dict[tuple[str, ...], list[dict[str, Any]]] = {}

    if state.pending is not None:
        pending = state.pending
        calls = _restore_calls(ctx, state, by_name)
        done: dict[int, tuple[ToolOutcome, dict[str, Any]]] = {}
        for key, item in (pending.get("done") or {}).items():
            done[int(key)] = (ToolOutcome.from_dict(item["outcome"]), dict(item["record"]))
        if tool_result is None:
            raise NodeFailed(f"the agent loop is paused on tool call {pending['call_id']!r}: resume it with its "
                             "result", node_id=ctx.node_id)
        outcome = tool_result if isinstance(tool_result, ToolOutcome) else ToolOutcome(str(tool_result))
        paused = next(c for c in calls if c.id == pending["call_id"])
        done[paused.index] = (outcome, {**paused.to_dict(), "status": "resumed", "elapsed_ms": 0.0})
        entry = next((e for e in reversed(state.trace) if e.get("round") == pending["round"]), None)
        if entry is None:
            entry = {"round": pending["round"]}
            state.trace.append(entry)
        entry.pop("paused_on", None)
        try:
            await _run_calls(ctx, hooks, calls, settings, state, done)
        except InterruptRequested:  # another call of the same round pauses: save the new pending call
            entry["paused_on"] = (state.pending or {}).get("call_id")
            data["agent_state"] = state.to_dict()
            raise
        if _finish_round(ctx, state, settings, calls, done, entry):
            return _result(ctx, state, "stop_tool", entry.get("response", {}).get("text", ""))

    while True:
        ctx.cancel.raise_if_cancelled(ctx.node_id)
        if state.round >= settings.max_rounds:
            raise AgentNotConverged(
                f"agent loop of node {ctx.node_id!r} reached max_rounds={settings.max_rounds} without a final answer",
                node_id=ctx.node_id, detail="max_rounds")
        control = await _maybe_await(hooks.request_control(state))
        offered_specs = list(tools) if control.tools is None else list(control.tools)
        forced = _answer_only(state, settings, control)
        round_index = state.round
        sent = await _maybe_await(hooks.compress(state.messages, state))
        if sent is not state.messages:
            state.messages = list(sent)
        request_messages = state.messages
        hint = control.hint
        tool_choice = control.tool_choice
        request_tools: list[dict[str, Any]] | None = None
        if state.mode == "native":
            if offered_specs:
                key = tuple(t.name for t in offered_specs)
                request_tools = openai_tools.get(key)
                if request_tools is None:
                    request_tools = openai_tools[key] = [t.openai_tool() for t in offered_specs]
            if forced is not None:
                why = _WHY.get(forced, forced)
                hint = FORCED_ANSWER_HINT.format(why=why) if forced != "max_rounds" else \
                    "This is the last step: tools are closed. Give your final answer now from what you already know."
                if caps.tool_choice and request_tools:
                    tool_choice = "none"
                else:
                    request_tools, tool_choice = None, None
            if tool_choice is not None and not caps.tool_choice:
                tool_choice = None
            if not request_tools:
                tool_choice = None
        else:
            if forced == "max_rounds":
                hint = LAST_ROUND_HINT
            elif forced is not None:
                hint = FORCED_ANSWER_HINT.format(why=_WHY.get(forced, forced))
            tool_choice = None
        if hint:
            request_messages = request_messages + [{"role": "user", "content": hint}]
        request = LLMRequest(settings.model, request_messages, tools=request_tools or None, tool_choice=tool_choice,
                             temperature=settings.temperature, max_tokens=max_tokens)
        entry: dict[str, Any] = {
            "round": round_index, "mode": state.mode,
            "request": {"messages": len(request_messages), "tokens_est": _size_of(state, state.messages),
                        "tools": [t.name for t in offered_specs] if (request_tools or state.mode == "json") else [],
                        "tool_choice": tool_choice, "forced": forced, "hint": hint},
        }
        started = time.perf_counter()
        response = await hooks.call_model(ctx, request, state, on_answer, settings)
        state.counters["model_calls"] += 1
        state.usage.append(response.usage)
        add_usage(ctx, response.usage)
        entry["usage"] = response.usage.model_dump()
        entry["cost"] = response.usage.cost
        entry["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
        text = response.text or ""
        entry["response"] = {"text": text, "finish_reason": response.finish_reason,
                             "reasoning_chars": len(response.reasoning or ""),
                             "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                            for c in response.tool_calls]}
        state.trace.append(entry)

        # ---- read the reply: requested calls, or an answer candidate
        raw_calls: list[tuple[str, Any, Any]]
        if state.mode == "native":
            raw_calls = [(c.id, c.name, c.arguments) for c in response.tool_calls]
            answer_text = text
        else:
            parsed = parse_reply(text, finish_reason=response.finish_reason,
                                 completion_tokens=response.usage.tokens_out, max_tokens=max_tokens)
            if parsed.repairs:
                entry["repairs"] = parsed.repairs
            if parsed.kind == "invalid":
                state.counters["parse_failures"] += 1
                state.counters["parse_retries"] += 1
                entry["parse_error"] = {"diagnosis": parsed.diagnosis, "error": parsed.error,
                                        "retry": state.counters["parse_retries"]}
                if state.counters["parse_retries"] > settings.max_parse_retries:
                    raise AgentNotConverged(
                        f"agent loop of node {ctx.node_id!r}: {state.counters['parse_retries']} consecutive replies "
                        f"could not be read as the JSON protocol ({parsed.diagnosis}: {parsed.error}); "
                        f"max_parse_retries={settings.max_parse_retries}",
                        node_id=ctx.node_id, detail="parse_failed")
                state.messages.append({"role": "assistant", "content": text[:4000]})
                state.messages.append({"role": "user", "content": parsed.hint})
                continue  # not a step: state.round unchanged
            state.counters["parse_retries"] = 0
            raw_calls = [(f"call_{round_index + 1}_{i + 1}", c.tool, c.params) for i, c in enumerate(parsed.calls)]
            answer_text = parsed.text
        state.round += 1

        if not raw_calls:
            if forced is not None and state.mode == "native" and looks_like_tool_markup(answer_text):
                raise AgentNotConverged(
                    f"agent loop of node {ctx.node_id!r}: the forced final answer ({forced}) is raw tool-call markup, "
                    "not an answer", node_id=ctx.node_id, detail="tool_markup_answer")
            if answer_text.strip():
                state.counters["tool_only"] = 0
            feedback = await _maybe_await(hooks.may_stop(state, response if state.mode == "native" else
                                                         _as_response(response, answer_text)))
            if feedback:
                state.force = None  # the feedback asks for more work: tools open again
                state.counters["stop_rejections"] += 1
                entry["stop_rejected"] = feedback
                state.messages.append({"role": "assistant", "content": answer_text if state.mode == "native"
                                       else text})
                state.messages.append({"role": "user", "content": feedback})
                continue
            return _result(ctx, state, "max_rounds" if forced == "max_rounds" else "answer", answer_text)

        if forced is not None:
            last = forced == "max_rounds"
            raise AgentNotConverged(
                f"agent loop of node {ctx.node_id!r} asked for tools on "
                + (f"its announced last round (max_rounds={settings.max_rounds})" if last
                   else f"a round where only an answer was allowed ({forced})")
                + "; no intermediate result is returned as the answer",
                node_id=ctx.node_id, detail="tool_call_on_last_round" if last else "tool_call_on_forced_round")
        state.force = None
        if answer_text.strip() and state.mode == "native":
            state.counters["tool_only"] = 0
        else:
            state.counters["tool_only"] += 1
        if settings.tool_only_cap > 0 and state.counters["tool_only"] > settings.tool_only_cap:
            state.force = "tool_only"
            state.notes.append({"round": round_index, "reason": "tool_only",
                                "message": f"{state.counters['tool_only']} consecutive rounds of tool calls without "
                                           "an answer; the next round may only answer"})
            state.counters["tool_only"] = 0

        offered = {t.name for t in offered_specs}
        truncated = response.finish_reason == "length"
        calls = [_prepare_call(ctx, state, cid, name, args, round_index, i, by_name, offered, truncated)
                 for i, (cid, name, args) in enumerate(raw_calls)]
        if state.mode == "native":
            state.messages.append({
                "role": "assistant", "content": text or None,
                "tool_calls": [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": _echo_arguments(c.arguments)}}
                               for c in calls],
            })
        else:
            state.messages.append({"role": "assistant", "content": json.dumps(parsed.value, ensure_ascii=False)})
        done = {}
        try:
            await _run_calls(ctx, hooks, calls, settings, state, done)
        except InterruptRequested:
            entry["paused_on"] = (state.pending or {}).get("call_id")
            data["agent_state"] = state.to_dict()
            raise
        if _finish_round(ctx, state, settings, calls, done, entry):
            return _result(ctx, state, "stop_tool", answer_text)
        if settings.on_max_rounds == "error" and state.round >= settings.max_rounds:
            raise AgentNotConverged(
                f"agent loop of node {ctx.node_id!r} reached max_rounds={settings.max_rounds} and still calls tools",
                node_id=ctx.node_id, detail="max_rounds")


def _as_response(response: LLMResponse, text: str) -> LLMResponse:
    return LLMResponse(text=text, reasoning=response.reasoning, tool_calls=[], finish_reason=response.finish_reason,
                       usage=response.usage, request=response.request, attempts=response.attempts)


def _result(ctx: NodeContext, state: LoopState, reason: str, answer: str) -> LoopResult:
    state.answer, state.stop_reason = answer, reason
    usage = sum_usage(state.usage)
    trail = state.messages[state.head:]
    agent = ctx.node_run.data.setdefault("agent", {})
    agent.update(stop_reason=reason, rounds=state.round, model_cost=usage.cost, tool_cost=state.tool_cost,
                 counters=dict(state.counters))
    ctx.node_run.data.pop("agent_state", None)
    return LoopResult(answer=answer, messages=state.messages, trail=trail, trace=state.trace, usage=usage,
                      cost=usage.cost + state.tool_cost, model_cost=usage.cost, tool_cost=state.tool_cost,
                      stop_reason=reason, rounds=state.round, state=state, results=state.results)


def _echo_arguments(arguments: str) -> str:
    """The arguments as echoed in the assistant message: valid JSON text, else ``{}`` (some
    providers refuse a history with broken arguments; the error result quotes them)."""
    if not arguments.strip():
        return "{}"
    try:
        json.loads(arguments)
    except ValueError:
        return "{}"
    return arguments
