"""Fitting a prompt into a model's context: a token estimate without a tokenizer
(:func:`estimate_tokens`) and :func:`fit_messages`, which drops the oldest whole turns of
a conversation until it fits, keeping the system messages and the pinned turns (a
prompt's examples) where they are.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .errors import LLMBadRequest

__all__ = ["IMAGE_TOKENS", "MESSAGE_OVERHEAD", "REPLY_PRIMING", "estimate_tokens", "fit_messages"]

#: Tokens added per message for role and separators, per request for reply priming, per image.
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3
IMAGE_TOKENS = 85


def _text_tokens(text: str) -> int:
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def _message_tokens(message: Mapping[str, Any]) -> int:
    tokens = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        tokens += _text_tokens(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                if part.get("type") == "text":
                    tokens += _text_tokens(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    tokens += IMAGE_TOKENS
            else:
                tokens += _text_tokens(str(part))
    if message.get("name"):
        tokens += 1 + _text_tokens(str(message["name"]))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        tokens += 3 + _text_tokens(str(fn.get("name", ""))) + _text_tokens(str(fn.get("arguments", "")))
    if message.get("tool_call_id"):
        tokens += 2
    return tokens


def estimate_tokens(value: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> int:
    """Rough token count without a tokenizer (tiktoken is not a dependency).

    Text: ASCII characters count 1/4 token each (rounded up), every other character 1
    token (CJK runs ~1 token per character in OpenAI's tokenizers; accented Latin is
    over-counted, which errs on the safe side). A message adds 4 tokens (role,
    separators), its tool calls' names and arguments, 85 per image part; a message list
    adds 3 for the reply priming. Good for budgeting a window with margin, not billing.
    """
    if value is None:
        return 0
    if isinstance(value, str):
        return _text_tokens(value)
    if isinstance(value, Mapping):
        return _message_tokens(value)
    return sum(_message_tokens(m) for m in value) + REPLY_PRIMING


def fit_messages(
    messages: Sequence[dict[str, Any]],
    *,
    max_input_tokens: int,
    node_id: str | None = None,
    pinned: Collection[int] = (),
) -> list[dict[str, Any]]:
    """Drop the oldest whole turns until ``messages`` fit in ``max_input_tokens``.

    ``max_input_tokens`` is ``max_context - max_output_tokens`` (``ModelSpec.max_input_tokens``).
    System (and developer) messages, and the messages at the ``pinned`` indexes (a
    prompt's example turns: part of the prompt, not of the conversation), are always kept
    where they are. A turn is a user
    message and everything after it up to the next user message, so a tool result never
    loses the assistant message that called it; messages before the first user message
    form a turn of their own. The newest turn is always kept; older turns are kept
    newest first while they fit (the kept history is contiguous).

    Raises:
        LLMBadRequest: (``context_length_exceeded``) the system messages and pinned turns
            plus the newest turn alone exceed the budget - shorten the prompt or pick a
            larger model.
    """
    system_roles = ("system", "developer")
    fixed = [i for i, m in enumerate(messages) if m.get("role") in system_roles or i in pinned]
    turns: list[list[int]] = []
    for i, message in enumerate(messages):
        if message.get("role") in system_roles or i in pinned:
            continue
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(i)
    sizes = [_message_tokens(m) for m in messages]
    budget = max_input_tokens - REPLY_PRIMING - sum(sizes[i] for i in fixed)
    if not turns:
        if budget < 0:
            raise _too_long(node_id, -budget + max_input_tokens, max_input_tokens)
        return list(messages)
    last = sum(sizes[i] for i in turns[-1])
    if last > budget:
        raise _too_long(node_id, max_input_tokens - budget + last, max_input_tokens)
    remaining = budget - last
    kept = list(fixed) + turns[-1]
    for turn in reversed(turns[:-1]):
        cost = sum(sizes[i] for i in turn)
        if cost > remaining:
            break
        remaining -= cost
        kept += turn
    return [messages[i] for i in sorted(kept)]


def _too_long(node_id: str | None, needed: int, budget: int) -> LLMBadRequest:
    where = f"node {node_id!r}: " if node_id else ""
    return LLMBadRequest(
        f"{where}the system prompt and the latest turn alone need ~{needed} tokens but the model's input budget "
        f"is {budget} (max_context - max_output_tokens); shorten the prompt or inputs, lower max_tokens, or use a "
        "model with a larger context",
        node_id=node_id,
        reason="context_length_exceeded",
    )
