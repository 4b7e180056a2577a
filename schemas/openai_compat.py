"""The request of the OpenAI-compatible endpoint (``POST /v1/chat/completions``).

Only what Flowloom uses is declared; every other OpenAI field (``temperature``,
``max_tokens``, ``tools``...) is accepted and ignored, since the workflow decides how
its models are called. Flowloom's own fields travel as extra body fields
(``extra_body`` in the ``openai`` SDK): ``chat_id``, ``inputs`` and ``detail``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChatCompletionRequest", "ChatMessageIn", "message_text"]


class ChatMessageIn(BaseModel):
    """One message: ``role`` (``system``/``user``/``assistant``/``tool``...) and
    ``content``, a string or a list of parts (only ``text`` parts are read)."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """``model``: the app (a published workflow's id; a key scoped to an app may leave
    it out). ``messages``: the last ``user`` message is the turn's message; the earlier
    ones are the history when there is no ``chat_id``. ``stream``: SSE chunks.
    ``chat_id``: the stored conversation to continue (its messages are the history).
    ``inputs``: the workflow's inputs. ``detail``: node events as extra stream chunks."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = Field(default=False, strict=True)
    stream_options: dict[str, Any] | None = None
    chat_id: str | None = Field(default=None, min_length=1, max_length=200)
    inputs: dict[str, Any] = Field(default_factory=dict)
    detail: bool = Field(default=False, strict=True)
    user: str | None = Field(default=None, max_length=200)


def message_text(message: ChatMessageIn) -> str:
    """The text of a message: its string content, or its ``text`` parts joined."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text") or "") for part in content if part.get("type", "text") == "text")
