"""The LLM call: the one function every LLM node (and the agent loop) calls a model with.

:func:`call_llm` sends one chat-completions request through the ``openai`` SDK and
streams the reply:

1. **Resolve** the model in the registry and refuse what it cannot do (tools without
   native tool calling, ``tool_choice``, ``json_schema`` output, images) with
   :class:`LLMBadRequest` - the caller picks the fallback (prompt-mode tools, ...).
2. **Build** the body. ``temperature`` and ``max_tokens`` are ALWAYS sent: an unset
   value silently falls to whatever the provider or model row says;
   ``None`` in :class:`LLMRequest` means the model's ``default_temperature`` /
   ``max_output_tokens`` (a larger ``max_tokens`` is clamped to the latter).
3. **Stream** (``stream=True``, ``include_usage`` unless the model's ``stream_usage``
   capability is off): answer deltas go to
   ``on_answer``, ``reasoning_content`` deltas (DeepSeek, Qwen) to ``on_reasoning``;
   tool-call fragments are joined by ``index`` across chunks (parallel calls may
   interleave). Some providers send each complete call in one chunk and reuse index 0
   for every call: a chunk carrying a *new* ``id`` at an index already in use starts a
   new call; a chunk without an id (or repeating the open call's id) continues the call
   open at that index (a chunk without an index continues the last call). Calls are
   returned in the order they started. A stream that ends without a ``finish_reason``
   was cut: it is an error, never a short answer.
4. **Idle timeout**: at most ``idle_timeout`` seconds between two chunks (and before
   the first) - not a total: a slow model that keeps streaming never times out, a
   stalled one fails with :class:`LLMStalled` instead of hanging. ``None`` means the
   registry's value for the model (:meth:`~nodes.llm.model_registry.ModelRegistry.stream_idle_timeout`:
   the model's, else its provider's, else 60 s); nodes pass their own bounded value
   (:func:`nodes.llm.chat.stream_idle_timeout`).
5. **Retries**: 429, 5xx, malformed frames and connection errors are retried with
   exponential backoff (full jitter; ``Retry-After`` honoured) ONLY while nothing was
   streamed. Once a token reached a callback, a failure is raised - a silent retry
   would stream the answer twice. Stalls are not retried (the node's own retry policy
   decides). The SDK's retries are off (``max_retries=0`` on the client).
6. **Cancellation**: the :class:`~engine.context.CancelToken` (or cancelling the task)
   closes the HTTP stream at once; a fired token raises ``RunCancelledError``.
7. **Usage**: the provider's usage, else an estimate (:func:`estimate_tokens`,
   ``token_source="estimated"``; completion tokens clamped to ``max_tokens``, exactly the
   cap when the reply ended with ``length``: :func:`clamp_estimate`). Cost is priced for this call alone with the model's
   tiered table (0 with ``user_key``); sum calls with :func:`sum_usage`.

Errors are :class:`LLMError` s (``NodeFailed``): each names the node and the model,
has a stable ``reason``, and never contains the API key. openai exceptions are
translated in one table, :data:`OPENAI_ERRORS` (both in :mod:`nodes.llm.errors`). Token
estimates and fitting messages into the context are :mod:`nodes.llm.prompts`; this module
re-exports them, so callers import every name of a model call from here.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from engine.context import CancelToken
from engine.errors import RunCancelledError
from engine.telemetry import Span, telemetry
from schemas.run import Usage

from .errors import (
    OPENAI_ERRORS,
    LLMAuthError,
    LLMBadRequest,
    LLMConnectionError,
    LLMError,
    LLMProviderError,
    LLMRateLimited,
    LLMStalled,
    translate_error,
)
from .errors import call_subject as _subject
from .model_registry import MissingAPIKey, ModelRegistry, ModelSpec, UnknownModel, price
from .prompts import estimate_tokens, fit_messages

__all__ = [
    "LLMAuthError",
    "LLMBadRequest",
    "LLMConnectionError",
    "LLMError",
    "LLMProviderError",
    "LLMRateLimited",
    "LLMRequest",
    "LLMResponse",
    "LLMStalled",
    "OPENAI_ERRORS",
    "ToolCall",
    "build_request_body",
    "call_llm",
    "clamp_estimate",
    "estimate_tokens",
    "estimate_usage",
    "fit_messages",
    "sum_usage",
    "translate_error",
]

DeltaCallback = Callable[[str], Awaitable[None] | None]

#: Longest wait a ``Retry-After`` header may impose (seconds).
MAX_RETRY_AFTER = 30.0

# ============================================================================ request / response


@dataclass
class LLMRequest:
    """One chat-completions request. ``model`` is a registry name; ``None`` temperature /
    max_tokens mean the model's defaults (both are always sent)."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = None


