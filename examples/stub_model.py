"""A stand-in OpenAI-compatible model for trying the model examples with no provider and
no network (standard library only; served by ``examples/stub_server.py``).

It does no reasoning: its answers are built from the request by fixed rules, so a run
shows Flowloom's plumbing (prompts, quotes, citations, streaming, usage) and nothing about
what a real model would say. Point every model at it with
``FLOWLOOM_LLM_BASE_URL_OVERRIDE=http://127.0.0.1:PORT/v1`` (no key needed).

- ``POST /v1/chat/completions`` (``stream`` true or false): a prompt asking for a JSON
  array of strings (the query extension node) gets ``["<the question>"]``; a prompt
  holding numbered quotes (``[1] source: ...``, a knowledge answer) gets the first
  sentence of quote 1 cited as ``[1]``; anything else gets ``You said: <last user
  message>``. Tools offered are never called.
- ``POST /v1/embeddings`` (``float`` or ``base64``): a hashed bag of words per text, unit
  length, so texts sharing words are near; the size is the request's ``dimensions``, else
  the bundled registry's size of the model named (1536 for ``text-embedding-3-small``,
  1024 for ``bge-m3``), else 384.
- ``GET /v1/models``: the models it answers as.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

#: Vector sizes of the bundled registry's embedding models (others: DEFAULT_DIMENSIONS).
DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "bge-m3": 1024}
DEFAULT_DIMENSIONS = 384
_QUOTE = re.compile(r"^\[1\] source: [^\n]*\n(?P<text>.+?)(?=\n\n\[\d+\] source: |\Z)", re.S | re.M)
_WORD = re.compile(r"\w+")


def _text(content: Any) -> str:
    """A message's text (a string, or the text parts of a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def answer(body: dict[str, Any]) -> str:
    """The reply to a chat request ``body`` (module docstring's rules)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt = "\n".join(_text(m.get("content")) for m in messages)
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1].strip() if users else ""
    if "JSON array of strings" in prompt:
        question = last.splitlines()[-1].strip() if last else ""
        return json.dumps([question] if question else [])
    quote = _QUOTE.search(prompt)
    if quote is not None:
        lines = [ln.strip() for ln in quote.group("text").splitlines() if ln.strip() and not ln.startswith("#")]
        first = re.split(r"(?<=[.!?])\s", lines[0], maxsplit=1)[0] if lines else "(an empty passage)"
        return f"{first} [1]"
    return f"You said: {last}" if last else "You said nothing."


def _usage(body: dict[str, Any], reply: str) -> dict[str, int]:
    """Token counts estimated as words (a stand-in has no tokenizer)."""
    sent = sum(len(_WORD.findall(_text(m.get("content")))) for m in body.get("messages") or [] if isinstance(m, dict))
    got = len(_WORD.findall(reply))
    return {"prompt_tokens": sent, "completion_tokens": got, "total_tokens": sent + got}


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """A whole ``chat.completion`` object for ``body``."""
    reply = answer(body)
    return {"id": f"stub-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": _usage(body, reply)}


def completion_chunks(body: dict[str, Any]) -> Iterator[bytes]:
    """The ``text/event-stream`` lines of a streamed answer to ``body``: a few words a chunk,
    then the finish reason, the usage when ``stream_options.include_usage`` asks for it, and
    ``[DONE]``."""
    reply = answer(body)
    base = {"id": f"stub-{time.time_ns()}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": str(body.get("model") or "stub")}
    words = re.findall(r"\S+\s*", reply) or [""]
    for i in range(0, len(words), 3):
        delta: dict[str, Any] = {"content": "".join(words[i:i + 3])}
        if i == 0:
            delta["role"] = "assistant"
        yield _event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    yield _event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _event({**base, "choices": [], "usage": _usage(body, reply)})
    yield b"data: [DONE]\n\n"


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def vector(text: str, dimensions: int) -> list[float]:
    """A unit-length hashed bag of the words of ``text`` (crc32 of each into a signed bucket)."""
    out = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        h = zlib.crc32(word.encode())
        out[h % dimensions] += 1.0 if (h >> 16) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in out))
    if norm == 0.0:  # a text without words (or whose words cancel out): still a unit vector
        out[0], norm = 1.0, 1.0
    return [x / norm for x in out]


def embeddings(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Status and body of ``POST /v1/embeddings``."""
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return 400, {"error": {"message": "input must be a string or a list of strings", "type": "invalid_request"}}
    model = str(body.get("model") or "")
    dims = body.get("dimensions") or DIMENSIONS.get(model, DEFAULT_DIMENSIONS)
    data = []
    for i, text in enumerate(texts):
        values = vector(text, int(dims))
        embedding: Any = values
        if body.get("encoding_format") == "base64":
            embedding = base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(len(_WORD.findall(t)) for t in texts)
    return 200, {"object": "list", "data": data, "model": model,
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def models() -> dict[str, Any]:
    """``GET /v1/models``."""
    names = ["stub-chat", *DIMENSIONS]
    return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "flowloom-examples"} for n in names]}
