"""A scope's quota limits remembered in the process (workers.sql.quotas): run starts that
find the entry expired share one read of them; limits set meanwhile are read anew."""

from __future__ import annotations

import asyncio

from workers.sql import quotas as quotas_module
from workers.sql.keys import SqlKeyStore
from workers.sql.quotas import SqlQuotaStore


async def test_starts_that_find_the_limits_expired_share_one_read(store, monkeypatch):
    await SqlKeyStore(store).ensure_tenant("acme")
    limits = SqlQuotaStore(store)
    await limits.put("acme", None, runs_per_minute=7, tokens_per_day=None)
    quotas_module._remembered.clear()
    count, tx = [0], store._tx

    def counted():
        count[0] += 1
        return tx()

    monkeypatch.setattr(store, "_tx", counted)
    found = await asyncio.gather(*(limits.limits("acme", "app") for _ in range(16)))
    assert count[0] == 1 and {tenant.runs_per_minute for tenant, _app in found} == {7}
    assert (await limits.limits("acme", "app"))[0].runs_per_minute == 7 and count[0] == 1  # remembered
    monkeypatch.setattr(store, "_tx", tx)
    await limits.put("acme", None, runs_per_minute=9, tokens_per_day=None)
    assert (await limits.limits("acme", "app"))[0].runs_per_minute == 9  # forgotten by the change
