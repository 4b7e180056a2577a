"""The multi-round tool loop kernel shared by the tool-call node and the planning agent.

Written once for both nodes, which differ only by the :class:`AgentHooks` they inject.
:func:`run_agent_loop` runs rounds until a stop:

1. **Fit the context** (``hooks.compress``): when the request would not fit the
   model's input budget the oldest tool rounds are dropped (the system prompt and the
   opening messages stay); what was dropped is kept as a checkpoint in
   ``LoopState.checkpoints`` (and the node run).
2. **Ask the model** (``hooks.request_control`` picks the tools offered and ``tool_choice``;
   ``hooks.call_model`` sends it, by default :func:`nodes.llm.call.call_llm`). A round may be
   *answer-only*: the last allowed round (``max_rounds``), after more than ``tool_only_cap``
   consecutive rounds of tool calls without answer text (answer text resets the count), after
   ``repeat_limit`` identical calls in a row (a loop; the reason is recorded in
   ``LoopState.notes``), or when the hook says ``tool_choice="none"``. Native models get
   ``tool_choice: "none"`` (or no tools when the model does not take ``tool_choice``) plus a
   one-round hint; JSON-protocol models get :data:`~nodes.agent.protocol.LAST_ROUND_HINT` /
   ``FORCED_ANSWER_HINT``. A tool call on an answer-only round, or raw tool-call markup as a
   forced final answer, ends the node with :class:`AgentNotConverged` (reason
   ``not_converged``) - never a tool observation or markup returned as the answer
   (fail-closed).
3. **Run the tools** the model asked for. ``hooks.can_batch`` groups the calls: calls in one
   group run concurrently, groups run one after another (the default - the tool-call node's -
   is one call per group: serial). Results are appended in the original call order. Every tool
   error - an exception, a timeout, arguments that are not JSON or do not match the tool's
   schema, an unknown or not-offered tool - becomes that call's result with ``is_error``
   (paired with its call id, the model's input for self-correction); only cancellation, run
   limits, interrupts and ``ToolSourceFailed`` (the tool's server went away) propagate. Empty arguments mean ``{}``. Results longer than
   ``max_result_chars`` are cut to a head preview plus a platform note; the full text stays in
   ``LoopState.results`` (node run: ``data.agent.tool_results``, :func:`get_tool_result`). Each
   observation/error is then fenced on its own (truncate first, then fence, so the fence sees
   the final text).
4. **Decide**: no tool requested -> ``hooks.may_stop`` may return feedback, which goes back as
   a user message and the loop continues (the planning agent's stop gate), else the loop ends
   with the answer. A tool returning ``ToolOutcome(stop=True)`` ends it after its round (the
   stop tool). A tool or hook calling ``ctx.interrupt`` pauses it (see *Pausing*). A fired
   cancel token raises ``RunCancelledError``.

**Models without free native function calls** (``capabilities.tools`` ``forced`` - they
call a tool only when ``tool_choice`` forces it, which a loop where the model chooses cannot
do - or ``none``; or ``LoopSettings.protocol="json"``) speak the JSON protocol of :mod:`nodes.agent.protocol` with
the same rounds: the reply is parsed by bracket balancing, a parse failure sends a hint quoting
the text around the error (or, for output cut by ``max_tokens``, asks for a shorter reply) and
is *not* a step: ``LoopState.counters["parse_retries"]`` counts consecutive failures apart from
rounds and more than ``max_parse_retries`` of them end the node with
:class:`AgentNotConverged`. The model's JSON is kept as an assistant message and the fenced
results go back as one user message (no ``tool`` role).

**Record**: ``LoopState.trace`` has one entry per model call - the request summary (messages,
estimated tokens, tools offered, tool_choice, why forced), the reply (text, finish reason, tool
calls with arguments; a call that retries after unreadable replies carries ``parse_retry``,
its number, since it shares its round's index), every tool run (arguments, status, preview, size, truncation, timing,
cost), usage and cost - and lives in ``ctx.node_run.data["agent"]`` while the loop runs, with
the full tool results, notes and checkpoints. Every model call is priced on its own and summed
(``sum_usage``; tiered prices make "sum tokens, price once" wrong); tool costs are added
separately: ``LoopResult.cost = model_cost + tool_cost``.

**Pausing and resuming**. A tool (or ``hooks.run_tool``) pauses the loop by calling
``ctx.interrupt(kind, payload)``. The kernel lets the other calls of the same group finish,
records ``LoopState.pending`` (the round, the pending call id, the round's calls and the
outcomes already known), saves ``LoopState.to_dict()`` in ``ctx.node_run.data["agent_state"]``
and re-raises, so the scheduler pauses the run. To continue the SAME message chain, restore the
state (:meth:`LoopState.from_dict`) and call
``run_agent_loop(..., state=restored, tool_result=answer)``: the answer becomes the pending
call's tool result, the round's remaining calls run, and the loop goes on.

Errors: :class:`AgentNotConverged` (``NodeFailed``, reason ``not_converged``, ``detail``
one of ``parse_failed``, ``tool_call_on_last_round``, ``tool_call_on_forced_round``,
``tool_markup_answer``, ``max_rounds``); LLM errors from :mod:`nodes.llm.call` propagate.

**Where things are.** The data types and hooks (:class:`AgentHooks`, :class:`LoopSettings`,
:class:`LoopState`, :class:`LoopResult`, :class:`ToolSpec`, :class:`ToolCallContext`,
:class:`ToolOutcome`, :class:`RequestControl`, :class:`AgentNotConverged`,
:func:`batch_parallel_safe`, :func:`get_tool_result`) and the default context fitting
:func:`fit_rounds` live in :mod:`nodes.agent.loop_types` and are re-exported here; checking,
running and recording a round's tool calls (step 3, and the pending call of a pause) live in
:mod:`nodes.agent.calls`. This module is the loop, one named step per function:
:func:`run_agent_loop` opens the loop (``_open_loop``), finishes a paused round
(``_resume_pending``), then runs ``_one_round`` until a round ends it: ``_check_can_start``
-> ``_prepare_request`` (control, fit, request) -> ``_call_model`` -> ``_read_reply`` ->
``_answer_or_feedback`` (no tool requested) or ``_count_tool_round`` -> ``_accept_calls`` ->
``_run_tools`` (run, append, decide).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from engine.context import InterruptRequested, NodeContext
from engine.errors import NodeFailed
from schemas.node_records import AgentRound, AgentToolRun, NodeData, agent_record

from ..llm.call import LLMError, LLMRequest, LLMResponse, estimate_tokens, sum_usage
from ..llm.chat import add_usage, registry_of, stream_idle_timeout
from .calls import echo_arguments, finish_round, prepare_call, restore_calls, run_calls
from .loop_types import (  # every public name of loop_types stays importable from here
    AgentHooks,
    AgentNotConverged,
    LoopResult,
    LoopSettings,
    LoopState,
    RequestControl,
    ToolCallContext,
    ToolOutcome,
    ToolSourceFailed,
    ToolSpec,
    batch_parallel_safe,
    fit_rounds,
    get_tool_result,
    maybe_await,
    messages_tokens,
)
from .protocol import (
    FORCED_ANSWER_HINT,
    LAST_ROUND_HINT,
    ProtocolReply,
    fence_contract,
    looks_like_tool_markup,
    parse_reply,
    protocol_prompt,
)

if TYPE_CHECKING:
    from ..llm.model_registry import Capabilities

__all__ = [
    "AgentHooks",
    "AgentNotConverged",
    "LoopResult",
    "LoopSettings",
    "LoopState",
    "RequestControl",
    "ToolCallContext",
    "ToolOutcome",
    "ToolSourceFailed",
    "ToolSpec",
    "batch_parallel_safe",
    "fit_rounds",
    "get_tool_result",
    "run_agent_loop",
]


# ============================================================================ setup


def _setup_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec], state: LoopState, settings: LoopSettings
) -> None:
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
    """Why the next round may only answer, a :data:`_WHY` key (None: tools are open): the last
    allowed round, a forced round (tool-only cap; repeated calls) or the hook."""
    if settings.on_max_rounds == "answer" and state.round >= settings.max_rounds - 1:
        return "max_rounds"
    if state.force is not None:
        return state.force
    if control.tool_choice == "none":
        return "hook"
    return None


_WHY = {
    "max_rounds": "the step limit is reached",
    "tool_only": "too many steps of tool calls without an answer",
    "repeated_call": "the same tool was called with the same arguments several times in a row",
    "hook": "the task is ready for its answer",
}


# ============================================================================ the loop


@dataclass(slots=True)
class _LoopDeps:
    """What one :func:`run_agent_loop` call fixes before its first round (never reassigned).

    ``by_name``: the tools by name. ``caps``: the model's capabilities. ``max_tokens``: the
    output cap of every request. ``on_answer``: the sink of answer deltas (native rounds with
    ``stream``) or None. ``data``: the node run's ``data`` (``agent``, ``agent_state``).
    ``openai_tools``: the ``tools`` entries sent, cached by the tuple of offered names.
    """

    ctx: NodeContext
    settings: LoopSettings
    hooks: AgentHooks
    tools: Sequence[ToolSpec]
    by_name: dict[str, ToolSpec]
    caps: Capabilities
    max_tokens: int
    on_answer: Callable[[str], Any] | None
    data: NodeData
    openai_tools: dict[tuple[str, ...], list[dict[str, Any]]]


@dataclass(slots=True)
class _Round:
    """One round in flight. ``index``: ``state.round`` when it started. ``forced``: why it is
    answer-only (a :data:`_WHY` key; None: tools are open). ``offered``: the tools the hook
    offered. ``entry``: its trace entry (``round``, ``mode``, ``request``, then ``usage``,
    ``cost``, ``elapsed_ms``, ``response``, ``tools``, ... - *Record* in the module docstring)."""

    index: int
    forced: str | None
    offered: list[ToolSpec]
    entry: AgentRound


@dataclass(slots=True)
class _Reply:
    """A reply as the loop reads it. ``text``: the raw reply text. ``answer``: the answer
    candidate (``text`` for native models, the protocol's answer for JSON ones). ``calls``:
    ``(call id, tool name, arguments)`` as the model sent them. ``value``: the parsed
    JSON-protocol object (None for native models)."""

    text: str
    answer: str
    calls: list[tuple[str, Any, Any]]
    value: Any = None


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
        RunCancelledError: the run was cancelled.
        LLMError: the model call failed (after ``call_llm``'s retries).
    """
    deps, state = _open_loop(ctx, settings, messages, tools, hooks or AgentHooks(), state)
    if state.pending is not None:
        result = await _resume_pending(deps, state, tool_result)
        if result is not None:
            return result
    while True:
        result = await _one_round(deps, state)
        if result is not None:
            return result


def _open_loop(
    ctx: NodeContext,
    settings: LoopSettings,
    messages: Sequence[Mapping[str, Any]] | None,
    tools: Sequence[ToolSpec],
    hooks: AgentHooks,
    state: LoopState | None,
) -> tuple[_LoopDeps, LoopState]:
    """Check the model and the tools, and set the loop up.

    Returns the loop's deps and its state: ``state`` when given (a resume), else a new
    :class:`LoopState` in the model's mode (``json`` when it has no native tool calling or
    ``protocol="json"``) holding ``messages`` plus the contract (:func:`_setup_messages`).
    Sets the input budget :func:`fit_rounds` works to (context - output cap - tool schemas)
    and publishes ``node_run.data["agent"]`` (trace, tool results, notes, checkpoints).

    Raises:
        NodeFailed: the model is not in the registry (``unknown_model``), or tool names repeat.
    """
    registry = registry_of(ctx)
    spec = registry.get(settings.model) if registry.has(settings.model) else None
    if spec is None:
        raise NodeFailed(
            f"model {settings.model!r} is not in the model registry (known: {', '.join(registry.names())})",
            node_id=ctx.node_id,
            reason="unknown_model",
        )
    caps = spec.capabilities
    settings = dataclasses.replace(settings, idle_timeout=_idle_timeout(ctx, spec, settings))
    # The model chooses its calls here: native tools only when it calls them on its own
    # (a model that calls only when forced would answer every round in text).
    mode: Literal["native", "json"] = (
        "json"
        if settings.protocol == "json" or (settings.protocol == "auto" and not caps.free_tool_calls)
        else "native"
    )
    by_name = {t.name: t for t in tools}
    if len(by_name) != len(tools):
        names = [t.name for t in tools]
        raise NodeFailed(
            f"duplicate tool names: {sorted({n for n in names if names.count(n) > 1})}", node_id=ctx.node_id
        )
    if state is None:
        state = LoopState(messages=[], mode=mode)
        _setup_messages(messages or [], tools, state, settings)
    max_tokens = settings.max_tokens if settings.max_tokens is not None else spec.max_output_tokens
    max_tokens = min(max_tokens, spec.max_output_tokens)
    tool_tokens = (
        estimate_tokens(json.dumps([t.openai_tool() for t in tools]))
        if (tools and state.mode == "native")
        else 0
    )
    state.__dict__["budget"] = spec.max_context - max_tokens - tool_tokens
    data = ctx.node_run.data
    data["agent"] = agent_record(state.mode, state.trace, state.results, state.notes, state.checkpoints)
    on_answer = (lambda t: ctx.delta(t, "answer")) if settings.stream and state.mode == "native" else None
    return _LoopDeps(ctx, settings, hooks, tools, by_name, caps, max_tokens, on_answer, data, {}), state


async def _resume_pending(
    deps: _LoopDeps, state: LoopState, tool_result: ToolOutcome | str | None
) -> LoopResult | None:
    """Finish the paused round, ``tool_result`` answering its pending call.

    ``state.pending`` is ``{"round", "call_id", "tool", "calls": [call dicts], "done":
    {"<index>": {"outcome", "record"}}}`` (see :mod:`nodes.agent.calls`). The round's calls not done
    yet run, all results are appended in call order and the round's trace entry loses its
    ``paused_on``. Returns the result when a tool said stop, else None.

    Raises:
        NodeFailed: no ``tool_result`` for the pending call.
        InterruptRequested: another call of the round pauses (the new pending call is saved).
    """
    ctx, pending = deps.ctx, state.pending
    if pending is None:
        raise NodeFailed("the agent loop has no paused tool call to resume", node_id=ctx.node_id)
    calls = restore_calls(ctx, state, deps.by_name)
    done: dict[int, tuple[ToolOutcome, AgentToolRun]] = {}
    for key, item in (pending.get("done") or {}).items():
        done[int(key)] = (ToolOutcome.from_dict(item["outcome"]), AgentToolRun(**item["record"]))
    if tool_result is None:
        raise NodeFailed(
            f"the agent loop is paused on tool call {pending['call_id']!r}: resume it with its result",
            node_id=ctx.node_id,
        )
    outcome = tool_result if isinstance(tool_result, ToolOutcome) else ToolOutcome(str(tool_result))
    paused = next(c for c in calls if c.id == pending["call_id"])
    done[paused.index] = (outcome, {**paused.to_dict(), "status": "resumed", "elapsed_ms": 0.0})
    entry: AgentRound | None = next(
        (e for e in reversed(state.trace) if e.get("round") == pending["round"]), None
    )
    if entry is None:
        entry = AgentRound(round=pending["round"])
        state.trace.append(entry)
    entry.pop("paused_on", None)
    if await _run_tools(deps, state, calls, done, entry):
        return _result(ctx, state, "stop_tool", entry.get("response", {}).get("text", ""))
    return None


async def _one_round(deps: _LoopDeps, state: LoopState) -> LoopResult | None:
    """One round, a checklist: may it start -> control and request -> call the model -> read the
    reply -> answer or stop feedback / run the tools -> decide to stop.

    Returns the loop's result when this round ends it, None when the loop goes on (also
    after an unreadable JSON-protocol reply, which is not a step).

    Raises:
        AgentNotConverged: see the module docstring (``on_max_rounds="error"`` here: the last
            allowed round still called tools).
    """
    _check_can_start(deps, state)
    rnd, request = await _prepare_request(deps, state)
    response = await _call_model(deps, state, request, rnd.entry)
    reply = _read_reply(deps, state, response, rnd)
    if reply is None:
        return None  # not a step: state.round unchanged
    state.round += 1
    if not reply.calls:
        return await _answer_or_feedback(deps, state, response, reply, rnd)
    _count_tool_round(deps, state, reply, rnd)
    calls = _accept_calls(deps, state, response, reply, rnd)
    if await _run_tools(deps, state, calls, {}, rnd.entry):
        return _result(deps.ctx, state, "stop_tool", reply.answer)
    ctx, settings = deps.ctx, deps.settings
    if settings.on_max_rounds == "error" and state.round >= settings.max_rounds:
        raise AgentNotConverged(
            f"agent loop of node {ctx.node_id!r} reached max_rounds={settings.max_rounds} and still calls tools",
            node_id=ctx.node_id,
            detail="max_rounds",
        )
    return None


def _idle_timeout(ctx: NodeContext, spec: Any, settings: LoopSettings) -> float:
    """The loop's stream idle timeout: ``settings.idle_timeout`` when the caller set one, else
    the node's / the model's (:func:`nodes.llm.chat.stream_idle_timeout`); never more than the
    node's ``timeout``."""
    if settings.idle_timeout is None:
        return stream_idle_timeout(ctx, spec)
    node_timeout = getattr(ctx.node, "timeout", None)
    return settings.idle_timeout if node_timeout is None else min(settings.idle_timeout, float(node_timeout))


def _check_can_start(deps: _LoopDeps, state: LoopState) -> None:
    """Before a round: a fired cancel token raises ``RunCancelledError``; ``max_rounds`` rounds done
    without an answer raise :class:`AgentNotConverged`."""
    ctx, settings = deps.ctx, deps.settings
    ctx.cancel.raise_if_cancelled(ctx.node_id)
    if state.round >= settings.max_rounds:
        raise AgentNotConverged(
            f"agent loop of node {ctx.node_id!r} reached max_rounds={settings.max_rounds} without a final answer",
            node_id=ctx.node_id,
            detail="max_rounds",
        )


async def _prepare_request(deps: _LoopDeps, state: LoopState) -> tuple[_Round, LLMRequest]:
    """Steps 1-2 up to the call: ``hooks.request_control`` says what to offer, :func:`_answer_only`
    whether the round may only answer, ``hooks.compress`` fits the context, and the request gets
    its tools, ``tool_choice`` and one-round hint (:func:`_native_offer`, :func:`_json_hint`).
    Returns the round (its entry holds the request summary
    ``{messages, tokens_est, tools, tool_choice, forced, hint}``) and the request."""
    settings = deps.settings
    control = await maybe_await(deps.hooks.request_control(state))
    offered = list(deps.tools) if control.tools is None else list(control.tools)
    forced = _answer_only(state, settings, control)
    round_index = state.round
    sent = await maybe_await(deps.hooks.compress(state.messages, state))
    if sent is not state.messages:
        state.messages = list(sent)
    if state.mode == "native":
        request_tools, tool_choice, hint = _native_offer(deps, control, offered, forced)
    else:
        request_tools, tool_choice, hint = None, None, _json_hint(control, forced)
    request_messages = state.messages
    if hint:
        request_messages = request_messages + [{"role": "user", "content": hint}]
    request = LLMRequest(
        settings.model,
        request_messages,
        tools=request_tools or None,
        tool_choice=tool_choice,
        temperature=settings.temperature,
        max_tokens=deps.max_tokens,
    )
    entry: AgentRound = {
        "round": round_index,
        "mode": state.mode,
        "request": {
            "messages": len(request_messages),
            "tokens_est": messages_tokens(state, state.messages),
            "tools": [t.name for t in offered] if (request_tools or state.mode == "json") else [],
            "tool_choice": tool_choice,
            "forced": forced,
            "hint": hint,
        },
    }
    if state.counters["parse_retries"]:  # a retry after unreadable replies: same round, numbered call
        entry["parse_retry"] = state.counters["parse_retries"]
    return _Round(round_index, forced, offered, entry), request


def _native_offer(
    deps: _LoopDeps, control: RequestControl, offered: list[ToolSpec], forced: str | None
) -> tuple[list[dict[str, Any]] | None, str | dict[str, Any] | None, str | None]:
    """``(tools entries, tool_choice, hint)`` of a native round. An answer-only round gets
    ``tool_choice: "none"`` (or no tools when the model does not take ``tool_choice``) and a
    one-round hint; ``tool_choice`` is dropped when the model does not take it or no tool is
    sent."""
    hint, tool_choice = control.hint, control.tool_choice
    request_tools: list[dict[str, Any]] | None = None
    if offered:
        key = tuple(t.name for t in offered)
        request_tools = deps.openai_tools.get(key)
        if request_tools is None:
            request_tools = deps.openai_tools[key] = [t.openai_tool() for t in offered]
    if forced is not None:
        why = _WHY.get(forced, forced)
        hint = (
            FORCED_ANSWER_HINT.format(why=why)
            if forced != "max_rounds"
            else "This is the last step: tools are closed. Give your final answer now from what you already know."
        )
        if deps.caps.tool_choice and request_tools:
            tool_choice = "none"
        else:
            request_tools, tool_choice = None, None
    if tool_choice is not None and not deps.caps.tool_choice:
        tool_choice = None
    if not request_tools:
        tool_choice = None
    return request_tools, tool_choice, hint


def _json_hint(control: RequestControl, forced: str | None) -> str | None:
    """The one-round hint of a JSON-protocol round: :data:`LAST_ROUND_HINT` on the last
    round, ``FORCED_ANSWER_HINT`` on another answer-only round, else the hook's hint."""
    if forced == "max_rounds":
        return LAST_ROUND_HINT
    if forced is not None:
        return FORCED_ANSWER_HINT.format(why=_WHY.get(forced, forced))
    return control.hint


async def _call_model(
    deps: _LoopDeps, state: LoopState, request: LLMRequest, entry: AgentRound
) -> LLMResponse:
    """Send ``request`` through ``hooks.call_model`` and record the call: usage priced per call
    (tiered prices make one price for summed tokens wrong), and in ``entry`` the reply
    ``{text, finish_reason, reasoning_chars, tool_calls}``, timing and cost; ``entry`` joins
    ``state.trace``, so the requested tool calls are on record, not only the answer."""
    started = time.perf_counter()
    try:
        response = await deps.hooks.call_model(deps.ctx, request, state, deps.on_answer, deps.settings)
    except LLMError as exc:
        if exc.usage is not None:  # tokens streamed before the failure were spent: the node run keeps them
            state.usage.append(exc.usage)
            add_usage(deps.ctx, exc.usage)
            entry["usage"], entry["cost"] = exc.usage.record(), exc.usage.cost
        entry["error"] = {"reason": exc.reason, "message": str(exc), "partial_text": exc.partial_text}
        state.trace.append(entry)
        raise
    state.counters["model_calls"] += 1
    state.usage.append(response.usage)
    add_usage(deps.ctx, response.usage)
    entry["usage"] = response.usage.record()
    entry["cost"] = response.usage.cost
    entry["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
    entry["response"] = {
        "text": response.text or "",
        "finish_reason": response.finish_reason,
        "reasoning_chars": len(response.reasoning or ""),
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
    }
    state.trace.append(entry)
    return response


def _read_reply(deps: _LoopDeps, state: LoopState, response: LLMResponse, rnd: _Round) -> _Reply | None:
    """The requested calls, or the answer candidate, of ``response``.

    Native: the provider's tool calls and text. JSON protocol (:mod:`nodes.agent.protocol`):
    the reply parsed by bracket balancing, its calls numbered ``call_<round>_<i>``; None when
    it cannot be read (:func:`_parse_failed`: a hint goes back, not a step).
    """
    text = response.text or ""
    if state.mode == "native":
        return _Reply(text, text, [(c.id, c.name, c.arguments) for c in response.tool_calls])
    parsed = parse_reply(
        text,
        finish_reason=response.finish_reason,
        completion_tokens=response.usage.tokens_out,
        max_tokens=deps.max_tokens,
    )
    if parsed.repairs:
        rnd.entry["repairs"] = parsed.repairs
    if parsed.kind == "invalid":
        _parse_failed(deps, state, text, parsed, rnd.entry)
        return None
    state.counters["parse_retries"] = 0
    calls = [(f"call_{rnd.index + 1}_{i + 1}", c.tool, c.params) for i, c in enumerate(parsed.calls)]
    return _Reply(text, parsed.text, calls, parsed.value)


def _parse_failed(
    deps: _LoopDeps, state: LoopState, text: str, parsed: ProtocolReply, entry: AgentRound
) -> None:
    """An unreadable JSON-protocol reply: counted apart from rounds, recorded as
    ``entry["parse_error"] = {diagnosis, error, retry}``, and the reply plus the parser's hint
    go back to the model.

    Raises:
        AgentNotConverged: (``parse_failed``) more than ``max_parse_retries`` in a row.
    """
    ctx, settings = deps.ctx, deps.settings
    state.counters["parse_failures"] += 1
    state.counters["parse_retries"] += 1
    entry["parse_error"] = {
        "diagnosis": parsed.diagnosis,
        "error": parsed.error,
        "retry": state.counters["parse_retries"],
    }
    if state.counters["parse_retries"] > settings.max_parse_retries:
        raise AgentNotConverged(
            f"agent loop of node {ctx.node_id!r}: {state.counters['parse_retries']} consecutive replies "
            f"could not be read as the JSON protocol ({parsed.diagnosis}: {parsed.error}); "
            f"max_parse_retries={settings.max_parse_retries}",
            node_id=ctx.node_id,
            detail="parse_failed",
        )
    state.messages.append({"role": "assistant", "content": text[:4000]})
    state.messages.append({"role": "user", "content": parsed.hint})


async def _answer_or_feedback(
    deps: _LoopDeps, state: LoopState, response: LLMResponse, reply: _Reply, rnd: _Round
) -> LoopResult | None:
    """Step 4 when no tool was requested: ``hooks.may_stop`` decides (the agent's stop gate).

    Feedback goes back as a user message and tools open again (returns None: the loop goes
    on); else the loop ends with ``reply.answer`` (stop reason ``answer``, or ``max_rounds``
    for the forced final answer of the last round).

    Raises:
        AgentNotConverged: (``tool_markup_answer``) a forced native answer is raw tool-call
            markup (fail-closed).
    """
    forced, ctx = rnd.forced, deps.ctx
    if forced is not None and state.mode == "native" and looks_like_tool_markup(reply.answer):
        raise AgentNotConverged(
            f"agent loop of node {ctx.node_id!r}: the forced final answer ({forced}) is raw tool-call markup, "
            "not an answer",
            node_id=ctx.node_id,
            detail="tool_markup_answer",
        )
    if reply.answer.strip():
        state.counters["tool_only"] = 0
    feedback = await maybe_await(
        deps.hooks.may_stop(
            state, response if state.mode == "native" else _as_response(response, reply.answer)
        )
    )
    if feedback:
        state.force = None  # the feedback asks for more work: tools open again
        state.counters["stop_rejections"] += 1
        rnd.entry["stop_rejected"] = feedback
        state.messages.append(
            {"role": "assistant", "content": reply.answer if state.mode == "native" else reply.text}
        )
        state.messages.append({"role": "user", "content": feedback})
        return None
    return _result(ctx, state, "max_rounds" if forced == "max_rounds" else "answer", reply.answer)


def _count_tool_round(deps: _LoopDeps, state: LoopState, reply: _Reply, rnd: _Round) -> None:
    """A round that asks for tools: refused when it was answer-only, else tools open and the
    tool-only streak counted; more than ``tool_only_cap`` such rounds in a row make the next
    round answer-only, with a note (answer text resets the count).

    Raises:
        AgentNotConverged: (``tool_call_on_last_round`` / ``tool_call_on_forced_round``) tools
            asked for on an answer-only round (fail-closed).
    """
    ctx, settings, forced = deps.ctx, deps.settings, rnd.forced
    if forced is not None:
        last = forced == "max_rounds"
        raise AgentNotConverged(
            f"agent loop of node {ctx.node_id!r} asked for tools on "
            + (
                f"its announced last round (max_rounds={settings.max_rounds})"
                if last
                else f"a round where only an answer was allowed ({forced})"
            )
            + "; no intermediate result is returned as the answer",
            node_id=ctx.node_id,
            detail="tool_call_on_last_round" if last else "tool_call_on_forced_round",
        )
    state.force = None
    if reply.answer.strip() and state.mode == "native":
        state.counters["tool_only"] = 0
    else:
        state.counters["tool_only"] += 1
    if settings.tool_only_cap > 0 and state.counters["tool_only"] > settings.tool_only_cap:
        state.force = "tool_only"
        state.notes.append(
            {
                "round": rnd.index,
                "reason": "tool_only",
                "message": f"{state.counters['tool_only']} consecutive rounds of tool calls without "
                "an answer; the next round may only answer",
            }
        )
        state.counters["tool_only"] = 0


def _accept_calls(
    deps: _LoopDeps, state: LoopState, response: LLMResponse, reply: _Reply, rnd: _Round
) -> list[ToolCallContext]:
    """Check every requested call (:func:`prepare_call`: unknown or not-offered tools and bad
    arguments become error calls, never exceptions) and keep the request in the history: an
    assistant message with ``tool_calls`` (native) or the model's JSON."""
    offered = {t.name for t in rnd.offered}
    truncated = response.finish_reason == "length"
    calls = [
        prepare_call(deps.ctx, state, cid, name, args, rnd.index, i, deps.by_name, offered, truncated)
        for i, (cid, name, args) in enumerate(reply.calls)
    ]
    if state.mode == "native":
        state.messages.append(
            {
                "role": "assistant",
                "content": reply.text or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": echo_arguments(c.arguments)},
                    }
                    for c in calls
                ],
            }
        )
    else:
        state.messages.append({"role": "assistant", "content": json.dumps(reply.value, ensure_ascii=False)})
    return calls


async def _run_tools(
    deps: _LoopDeps,
    state: LoopState,
    calls: list[ToolCallContext],
    done: dict[int, tuple[ToolOutcome, AgentToolRun]],
    entry: AgentRound,
) -> bool:
    """Step 3 and the stop signal: run the calls not in ``done`` (index ->
    ``(outcome, trace record)``) in ``hooks.can_batch`` groups (default serial), then append every
    result in call order, each truncated then fenced on its own. True when a tool returned
    ``stop``.

    Raises:
        InterruptRequested: a call paused the loop; ``entry["paused_on"]``
            names it and ``node_run.data["agent_state"]`` holds the saved state.
    """
    try:
        await run_calls(deps.ctx, deps.hooks, calls, deps.settings, state, done)
    except InterruptRequested:
        entry["paused_on"] = (state.pending or {}).get("call_id")
        deps.data["agent_state"] = state.to_dict()
        raise
    return finish_round(deps.ctx, state, deps.settings, calls, done, entry)


def _as_response(response: LLMResponse, text: str) -> LLMResponse:
    return LLMResponse(
        text=text,
        reasoning=response.reasoning,
        tool_calls=[],
        finish_reason=response.finish_reason,
        usage=response.usage,
        request=response.request,
        attempts=response.attempts,
    )


def _result(ctx: NodeContext, state: LoopState, reason: str, answer: str) -> LoopResult:
    state.answer, state.stop_reason = answer, reason
    usage = sum_usage(state.usage)
    trail = state.messages[state.head :]
    agent = ctx.node_run.data.setdefault("agent", {})
    agent.update(
        {
            "stop_reason": reason,
            "rounds": state.round,
            "model_cost": usage.cost,
            "tool_cost": state.tool_cost,
            "counters": dict(state.counters),
        }
    )
    ctx.node_run.data.pop("agent_state", None)
    return LoopResult(
        answer=answer,
        messages=state.messages,
        trail=trail,
        trace=state.trace,
        usage=usage,
        cost=usage.cost + state.tool_cost,
        model_cost=usage.cost,
        tool_cost=state.tool_cost,
        stop_reason=reason,
        rounds=state.round,
        state=state,
        results=state.results,
    )
