"""``/v1/keys``: API keys of the caller's tenant, for admin keys only.

``POST`` creates a key and returns its plaintext once (only its hash is kept);
``GET`` lists the keys (prefix, scope, last use, revocation; never a secret);
``DELETE /{id}`` revokes one. A key of another tenant is 404, as one that does not
exist. An admin key scoped to an app sees and creates only keys of that app, so it
cannot make itself a tenant-wide key. A key scoped to an app the tenant does not have
(:func:`api.quotas.tenant_has_app`) is refused (422 naming ``app_id``): it could only
ever get 404.
"""

from __future__ import annotations

from engine.ports import KeyNotFound
from schemas.api import ErrorBody, KeyCreate, KeyCreated, KeyList, KeyOut

from ..auth import Admin, Keys, Service
from ..errors import ApiError
from ..quotas import no_app_message, tenant_has_app
from ..screened_router import ScreenedRouter
from .runs import link

__all__ = ["router"]

router = ScreenedRouter(
    prefix="/v1/keys", tags=["keys"], responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody}}
)


@router.post(
    "",
    status_code=201,
    response_model=KeyCreated,
    summary="Create an API key (shown once)",
    responses={
        201: {
            "links": {
                "RevokeKey": link(
                    "revoke_key_v1_keys__key_id__delete", "revoke the key", key_id="$response.body#/key/id"
                )
            }
        }
    },
)
async def create_key(body: KeyCreate, caller: Admin, keys: Keys, service: Service) -> KeyCreated:
    """A new key of the caller's tenant; ``secret`` is the key, not shown again."""
    if caller.app_id is not None and body.app_id != caller.app_id:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: it can only create keys of that app",
        )
    if body.app_id is not None and not await tenant_has_app(service, caller.tenant_id, body.app_id):
        message = no_app_message(caller.tenant_id, body.app_id)
        raise ApiError(
            422,
            "invalid_request",
            f"app_id: {message}",
            problems=[{"loc": ["body", "app_id"], "message": message, "code": "unknown_app"}],
        )
    record, plaintext = await keys.create_key(
        caller.tenant_id, name=body.name, admin=body.admin, app_id=body.app_id
    )
    return KeyCreated(key=KeyOut.of(record), secret=plaintext)


@router.get("", response_model=KeyList, summary="List the tenant's API keys")
async def list_keys(caller: Admin, keys: Keys) -> KeyList:
    """Oldest first, revoked ones included."""
    found = await keys.list_keys(caller.tenant_id)
    return KeyList(keys=[KeyOut.of(k) for k in found if caller.app_id is None or k.app_id == caller.app_id])


@router.delete(
    "/{key_id}", response_model=KeyOut, responses={404: {"model": ErrorBody}}, summary="Revoke an API key"
)
async def revoke_key(key_id: str, caller: Admin, keys: Keys) -> KeyOut:
    """The key no longer authenticates (idempotent). 404 for a key of another tenant."""
    if caller.app_id is not None:
        mine = {k.id for k in await keys.list_keys(caller.tenant_id) if k.app_id == caller.app_id}
        if key_id not in mine:
            raise KeyNotFound(f"no API key {key_id}")
    return KeyOut.of(await keys.revoke_key(caller.tenant_id, key_id))