@dataclass
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text ("{}" when empty)."""

    id: str
    name: str
    arguments: str


@dataclass
class LLMResponse:
    """The joined reply. ``request`` is the body that was sent (no key, no headers);
    ``attempts`` counts the HTTP requests made (retries + 1)."""

    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: Usage
    request: dict[str, Any]
    attempts: int = 1


def _has_image(messages: Sequence[Mapping[str, Any]]) -> bool:
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") == "image_url" for p in content
        ):
            return True
    return False


def build_request_body(spec: ModelSpec, request: LLMRequest, *, node_id: str | None = None) -> dict[str, Any]:
    """The JSON body sent for ``request`` (steps 1-2 of the module docstring).

    Raises:
        LLMBadRequest: the model lacks a capability the request needs, or a value is out of range.
    """
    subject = _subject(node_id, spec.name)
    caps = spec.capabilities

    def refuse(why: str, reason: str = "unsupported_capability") -> LLMBadRequest:
        return LLMBadRequest(f"{subject}: {why}", node_id=node_id, reason=reason, model=spec.name)

    if request.tools and not caps.tool_calling:
        raise refuse(
            'the model has no native tool calling (capabilities.tools = "none"); use prompt-mode tools'
        )
    if request.tool_choice is not None and not caps.tool_choice:
        raise refuse("the model does not accept tool_choice")
    if (request.response_format or {}).get("type") == "json_schema" and not caps.structured_output:
        raise refuse("the model has no structured output (json_schema); ask for JSON in the prompt")
    if not caps.vision and _has_image(request.messages):
        raise refuse("the model cannot read images")
    if not request.messages:
        raise refuse("no messages to send", "bad_request")
    temperature = spec.default_temperature if request.temperature is None else request.temperature
    if not 0 <= temperature <= 2:
        raise refuse(f"temperature must be between 0 and 2, got {temperature}", "bad_request")
    max_tokens = spec.max_output_tokens
    if request.max_tokens is not None:
        max_tokens = min(request.max_tokens, spec.max_output_tokens)
    if max_tokens <= 0:
        raise refuse(f"max_tokens must be positive, got {request.max_tokens}", "bad_request")
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": list(request.messages),
        "temperature": temperature,
        "max_tokens": max_tokens,
        "stream": True,
    }
    if caps.stream_usage:  # a server that rejects the option is estimated instead
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = list(request.tools)
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if request.response_format is not None:
        body["response_format"] = request.response_format
    return body


# ============================================================================ streaming


class _Stalled(Exception):
    pass


class _Malformed(Exception):
    pass


class _Incomplete(Exception):
    pass


@dataclass
class _CallSlot:
    """One streamed tool call being joined: the stream ``index`` it arrived at, its id,
    name and argument fragments."""

    index: int
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)


@dataclass
class _Reply:
    """What one attempt accumulated. ``calls`` in the order they started; ``open_at`` maps
    a stream index to the call currently open there."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[_CallSlot] = field(default_factory=list)
    open_at: dict[int, _CallSlot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    streamed: bool = False
    chunks: int = 0


def _add_tool_delta(reply: _Reply, delta: Any) -> None:
    """Join one tool-call delta (step 3 of the module docstring).

    A new ``id`` at an index already in use starts a new call: providers that send each
    complete call in one chunk reuse index 0 for all of them, and gluing them would
    concatenate their arguments and lose every call but the first. A delta without an
    id continues the call open at its index; a delta without an index continues the
    last call (servers that omit it for a single call).
    """
    index = delta.index
    if index is None:
        index = reply.calls[-1].index if reply.calls else 0
    slot = reply.open_at.get(index)
    if slot is None or (delta.id and slot.id and delta.id != slot.id):
        slot = _CallSlot(index)
        reply.calls.append(slot)
        reply.open_at[index] = slot
    if delta.id and not slot.id:
        slot.id = delta.id
    fn = delta.function
    if fn is not None:
        if fn.name and not slot.name:  # some servers repeat the full name on every delta
            slot.name = fn.name
        if fn.arguments:
            slot.fragments.append(fn.arguments)


class _IdleWatchdog:
    """Cancels the task when no chunk arrived for ``idle`` seconds.

    A chunk only stores ``loop.time()`` in :attr:`last`; the one timer re-arms itself
    for the remaining time when it fires early. (``asyncio.timeout().reschedule`` per
    chunk would cancel and push a new timer handle for every chunk.)
    """

    __slots__ = ("loop", "task", "idle", "last", "handle", "expired")

    def __init__(self, idle: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.idle = idle
        self.last = self.loop.time()
        self.expired = False
        self.handle: asyncio.TimerHandle | None = self.loop.call_at(self.last + idle, self._check)

    def _check(self) -> None:
        due = self.last + self.idle
        if self.loop.time() < due:
            self.handle = self.loop.call_at(due, self._check)
            return
        self.handle = None
        self.expired = True
        if self.task is not None:
            self.task.cancel()

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


async def _attempt(
    client: openai.AsyncOpenAI,
    body: dict[str, Any],
    reply: _Reply,
    idle_timeout: float,
    on_answer: DeltaCallback | None,
    on_reasoning: DeltaCallback | None,
) -> None:
    """One HTTP request, streamed into ``reply``. Raises openai errors, _Stalled, _Malformed, _Incomplete."""
    watchdog = _IdleWatchdog(idle_timeout)
    loop_time = watchdog.loop.time
    try:
        stream = await client.chat.completions.create(**body)
        try:
            next_chunk = stream.__anext__
            while True:
                watchdog.last = loop_time()
                try:
                    chunk = await next_chunk()
                except StopAsyncIteration:
                    break
                except json.JSONDecodeError as exc:
                    raise _Malformed(f"a stream frame is not valid JSON: {exc}") from None
                reply.chunks += 1
                if chunk.usage is not None:
                    reply.usage = chunk.usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None:
                    content = delta.content
                    if content:
                        reply.streamed = True
                        reply.text.append(content)
                        if on_answer is not None:
                            result = on_answer(content)
                            if result is not None and inspect.isawaitable(result):
                                await result
                    extra = delta.model_extra  # reasoning_content is not an SDK field: it lands here
                    thought = extra.get("reasoning_content") if extra else None
                    if thought:
                        reply.streamed = True
                        reply.reasoning.append(thought)
                        if on_reasoning is not None:
                            result = on_reasoning(thought)
                            if result is not None and inspect.isawaitable(result):
                                await result
                    if delta.tool_calls:
                        reply.streamed = True
                        for tool_delta in delta.tool_calls:
                            _add_tool_delta(reply, tool_delta)
                if choice.finish_reason:
                    reply.finish_reason = choice.finish_reason
        finally:
            watchdog.stop()
            await stream.close()
    except asyncio.CancelledError:
        task = watchdog.task
        if watchdog.expired and task is not None and task.uncancel() == 0:
            raise _Stalled from None
        raise
    finally:
        watchdog.stop()
    if reply.finish_reason is None:
        raise _Incomplete


class _CancelWatch:
    """Cancels the calling task when the token fires while the call is running."""

    __slots__ = ("task", "fired", "active", "unsubscribe")

    def __init__(self, token: CancelToken | None) -> None:
        self.task = asyncio.current_task()
        self.fired = False
        self.active = True
        self.unsubscribe = token.on_cancel(self._fire) if token is not None else (lambda: None)

    def close(self) -> None:
        """Stop watching: the call is over (and leave no callback on a long run's token)."""
        self.active = False
        self.unsubscribe()

    def _fire(self, reason: str) -> None:
        if self.active and not self.fired and self.task is not None:
            self.fired = True
            self.task.cancel()


def _retry_delay(error: BaseException, attempt: int, base: float) -> float:
    response = getattr(error, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if header is not None:
        try:
            return min(max(float(header), 0.0), MAX_RETRY_AFTER)
        except ValueError:
            pass
    return base * (2 ** (attempt - 1)) * (0.5 + random.random() / 2)


def _translate_attempt_error(
    exc: BaseException,
    reply: _Reply,
    *,
    spec: ModelSpec,
    node_id: str | None,
    secret: str | None,
    idle_timeout: float,
) -> LLMError | None:
    subject = _subject(node_id, spec.name)
    if isinstance(exc, _Stalled):
        where = f"after {reply.chunks} chunk(s)" if reply.chunks else "before the first chunk"
        return LLMStalled(
            f"{subject} stalled: no data for {idle_timeout:g}s {where}", node_id=node_id, model=spec.name
        )
    if isinstance(exc, _Malformed):
        return LLMProviderError(
            f"{subject} failed: the provider sent a malformed stream ({exc})",
            node_id=node_id,
            reason="malformed_response",
            model=spec.name,
        )
    if isinstance(exc, _Incomplete):
        return LLMConnectionError(
            f"{subject} failed: the stream ended after {reply.chunks} chunk(s) without a "
            "finish_reason (connection dropped?)",
            node_id=node_id,
            reason="incomplete_stream",
            model=spec.name,
        )
    error = translate_error(exc, model=spec.name, node_id=node_id, secret=secret)
    if reply.streamed and isinstance(error, LLMConnectionError):
        error = LLMConnectionError(
            f"{subject} failed: the connection dropped mid-stream after {reply.chunks} "
            f"chunk(s) ({type(exc).__name__})",
            node_id=node_id,
            reason="stream_interrupted",
            model=spec.name,
        )
    return error


# ============================================================================ the call


async def call_llm(
    request: LLMRequest,
    *,
    registry: ModelRegistry,
    on_answer: DeltaCallback | None = None,
    on_reasoning: DeltaCallback | None = None,
    cancel: CancelToken | None = None,
    user_key: bool = False,
    idle_timeout: float | None = None,
    max_retries: int = 3,
    retry_base_delay: float = 0.5,
    node_id: str | None = None,
) -> LLMResponse:
    """Call a model once (with retries before the first token); see the module docstring.

    ``on_answer`` / ``on_reasoning`` get each delta (sync or async callables).
    ``user_key``: the user brings their own key, the call costs 0. ``idle_timeout``:
    seconds allowed between two chunks; None: the registry's value for the model.

    Raises:
        LLMError: a subclass naming the node and model (never the key).
        RunCancelledError: ``cancel`` fired during the call.
    """
    # the call's span (GenAI conventions), current while it runs: the SDK's HTTP request nests under it
    with telemetry().model_span("chat", request.model, node_id) as span:
        try:
            return await _call_llm(
                request,
                registry,
                on_answer,
                on_reasoning,
                cancel,
                user_key,
                idle_timeout,
                max_retries,
                retry_base_delay,
                node_id,
                span,
            )
        except LLMError as exc:
            span.fail(exc.reason or "error")
            raise


async def _call_llm(
    request: LLMRequest,
    registry: ModelRegistry,
    on_answer: DeltaCallback | None,
    on_reasoning: DeltaCallback | None,
    cancel: CancelToken | None,
    user_key: bool,
    idle_timeout: float | None,
    max_retries: int,
    retry_base_delay: float,
    node_id: str | None,
    span: Span,
) -> LLMResponse:
    """:func:`call_llm` within its span ``span`` (same arguments, same errors)."""
    try:
        spec = registry.get(request.model)
    except UnknownModel as exc:
        raise LLMBadRequest(
            f"{_subject(node_id, request.model)}: {exc}",
            node_id=node_id,
            reason="unknown_model",
            model=request.model,
        ) from None
    body = build_request_body(spec, request, node_id=node_id)
    if idle_timeout is None:
        idle_timeout = registry.stream_idle_timeout(spec)
    if cancel is not None:
        cancel.raise_if_cancelled(node_id)
    try:
        secret = registry.api_key(spec)
        client = registry.client_for(spec)
    except MissingAPIKey as exc:
        raise LLMAuthError(
            f"{_subject(node_id, spec.name)}: {exc}",
            node_id=node_id,
            reason="missing_api_key",
            model=spec.name,
        ) from None
    started = time.perf_counter()
    watch = _CancelWatch(cancel)
    attempt = 0
    try:
        while True:
            attempt += 1
            reply = _Reply()
            try:
                await _attempt(client, body, reply, idle_timeout, on_answer, on_reasoning)
                break
            except (openai.OpenAIError, _Stalled, _Malformed, _Incomplete) as exc:
                error = _translate_attempt_error(
                    exc, reply, spec=spec, node_id=node_id, secret=secret, idle_timeout=idle_timeout
                )
                assert error is not None
                if error.retryable and not reply.streamed and attempt <= max_retries:
                    span.event(
                        "flowloom.retry", {"flowloom.error.reason": error.reason, "flowloom.attempt": attempt}
                    )
                    await asyncio.sleep(_retry_delay(exc, attempt, retry_base_delay))
                    continue
                error.attempts = attempt
                # Connection problems name the URL: with local endpoints the usual cause is
                # a server that is not running, or a base URL missing its /v1.
                tried = (
                    f" (URL tried: {registry.base_url(spec)})"
                    if isinstance(error, LLMConnectionError)
                    else ""
                )
                retries = f" [after {attempt} attempts: {attempt - 1} retries]" if attempt > 1 else ""
                error.args = (f"{error.args[0]}{tried}{retries}",)
                if reply.streamed:
                    error.usage = _usage(spec, body, reply, started, user_key)
                    error.partial_text = "".join(reply.text)
                    error.partial_reasoning = "".join(reply.reasoning)
                telemetry().model_call(
                    model=spec.name,
                    provider=spec.provider,
                    outcome=error.reason or "error",
                    usage=error.usage,
                )
                span.model_result(provider=spec.provider, usage=error.usage, attempts=attempt)
                # The message carries the provider's text (redacted); the openai exception is not
                # chained: it holds the raw request, and tracebacks are logged.
                raise error from None
    except asyncio.CancelledError:
        task = watch.task
        if watch.fired and task is not None:
            task.uncancel()
            if task.cancelling() == 0:
                reason = cancel.reason if cancel is not None else "cancelled"
                raise RunCancelledError(
                    f"{_subject(node_id, spec.name)} cancelled: {reason}", node_id=node_id
                ) from None
        raise
    finally:
        watch.close()
    calls = [
        ToolCall(slot.id or f"call_{position}", slot.name, "".join(slot.fragments) or "{}")
        for position, slot in enumerate(reply.calls)
    ]
    usage = _usage(spec, body, reply, started, user_key)
    telemetry().model_call(model=spec.name, provider=spec.provider, outcome="ok", usage=usage)
    span.model_result(
        provider=spec.provider, usage=usage, finish_reason=reply.finish_reason, attempts=attempt
    )
    if span.recording:
        span.model_content(
            body.get("messages"),
            {
                "text": "".join(reply.text),
                "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
            },
        )
    return LLMResponse(
        text="".join(reply.text),
        reasoning="".join(reply.reasoning),
        tool_calls=calls,
        finish_reason=reply.finish_reason,
        usage=usage,
        request=body,
        attempts=attempt,
    )


def _usage(spec: ModelSpec, body: dict[str, Any], reply: _Reply, started: float, user_key: bool) -> Usage:
    provided = reply.usage
    if provided is not None and provided.prompt_tokens is not None and provided.completion_tokens is not None:
        tokens_in, tokens_out, source = provided.prompt_tokens, provided.completion_tokens, "provider"
    else:
        tokens_in = estimate_tokens(body["messages"])
        if body.get("tools"):
            tokens_in += estimate_tokens(json.dumps(body["tools"]))
        tokens_out = estimate_tokens("".join(reply.text)) + estimate_tokens("".join(reply.reasoning))
        for slot in reply.calls:
            tokens_out += 3 + estimate_tokens(slot.name) + estimate_tokens("".join(slot.fragments))
        tokens_out = clamp_estimate(tokens_out, body.get("max_tokens"), reply.finish_reason)
        source = "estimated"
    return Usage(
        model=spec.name,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        token_source=source,
        cost=0.0 if user_key else price(spec, tokens_in, tokens_out),
        latency_ms=(time.perf_counter() - started) * 1000.0,
        calls=1,
    )


def clamp_estimate(tokens_out: int, max_tokens: int | None, finish_reason: str | None) -> int:
    """An estimated completion count made consistent with the request's cap: never above
    ``max_tokens`` (a local count of the text can overshoot the server's tokenizer), and
    exactly ``max_tokens`` when the reply ended with ``length`` (the server stopped at the
    cap, so the cap is the true count)."""
    if not max_tokens or max_tokens <= 0:
        return tokens_out
    if finish_reason == "length":
        return int(max_tokens)
    return min(tokens_out, int(max_tokens))


def estimate_usage(
    spec: ModelSpec,
    messages: Sequence[Mapping[str, Any]],
    text: str,
    reasoning: str = "",
    *,
    latency_ms: float = 0.0,
    user_key: bool = False,
    max_tokens: int | None = None,
) -> Usage:
    """The estimated usage of a call whose reply was cut before the provider counted it
    (the node was cancelled or timed out mid-stream): ``messages`` in, ``text`` +
    ``reasoning`` out, priced like any call (0 with ``user_key``), ``token_source``
    ``"estimated"`` (completion tokens at most ``max_tokens``). The tokens were spent, so a
    failed node still records them."""
    tokens_in = estimate_tokens(list(messages))
    tokens_out = clamp_estimate(estimate_tokens(text) + estimate_tokens(reasoning), max_tokens, None)
    return Usage(
        model=spec.name,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        token_source="estimated",
        cost=0.0 if user_key else price(spec, tokens_in, tokens_out),
        latency_ms=latency_ms,
        calls=1,
    )


def sum_usage(usages: Iterable[Usage | None]) -> Usage:
    """Sum calls: tokens, costs (each already priced on its own), latency and call counts
    (:meth:`schemas.run.Usage.total`).

    ``token_source`` is ``"estimated"`` when any call was; ``model`` joins the distinct names.
    """
    return Usage.total(usages)
