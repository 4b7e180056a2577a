"""Tenants and API keys in the SQL store (the engine's ``KeyStore`` port).

A key reads ``fl_<prefix>_<secret>``: ``prefix`` is 8 lower-case letters and digits,
unique, stored as it is and shown in lists; ``secret`` is 43 URL-safe random characters
(256 bits) of which only the SHA-256 (hex) is stored. Authenticating looks the key up
by its prefix and compares the hashes in constant time, so neither a timing nor a
stolen database gives a usable key. The plaintext exists only in the return value of
:meth:`SqlKeyStore.create_key`.

Authenticating is on every request, so a key found active is remembered in the process
for :data:`KEY_CACHE_TTL_S` seconds, under the SHA-256 of the whole plaintext (never the
plaintext itself). Revoking a key through any :class:`SqlKeyStore` of this process forgets
it at once; a key revoked by another process (``flowloom keys revoke``) stops working here
within :data:`KEY_CACHE_TTL_S` seconds. Unknown, malformed and revoked keys are never
remembered, so a key created elsewhere works at once. Requests that find their key's
entry expired share the look-up in flight (:class:`~engine.shared_reads.SharedReads`).

:class:`SqlKeyStore` shares the connection (and its lock) of a :class:`SqlStore`::

    keys = SqlKeyStore(store)
    record, plaintext = await keys.create_key("default", name="ci", admin=True)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import time
import uuid
from collections import OrderedDict

import sqlalchemy as sa
from sqlalchemy import exc

from engine.ports import KeyNotFound, StoreError, TenantNotFound
from engine.shared_reads import SharedReads
from schemas.records import ApiKey, Tenant

from .rows import RowData
from .store import SqlStore, dialect_insert
from .tables import api_keys, tenants

__all__ = ["KEY_PATTERN", "SqlKeyStore", "hash_secret", "parse_key"]


#: The shape of a key's plaintext: ``fl_`` + 8-character prefix + ``_`` + the secret.
KEY_PATTERN = re.compile(r"^fl_([a-z0-9]{8})_([A-Za-z0-9_-]{32,128})$")
_PREFIX_ALPHABET = string.ascii_lowercase + string.digits
_PREFIX_TRIES = 5
#: ``last_used_at`` is rewritten at most this often (seconds): a write per request would make
#: every authenticated request a write transaction (on SQLite, serialized with the runs' writes)
LAST_USED_RESOLUTION_S = 60.0
#: seconds an active key stays remembered in the process (module docstring): the longest a key
#: revoked by another process keeps working here; short, since a lookup is cheap next to a run
KEY_CACHE_TTL_S = 1.0
#: keys remembered at most (oldest dropped first)
_KEY_CACHE_MAX = 1024
#: (database URL, SHA-256 of the plaintext) -> (time remembered until, the key); shared by
#: every store of the process, so a revocation through one is seen by all
_active: OrderedDict[tuple[str, str], tuple[float, ApiKey]] = OrderedDict()
#: look-ups in flight, by the same key as ``_active``
_reads: SharedReads[tuple[str, str]] = SharedReads()


def hash_secret(secret: str) -> str:
    """SHA-256 of the secret as hex (what the store keeps)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(plaintext: str) -> tuple[str, str] | None:
    """``(prefix, secret)`` of a well-formed key, else None."""
    match = KEY_PATTERN.match(plaintext.strip())
    return (match.group(1), match.group(2)) if match else None


