"""The process's memory of active API keys: a key revoked through any key store of the
process stops at once; one revoked by another process within ``KEY_CACHE_TTL_S``."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from workers.sql import SqlStore
from workers.sql import keys as keys_module
from workers.sql.keys import SqlKeyStore


async def test_revoke_through_another_store_of_the_process_stops_the_key_at_once(store):
    first, second = SqlKeyStore(store), SqlKeyStore(store)
    await first.ensure_tenant("acme")
    record, plaintext = await first.create_key("acme", name="ci")
    assert (await first.authenticate(plaintext)).id == record.id
    assert (await first.authenticate(plaintext)).id == record.id  # remembered
    await second.revoke_key("acme", record.id)
    assert await first.authenticate(plaintext) is None


async def test_revoke_by_another_process_stops_the_key_within_the_ttl(store, database_url, monkeypatch):
    monkeypatch.setattr(keys_module, "KEY_CACHE_TTL_S", 0.3)
    keys = SqlKeyStore(store)
    await keys.ensure_tenant("acme")
    record, plaintext = await keys.create_key("acme")
    assert await keys.authenticate(plaintext) is not None
    other = await SqlStore.open(database_url)  # another connection writing, as another process would
    try:
        async with other._tx() as conn:
            await conn.execute(sa.update(keys_module.api_keys).where(keys_module.api_keys.c.id == record.id)
                               .values(revoked_at=1.0))
    finally:
        await other.close()
    assert await keys.authenticate(plaintext) is not None  # still remembered here
    await asyncio.sleep(0.35)
    assert await keys.authenticate(plaintext) is None
    assert await keys.authenticate(plaintext.replace(plaintext[-4:], "AAAA")) is None  # a wrong secret never matches
