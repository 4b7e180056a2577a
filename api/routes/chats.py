"""``/v1/chats``: conversations of the caller's tenant.

- ``GET /v1/chats`` (``limit``, ``before``): chats, most recently changed first, each
  with its title and a preview of its newest message.
- ``GET /v1/chats/{id}``: the chat with its last messages and their parts (text,
  reasoning, tool calls and results, interrupts).
- ``GET /v1/chats/{id}/messages`` (``limit``): the chat's last messages, oldest first.
- ``GET /v1/chats/{id}/variables``, ``PUT`` ``{variables}``: the conversation variables
  the chat holds (what its next turn starts from); a ``PUT`` sets the names it gives.
- ``PATCH /v1/chats/{id}`` ``{title}``: rename (null: back to the first user message).
- ``DELETE /v1/chats/{id}``: the chat and its messages (204). Refused (409) while a run
  of the chat executes, since its answer would land in a deleted chat; a run of the
  chat waiting for an answer is cancelled first, so the chat id starts afresh.

A turn is sent with ``POST /v1/runs`` ``{chat_id, message}``; when the chat has a run
waiting for one answer, that message answers it. A chat of another tenant is 404, as
one that does not exist. Chats are the tenant's: a key scoped to one app gets 403.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from engine.ports import ChatStore
from schemas.api import (
    ChatDetail,
    ChatList,
    ChatOut,
    ChatRename,
    ChatVariables,
    ErrorBody,
    MessageList,
    MessageOut,
)
from schemas.types import RunStatus

from ..auth import Caller, Principal, Service
from ..deployment import Chats
from ..errors import ApiError

__all__ = ["router"]

router = APIRouter(
    prefix="/v1/chats", tags=["chats"], responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody}}
)
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}
Limit = Annotated[int, Query(ge=1, le=500, description="at most this many (the newest)")]


def _chats(store: ChatStore, caller: Principal) -> ChatStore:
    """The chat store, for a key of the whole tenant. Raises ApiError 403 for an app key."""
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}; chats need a key of the whole tenant",
        )
    return store


#: a JSON number (what the schema's ``number`` allows), not Python's wider float syntax
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _json_number(value: Any) -> Any:
    """``before`` as its schema says: a finite number written as JSON writes one
    (``1767225600.25``), not ``nan``, ``inf``, `` 5 `` or ``1_0`` that Python would read."""
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        raise PydanticCustomError(
            "float_parsing",
            "Input should be a number written as JSON writes one (`next_before` of the previous page)",
        )
    return value


Before = Annotated[
    float | None,
    Query(description="`next_before` of the previous page", allow_inf_nan=False),
    BeforeValidator(_json_number),
]


@router.get("", response_model=ChatList, summary="List chats")
async def list_chats(
    caller: Caller, store: Chats, limit: Annotated[int, Query(ge=1, le=200)] = 50, before: Before = None
) -> ChatList:
    """The tenant's chats, most recently changed first."""
    found = await _chats(store, caller).list_chats(caller.tenant_id, limit=limit, before=before)
    return ChatList(
        chats=[ChatOut.of(chat) for chat in found],
        next_before=found[-1].updated_at if len(found) == limit else None,
    )


@router.get("/{chat_id}", response_model=ChatDetail, responses=NOT_FOUND, summary="A chat with its messages")
async def get_chat(chat_id: str, caller: Caller, store: Chats, limit: Limit = 100) -> ChatDetail:
    """The chat and its last ``limit`` messages (oldest first) with their parts."""
    chats = _chats(store, caller)
    chat = await chats.get_chat(caller.tenant_id, chat_id)
    found = await chats.messages(caller.tenant_id, chat_id, limit=limit)
    return ChatDetail(**ChatOut.of(chat).model_dump(), messages=[MessageOut.of(m) for m in found])


@router.get(
    "/{chat_id}/messages", response_model=MessageList, responses=NOT_FOUND, summary="The messages of a chat"
)
async def list_messages(chat_id: str, caller: Caller, store: Chats, limit: Limit = 100) -> MessageList:
    """The chat's last ``limit`` messages, oldest first, with their parts."""
    chats = _chats(store, caller)
    await chats.get_chat(caller.tenant_id, chat_id)
    found = await chats.messages(caller.tenant_id, chat_id, limit=limit)
    return MessageList(messages=[MessageOut.of(m) for m in found])


@router.get(
    "/{chat_id}/variables",
    response_model=ChatVariables,
    responses=NOT_FOUND,
    summary="A chat's conversation variables",
)
async def get_chat_variables(chat_id: str, caller: Caller, store: Chats) -> ChatVariables:
    """What the chat's next turn starts from, for the variables it holds (a variable it
    holds none of starts from the workflow's default)."""
    chats = _chats(store, caller)
    await chats.get_chat(caller.tenant_id, chat_id)
    return ChatVariables(variables=await chats.chat_variables(caller.tenant_id, chat_id))


@router.put(
    "/{chat_id}/variables",
    response_model=ChatVariables,
    responses=NOT_FOUND,
    summary="Change a chat's conversation variables",
)
async def set_chat_variables(
    chat_id: str, body: ChatVariables, caller: Caller, store: Chats
) -> ChatVariables:
    """Set the variables named in ``variables`` (the others are kept); the next turn reads
    them. A turn running meanwhile leaves its own final values when it succeeds."""
    chats = _chats(store, caller)
    return ChatVariables(variables=await chats.set_chat_variables(caller.tenant_id, chat_id, body.variables))


@router.patch("/{chat_id}", response_model=ChatOut, responses=NOT_FOUND, summary="Rename a chat")
async def rename_chat(chat_id: str, body: ChatRename, caller: Caller, store: Chats) -> ChatOut:
    """Set the chat's title; null or blank goes back to its first user message."""
    return ChatOut.of(await _chats(store, caller).rename_chat(caller.tenant_id, chat_id, body.title))


@router.delete(
    "/{chat_id}",
    status_code=204,
    response_class=Response,
    responses={**NOT_FOUND, 409: {"model": ErrorBody}},
    summary="Delete a chat",
)
async def delete_chat(chat_id: str, caller: Caller, service: Service, store: Chats) -> Response:
    """Delete the chat and its messages (its runs stay in the run list). 409 while a run
    of the chat executes; a run waiting for an answer is cancelled first."""
    chats = _chats(store, caller)
    tenant = caller.tenant_id
    await chats.get_chat(tenant, chat_id)
    for status in (RunStatus.running, RunStatus.pending):
        busy = await service.list(tenant, status=status, chat_id=chat_id, limit=1)
        if busy:
            raise ApiError(
                409,
                "conflict",
                f"run {busy[0].run_id} of chat {chat_id} is {status.value}; "
                f"stop it (POST /v1/runs/{busy[0].run_id}/stop) first",
            )
    for paused in await service.list(tenant, status=RunStatus.paused, chat_id=chat_id, limit=500):
        await service.cancel(tenant, paused.run_id, reason="its chat was deleted")
    await chats.delete_chat(tenant, chat_id)
    return Response(status_code=204)