def _key_of(row: RowData) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        prefix=row["prefix"],
        app_id=row["app_id"],
        admin=bool(row["admin"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )


_KEY_COLUMNS = [
    api_keys.c[name]
    for name in (
        "id",
        "tenant_id",
        "name",
        "prefix",
        "app_id",
        "admin",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
]


class SqlKeyStore:
    """Tenants and API keys on the tables of :mod:`workers.sql.tables`, through the
    connection of ``store`` (opened and migrated by :meth:`SqlStore.open`).

    Errors of the database surface as :class:`engine.ports.StoreError` (URL masked).
    """

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._url = str(store.url)

    # ------------------------------------------------------------------ tenants

    async def ensure_tenant(self, tenant_id: str, name: str = "") -> tuple[Tenant, bool]:
        """The tenant, created when missing; True when this call created it."""
        insert = dialect_insert(self.store.backend)
        stmt = insert(tenants).on_conflict_do_nothing(index_elements=[tenants.c.tenant_id])
        async with self.store._tx() as conn:
            created = (
                await conn.execute(
                    stmt, {"tenant_id": tenant_id, "name": name or tenant_id, "created_at": time.time()}
                )
            ).rowcount == 1
            row = (
                (await conn.execute(sa.select(tenants).where(tenants.c.tenant_id == tenant_id)))
                .mappings()
                .one()
            )
        return Tenant(id=row["tenant_id"], name=row["name"], created_at=row["created_at"]), created

    async def examples_offered(self, tenant_id: str) -> bool:
        """True once :meth:`mark_examples_offered` marked the tenant (False: no such tenant)."""
        stmt = sa.select(tenants.c.examples_offered_at).where(tenants.c.tenant_id == tenant_id)
        async with self.store._tx() as conn:
            return (await conn.execute(stmt)).scalar() is not None

    async def mark_examples_offered(self, tenant_id: str) -> None:
        """Mark the tenant offered the bundled examples (the first time only: the time kept
        is the first offer's)."""
        stmt = (
            sa.update(tenants)
            .where(tenants.c.tenant_id == tenant_id, tenants.c.examples_offered_at.is_(None))
            .values(examples_offered_at=time.time())
        )
        async with self.store._tx() as conn:
            await conn.execute(stmt)

    async def get_tenant(self, tenant_id: str) -> Tenant:
        """The tenant. Raises TenantNotFound."""
        async with self.store._tx() as conn:
            row = (
                (await conn.execute(sa.select(tenants).where(tenants.c.tenant_id == tenant_id)))
                .mappings()
                .first()
            )
        if row is None:
            raise TenantNotFound(f"no tenant {tenant_id!r}")
        return Tenant(id=row["tenant_id"], name=row["name"], created_at=row["created_at"])

    # --------------------------------------------------------------------- keys

    async def create_key(
        self, tenant_id: str, *, name: str = "", admin: bool = False, app_id: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key of the tenant and its plaintext (shown once). Raises TenantNotFound."""
        await self.get_tenant(tenant_id)
        for _ in range(_PREFIX_TRIES):  # a prefix collision (1 in 36**8) gets a new prefix
            prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(8))
            secret = secrets.token_urlsafe(32)
            key = ApiKey(
                id=f"key_{uuid.uuid4().hex[:16]}",
                tenant_id=tenant_id,
                name=name,
                prefix=prefix,
                app_id=app_id,
                admin=admin,
                created_at=time.time(),
            )
            row = {
                **key.model_dump(exclude={"last_used_at", "revoked_at"}),
                "secret_hash": hash_secret(secret),
            }
            try:
                async with self.store._tx() as conn:
                    await conn.execute(sa.insert(api_keys), row)
            except StoreError as error:
                if isinstance(error.__cause__, exc.IntegrityError):
                    continue
                raise
            return key, f"fl_{prefix}_{secret}"
        raise RuntimeError("could not find a free key prefix")  # pragma: no cover - astronomically unlikely

    async def authenticate(self, plaintext: str) -> ApiKey | None:
        """The active key of this plaintext, its ``last_used_at`` set to now when it was
        older than :data:`LAST_USED_RESOLUTION_S` (or never set); else None."""
        parsed = parse_key(plaintext)
        if parsed is None:
            return None
        prefix, secret = parsed
        now = time.time()
        cache_key = (self._url, hash_secret(plaintext.strip()))
        cached = _active.get(cache_key)
        if cached is not None:
            if cached[0] > time.monotonic():
                return cached[1].model_copy()
            del _active[cache_key]
        key = await _reads.read(cache_key, lambda: self._look_up(prefix, secret, cache_key, now))
        return None if key is None else key.model_copy()  # every caller its own copy

    async def _look_up(
        self, prefix: str, secret: str, cache_key: tuple[str, str], now: float
    ) -> ApiKey | None:
        """Read the key of ``prefix`` and check ``secret``: the active key (remembered unless
        a key was revoked meanwhile), or None."""
        epoch = _reads.epoch
        async with self.store._tx() as conn:
            row = (
                (
                    await conn.execute(
                        sa.select(*_KEY_COLUMNS, api_keys.c.secret_hash).where(api_keys.c.prefix == prefix)
                    )
                )
                .mappings()
                .first()
            )
            if row is None or row["revoked_at"] is not None:
                hmac.compare_digest(
                    hash_secret(secret), "0" * 64
                )  # same work whether the prefix exists or not
                return None
            if not hmac.compare_digest(hash_secret(secret), row["secret_hash"]):
                return None
            last = row["last_used_at"]
            if last is None or now - last >= LAST_USED_RESOLUTION_S:
                await conn.execute(
                    sa.update(api_keys).where(api_keys.c.id == row["id"]).values(last_used_at=now)
                )
                last = now
        key = _key_of(row)
        key.last_used_at = last
        if _reads.epoch == epoch:  # no key revoked meanwhile
            _active[cache_key] = (time.monotonic() + KEY_CACHE_TTL_S, key.model_copy())
            while len(_active) > _KEY_CACHE_MAX:
                _active.popitem(last=False)
        return key

    async def list_keys(self, tenant_id: str) -> list[ApiKey]:
        """The tenant's keys, revoked ones included, oldest first."""
        stmt = (
            sa.select(*_KEY_COLUMNS)
            .where(api_keys.c.tenant_id == tenant_id)
            .order_by(api_keys.c.created_at, api_keys.c.id)
        )
        async with self.store._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_key_of(row) for row in rows]

    async def revoke_key(self, tenant_id: str, key_id: str) -> ApiKey:
        """Revoke the tenant's key (a revoked key keeps its first revocation time).
        Raises KeyNotFound, also for another tenant's key."""
        mine = sa.and_(api_keys.c.id == key_id, api_keys.c.tenant_id == tenant_id)
        self._forget(key_id)
        async with self.store._tx() as conn:
            await conn.execute(
                sa.update(api_keys)
                .where(mine, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            row = (await conn.execute(sa.select(*_KEY_COLUMNS).where(mine))).mappings().first()
        self._forget(key_id)  # also a lookup that raced the UPDATE and remembered the key
        if row is None:
            raise KeyNotFound(f"no API key {key_id} for tenant {tenant_id!r}")
        return _key_of(row)

    @staticmethod
    def _forget(key_id: str) -> None:
        """Drop ``key_id`` from the process's remembered keys (whatever database); a look-up
        in flight serves who asked before but is neither joined nor remembered."""
        _reads.forget()
        for cache_key in [k for k, (_until, key) in _active.items() if key.id == key_id]:
            _active.pop(cache_key, None)
