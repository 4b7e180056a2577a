"""Quotas in the SQL store: a tenant's or an app's own limits, and admissions.

Two tables (migration 0005):

- ``quota_limits``: the limits a tenant (``app_id`` empty) or one of its apps set for
  themselves; NULL keeps the default.
- ``quota_admissions``: one row per run start or continuation admitted under the
  quotas, with the tenant, the app (the workflow id) and the run.

**Runs per minute** is a sliding window: the admissions of the scope in the last 60
seconds. **Tokens per day** is the tokens (in + out, as the run store keeps them on
``runs``, raised by every checkpoint) of the runs admitted since 00:00 UTC, so the
count follows whatever process executes the run (API task, queue worker), and a run
that is still going counts what it has spent so far. Tokens spent outside runs - the
embeddings of knowledge-base ingestion and searches - are rows of ``token_usage``
(:meth:`SqlQuotaStore.record_usage`, migration 0007) and count in the same day.

Correct under concurrency, in one process and across processes, on both backends:
:meth:`SqlQuotaStore.admit` counts and inserts in one transaction that starts by
writing the tenant's row (``UPDATE tenants SET name = name``). On SQLite that write
takes the database's write lock before anything is read, so two admissions are
serialised and the second one counts the first; on PostgreSQL it locks the tenant's
row until commit, so concurrent admissions of one tenant queue behind each other
while other tenants' do not. No two admissions can both take the last slot.

Admitting asks for a scope's limits on every run start, so :meth:`SqlQuotaStore.limits`
reads the tenant's and the app's in one query and remembers them in the process for
:data:`LIMITS_CACHE_TTL_S` seconds. Setting or removing limits through any quota store of
the process forgets them at once; limits changed by another process (``flowloom quotas
set``) hold here within that bound. Run starts that find the entry expired share the
read in flight (:class:`~engine.shared_reads.SharedReads`). The counting itself is never cached.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from engine.ports import NewRun, RunExists
from engine.shared_reads import SharedReads

from .launch import AdmissionRow, launch_in
from .rows import RowData
from .store import SqlStore, dialect_insert
from .tables import quota_admissions as admissions
from .tables import quota_limits as limits_table
from .tables import runs, tenants
from .tables import token_usage as usage_rows

__all__ = ["QuotaCheck", "QuotaLimits", "QuotaRefusal", "QuotaUsage", "SqlQuotaStore", "WINDOW_S"]


#: the runs-per-minute window, in seconds
WINDOW_S = 60.0
#: admissions older than this are deleted as new ones come in (they no longer count)
_KEEP_S = 2 * 86400.0
#: seconds a scope's limits stay remembered in the process (module docstring)
LIMITS_CACHE_TTL_S = 1.0
_LIMITS_CACHE_MAX = 4096
#: (database URL, tenant) -> when :meth:`SqlQuotaStore.record` last deleted the tenant's old admissions
_pruned: dict[tuple[str, str], float] = {}
#: (database URL, tenant, app) -> (time remembered until, tenant's own limits, app's own limits)
_remembered: OrderedDict[tuple[str, str, str], tuple[float, QuotaLimits | None, QuotaLimits | None]] = (
    OrderedDict()
)
#: reads of limits in flight, by the same key as ``_remembered``
_reads: SharedReads[tuple[str, str, str]] = SharedReads()


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """The limits a tenant (``app_id`` None) or an app set: None keeps the default, 0 is unlimited."""

    tenant_id: str
    app_id: str | None
    runs_per_minute: int | None
    tokens_per_day: int | None
    updated_at: float


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    """The limits to enforce on one scope: the whole tenant (``app_id`` None) or one app;
    0 means unlimited."""

    app_id: str | None
    runs_per_minute: int
    tokens_per_day: int


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """Why an admission was refused: the scope, the quota (``runs_per_minute`` or
    ``tokens_per_day``), its limit, what is used, and the seconds until a slot frees."""

    app_id: str | None
    quota: str
    limit: int
    used: int
    retry_after: float


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """What a scope used: admissions in the last minute, tokens since 00:00 UTC."""

    runs_last_minute: int
    tokens_today: int


def _limits(row: RowData) -> QuotaLimits:
    return QuotaLimits(
        tenant_id=row["tenant_id"],
        app_id=row["app_id"] or None,
        runs_per_minute=row["runs_per_minute"],
        tokens_per_day=row["tokens_per_day"],
        updated_at=row["updated_at"],
    )


def _scope(tenant_id: str, app_id: str | None) -> Any:
    where = admissions.c.tenant_id == tenant_id
    return where if app_id is None else sa.and_(where, admissions.c.app_id == app_id)


class SqlQuotaStore:
    """Quota limits and admissions on the connection (and lock) of ``store``.

    Database errors surface as :class:`engine.ports.StoreError` (URL masked).
    """

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._url = str(store.url)

    # ------------------------------------------------------------------ limits

    async def limits(self, tenant_id: str, app_id: str) -> tuple[QuotaLimits | None, QuotaLimits | None]:
        """``(the tenant's own limits, the app's own limits)``, None where none were set;
        one query, remembered for :data:`LIMITS_CACHE_TTL_S` seconds (module docstring)."""
        key = (self._url, tenant_id, app_id)
        cached = _remembered.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1], cached[2]
        return await _reads.read(key, lambda: self._read_limits(key))

    async def _read_limits(self, key: tuple[str, str, str]) -> tuple[QuotaLimits | None, QuotaLimits | None]:
        """Read the limits of ``key`` (database URL, tenant, app) and remember them (unless
        limits were changed meanwhile)."""
        _url, tenant_id, app_id = key
        epoch = _reads.epoch
        stmt = sa.select(limits_table).where(
            limits_table.c.tenant_id == tenant_id, limits_table.c.app_id.in_(("", app_id))
        )
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        found = {row["app_id"]: _limits(row) for row in rows}
        tenant, app = found.get(""), found.get(app_id) if app_id else None
        if _reads.epoch == epoch:  # no limits changed meanwhile
            _remembered[key] = (time.monotonic() + LIMITS_CACHE_TTL_S, tenant, app)
            _remembered.move_to_end(key)
            while len(_remembered) > _LIMITS_CACHE_MAX:
                _remembered.popitem(last=False)
        return tenant, app

    @staticmethod
    def _forget(tenant_id: str) -> None:
        """Drop the tenant's remembered limits (they changed); a read of them in flight
        serves who asked before but is neither joined nor remembered."""
        _reads.forget(lambda key: key[1] == tenant_id)
        for key in [k for k in _remembered if k[1] == tenant_id]:
            _remembered.pop(key, None)

    async def get(self, tenant_id: str, app_id: str | None = None) -> QuotaLimits | None:
        """The tenant's (``app_id`` None) or the app's own limits; None when none were set."""
        stmt = sa.select(limits_table).where(
            limits_table.c.tenant_id == tenant_id, limits_table.c.app_id == (app_id or "")
        )
        async with self.store._tx() as conn:
            row = (await conn.execute(stmt)).mappings().first()
        return _limits(row) if row is not None else None

    async def list(self, tenant_id: str) -> list[QuotaLimits]:
        """Every limit the tenant set: its own first, then its apps' by id."""
        stmt = (
            sa.select(limits_table)
            .where(limits_table.c.tenant_id == tenant_id)
            .order_by(limits_table.c.app_id)
        )
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_limits(row) for row in rows]

    async def put(
        self, tenant_id: str, app_id: str | None, *, runs_per_minute: int | None, tokens_per_day: int | None
    ) -> QuotaLimits:
        """Set (replace) the tenant's or the app's limits; returns them.
        Raises StoreError when the tenant does not exist (foreign key)."""
        now = time.time()
        values = {
            "tenant_id": tenant_id,
            "app_id": app_id or "",
            "runs_per_minute": runs_per_minute,
            "tokens_per_day": tokens_per_day,
            "updated_at": now,
        }
        stmt = (
            dialect_insert(self.store.backend)(limits_table)
            .values(values)
            .on_conflict_do_update(
                index_elements=[limits_table.c.tenant_id, limits_table.c.app_id],
                set_={
                    "runs_per_minute": runs_per_minute,
                    "tokens_per_day": tokens_per_day,
                    "updated_at": now,
                },
            )
        )
        self._forget(tenant_id)
        async with self.store._tx() as conn:
            await conn.execute(stmt)
        self._forget(tenant_id)  # also what a read that raced the write remembered
        return QuotaLimits(tenant_id, app_id or None, runs_per_minute, tokens_per_day, now)

    async def delete(self, tenant_id: str, app_id: str | None) -> bool:
        """Remove the tenant's or the app's own limits (back to the defaults); True when some were set."""
        stmt = sa.delete(limits_table).where(
            limits_table.c.tenant_id == tenant_id, limits_table.c.app_id == (app_id or "")
        )
        self._forget(tenant_id)
        async with self.store._tx() as conn:
            removed = (await conn.execute(stmt)).rowcount > 0
        self._forget(tenant_id)
        return removed

    # -------------------------------------------------------------- admissions

    async def usage(self, tenant_id: str, app_id: str | None, *, now: float, day_start: float) -> QuotaUsage:
        """What the tenant (``app_id`` None) or the app used (module docstring)."""
        async with self.store._tx() as conn:
            return QuotaUsage(
                await self._runs_in_window(conn, tenant_id, app_id, now),
                await self._tokens_since(conn, tenant_id, app_id, day_start),
            )

    async def admit(
        self,
        tenant_id: str,
        app_id: str,
        run_id: str,
        checks: Sequence[QuotaCheck],
        *,
        now: float,
        day_start: float,
        day_end: float,
        run: NewRun | None = None,
    ) -> int | QuotaRefusal:
        """Admit a start or continuation of ``run_id`` (a run of app ``app_id``) when every
        check holds; returns the admission's id, or the first refusal (nothing stored).
        ``run``: the new run, created in the same transaction (``SqlStore.create_run``'s
        errors; nothing of the admission is stored when it raises).

        A check's ``runs_per_minute`` holds while the scope has fewer admissions in the
        last 60 seconds (refused: ``retry_after`` is when the oldest one that must leave
        the window does); its ``tokens_per_day`` while the scope's runs admitted since
        ``day_start`` spent fewer tokens (refused: until ``day_end``). Atomic with the
        insert (module docstring).
        """
        async with self.store._tx() as conn:
            # Write first: the lock that serialises admissions of this tenant (module docstring).
            await conn.execute(
                sa.update(tenants).where(tenants.c.tenant_id == tenant_id).values(name=tenants.c.name)
            )
            for check in checks:
                refusal = await self._check(
                    conn, tenant_id, check, now=now, day_start=day_start, day_end=day_end
                )
                if refusal is not None:
                    return refusal
            if run is None:
                await conn.execute(
                    sa.delete(admissions).where(
                        admissions.c.tenant_id == tenant_id, admissions.c.admitted_at < now - _KEEP_S
                    )
                )
                result = await conn.execute(
                    sa.insert(admissions)
                    .values(tenant_id=tenant_id, app_id=app_id, run_id=run_id, admitted_at=now)
                    .returning(admissions.c.id)
                )
                return int(result.scalar_one())
            created = await self._create_in(
                conn, run, AdmissionRow(tenant_id, app_id, run_id, now, now - _KEEP_S)
            )
        self.store._created(*created[1:])
        return created[0]

    async def _create_in(self, conn: Any, run: NewRun, admission: AdmissionRow) -> tuple[int, Any, Any]:
        """Create ``run`` with ``admission`` on ``conn`` inside the caller's transaction;
        ``(the admission's id, what the store remembers once committed)``."""
        write, index, node_rows = self.store._new_run(run.state, run.owner, run.doc, run.published, admission)
        try:
            admission_id = await launch_in(conn, write, self._url)
            if node_rows:
                await conn.execute(self.store._sql.upsert_node_runs, node_rows)
        except sa.exc.IntegrityError:
            raise RunExists(f"run {run.state.run_id} already exists") from None
        assert admission_id is not None
        return admission_id, write, index

    async def record(
        self, tenant_id: str, app_id: str, run_id: str, *, now: float, run: NewRun | None = None
    ) -> int:
        """Record an admission that no limit can refuse (no check holds a limit): the INSERT
        alone, without the tenant's lock or any counting, so it is counted should a limit
        be set later; returns its id. Old admissions are deleted at most once a minute per
        tenant and process (they only take space). ``run``: the new run, created with the
        admission as one statement (``SqlStore.create_run``, which raises for both)."""
        prune = now - _pruned.get((self._url, tenant_id), 0.0) >= WINDOW_S
        if prune:
            _pruned[(self._url, tenant_id)] = now
        if run is not None:
            admission = AdmissionRow(tenant_id, app_id, run_id, now, now - _KEEP_S if prune else None)
            admission_id = await self.store.create_run(
                run.state,
                owner=run.owner,
                doc=run.doc,
                published=run.published,
                admission=admission,
                durable=run.durable,
            )
            assert admission_id is not None
            return admission_id
        if self.store.backend == "sqlite":  # one call in the driver's thread (SqlStore._sqlite_write)
            statements: list[tuple[str, tuple[Any, ...]]] = (
                [
                    (
                        "DELETE FROM quota_admissions WHERE tenant_id = ? AND admitted_at < ?",
                        (tenant_id, now - _KEEP_S),
                    )
                ]
                if prune
                else []
            )
            statements.append(
                (
                    "INSERT INTO quota_admissions (tenant_id, app_id, run_id, admitted_at) "
                    "VALUES (?, ?, ?, ?)",
                    (tenant_id, app_id, run_id, now),
                )
            )
            return (await self.store._sqlite_write(statements))[-1]
        async with self.store._tx() as conn:
            if prune:
                await conn.execute(
                    sa.delete(admissions).where(
                        admissions.c.tenant_id == tenant_id, admissions.c.admitted_at < now - _KEEP_S
                    )
                )
            result = await conn.execute(
                sa.insert(admissions)
                .values(tenant_id=tenant_id, app_id=app_id, run_id=run_id, admitted_at=now)
                .returning(admissions.c.id)
            )
            return int(result.scalar_one())

    async def check_tokens(
        self, tenant_id: str, checks: Sequence[QuotaCheck], *, now: float, day_start: float, day_end: float
    ) -> QuotaRefusal | None:
        """The first check whose ``tokens_per_day`` is used up, else None (nothing stored):
        for work that spends tokens without a run (embeddings), refused before it starts."""
        async with self.store._tx() as conn:
            for check in checks:
                if check.tokens_per_day > 0:
                    used = await self._tokens_since(conn, tenant_id, check.app_id, day_start)
                    if used >= check.tokens_per_day:
                        return QuotaRefusal(
                            check.app_id, "tokens_per_day", check.tokens_per_day, used, day_end - now
                        )
        return None

    async def record_usage(
        self, tenant_id: str, app_id: str | None, source: str, tokens: int, cost: float, *, now: float
    ) -> None:
        """Count ``tokens`` spent outside a run (``source``: ``embedding``) in the day of
        the tenant (``app_id`` None) or of the app whose key spent them. Rows older than
        two days are deleted as new ones come in (they no longer count)."""
        if tokens <= 0 and cost <= 0:
            return
        async with self.store._tx() as conn:
            await conn.execute(
                sa.delete(usage_rows).where(
                    usage_rows.c.tenant_id == tenant_id, usage_rows.c.used_at < now - _KEEP_S
                )
            )
            await conn.execute(
                sa.insert(usage_rows).values(
                    tenant_id=tenant_id,
                    app_id=app_id or "",
                    source=source,
                    tokens=int(tokens),
                    cost=float(cost),
                    used_at=now,
                )
            )

    async def release(self, admission_id: int) -> None:
        """Forget an admission whose run never started (its request was refused after
        admission, e.g. inputs that do not fit), so it does not take a slot."""
        async with self.store._tx() as conn:
            await conn.execute(sa.delete(admissions).where(admissions.c.id == admission_id))

    async def _check(
        self, conn: Any, tenant_id: str, check: QuotaCheck, *, now: float, day_start: float, day_end: float
    ) -> QuotaRefusal | None:
        if check.runs_per_minute > 0:
            used = await self._runs_in_window(conn, tenant_id, check.app_id, now)
            if used >= check.runs_per_minute:
                # The slot frees when the admission at position used - limit (oldest first) leaves the window.
                oldest = (
                    await conn.execute(
                        sa.select(admissions.c.admitted_at)
                        .where(_scope(tenant_id, check.app_id), admissions.c.admitted_at > now - WINDOW_S)
                        .order_by(admissions.c.admitted_at)
                        .offset(used - check.runs_per_minute)
                        .limit(1)
                    )
                ).scalar()
                frees = (oldest if oldest is not None else now) + WINDOW_S
                return QuotaRefusal(check.app_id, "runs_per_minute", check.runs_per_minute, used, frees - now)
        if check.tokens_per_day > 0:
            used = await self._tokens_since(conn, tenant_id, check.app_id, day_start)
            if used >= check.tokens_per_day:
                return QuotaRefusal(check.app_id, "tokens_per_day", check.tokens_per_day, used, day_end - now)
        return None

    async def _runs_in_window(self, conn: Any, tenant_id: str, app_id: str | None, now: float) -> int:
        stmt = (
            sa.select(sa.func.count())
            .select_from(admissions)
            .where(_scope(tenant_id, app_id), admissions.c.admitted_at > now - WINDOW_S)
        )
        return int((await conn.execute(stmt)).scalar_one())

    async def _tokens_since(self, conn: Any, tenant_id: str, app_id: str | None, day_start: float) -> int:
        admitted = sa.select(admissions.c.run_id).where(
            _scope(tenant_id, app_id), admissions.c.admitted_at >= day_start
        )
        stmt = sa.select(sa.func.coalesce(sa.func.sum(runs.c.tokens_in + runs.c.tokens_out), 0)).where(
            runs.c.tenant_id == tenant_id, runs.c.run_id.in_(admitted)
        )
        in_runs = int((await conn.execute(stmt)).scalar_one())
        outside = usage_rows.c.tenant_id == tenant_id
        if app_id is not None:
            outside = sa.and_(outside, usage_rows.c.app_id == app_id)
        spent = sa.select(sa.func.coalesce(sa.func.sum(usage_rows.c.tokens), 0)).where(
            outside, usage_rows.c.used_at >= day_start
        )
        return in_runs + int((await conn.execute(spent)).scalar_one())
