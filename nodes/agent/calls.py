"""A round's tool calls for the agent loop kernel (:mod:`nodes.agent.loop`): check, run, record.

Step 3 of the loop (see :mod:`nodes.agent.loop`) and its pause bookkeeping:

- :func:`prepare_call` parses and checks one requested call; an unknown or not-offered
  tool, arguments that are not JSON or do not match the tool's schema become the call's
  ``error`` (reported to the model, never raised). Empty arguments mean ``{}``.
- :func:`run_calls` runs the calls in the groups of ``hooks.can_batch`` (a group
  concurrently, groups in order; the default is one call per group, i.e. serial) with the
  per-call timeout; every tool error becomes an error outcome, only cancellation, run limits,
  interrupts and :class:`~nodes.agent.loop_types.ToolSourceFailed` (the tool's server is gone)
  propagate. A call that pauses (``ctx.interrupt``) leaves
  ``LoopState.pending``, which :func:`restore_calls` turns back into calls on resume.
- :func:`finish_round` appends the results in call order, each truncated then fenced on its
  own, records them in the round's trace entry, adds tool costs and detects repeated calls
  (a loop); it says whether a tool returned ``stop`` (the loop then ends after the round).
- :func:`echo_arguments` is the arguments text echoed in the assistant message.
- :func:`run_approved` runs a call a person confirmed after a pause, as :func:`run_calls`
  would have (timeout, failures as error results).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from engine.context import InterruptRequested, NodeContext
from engine.errors import RunCancelledError, RunLimitExceeded
from engine.telemetry import telemetry
from schemas.node_records import AgentNote, AgentRound, AgentToolRun

from .loop_types import (
    AgentHooks,
    LoopSettings,
    LoopState,
    ToolCallContext,
    ToolOutcome,
    ToolSourceFailed,
    ToolSpec,
    maybe_await,
)
from .protocol import fence_observation, observations_message, safe_name, truncate_result, validate_args

__all__ = [
    "echo_arguments",
    "run_approved",
    "finish_round",
    "prepare_call",
    "restore_calls",
    "run_calls",
]


def _signature(call: ToolCallContext) -> str:
    try:
        args = json.dumps(call.args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        args = call.arguments
    return f"{call.name}\x00{args}"


def prepare_call(
    ctx: NodeContext,
    state: LoopState,
    raw_id: str,
    name: Any,
    arguments: Any,
    round_: int,
    index: int,
    by_name: Mapping[str, ToolSpec],
    offered: set[str] | None,
    truncated: bool,
) -> ToolCallContext:
    """Parse and check one requested call; errors are recorded on it, never raised."""
    text_args = (
        arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    )
    call = ToolCallContext(
        ctx, raw_id, name if isinstance(name, str) else safe_name(name), text_args, {}, round_, index, state
    )
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
            cut = (
                " (the reply hit max_tokens and the arguments were cut: send shorter arguments)"
                if truncated
                else ""
            )
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


async def _run_one(
    ctx: NodeContext, hooks: AgentHooks, call: ToolCallContext, settings: LoopSettings, state: LoopState
) -> tuple[ToolOutcome, AgentToolRun]:
    """Run one call; every failure except cancel/limits/interrupts becomes an error outcome."""
    started = time.perf_counter()
    record: AgentToolRun = {
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "args": call.args,
        "status": call.status,
        "started_at": time.time(),
    }
    if call.error is not None:
        outcome = ToolOutcome(call.error, is_error=True)
    else:
        # the call's span (GenAI execute_tool): an HTTP tool's or MCP server's request nests under it
        with telemetry().span(
            f"execute_tool {call.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "openinference.span.kind": "TOOL",
            },
        ) as span:
            outcome = await _run_hook(hooks, call, settings, state, record)
            span.set({"flowloom.tool.status": record["status"]})
            if record["status"] != "ok":
                span.fail(f"tool_{record['status']}")
    record["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
    return outcome, record


async def _run_hook(
    hooks: AgentHooks, call: ToolCallContext, settings: LoopSettings, state: LoopState, record: AgentToolRun
) -> ToolOutcome:
    """``hooks.run_tool`` within the tool's timeout; ``record["status"]`` says how it went."""
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
    except (InterruptRequested, RunCancelledError, RunLimitExceeded, ToolSourceFailed):
        raise
    except TimeoutError:
        outcome = ToolOutcome(f"tool {call.name} timed out after {timeout:g}s", is_error=True)
        record["status"] = "timeout"
    except Exception as exc:
        outcome = ToolOutcome(f"tool {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        record["status"] = "exception"
    return outcome


async def run_calls(
    ctx: NodeContext,
    hooks: AgentHooks,
    calls: list[ToolCallContext],
    settings: LoopSettings,
    state: LoopState,
    done: dict[int, tuple[ToolOutcome, AgentToolRun]],
) -> None:
    """Run every call not in ``done`` (by index) group by group; fills ``done``.

    Raises:
        InterruptRequested: a call paused; ``done`` holds the calls that finished, and
            ``state.pending`` names the one that paused.
    """
    todo = [c for c in calls if c.index not in done]
    if not todo:
        return
    groups = await maybe_await(hooks.can_batch(todo, state))
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
        results = await asyncio.gather(
            *(_run_one(ctx, hooks, c, settings, state) for c in group), return_exceptions=True
        )
        paused: ToolCallContext | None = None
        failure: BaseException | None = None
        for call, result in zip(group, results, strict=True):
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
            done[call.index] = (
                ToolOutcome(
                    f"tool {call.name} was not run (not scheduled by the loop's hooks)", is_error=True
                ),
                {**call.to_dict(), "status": "not_scheduled"},
            )


def _set_pending(
    state: LoopState,
    calls: list[ToolCallContext],
    done: dict[int, tuple[ToolOutcome, AgentToolRun]],
    paused: ToolCallContext,
) -> None:
    state.pending = {
        "round": paused.round,
        "call_id": paused.id,
        "tool": paused.name,
        "calls": [c.to_dict() for c in calls],
        "done": {str(i): {"outcome": o.to_dict(), "record": r} for i, (o, r) in done.items()},
    }


def finish_round(
    ctx: NodeContext,
    state: LoopState,
    settings: LoopSettings,
    calls: list[ToolCallContext],
    done: dict[int, tuple[ToolOutcome, AgentToolRun]],
    entry: AgentRound,
) -> bool:
    """Append the round's results in call order, record them, detect loops; True when a tool said stop."""
    blocks: list[str] = []
    stop = False
    records = entry.setdefault("tools", [])
    for call in calls:
        outcome, record = done[call.index]
        content = outcome.content if isinstance(outcome.content, str) else str(outcome.content)
        state.results[call.id] = content
        preview, note = truncate_result(content, settings.max_result_chars, call.id)
        block = fence_observation(
            call.id, call.name, preview, state.nonce, is_error=outcome.is_error, note=note
        )
        if state.mode == "native":
            state.messages.append({"role": "tool", "tool_call_id": call.id, "content": block})
        else:
            blocks.append(f"- call {safe_name(call.id)} ({safe_name(call.name)}):\n{block}")
        record.update(
            {
                "is_error": outcome.is_error,
                "stop": outcome.stop,
                "cost": outcome.cost,
                "chars": len(content),
                "truncated": bool(note),
                "preview": preview[:500],
            }
        )
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
            repeated: AgentNote = {
                "round": state.round,
                "reason": "repeated_call",
                "tool": name,
                "message": f"tool {name} was called {limit} times in a row with the same arguments; "
                "the next round may only answer",
            }
            state.notes.append(repeated)
            entry["loop_detected"] = repeated["message"]
            state.force = "repeated_call"
            state.recent_calls.clear()
    entry["tool_cost"] = sum(r.get("cost", 0.0) for r in records)
    state.pending = None
    return stop


def restore_calls(
    ctx: NodeContext, state: LoopState, by_name: Mapping[str, ToolSpec]
) -> list[ToolCallContext]:
    """The paused round's calls (``state.pending["calls"]``) as call contexts again; a tool
    no longer offered makes its call an ``unknown_tool`` error call."""
    calls = []
    for raw in (state.pending or {}).get("calls", []):
        call = ToolCallContext(
            ctx,
            raw["id"],
            raw["name"],
            raw.get("arguments", "{}"),
            raw.get("args") or {},
            raw.get("round", state.round),
            raw["index"],
            state,
            by_name.get(raw["name"]),
            raw.get("error"),
            raw.get("status", "ok"),
        )
        if call.spec is None and call.error is None:
            call.error, call.status = f"tool {safe_name(call.name)} is no longer available", "unknown_tool"
        calls.append(call)
    return calls


async def run_approved(call: ToolCallContext, spec: ToolSpec, settings: LoopSettings) -> ToolOutcome:
    """Run a confirmed call: the tool's (else the loop's) timeout; an exception or a timeout
    is the call's error result (the model's input, as in :func:`run_calls`); only
    interrupts, cancellation and run limits propagate."""
    timeout = spec.timeout if spec.timeout is not None else settings.tool_timeout
    try:
        if timeout is None:
            outcome = await spec.run(call.args, call)
        else:
            async with asyncio.timeout(timeout):
                outcome = await spec.run(call.args, call)
    except (InterruptRequested, RunCancelledError, RunLimitExceeded, ToolSourceFailed):
        raise
    except TimeoutError:
        return ToolOutcome(f"tool {call.name} timed out after {timeout:g}s", is_error=True)
    except Exception as exc:
        return ToolOutcome(f"tool {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
    return outcome if isinstance(outcome, ToolOutcome) else ToolOutcome(str(outcome))


def echo_arguments(arguments: str) -> str:
    """The arguments as echoed in the assistant message: valid JSON text, else ``{}`` (some
    providers refuse a history with broken arguments; the error result quotes them)."""
    if not arguments.strip():
        return "{}"
    try:
        json.loads(arguments)
    except ValueError:
        return "{}"
    return arguments
