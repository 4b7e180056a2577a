"""The process's memory of active API keys: a key revoked through any key store of the
process stops at once; one revoked by another process within ``KEY_CACHE_TTL_S``."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

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
    # The module's clock is the test's: how long opening another store takes on a loaded
    # machine must not decide whether the key is still remembered.
    clock = [1000.0]
    monkeypatch.setattr(keys_module, "time", SimpleNamespace(time=time.time, monotonic=lambda: clock[0]))
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
    clock[0] += keys_module.KEY_CACHE_TTL_S * 0.9
    assert await keys.authenticate(plaintext) is not None  # still remembered here
    clock[0] += keys_module.KEY_CACHE_TTL_S * 0.2
    assert await keys.authenticate(plaintext) is None
    assert await keys.authenticate(plaintext.replace(plaintext[-4:], "AAAA")) is None  # a wrong secret never matches


def _count_transactions(store, monkeypatch) -> list[int]:
    """Count the store's SQLAlchemy transactions from now on (a one-item list)."""
    count, tx = [0], store._tx

    def counted():
        count[0] += 1
        return tx()

    monkeypatch.setattr(store, "_tx", counted)
    return count


async def test_requests_that_find_their_key_expired_share_one_look_up(store, monkeypatch):
    keys = SqlKeyStore(store)
    await keys.ensure_tenant("acme")
    record, plaintext = await keys.create_key("acme")
    assert (await keys.authenticate(plaintext)).id == record.id
    keys_module._active.clear()  # expired
    reads = _count_transactions(store, monkeypatch)
    found = await asyncio.gather(*(keys.authenticate(plaintext) for _ in range(16)))
    assert reads[0] == 1 and {key.id for key in found} == {record.id}
    assert len({id(key) for key in found}) == 16  # each caller its own copy
    assert (await keys.authenticate(plaintext)).id == record.id and reads[0] == 1  # remembered


async def test_a_look_up_in_flight_when_a_key_is_revoked_is_not_remembered(store, monkeypatch):
    keys = SqlKeyStore(store)
    await keys.ensure_tenant("acme")
    record, plaintext = await keys.create_key("acme")
    started, resume = asyncio.Event(), asyncio.Event()
    look_up = SqlKeyStore._look_up

    async def held(self, *args):
        found = await look_up(self, *args)  # read before the revocation
        started.set()
        await resume.wait()
        return found

    monkeypatch.setattr(SqlKeyStore, "_look_up", held)
    before = asyncio.create_task(keys.authenticate(plaintext))
    await started.wait()
    monkeypatch.setattr(SqlKeyStore, "_look_up", look_up)
    await keys.revoke_key("acme", record.id)
    assert await keys.authenticate(plaintext) is None  # did not join the look-up from before
    resume.set()
    assert (await before).id == record.id  # asked before the revocation
    assert await keys.authenticate(plaintext) is None  # what it found is not remembered
