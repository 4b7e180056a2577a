"""Run ownership in the SQL store: claiming a run (with a lease), renewing and releasing
the lease, and pruning ended runs. :class:`RunLeases` is a base of
:class:`~workers.sql.store.SqlStore` and uses its connection, lock and transaction."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.ports import LeaseLost, RunNotFound, RunOwned
from schemas.records import OwnerInfo
from schemas.run import RunState
from schemas.types import RunStatus

from .checkpoint import _raw_connection, _sqlite_claim, pg_statement
from .connect import store_errors
from .rows import ENDED, owner_from_row
from .run_reads import _NODE_RUN_JSON, _RUN_JSON, RunReads, _decoded
from .tables import runs

__all__ = ["RunLeases"]


#: the owner columns of a run nobody holds
_RELEASED = {"owner_id": None, "owner_host": None, "owner_pid": None, "lease_until": None}


class RunLeases(RunReads):
    """``claim``, ``claim_and_load``, ``claim_if_pending``, ``renew``, ``release`` and
    ``prune`` of the run store port."""

    url: URL
    _lock: asyncio.Lock
    _connection: Callable[[], Awaitable[AsyncConnection]]
    _sqlite_write: Callable[[list[tuple[str, tuple[Any, ...]]]], Awaitable[list[int]]]

    async def claim(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, *, take_from: str | None = None
    ) -> None:
        """Become the run's owner until ``owner.lease_until`` with one conditional UPDATE:
        allowed when nobody owns it, the lease expired, ``owner.id`` owns it already, or the
        owner is ``take_from``. Raises RunOwned (``.owner``: the current owner), RunNotFound."""
        await self._claim(tenant_id, run_id, owner, take_from, load=False)

    async def claim_and_load(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, *, take_from: str | None = None
    ) -> RunState:
        """:meth:`claim`, then the run's state as :meth:`load_run` reads it, in the same
        transaction (so the state is the one the new owner continues). Same errors as :meth:`claim`."""
        loaded = await self._claim(tenant_id, run_id, owner, take_from, load=True)
        assert loaded is not None
        return self._loaded(*loaded)

    async def claim_if_pending(self, tenant_id: str, run_id: str, owner: OwnerInfo) -> bool:
        """Claim the run only while it is ``pending`` and nobody holds it (one UPDATE); False
        when it is not (nothing changed). A pending run has never been checkpointed (the
        first checkpoint records it running), so its stored state is still the one created."""
        if self.backend == "sqlite":
            (count,) = await self._sqlite_write(
                [
                    (
                        "UPDATE runs SET owner_id = ?, owner_host = ?, owner_pid = ?, lease_until = ? "
                        "WHERE run_id = ? AND tenant_id = ? AND status = ? AND owner_id IS NULL",
                        (
                            owner.id,
                            owner.host,
                            owner.pid,
                            owner.lease_until,
                            run_id,
                            tenant_id,
                            RunStatus.pending.value,
                        ),
                    )
                ]
            )
            return count == 1
        status = await self._pg(
            "UPDATE runs SET owner_id = $1, owner_host = $2, owner_pid = $3, lease_until = $4 "
            "WHERE run_id = $5 AND tenant_id = $6 AND status = 'pending' AND owner_id IS NULL",
            owner.id,
            owner.host,
            owner.pid,
            owner.lease_until,
            run_id,
            tenant_id,
        )
        return status == "UPDATE 1"

    async def _pg(self, sql: str, *args: Any) -> str:
        """PostgreSQL: ``sql`` alone in autocommit on the store's connection (:func:`pg_statement`)."""
        async with self._lock:
            with store_errors(self.url):
                return await pg_statement(await self._connection(), sql, *args)

    async def _claim(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, take_from: str | None, *, load: bool
    ) -> tuple[Any, list[Any]] | None:
        if self.backend == "sqlite":
            return await self._sqlite_claim(tenant_id, run_id, owner, take_from, load=load)
        allowed = (
            runs.c.owner_id.is_(None) | (runs.c.lease_until < time.time()) | (runs.c.owner_id == owner.id)
        )
        if take_from is not None:
            allowed = allowed | (runs.c.owner_id == take_from)
        stmt = (
            sa.update(runs)
            .where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id, allowed)
            .values(
                owner_id=owner.id, owner_host=owner.host, owner_pid=owner.pid, lease_until=owner.lease_until
            )
        )
        async with self._tx() as conn:
            if (await conn.execute(stmt)).rowcount == 1:
                self._index.pop(run_id, None)  # another owner may have written since this store did
                return await self._run_rows(conn, tenant_id, run_id) if load else None
            row = (
                (
                    await conn.execute(
                        sa.select(
                            runs.c.owner_id, runs.c.owner_host, runs.c.owner_pid, runs.c.lease_until
                        ).where(runs.c.run_id == run_id, runs.c.tenant_id == tenant_id)
                    )
                )
                .mappings()
                .one_or_none()
            )
        raise self._owned_error(tenant_id, run_id, row)

    async def _sqlite_claim(
        self, tenant_id: str, run_id: str, owner: OwnerInfo, take_from: str | None, *, load: bool
    ) -> tuple[Any, list[Any]] | None:
        """:meth:`_claim` on SQLite: the UPDATE and the reads of the run's rows in one
        transaction in one call in aiosqlite's worker thread (a queued run's claim is one
        hand-off, not one per statement and cursor step)."""
        allowed = "owner_id IS NULL OR lease_until < ? OR owner_id = ?" + (
            " OR owner_id = ?" if take_from else ""
        )
        params = (
            owner.id,
            owner.host,
            owner.pid,
            owner.lease_until,
            run_id,
            tenant_id,
            time.time(),
            owner.id,
            *((take_from,) if take_from else ()),
        )
        update = (
            "UPDATE runs SET owner_id = ?, owner_host = ?, owner_pid = ?, lease_until = ? "
            f"WHERE run_id = ? AND tenant_id = ? AND ({allowed})",
            params,
        )
        key = (run_id, tenant_id)
        reads = (
            [
                ("SELECT * FROM runs WHERE run_id = ? AND tenant_id = ?", key),
                ("SELECT * FROM node_runs WHERE run_id = ? AND tenant_id = ?", key),
            ]
            if load
            else []
        )
        owner_read = (
            "SELECT owner_id, owner_host, owner_pid, lease_until FROM runs "
            "WHERE run_id = ? AND tenant_id = ?",
            key,
        )
        async with self._lock:
            with store_errors(self.url):
                driver = (await _raw_connection(await self._connection())).driver_connection
                matched, rows = await driver._execute(_sqlite_claim, driver._conn, update, reads, owner_read)
        if not matched:
            raise self._owned_error(tenant_id, run_id, rows[0][0] if rows[0] else None)
        self._index.pop(run_id, None)  # another owner may have written since this store did
        if not load:
            return None
        return _decoded(rows[0][0], _RUN_JSON), [_decoded(row, _NODE_RUN_JSON) for row in rows[1]]

    @staticmethod
    def _owned_error(tenant_id: str, run_id: str, row: Any) -> Exception:
        """RunOwned naming the owner of the run's ``row`` (None: RunNotFound)."""
        if row is None:
            return RunNotFound(f"no run {run_id} for tenant {tenant_id!r}")
        current = owner_from_row(row)
        assert current is not None
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(current.lease_until))
        return RunOwned(
            f"run {run_id} is owned by {current.id} (host {current.host or '?'}, pid {current.pid}) "
            f"until {until} ({current.lease_until - time.time():.0f}s from now)",
            current,
        )

    async def renew(self, run_id: str, owner_id: str, lease_until: float) -> None:
        """Extend the lease to ``lease_until``. Raises LeaseLost when ``owner_id`` no longer owns the run."""
        stmt = (
            sa.update(runs)
            .where(runs.c.run_id == run_id, runs.c.owner_id == owner_id)
            .values(lease_until=lease_until)
        )
        async with self._tx() as conn:
            if (await conn.execute(stmt)).rowcount == 0:
                raise LeaseLost(f"run {run_id} is no longer owned by {owner_id}")

    async def release(self, run_id: str, owner_id: str) -> None:
        """Give the run up (no-op when ``owner_id`` does not own it)."""
        stmt = sa.update(runs).where(runs.c.run_id == run_id, runs.c.owner_id == owner_id).values(_RELEASED)
        async with self._tx() as conn:
            await conn.execute(stmt)
        self._index.pop(run_id, None)

    async def prune(self, tenant_id: str, finished_before: float) -> int:
        """Delete the tenant's runs that ended (succeeded, failed, cancelled) before
        ``finished_before``, with their node runs, events and commands (cascade); returns
        how many runs were deleted."""
        for key in [key for key in self._ended if key[0] == tenant_id]:
            del self._ended[key]
        stmt = sa.delete(runs).where(
            runs.c.tenant_id == tenant_id, runs.c.status.in_(ENDED), runs.c.finished_at < finished_before
        )
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount
