"""The SQL store's run commands (stop requests polled by the executing process) and chat
messages: small writes beside a run's checkpoints, kept apart from the run lifecycle of
:mod:`workers.sql.store`. :class:`CommandsAndMessages` is a base of
:class:`~workers.sql.store.SqlStore` and uses its ``_tx()`` transaction and dialect
statements (``_sql``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.ports import ChatNotFound, RunNotFound, StoreError
from schemas.records import ChatMessage, RunCommand

from .rows import message_from_row, message_row
from .tables import chats, run_commands, runs
from .tables import messages as messages_table

__all__ = ["CommandsAndMessages", "merge_chat_variables"]


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take a finished read's error (if any) off the task, so that a read whose caller was
    cancelled does not report it as never retrieved (the next read meets the same store)."""
    if not task.cancelled():
        task.exception()


#: runs polled in one read at most (SQLite's bound parameters per statement stay far below its limit)
_POLL_CHUNK = 500


class CommandsAndMessages:
    """``send``/``poll`` of the run store port and the message methods of the chat store port."""

    _sql: Any
    _tx: Callable[[], AbstractAsyncContextManager[AsyncConnection]]
    backend: str
    _sqlite_read: Callable[[list[tuple[str, tuple[Any, ...]]]], Awaitable[list[list[dict[str, Any]]]]]

    # ------------------------------------------------------------------------- commands

    async def send(self, tenant_id: str, command: RunCommand) -> None:
        """Deliver ``command`` to its run (one INSERT ... SELECT from the tenant's run).
        Raises RunNotFound when the tenant has no such run."""
        source = sa.select(
            runs.c.run_id,
            runs.c.tenant_id,
            sa.literal(str(command.kind), sa.Text()),
            sa.literal(command.reason, sa.Text()),
            sa.literal(command.created_at or time.time(), sa.Double()),
        ).where(runs.c.run_id == command.run_id, runs.c.tenant_id == tenant_id)
        stmt = sa.insert(run_commands).from_select(
            ["run_id", "tenant_id", "kind", "reason", "created_at"], source
        )
        async with self._tx() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise RunNotFound(f"no run {command.run_id} for tenant {tenant_id!r}")

    async def poll(self, run_id: str, after_id: int = 0) -> list[RunCommand]:
        """Commands for ``run_id`` with ``id > after_id``, oldest first."""
        stmt = (
            sa.select(run_commands)
            .where(run_commands.c.run_id == run_id, run_commands.c.id > after_id)
            .order_by(run_commands.c.id)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [
            RunCommand(
                id=r["id"], run_id=r["run_id"], kind=r["kind"], reason=r["reason"], created_at=r["created_at"]
            )
            for r in rows
        ]

    async def poll_many(self, runs: Mapping[str, int]) -> dict[str, list[RunCommand]]:
        """Commands for several runs at once (``runs``: run id -> the last command id it saw):
        run id -> its commands with a greater id, oldest first (runs with none left out).
        One read per :data:`_POLL_CHUNK` runs; on SQLite in one call in the driver's thread
        (``SqlStore._sqlite_read``): the process's executions poll together
        (:mod:`engine.command_watch`).

        A caller cancelled during the read is cancelled at once, but the read itself runs
        to its end: the command watch stops its poll when the last run ends, often in the
        middle of this read, and a statement cut short on PostgreSQL leaves the store's one
        connection unusable - it was closed and connected anew each time (a stall of every
        run in flight, and every statement prepared again)."""
        read = asyncio.ensure_future(self._poll_many(runs))
        read.add_done_callback(_retrieved)
        return await asyncio.shield(read)

    async def _poll_many(self, runs: Mapping[str, int]) -> dict[str, list[RunCommand]]:
        found: dict[str, list[RunCommand]] = {}
        ids = list(runs)
        for start in range(0, len(ids), _POLL_CHUNK):
            chunk = ids[start : start + _POLL_CHUNK]
            after = min(runs[run_id] for run_id in chunk)
            for r in await self._poll_rows(chunk, after):
                if r["id"] > runs[r["run_id"]]:
                    found.setdefault(r["run_id"], []).append(
                        RunCommand(
                            id=r["id"],
                            run_id=r["run_id"],
                            kind=r["kind"],
                            reason=r["reason"],
                            created_at=r["created_at"],
                        )
                    )
        return found

    async def _poll_rows(self, run_ids: list[str], after_id: int) -> list[Any]:
        """``run_commands`` rows of ``run_ids`` with ``id > after_id``, by id."""
        if self.backend == "sqlite":
            marks = ", ".join("?" * len(run_ids))
            sql = (
                "SELECT id, run_id, kind, reason, created_at FROM run_commands "
                f"WHERE run_id IN ({marks}) AND id > ? ORDER BY id"
            )
            return (await self._sqlite_read([(sql, (*run_ids, after_id))]))[0]
        stmt = (
            sa.select(run_commands)
            .where(run_commands.c.run_id.in_(run_ids), run_commands.c.id > after_id)
            .order_by(run_commands.c.id)
        )
        async with self._tx() as conn:
            return list((await conn.execute(stmt)).mappings().all())

    # ---------------------------------------------------------------------------- chats

    async def add_message(self, message: ChatMessage) -> None:
        """Insert a message, creating its chat on the first one (the chat's ``updated_at``
        follows its newest message). A zero ``created_at``/``updated_at`` is set to now.
        Raises StoreError when the tenant already has a message with that id."""
        now = time.time()
        row = message_row(message)
        row["created_at"] = row["created_at"] or now
        row["updated_at"] = row["updated_at"] or row["created_at"]
        chat = self._sql.insert(chats).values(
            tenant_id=message.tenant_id,
            chat_id=message.chat_id,
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )
        chat = chat.on_conflict_do_update(
            index_elements=[chats.c.tenant_id, chats.c.chat_id], set_={"updated_at": chat.excluded.updated_at}
        )
        async with self._tx() as conn:
            await conn.execute(chat)
            await conn.execute(sa.insert(messages_table), row)

    async def update_message(self, message: ChatMessage, variables: Mapping[str, Any] | None = None) -> None:
        """Replace a message's status and parts (``updated_at``: the message's, or now);
        with ``variables``, also merge them into the chat's conversation variables, in the
        same transaction. Raises StoreError when the tenant has no such message."""
        stmt = (
            sa.update(messages_table)
            .where(messages_table.c.tenant_id == message.tenant_id, messages_table.c.id == message.id)
            .values(
                status=str(message.status), parts=message.parts, updated_at=message.updated_at or time.time()
            )
        )
        async with self._tx() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise StoreError(f"no message {message.id} for tenant {message.tenant_id!r}")
            if variables:
                await merge_chat_variables(conn, message.tenant_id, message.chat_id, variables)

    async def chat_variables(self, tenant_id: str, chat_id: str) -> dict[str, Any]:
        """The conversation variables the chat holds; empty for none or an unknown chat."""
        stmt = sa.select(chats.c.variables).where(chats.c.tenant_id == tenant_id, chats.c.chat_id == chat_id)
        async with self._tx() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        return dict(row[0] or {}) if row is not None else {}

    async def set_chat_variables(
        self, tenant_id: str, chat_id: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Merge ``values`` into the chat's conversation variables; all it holds now.
        Raises ChatNotFound (also for another tenant's chat)."""
        async with self._tx() as conn:
            merged = await merge_chat_variables(conn, tenant_id, chat_id, values)
        if merged is None:
            raise ChatNotFound(f"no chat {chat_id}")
        return merged

    async def messages(self, tenant_id: str, chat_id: str, limit: int = 100) -> list[ChatMessage]:
        """The chat's last ``limit`` messages, oldest first (by ``created_at``)."""
        stmt = (
            sa.select(messages_table)
            .where(messages_table.c.tenant_id == tenant_id, messages_table.c.chat_id == chat_id)
            .order_by(messages_table.c.created_at.desc(), messages_table.c.id.desc())
            .limit(limit)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [message_from_row(row) for row in reversed(rows)]


async def merge_chat_variables(
    conn: Any, tenant_id: str, chat_id: str, values: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Merge ``values`` into the chat's ``variables`` inside the caller's transaction (the
    row is locked first on PostgreSQL, so two turns ending at once do not lose one's
    values); the chat's variables now, or None when the tenant has no such chat."""
    where = (chats.c.tenant_id == tenant_id, chats.c.chat_id == chat_id)
    row = (await conn.execute(sa.select(chats.c.variables).where(*where).with_for_update())).one_or_none()
    if row is None:
        return None
    merged = {**(row[0] or {}), **values}
    await conn.execute(sa.update(chats).where(*where).values(variables=merged))
    return merged
