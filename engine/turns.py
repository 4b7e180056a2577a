"""The chat transcript of runs: a turn is the user's message and exactly one assistant
message, which the run fills - its answer (or what was streamed before a stop or a
failure), reasoning, tool calls, the answer's citations and a pending question - and
whose status follows the run's. A turn starts from the conversation variables the chat
holds and, when it succeeds, leaves its final values to the chat together with its
closed message. :class:`ChatTurns` is a base of :class:`~engine.service.RunService`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from schemas.node_records import AgentToolRun, agent_trace
from schemas.records import ChatMessage, MessagePart, MessageStatus
from schemas.run import RunState
from schemas.types import RunStatus

if TYPE_CHECKING:
    from .compiler import CompiledPlan
    from .service import Stores

__all__ = ["ChatTurns", "answer_text"]


class ChatTurns:
    """Opening and closing chat turns over the service's chat store."""

    stores: Stores

    async def _history(self, tenant_id: str, chat_id: str) -> list[dict[str, Any]]:
        """``sys.history``: the chat's messages with text, oldest first."""
        messages = await self.stores.chats.messages(tenant_id, chat_id, limit=200)
        return [{"role": m.role, "content": m.text} for m in messages if m.text]

    async def _conversation(self, tenant_id: str, chat_id: str, plan: CompiledPlan) -> dict[str, Any] | None:
        """The conversation variables the chat holds (None when the workflow declares none:
        nothing to read)."""
        if not plan.workflow.conversation_variables:
            return None
        return await self.stores.chats.chat_variables(tenant_id, chat_id)

    async def _open_turn(self, state: RunState, text: str | None) -> None:
        """A turn of a chat: the user's message, then the assistant message that the run fills."""
        now = time.time()
        chat_id = str(state.sys["chat_id"])
        if text:
            await self.stores.chats.add_message(
                ChatMessage(
                    id=uuid.uuid4().hex,
                    tenant_id=state.tenant_id,
                    chat_id=chat_id,
                    role="user",
                    run_id=state.run_id,
                    parts=[MessagePart(type="text", text=text)],
                    created_at=now,
                    updated_at=now,
                )
            )
        await self.stores.chats.add_message(
            ChatMessage(
                id=uuid.uuid4().hex,
                tenant_id=state.tenant_id,
                chat_id=chat_id,
                role="assistant",
                run_id=state.run_id,
                status=MessageStatus.streaming,
                created_at=now + 1e-6,
                updated_at=now,
            )
        )

    async def _close_turn(self, state: RunState, streamed: str, *, reclose: bool = False) -> None:
        """Finish the turn's one assistant message: the answer (or what was streamed before a
        stop or failure), the reasoning, the tool calls, and a pending question. ``reclose``:
        the message was closed already, with an end the run's store did not keep (the last
        checkpoint failed): close the newest one of the run again with the end it has now."""
        chat_id = state.sys.get("chat_id")
        if not chat_id or state.sys.get("chat_id") == state.run_id:
            return
        messages = await self.stores.chats.messages(state.tenant_id, str(chat_id), limit=50)
        open_ = [
            m
            for m in messages
            if m.role == "assistant"
            and m.run_id == state.run_id
            and (reclose or m.status is MessageStatus.streaming)
        ]
        if not open_:
            return
        message = open_[-1]
        message.parts = _parts_of(state, streamed)
        message.status = _MESSAGE_STATUS.get(state.status, MessageStatus.failed)
        message.updated_at = time.time()
        # A turn that succeeded leaves its conversation variables to the chat, in the
        # transaction that closes its message; a failed or stopped turn changes nothing.
        kept = state.conversation if state.status is RunStatus.succeeded and state.conversation else None
        await self.stores.chats.update_message(message, kept)


def answer_text(answers: Mapping[str, Any]) -> str:
    """The answers to a run's interrupts as a chat message's text: a plain value as it is,
    a form's fields one ``name: value`` line each, a list comma-separated (several
    interrupts answered at once: their texts one per line)."""

    def one(value: Any) -> str:
        if isinstance(value, Mapping):
            return "\n".join(f"{k}: {one(v)}" for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return ", ".join(one(v) for v in value)
        return "" if value is None else str(value)

    return "\n".join(one(value) for value in answers.values())


_MESSAGE_STATUS = {
    RunStatus.succeeded: MessageStatus.done,
    RunStatus.paused: MessageStatus.paused,
    RunStatus.cancelled: MessageStatus.cancelled,
    RunStatus.failed: MessageStatus.failed,
    RunStatus.running: MessageStatus.failed,
}


def _parts_of(state: RunState, streamed: str) -> list[MessagePart]:
    """The assistant message's parts from the run: text, reasoning, tool calls, the
    citations of a succeeded answer (one part each), question."""
    parts: list[MessagePart] = []
    text = state.answer if state.status is RunStatus.succeeded else (state.answer or streamed)
    for run in state.node_runs.values():
        reasoning = (run.outputs or {}).get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(MessagePart(type="reasoning", text=reasoning))
        for step in agent_trace(run.data):
            parts += _tool_parts(step.get("tools") or [])
    if text:
        parts.append(MessagePart(type="text", text=text))
    if state.status is RunStatus.succeeded:  # the sources of the answer, so a reloaded chat still shows them
        # here, not at the top: the knowledge models are for chats, not for every run's service
        from schemas.knowledge import run_citations

        parts += [
            MessagePart(type="citation", data=piece.model_dump(mode="json"))
            for piece in run_citations(state.node_runs.values())
        ]
    for interrupt in state.interrupts.values():
        parts.append(
            MessagePart(type="interrupt", data=interrupt.model_dump(mode="json", exclude={"answer"}))
        )
    if state.error is not None and state.status is not RunStatus.succeeded:
        parts.append(MessagePart(type="text", text="", data={"error": state.error.model_dump(mode="json")}))
    return parts


def _tool_parts(records: list[AgentToolRun]) -> list[MessagePart]:
    """A ``tool_call`` and a ``tool_result`` part per call an agent round made (its trace
    entry's ``tools``): the call's id, tool name and arguments, then the result's preview
    (the first characters the model saw) with ``is_error``."""
    parts: list[MessagePart] = []
    for record in records:
        ids = {"id": record.get("id"), "name": record.get("name")}
        parts.append(MessagePart(type="tool_call", data={**ids, "arguments": record.get("arguments")}))
        if "preview" in record or "is_error" in record:
            parts.append(
                MessagePart(
                    type="tool_result",
                    text=str(record.get("preview") or ""),
                    data={**ids, "is_error": bool(record.get("is_error"))},
                )
            )
    return parts
