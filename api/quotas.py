"""Quotas of the HTTP API: runs per minute and tokens per day, per tenant and per app.

Every route that makes a run do model work - a new run (``POST /v1/runs``,
``POST /v1/workflows/{id}/runs``, ``POST /v1/chat/completions``), a chat message that
answers a waiting run, ``POST /v1/runs/{id}/resume`` - asks :meth:`Quotas.admit`
first, before the run is created or continued, so a refused request costs no token.
A refusal is :class:`QuotaExceeded`: 429 naming the quota, its scope and its limit,
with ``Retry-After`` (whole seconds until a slot frees: the oldest admission leaving
the 60-second window, or 00:00 UTC for the day's tokens).

Which limits hold for a run of app ``A`` by tenant ``T`` (0 or none: unlimited):

- the tenant's: ``T``'s own limit when it set one, else the operator's default
  (``Settings.quota_runs_per_minute`` / ``quota_tokens_per_day``); counted over every
  run of the tenant;
- the app's: ``A``'s own limit when the tenant set one (no default); counted over the
  runs of ``A``. An app is the workflow the run executes (its id).

Tokens spent without a run count too: the embeddings of knowledge-base ingestion and
searches (:meth:`Quotas.record_tokens`, called by the knowledge service's usage hook,
wired in :mod:`api.composition`). Work that spends them - an upload, a re-index, a change of
embedding model, a search of ``/v1/datasets`` - asks :meth:`Quotas.check_tokens` first
and is refused (429) while the day's tokens are used up; a document already accepted
finishes its ingestion (its tokens count, so the next request is refused).

The counting and its atomicity live in :mod:`workers.sql.quotas` (one transaction,
locked per tenant, on SQLite and PostgreSQL).

A new run is created in the admission's transaction (``admit(..., run=...)``): a
refused start leaves no run, and a created run always has its admission.

A run start or continuation for which no limit holds (the tenant's, the app's and the
defaults all 0 or unset: the embedded default) cannot be refused, so it is only recorded
(one INSERT, without the per-tenant lock or the counting): a limit set later still counts
it. The limits are remembered for a second (:data:`workers.sql.quotas.LIMITS_CACHE_TTL_S`).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass
from typing import Any

from engine.ports import NewRun
from engine.settings import Settings
from workers.sql import SqlStore
from workers.sql.quotas import QuotaCheck, QuotaLimits, QuotaRefusal, QuotaUsage, SqlQuotaStore

from .errors import ApiError

__all__ = [
    "Admission",
    "EffectiveQuota",
    "QuotaExceeded",
    "Quotas",
    "day_bounds",
    "no_app_message",
    "quota_store_of",
    "tenant_has_app",
]


class QuotaExceeded(ApiError):
    """429: a quota is used up. ``Retry-After`` says when the next request may pass."""

    def __init__(self, refusal: QuotaRefusal) -> None:
        seconds = max(1, math.ceil(refusal.retry_after))
        scope = f"app {refusal.app_id!r}" if refusal.app_id is not None else "the tenant"
        used = (
            f"{refusal.used} run{'' if refusal.used == 1 else 's'} in the last minute"
            if refusal.quota == "runs_per_minute"
            else f"{refusal.used} token{'' if refusal.used == 1 else 's'} since 00:00 UTC"
        )
        super().__init__(
            429,
            "quota_exceeded",
            f"quota exceeded: {refusal.quota} of {scope} is {refusal.limit} ({used}); "
            f"retry after {seconds} s",
            headers={"Retry-After": str(seconds)},
        )
        self.refusal = refusal
        self.retry_after = seconds


@dataclass(frozen=True, slots=True)
class EffectiveQuota:
    """The limits that hold for a scope (0: unlimited) and where each comes from:
    ``own`` (set for this tenant or app), ``default`` (the operator's settings) or
    ``none`` (an app without its own limit: only the tenant's holds)."""

    runs_per_minute: int
    tokens_per_day: int
    runs_per_minute_source: str
    tokens_per_day_source: str


@dataclass(frozen=True, slots=True)
class Admission:
    """An admitted request: :meth:`Quotas.release` it when the run did not start after all."""

    id: int


def day_bounds(now: float) -> tuple[float, float]:
    """``(00:00 UTC of today, 00:00 UTC of tomorrow)`` around ``now`` (Unix seconds)."""
    day = dt.datetime.fromtimestamp(now, dt.UTC).date()
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()
    return start, start + 86400.0


def quota_store_of(store: object) -> SqlQuotaStore:
    """The quota store on the database of the run store ``store``.

    Raises:
        TypeError: the run store is not the SQL store (the only one with quotas).
    """
    if not isinstance(store, SqlStore):
        raise TypeError(f"quotas need the SQL run store, not {type(store).__name__}")
    return SqlQuotaStore(store)


async def tenant_has_app(service: Any, tenant_id: str, app_id: str) -> bool:
    """True when ``tenant_id`` has a saved workflow ``app_id`` or a run of a workflow of
    that id (runs of a posted document count under its id too). A quota or a key for any
    other id would hold for nothing: most likely a misspelt app. ``service``: the run
    service (its run store is the workflows' database)."""
    from workers.sql.workflows import SqlWorkflowStore

    if await SqlWorkflowStore(service.stores.runs).list(tenant_id, app_id):
        return True
    return bool(await service.list(tenant_id, workflow_id=app_id, limit=1))


def no_app_message(tenant_id: str, app_id: str) -> str:
    """Why an app id is refused (:func:`tenant_has_app`), the same words on every path:
    the quota routes, ``POST /v1/keys``, ``flowloom quotas set`` and ``keys create``."""
    return (
        f"tenant {tenant_id!r} has no workflow {app_id!r} (saved or run): an app is a workflow's id "
        "(GET /v1/workflows, the canvas's list)"
    )


class Quotas:
    """The quota policy over ``store`` with the operator's defaults from ``settings``."""

    def __init__(self, store: SqlQuotaStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def effective(self, own: QuotaLimits | None, *, app: bool) -> EffectiveQuota:
        """The limits that hold given a scope's ``own`` limits (module docstring)."""
        runs, runs_source = self._pick(
            own.runs_per_minute if own else None, 0 if app else self.settings.quota_runs_per_minute, app
        )
        tokens, tokens_source = self._pick(
            own.tokens_per_day if own else None, 0 if app else self.settings.quota_tokens_per_day, app
        )
        return EffectiveQuota(runs, tokens, runs_source, tokens_source)

    @staticmethod
    def _pick(own: int | None, default: int, app: bool) -> tuple[int, str]:
        if own is not None:
            return own, "own"
        return default, "none" if app else "default"

    async def usage(self, tenant_id: str, app_id: str | None) -> QuotaUsage:
        """What the tenant (``app_id`` None) or the app used so far."""
        now = time.time()
        return await self.store.usage(tenant_id, app_id, now=now, day_start=day_bounds(now)[0])

    async def admit(
        self, tenant_id: str, app_id: str, run_id: str, *, run: NewRun | None = None
    ) -> Admission:
        """Admit a start or continuation of ``run_id``, a run of app ``app_id``; with
        ``run``, create that new run in the admission's transaction (the run store's
        database: a refusal stores neither, a start is one commit).

        Raises:
            QuotaExceeded: the tenant's or the app's runs per minute or tokens per day are
            used up (nothing was stored).
            RunExists, StalePublished: the run could not be created (nothing was stored).
        """
        own_tenant, own_app = await self.store.limits(tenant_id, app_id)
        tenant = self.effective(own_tenant, app=False)
        app = self.effective(own_app, app=True)
        now = time.time()
        if not (tenant.runs_per_minute or tenant.tokens_per_day or app.runs_per_minute or app.tokens_per_day):
            return Admission(
                await self.store.record(tenant_id, app_id, run_id, now=now, run=run)
            )  # module docstring
        checks = [
            QuotaCheck(None, tenant.runs_per_minute, tenant.tokens_per_day),
            QuotaCheck(app_id, app.runs_per_minute, app.tokens_per_day),
        ]
        start, end = day_bounds(now)
        outcome = await self.store.admit(
            tenant_id, app_id, run_id, checks, now=now, day_start=start, day_end=end, run=run
        )
        if isinstance(outcome, QuotaRefusal):
            raise QuotaExceeded(outcome)
        return Admission(outcome)

    async def check_tokens(self, tenant_id: str, app_id: str | None = None) -> None:
        """Refuse work that spends tokens outside a run while the tenant's (or the app's)
        tokens per day are used up.

        Raises:
            QuotaExceeded: ``tokens_per_day`` of the tenant or of the app (nothing stored).
        """
        own_tenant, own_app = await self.store.limits(tenant_id, app_id or "")
        checks = [QuotaCheck(None, 0, self.effective(own_tenant, app=False).tokens_per_day)]
        if app_id is not None:
            checks.append(QuotaCheck(app_id, 0, self.effective(own_app, app=True).tokens_per_day))
        if not any(check.tokens_per_day for check in checks):
            return
        now = time.time()
        start, end = day_bounds(now)
        refusal = await self.store.check_tokens(tenant_id, checks, now=now, day_start=start, day_end=end)
        if refusal is not None:
            raise QuotaExceeded(refusal)

    async def record_tokens(
        self,
        tenant_id: str,
        tokens: int,
        cost: float = 0.0,
        *,
        app_id: str | None = None,
        source: str = "embedding",
    ) -> None:
        """Count ``tokens`` spent outside a run in the tenant's day (and the app's, when given)."""
        await self.store.record_usage(tenant_id, app_id, source, tokens, cost, now=time.time())

    async def release(self, admission: Admission) -> None:
        """Give back the slot of an admission whose run never started."""
        await self.store.release(admission.id)
