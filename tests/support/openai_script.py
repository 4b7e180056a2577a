"""The script DSL of the scripted OpenAI server: reply steps, their constructors, named scripts.

Split out of :mod:`tests.support.openai_server`, which plays these replies on the wire
(see its docstring for what each step sends) and re-exports every name here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Delay",
    "Disconnect",
    "Finish",
    "Raw",
    "Reasoning",
    "Reply",
    "Stall",
    "Step",
    "StreamError",
    "Text",
    "ToolDelta",
    "Usage",
    "bench_responder",
    "delay",
    "disconnect",
    "disconnect_reply",
    "error_after_tokens",
    "fenced_json_reply",
    "finish",
    "http_error",
    "malformed_frame_reply",
    "malformed_json_reply",
    "parallel_tool_calls_reply",
    "rate_limited",
    "raw",
    "reasoning",
    "reasoning_reply",
    "reply",
    "reused_index_tool_calls_reply",
    "stall",
    "stalled_reply",
    "stream_error",
    "text",
    "text_reply",
    "tool_args_split_reply",
    "tool_delta",
    "usage",
    "utf8_split_reply",
]

# ============================================================================ the DSL


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Reasoning:
    text: str


@dataclass(frozen=True)
class ToolDelta:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Finish:
    reason: str


@dataclass(frozen=True)
class Raw:
    data: bytes
    split_at: int | None = None


@dataclass(frozen=True)
class Delay:
    seconds: float


@dataclass(frozen=True)
class Stall:
    seconds: float | None = None


@dataclass(frozen=True)
class Disconnect:
    pass


@dataclass(frozen=True)
class StreamError:
    message: str
    code: int | str | None = 500
    type: str = "server_error"


Step = Text | Reasoning | ToolDelta | Usage | Finish | Raw | Delay | Stall | Disconnect | StreamError


@dataclass
class Reply:
    """One scripted answer: ``steps`` played in order, or an HTTP error when ``status`` != 200."""

    steps: list[Step] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = True


def text(s: str) -> Text:
    """A content delta."""
    return Text(s)


def reasoning(s: str) -> Reasoning:
    """A ``reasoning_content`` delta."""
    return Reasoning(s)


def tool_delta(index: int, *, id: str | None = None, name: str | None = None,
               arguments: str | None = None) -> ToolDelta:
    """One tool-call delta (the first of a call carries ``id`` and ``name``)."""
    return ToolDelta(index, id, name, arguments)


def usage(prompt_tokens: int, completion_tokens: int) -> Usage:
    """The usage chunk."""
    return Usage(prompt_tokens, completion_tokens)


def finish(reason: str = "stop") -> Finish:
    """A chunk carrying ``finish_reason``."""
    return Finish(reason)


def raw(data: bytes | str, *, split_at: int | None = None) -> Raw:
    """Raw bytes on the wire, in two TCP writes split at byte ``split_at``."""
    return Raw(data.encode() if isinstance(data, str) else data, split_at)


def delay(seconds: float) -> Delay:
    """Sleep before the next step."""
    return Delay(seconds)


def stall(seconds: float | None = None) -> Stall:
    """Stop sending (until the client hangs up, the server stops, or ``seconds`` pass)."""
    return Stall(seconds)


def disconnect() -> Disconnect:
    """Drop the connection mid-body."""
    return Disconnect()


def stream_error(message: str, code: int | str | None = 500, type: str = "server_error") -> StreamError:
    """An in-stream error event (how providers report a failure after the 200 header)."""
    return StreamError(message, code, type)


def reply(*steps: Step, done: bool = True) -> Reply:
    """A 200 reply of ``steps``."""
    return Reply(list(steps), done=done)


def http_error(status: int, message: str, *, code: str | None = None, type: str | None = None,
               headers: dict[str, str] | None = None) -> Reply:
    """An HTTP error reply with an OpenAI-style ``{"error": {...}}`` body."""
    return Reply(status=status, headers=dict(headers or {}),
                 error={"message": message, "type": type or "invalid_request_error", "param": None, "code": code})


# ============================================================================ named scripts


def _chunks(s: str, size: int | None) -> list[str]:
    if not size:
        return [s] if s else []
    return [s[i:i + size] for i in range(0, len(s), size)]


def text_reply(answer: str, *, chunk_size: int | None = 4, usage: tuple[int, int] | None = (10, 5),
               finish_reason: str = "stop") -> Reply:
    """``answer`` in chunks of ``chunk_size`` characters (splits words), then finish + usage."""
    steps: list[Step] = [Text(c) for c in _chunks(answer, chunk_size)]
    steps.append(Finish(finish_reason))
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def utf8_split_reply(answer: str = "héllo 世界 🙂 done", *, usage: tuple[int, int] | None = (10, 6)) -> Reply:
    """One content frame whose bytes are split INSIDE a multibyte character across two TCP writes."""
    frame = ("data: " + json.dumps(_chunk_json("chatcmpl-raw", "m", {"role": "assistant", "content": answer}),
                                   ensure_ascii=False) + "\n\n").encode()
    first_multibyte = next(i for i, b in enumerate(frame) if b >= 0xC0)
    steps: list[Step] = [Raw(frame, split_at=first_multibyte + 1), Finish("stop")]
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def tool_args_split_reply(name: str, arguments: str, *, call_id: str = "call_1", fragment: int = 3,
                          usage: tuple[int, int] | None = (20, 12)) -> Reply:
    """One tool call whose arguments arrive in ``fragment``-character pieces."""
    steps: list[Step] = [ToolDelta(0, call_id, name, "")]
    steps += [ToolDelta(0, arguments=c) for c in _chunks(arguments, fragment)]
    steps.append(Finish("tool_calls"))
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def parallel_tool_calls_reply(calls: Sequence[tuple[str, str, str]], *, fragment: int = 4,
                              usage: tuple[int, int] | None = (30, 20)) -> Reply:
    """Several tool calls ``(id, name, arguments)`` whose argument fragments interleave by index."""
    steps: list[Step] = [ToolDelta(i, cid, name, "") for i, (cid, name, _) in enumerate(calls)]
    pieces = [_chunks(args, fragment) for _, _, args in calls]
    for round_ in range(max((len(p) for p in pieces), default=0)):
        for i, parts in enumerate(pieces):
            if round_ < len(parts):
                steps.append(ToolDelta(i, arguments=parts[round_]))
    steps.append(Finish("tool_calls"))
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def reused_index_tool_calls_reply(calls: Sequence[tuple[str, str, str]], *,
                                  usage: tuple[int, int] | None = (30, 20)) -> Reply:
    """Several tool calls ``(id, name, arguments)``, each complete in one chunk, ALL at index 0
    (providers that number every call 0 and tell them apart by ``id`` only)."""
    steps: list[Step] = [ToolDelta(0, cid, name, args) for cid, name, args in calls]
    steps.append(Finish("tool_calls"))
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def reasoning_reply(thought: str, answer: str, *, chunk_size: int = 5,
                    usage: tuple[int, int] | None = (15, 40)) -> Reply:
    """``reasoning_content`` deltas first, then the answer."""
    steps: list[Step] = [Reasoning(c) for c in _chunks(thought, chunk_size)]
    steps += [Text(c) for c in _chunks(answer, chunk_size)]
    steps.append(Finish("stop"))
    if usage is not None:
        steps.append(Usage(*usage))
    return Reply(steps)


def rate_limited(message: str = "Rate limit reached, slow down", *, retry_after: float | None = 0) -> Reply:
    """HTTP 429 (with ``Retry-After`` when given)."""
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    return http_error(429, message, code="rate_limit_exceeded", type="requests", headers=headers)


def error_after_tokens(answer: str = "Partial ans", *, message: str = "upstream model crashed") -> Reply:
    """Tokens, then a 5xx reported inside the stream (the 200 header is already sent)."""
    return Reply([Text(c) for c in _chunks(answer, 4)] + [StreamError(message, 500)], done=False)


def stalled_reply(before: str = "") -> Reply:
    """Optional tokens, then silence with the connection open."""
    return Reply([Text(c) for c in _chunks(before, 4)] + [Stall()], done=False)


def disconnect_reply(answer: str = "This answer is cut", *, after: int = 2) -> Reply:
    """``after`` content chunks, then the connection drops mid-body."""
    return Reply([Text(c) for c in _chunks(answer, 4)[:after]] + [Disconnect()], done=False)


def malformed_frame_reply(before: str = "") -> Reply:
    """Optional tokens, then an SSE frame whose JSON is broken."""
    return Reply([Text(c) for c in _chunks(before, 4)] + [Raw(b'data: {"id": "x", "choices": [{"delta": {"cont\n\n')],
                 done=True)


def malformed_json_reply(*, usage: tuple[int, int] | None = (10, 8)) -> Reply:
    """A model answer that is JSON cut short (what extraction nodes must refuse)."""
    return text_reply('{"name": "Ada", "age": 3', chunk_size=5, usage=usage)


def fenced_json_reply(obj: Any, *, usage: tuple[int, int] | None = (10, 20)) -> Reply:
    """A JSON answer wrapped in prose and a ```json code fence."""
    body = json.dumps(obj, ensure_ascii=False)
    return text_reply(f"Sure! Here is the result:\n```json\n{body}\n```\nLet me know if you need more.",
                      chunk_size=7, usage=usage)


def bench_responder(body: dict[str, Any]) -> Reply:
    """Replies with ``max_tokens`` one-word chunks (used by ``bench/llm.py``)."""
    n = int(body.get("max_tokens") or 1)
    return Reply([Text("tok ") for _ in range(n)] + [Finish("stop"), Usage(10, n)])


# One ``chat.completion.chunk`` as the server frames it; the malformed-frame script builds on it.
def _chunk_json(cid: str, model: str, delta: dict[str, Any], finish_reason: str | None = None,
                include_usage: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if include_usage:
        out["usage"] = None
    return out
