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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

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
    "missing_key",
    "principal",
]

_HOW = "send `Authorization: Bearer <key>` (create one with `flowloom keys create`)"
# Scheme names that may be repeated in a message: anything else in the scheme's place
# may be the key itself (a header holding the bare key), and a key is never repeated.
_KNOWN_SCHEMES = frozenset({"basic", "digest", "token", "apikey", "api-key", "key", "jwt", "hmac"})


def missing_key(headers: Mapping[str, str]) -> ApiError:
    """The 401 of a request with no usable bearer key, naming what it sent instead (another
    ``Authorization`` scheme, a bare key, an ``X-API-Key`` header) so the caller knows what
    to change; never repeating what was sent."""
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer":
        message = f"the Authorization header has no key after `Bearer`: {_HOW}"
    elif scheme.lower() in _KNOWN_SCHEMES:
        message = f"the Authorization header uses the `{scheme}` scheme; Flowloom takes bearer keys: {_HOW}"
    elif scheme:
        kind = "a key" if scheme.startswith("fl_") and not value else "a value"
        message = f"the Authorization header holds {kind} without the `Bearer ` prefix: {_HOW}"
    elif "x-api-key" in headers or "api-key" in headers:
        message = f"the key was sent in an API-key header, which Flowloom does not read: {_HOW}"
    else:
        message = f"missing API key: {_HOW}"
    return _unauthorized(message)


class _Bearer(HTTPBearer):
    """FastAPI's bearer scheme (its OpenAPI security entry), raising :func:`missing_key`'s
    401 where FastAPI's would give None, so the message says what the request sent."""

    async def __call__(self, request: HTTPConnection) -> HTTPAuthorizationCredentials | None:
        credentials = await super().__call__(request)
        if credentials is None:
            raise missing_key(request.headers)
        return credentials


bearer = _Bearer(
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
        raise missing_key({})
    key = await keys.authenticate(credentials.credentials)
    if key is None:
        # the likeliest first-day cause: a key created against another store than the server's
        raise _unauthorized(
            "invalid or revoked API key (a key works on the server whose store it was created in: run "
            "`flowloom keys create` with the server's FLOWLOOM_HOME / FLOWLOOM_DATABASE_URL)",
            "invalid_token",
        )
    return Principal(tenant_id=key.tenant_id, key_id=key.id, app_id=key.app_id, admin=key.admin)


Caller = Annotated[Principal, Depends(principal)]


async def admin(caller: Caller) -> Principal:
    """The caller, who must hold an admin key. Raises ApiError 403 otherwise."""
    if not caller.admin:
        raise ApiError(403, "forbidden", "this needs an admin key (`flowloom keys create --admin`)")
    return caller


Admin = Annotated[Principal, Depends(admin)]
