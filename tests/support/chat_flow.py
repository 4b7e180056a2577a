"""The chat workflow the tests run against the scripted model server: ``start -> reply
(a chat node) -> say`` (an answer node that sends the reply's answer), with the
workflow input ``query``. A run sends its message (``sys.query``) to the model named by
``model`` and answers what the model says, so a test scripts the server
(:mod:`tests.support.openai_server`) and reads the answer, the stream or the chat's
messages.
"""

from __future__ import annotations

from typing import Any

__all__ = ["chat_flow"]


def chat_flow(flow_id: str = "chatbot", *, model: str = "default", **config: Any) -> dict[str, Any]:
    """The chat workflow ``flow_id`` (named after it) whose chat node ``reply`` calls
    ``model``; ``config`` adds to the node's configuration (``history=10``,
    ``max_tokens=40``, ``system_prompt=...``). A new dict on each call, so a test may
    change its copy."""
    return {
        "id": flow_id,
        "name": flow_id.replace("_", " ").capitalize(),
        "inputs": [{"name": "query", "type": "string"}],
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "reply", "type": "chat", "name": "Reply", "config": {"model": model, **config}},
            {"id": "say", "type": "answer", "config": {"text": "{{ reply.answer }}"}},
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "reply"},
            {"id": "e2", "source": "reply", "target": "say"},
        ],
    }
