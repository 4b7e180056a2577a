"""What a model node actually sent, kept on its node run for the trace: the rendered
messages, capped in size, with secrets masked.

A builder debugging a prompt wants to read the messages as the model got them (the
system prompt with its quotes, the history, the rendered user prompt), not the
templates. They are kept in the node run's ``data["sent"]`` - stored with the run and
shown by ``GET /v1/runs/{id}``, ``flowloom show`` and the canvas's trace - so two rules
hold:

1. **Capped**: each message's text at :data:`MAX_MESSAGE_CHARS`, all of them together at
   :data:`MAX_TOTAL_CHARS` (later messages first kept: the newest turn is what the
   builder is after); what was cut is said (``truncated``, ``omitted``). An image part
   is kept as ``[image]``, never its data.
2. **Secrets masked**: every deployment secret value (``FLOWLOOM_SECRET_*``, which a
   workflow reads as ``{{secret:NAME}}``) found in the text becomes ``[secret]``, and so
   does text shaped like a provider key (``sk-...``), as the model client masks them in
   its errors. A secret never reaches the run store through a trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.settings import SECRET_ENV_PREFIX
from schemas.node_records import SentMessage, SentRecord, SentToolCall

__all__ = ["MAX_MESSAGE_CHARS", "MAX_TOTAL_CHARS", "deployment_secrets", "mask_secrets", "sent_record"]

#: characters of one message kept
MAX_MESSAGE_CHARS = 4000
#: characters of all messages kept together
MAX_TOTAL_CHARS = 16000
#: secrets shorter than this are not masked (a 1-3 character value would mask ordinary text)
_MIN_SECRET = 4
_KEY_SHAPED = re.compile(r"\b(?:sk|pk|rk|key|api[_-]?key)[-_][A-Za-z0-9*._\-]{6,}", re.IGNORECASE)
MASK = "[secret]"


def deployment_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values of the deployment's secrets (``FLOWLOOM_SECRET_*``), longest first (so
    a secret holding another is masked whole)."""
    values = {
        v for k, v in environ.items() if k.startswith(SECRET_ENV_PREFIX) and v and len(v) >= _MIN_SECRET
    }
    return sorted(values, key=len, reverse=True)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every value of ``secrets`` and every key-shaped token masked."""
    for value in secrets:
        if value in text:
            text = text.replace(value, MASK)
    return _KEY_SHAPED.sub(MASK, text)


def _text_of(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list (images as ``[image]``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, Mapping) and part.get("type") in ("image_url", "input_image", "image"):
                parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else str(content)


def sent_record(messages: Sequence[Mapping[str, Any]], secrets: Iterable[str]) -> SentRecord:
    """``{"messages": [{"role", "content", "truncated"?, "tool_calls"?}], "omitted": N}``
    of ``messages`` under the rules of the module docstring; ``omitted``: older messages
    left out to keep the total under the cap."""
    masked = list(secrets)
    kept: list[SentMessage] = []
    total = 0
    omitted = 0
    for message in reversed(messages):
        text = mask_secrets(_text_of(message.get("content")), masked)
        entry = SentMessage(role=str(message.get("role") or ""), content="")
        if len(text) > MAX_MESSAGE_CHARS:
            text, entry["truncated"] = text[:MAX_MESSAGE_CHARS], len(text)
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            entry["tool_calls"] = [
                SentToolCall(
                    name=str((c.get("function") or {}).get("name") or ""),
                    arguments=mask_secrets(
                        str((c.get("function") or {}).get("arguments") or "")[:MAX_MESSAGE_CHARS], masked
                    ),
                )
                for c in calls
                if isinstance(c, Mapping)
            ]
        if total + len(text) > MAX_TOTAL_CHARS and kept:
            omitted = len(messages) - len(kept)
            break
        entry["content"] = text
        total += len(text)
        kept.append(entry)
    kept.reverse()
    return SentRecord(messages=kept, omitted=omitted)
