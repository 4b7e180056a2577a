"""Responders of the scripted OpenAI server that imitate real servers' quirks, for
capability probing and for nodes choosing their protocol: a model that ignores tools
under ``tool_choice: "auto"`` but obeys a forced call (small llama.cpp models), a server
that refuses tools or ``response_format``, one that sends no usage in streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.openai_server import (
    Finish,
    Reply,
    Text,
    Usage,
    http_error,
    text_reply,
    tool_args_split_reply,
)

__all__ = ["Responder", "server_like"]

Responder = Callable[[dict[str, Any]], Reply]


def _forced(body: dict[str, Any]) -> bool:
    return isinstance(body.get("tool_choice"), dict)


def _tool_name(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return str(body["tools"][0]["function"]["name"])


def server_like(*, free_tools: bool, forced_tools: bool, tools_accepted: bool = True, json_mode: str = "ok",
                stream_usage: bool = True, arguments: str = '{"city": "Paris"}',
                text: str = "I think it is sunny in Paris.") -> Responder:
    """A responder with these quirks. A tool call calls the forced tool, else the first
    offered, with ``arguments``; a request with tools the model does not call is answered
    with ``text``. ``json_mode``: ``ok`` (JSON replies), ``refused`` (400 for any
    response_format) or ``prose`` (accepted, answered in prose)."""

    def respond(body: dict[str, Any]) -> Reply:
        usage = (12, 3) if stream_usage else None
        if body.get("tools"):
            if not tools_accepted:
                return http_error(400, "tools are not supported by this model")
            if free_tools or (forced_tools and _forced(body)):
                return tool_args_split_reply(_tool_name(body), arguments, usage=usage)
            return text_reply(text, usage=usage)
        if body.get("response_format"):
            if json_mode == "refused":
                return http_error(400, "response_format is not supported")
            answer = '{"answer": "Paris"}' if json_mode == "ok" else "The capital of France is Paris."
            return text_reply(answer, usage=usage)
        return Reply([Text("OK"), Finish("stop")] + ([Usage(*usage)] if usage else []))

    return respond
