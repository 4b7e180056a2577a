"""Chats in the SQL store: the whole of the engine's ``ChatStore`` port.

:class:`SqlChatStore` shares the connection (and its lock) of a :class:`SqlStore`, like
:class:`workers.sql.keys.SqlKeyStore`: the message methods (``add_message``,
``update_message``, ``messages``) are the store's own; listing, reading, renaming and
deleting chats are here::

    chats = SqlChatStore(store)
    page = await chats.list_chats("default", limit=20)
    older = await chats.list_chats("default", limit=20, before=page[-1].updated_at)

Every statement is scoped by tenant: another tenant's chat is :class:`ChatNotFound`,
exactly as one that does not exist. A chat's title is the one set by a person, else
its first user message cut short; its preview is its newest message cut short. Both are
read with one window-function query per page (SQLite 3.25+ and PostgreSQL), not one
query per chat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from engine.ports import ChatNotFound
from schemas.records import CHAT_PREVIEW_CHARS, CHAT_TITLE_CHARS, Chat, ChatMessage, MessagePart, clip

from .rows import RowData
from .store import SqlStore
from .tables import chats, messages

__all__ = ["SqlChatStore", "message_preview"]


def message_preview(parts: Sequence[Any]) -> str:
    """The text a list shows for a message: its text parts, or else the question of its
    interrupt (``payload.description``/``question``/``prompt``/``message``), or ``""``."""
    loaded = [p if isinstance(p, MessagePart) else MessagePart.model_validate(p) for p in parts or []]
    text = "".join(p.text for p in loaded if p.type == "text")
    if text.strip():
        return text
    for part in loaded:
        if part.type == "interrupt":
            payload = part.data.get("payload") or {}
            for key in ("description", "question", "prompt", "message", "text"):
                if isinstance(payload.get(key), str) and payload[key]:
                    return str(payload[key])
    return ""


class SqlChatStore:
    """Chats and their messages in the database of a :class:`SqlStore` (see module docstring)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"SqlChatStore({self.store!r})"

    # ------------------------------------------------------------ messages (the store's)

    async def add_message(self, message: ChatMessage) -> None:
        """Insert a message, creating its chat on the first one. See :meth:`SqlStore.add_message`."""
        await self.store.add_message(message)

    async def update_message(self, message: ChatMessage, variables: Mapping[str, Any] | None = None) -> None:
        """Replace a message's status and parts (and merge ``variables`` into the chat's
        conversation variables, in the same transaction). See :meth:`SqlStore.update_message`."""
        await self.store.update_message(message, variables)

    async def messages(self, tenant_id: str, chat_id: str, limit: int = 100) -> list[ChatMessage]:
        """The chat's last ``limit`` messages, oldest first (empty for an unknown chat)."""
        return await self.store.messages(tenant_id, chat_id, limit)

    # -------------------------------------------------------- conversation variables

    async def chat_variables(self, tenant_id: str, chat_id: str) -> dict[str, Any]:
        """The chat's conversation variables. See :meth:`SqlStore.chat_variables`."""
        return await self.store.chat_variables(tenant_id, chat_id)

    async def set_chat_variables(
        self, tenant_id: str, chat_id: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Merge into the chat's conversation variables. See :meth:`SqlStore.set_chat_variables`."""
        return await self.store.set_chat_variables(tenant_id, chat_id, values)

    # ------------------------------------------------------------------------- chats

    async def list_chats(self, tenant_id: str, limit: int = 50, before: float | None = None) -> list[Chat]:
        """The tenant's chats, most recently changed first; ``before``: only chats whose
        ``updated_at`` is earlier (the last ``updated_at`` of the previous page)."""
        stmt = sa.select(chats).where(chats.c.tenant_id == tenant_id)
        if before is not None:
            stmt = stmt.where(chats.c.updated_at < before)
        stmt = stmt.order_by(chats.c.updated_at.desc(), chats.c.chat_id.desc()).limit(limit)
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
            ids = [row["chat_id"] for row in rows]
            untitled = [row["chat_id"] for row in rows if not row["title"]]
            newest = await self._edge_messages(conn, tenant_id, ids, newest=True) if ids else {}
            first = await self._edge_messages(conn, tenant_id, untitled, newest=False) if untitled else {}
        return [_chat_of(row, first.get(row["chat_id"]), newest.get(row["chat_id"])) for row in rows]

    async def get_chat(self, tenant_id: str, chat_id: str) -> Chat:
        """The tenant's chat with its title and preview. Raises ChatNotFound."""
        stmt = sa.select(chats).where(chats.c.tenant_id == tenant_id, chats.c.chat_id == chat_id)
        async with self.store._tx() as conn:
            row = (await conn.execute(stmt)).mappings().one_or_none()
            if row is None:
                raise ChatNotFound(f"no chat {chat_id}")
            newest = await self._edge_messages(conn, tenant_id, [chat_id], newest=True)
            first = (
                {} if row["title"] else await self._edge_messages(conn, tenant_id, [chat_id], newest=False)
            )
        return _chat_of(row, first.get(chat_id), newest.get(chat_id))

    async def rename_chat(self, tenant_id: str, chat_id: str, title: str | None) -> Chat:
        """Set the chat's title (None or blank: back to the first user message); the chat
        as it is now. Does not change ``updated_at`` (the list order follows messages).
        Raises ChatNotFound."""
        value = title.strip() if title and title.strip() else None
        stmt = (
            sa.update(chats)
            .where(chats.c.tenant_id == tenant_id, chats.c.chat_id == chat_id)
            .values(title=value)
        )
        async with self.store._tx() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise ChatNotFound(f"no chat {chat_id}")
        return await self.get_chat(tenant_id, chat_id)

    async def delete_chat(self, tenant_id: str, chat_id: str) -> None:
        """Delete the chat and its messages in one transaction (runs of the chat stay:
        they have their own retention). Raises ChatNotFound."""
        async with self.store._tx() as conn:
            await conn.execute(
                sa.delete(messages).where(messages.c.tenant_id == tenant_id, messages.c.chat_id == chat_id)
            )
            deleted = await conn.execute(
                sa.delete(chats).where(chats.c.tenant_id == tenant_id, chats.c.chat_id == chat_id)
            )
            if deleted.rowcount == 0:
                raise ChatNotFound(f"no chat {chat_id}")

    @staticmethod
    async def _edge_messages(
        conn: Any, tenant_id: str, chat_ids: list[str], *, newest: bool
    ) -> dict[str, Mapping[str, Any]]:
        """Per chat of ``chat_ids``: its newest message (``newest``) or its first user
        message, as ``{chat_id: {"role", "parts"}}`` (one query, a window function)."""
        order = (
            (messages.c.created_at.desc(), messages.c.id.desc())
            if newest
            else (messages.c.created_at.asc(), messages.c.id.asc())
        )
        ranked = sa.select(
            messages.c.chat_id,
            messages.c.role,
            messages.c.parts,
            sa.func.row_number().over(partition_by=messages.c.chat_id, order_by=order).label("rn"),
        ).where(messages.c.tenant_id == tenant_id, messages.c.chat_id.in_(chat_ids))
        if not newest:
            ranked = ranked.where(messages.c.role == "user")
        sub = ranked.subquery()
        rows = (
            (await conn.execute(sa.select(sub.c.chat_id, sub.c.role, sub.c.parts).where(sub.c.rn == 1)))
            .mappings()
            .all()
        )
        return {row["chat_id"]: row for row in rows}


def _chat_of(row: RowData, first_user: RowData | None, newest: RowData | None) -> Chat:
    """The :class:`Chat` of a ``chats`` row, its first user message and its newest message."""
    title = row["title"] or None
    if title is None and first_user is not None:
        title = clip(message_preview(first_user["parts"]), CHAT_TITLE_CHARS) or None
    preview = clip(message_preview(newest["parts"]), CHAT_PREVIEW_CHARS) if newest is not None else ""
    return Chat(
        id=row["chat_id"],
        tenant_id=row["tenant_id"],
        title=title,
        title_set=bool(row["title"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        preview=preview,
        preview_role=newest["role"] if newest is not None else None,
    )
