"""``/v1/quotas``: the caller's tenant's quotas (admin keys of the whole tenant).

- ``GET /v1/quotas``: the tenant's quota (its own limits, what holds, what it used)
  and those of the apps that have limits of their own.
- ``PUT /v1/quotas``: the tenant's own limits (``null``: the operator's default).
- ``GET/PUT/DELETE /v1/quotas/apps/{app_id}``: one app's (an app is a workflow id;
  ``DELETE`` removes its own limits, so only the tenant's hold).

Limits and counting: :mod:`api.quotas`. A key scoped to an app, or not an admin key,
gets 403: quotas are the tenant's to set. An app the tenant does not have (no saved
workflow, no run of that id: :func:`api.quotas.tenant_has_app`) is 404 on the three app
routes, as ``flowloom quotas set --app`` refuses it, unless it has limits of its own
stored (an app whose workflow was deleted since: they can still be read and removed).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response

from engine.service import RunService
from schemas.api import ErrorBody, QuotaEffective, QuotaList, QuotaOut, QuotaUpdate, QuotaUsageOut
from workers.sql.quotas import QuotaLimits

from ..auth import Principal, Service, admin
from ..deployment import QuotaPolicy
from ..errors import ApiError
from ..quotas import Quotas, no_app_message, tenant_has_app

__all__ = ["router"]

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 422)}
router = APIRouter(prefix="/v1/quotas", tags=["quotas"], responses=_E)
AppId = Annotated[str, Path(min_length=1, max_length=200, description="the app (a workflow id)")]
NO_APP: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "the tenant has no such app"}
}


async def tenant_admin(caller: Annotated[Principal, Depends(admin)]) -> Principal:
    """An admin key of the whole tenant. Raises ApiError 403 for a key scoped to an app."""
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}; quotas are set with an "
            f"admin key of the whole tenant",
        )
    return caller


Owner = Annotated[Principal, Depends(tenant_admin)]
Policy = QuotaPolicy


async def _own_of_app(service: RunService, quotas: Quotas, tenant_id: str, app_id: str) -> QuotaLimits | None:
    """The app's own limits (None: none). Raises ApiError 404 when the tenant has no such
    app and nothing stored for it (module docstring)."""
    own = await quotas.store.get(tenant_id, app_id)
    if own is None and not await tenant_has_app(service, tenant_id, app_id):
        raise ApiError(404, "not_found", no_app_message(tenant_id, app_id))
    return own


async def _out(quotas: Quotas, tenant_id: str, app_id: str | None, own: QuotaLimits | None) -> QuotaOut:
    effective = quotas.effective(own, app=app_id is not None)
    usage = await quotas.usage(tenant_id, app_id)
    return QuotaOut(
        app_id=app_id,
        runs_per_minute=own.runs_per_minute if own else None,
        tokens_per_day=own.tokens_per_day if own else None,
        updated_at=own.updated_at if own else None,
        effective=QuotaEffective(
            runs_per_minute=effective.runs_per_minute or None,
            tokens_per_day=effective.tokens_per_day or None,
            runs_per_minute_source=effective.runs_per_minute_source,
            tokens_per_day_source=effective.tokens_per_day_source,
        ),
        usage=QuotaUsageOut(runs_last_minute=usage.runs_last_minute, tokens_today=usage.tokens_today),
    )


@router.get("", response_model=QuotaList, summary="The tenant's quotas")
async def get_quotas(caller: Owner, quotas: Policy) -> QuotaList:
    """The tenant's quota and those of its apps with limits of their own."""
    found = await quotas.store.list(caller.tenant_id)
    own = next((q for q in found if q.app_id is None), None)
    apps = [await _out(quotas, caller.tenant_id, q.app_id, q) for q in found if q.app_id is not None]
    return QuotaList(tenant=await _out(quotas, caller.tenant_id, None, own), apps=apps)


@router.put("", response_model=QuotaOut, summary="Set the tenant's own limits")
async def put_tenant_quota(body: QuotaUpdate, caller: Owner, quotas: Policy) -> QuotaOut:
    """Replace the tenant's own limits (``null``: the operator's default; ``0``: unlimited)."""
    own = await quotas.store.put(
        caller.tenant_id, None, runs_per_minute=body.runs_per_minute, tokens_per_day=body.tokens_per_day
    )
    return await _out(quotas, caller.tenant_id, None, own)


@router.get("/apps/{app_id}", response_model=QuotaOut, responses=NO_APP, summary="An app's quota")
async def get_app_quota(app_id: AppId, caller: Owner, quotas: Policy, service: Service) -> QuotaOut:
    """The app's own limits (none set: only the tenant's hold), what holds and what it used."""
    return await _out(
        quotas, caller.tenant_id, app_id, await _own_of_app(service, quotas, caller.tenant_id, app_id)
    )


@router.put("/apps/{app_id}", response_model=QuotaOut, responses=NO_APP, summary="Set an app's own limits")
async def put_app_quota(
    app_id: AppId, body: QuotaUpdate, caller: Owner, quotas: Policy, service: Service
) -> QuotaOut:
    """Replace the app's own limits (``null``: none, only the tenant's hold; ``0``: unlimited)."""
    await _own_of_app(service, quotas, caller.tenant_id, app_id)
    own = await quotas.store.put(
        caller.tenant_id, app_id, runs_per_minute=body.runs_per_minute, tokens_per_day=body.tokens_per_day
    )
    return await _out(quotas, caller.tenant_id, app_id, own)


@router.delete("/apps/{app_id}", status_code=204, responses=NO_APP, summary="Remove an app's own limits")
async def delete_app_quota(app_id: AppId, caller: Owner, quotas: Policy, service: Service) -> Response:
    """The app keeps only the tenant's limits (204 also when it had none of its own)."""
    await _own_of_app(service, quotas, caller.tenant_id, app_id)
    await quotas.store.delete(caller.tenant_id, app_id)
    return Response(status_code=204)
