"""Who calls: the API key of a request, as a :class:`Principal` (the app's parts are
typed dependencies of :mod:`api.deployment`, re-exported here: ``Service``, ``Keys``,
``Knowledge``).

Every route but ``/health``, ``/ready`` and the OpenAPI document depends on :func:`principal`: a
request without ``Authorization: Bearer <key>``, or with a malformed, unknown or
revoked key, gets 401 with ``WWW-Authenticate: Bearer`` and a JSON error that never
repeats the key. Routes scope every query by ``Principal.tenant_id`` (and, for a key
scoped to an app, by its ``app_id``); :func:`admin` also requires an admin key (403).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engine.ports import KeyStore

from .deployment import Keys, Knowledge, Service
from .errors import ApiError

__all__ = [
    "Admin",
    "Caller",
    "Keys",
    "Knowledge",
    "Principal",
    "Service",
    "admin",
    "authenticate",
    "bearer",
    "principal",
]

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="an API key (`fl_<prefix>_<secret>`; `flowloom keys create`)",
)


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: the key's tenant, the key's id, the app it is scoped to (None: the
    whole tenant) and whether it may manage the tenant's keys."""

    tenant_id: str
    key_id: str
    app_id: str | None = None
    admin: bool = False


def _unauthorized(message: str, error: str | None = None) -> ApiError:
    challenge = 'Bearer realm="flowloom"' + (f', error="{error}"' if error else "")
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": challenge})


async def principal(
    keys: Keys, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The caller of a request. Raises ApiError 401 without a valid, active key."""
    return await authenticate(keys, credentials)


async def authenticate(keys: KeyStore, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The caller holding ``credentials`` (the bearer token of a request, None when it sent
    none), checked against ``keys``: :func:`principal` without FastAPI's dependency solving,
    for a dependency that gives a route several parts at once. Raises ApiError 401 without a
    valid, active key."""
    if credentials is None:
        raise _unauthorized(
            "missing API key: send `Authorization: Bearer <key>` (create one with `flowloom keys create`)"
        )
    key = await keys.authenticate(credentials.credentials)
    if key is None:
        raise _unauthorized("invalid or revoked API key", "invalid_token")
    return Principal(tenant_id=key.tenant_id, key_id=key.id, app_id=key.app_id, admin=key.admin)


Caller = Annotated[Principal, Depends(principal)]


async def admin(caller: Caller) -> Principal:
    """The caller, who must hold an admin key. Raises ApiError 403 otherwise."""
    if not caller.admin:
        raise ApiError(403, "forbidden", "this needs an admin key (`flowloom keys create --admin`)")
    return caller


Admin = Annotated[Principal, Depends(admin)]
