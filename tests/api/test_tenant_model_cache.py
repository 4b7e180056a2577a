"""Each tenant's model registry as the API's run service reads it (api.tenant_models,
api.model_overrides) on a real SQL store: an expired entry is read in one transaction,
providers and overrides together (one commit, counted by the database); callers that find
the tenant's entry expired share the read in flight instead of each reading; a read in
flight when the tenant is forgotten (a change through the routes) serves who joined it but
is not remembered; a failed read reaches every caller of it and the next call reads again."""

from __future__ import annotations

import asyncio

import pytest

from api import model_overrides, tenant_models
from api.model_overrides import OverriddenModelSource
from engine.ports import StoreError
from engine.settings import Settings
from nodes.llm.model_registry import load_registry
from tests.engine.test_launch_commits import _Commits
from workers.sql import SqlStore
from workers.sql.model_overrides import SqlModelOverrideStore
from workers.sql.providers import SqlProviderStore


class _Gate:
    """Counts calls of a store method; each reads at once, then is held until released."""

    def __init__(self, method) -> None:
        self.method, self.calls, self.open, self.read = method, 0, asyncio.Event(), asyncio.Event()
        self.open.set()
        self.fail: Exception | None = None

    async def __call__(self, *args):
        self.calls += 1
        found = await self.method(*args)
        self.read.set()
        await self.open.wait()
        if self.fail is not None:
            raise self.fail
        return found


@pytest.fixture
async def source(database_url):
    store = await SqlStore.open(database_url)

    def no_box():
        raise AssertionError("no tenant key is read here")

    made = OverriddenModelSource(
        SqlProviderStore(store, no_box),
        SqlModelOverrideStore(store),
        load_registry(env={"OPENAI_API_KEY": "sk-operator"}),
        Settings(),
    )
    made.providers.snapshot = _Gate(made.providers.snapshot)  # type: ignore[method-assign]
    made.overrides.overrides = _Gate(made.overrides.overrides)  # type: ignore[method-assign]
    yield made
    await store.close()


async def test_callers_of_an_expired_entry_share_one_read(source):
    snapshot, overrides = source.providers.snapshot, source.overrides.overrides
    snapshot.open.clear()
    callers = [asyncio.create_task(source.models_for("acme")) for _ in range(16)]
    await asyncio.sleep(0.05)
    snapshot.open.set()
    found = await asyncio.gather(*callers)
    assert snapshot.calls == 1 and overrides.calls == 0  # the overrides come in the snapshot
    assert all(registry is found[0] for registry in found)
    assert await source.models_for("acme") is found[0] and snapshot.calls == 1  # remembered


async def test_a_cancelled_caller_does_not_cancel_the_read_of_the_others(source):
    snapshot = source.providers.snapshot
    snapshot.open.clear()
    first, second = (asyncio.create_task(source.models_for("acme")) for _ in range(2))
    await asyncio.sleep(0.05)
    first.cancel()
    snapshot.open.set()
    assert (await second) is not None and first.cancelled() and snapshot.calls == 1


async def test_a_read_in_flight_when_the_tenant_is_forgotten_is_not_remembered(source):
    model = next(iter(source.base.names()))
    snapshot = source.providers.snapshot
    snapshot.open.clear()
    before = asyncio.create_task(source.models_for("acme"))  # read the overrides before the change
    await snapshot.read.wait()  # done, and held by the gate
    await source.overrides.set_override("acme", model, {"max_context": 1234})
    source.forget("acme")  # as the route that set it does
    snapshot.open.set()
    old = await before
    after = await source.models_for("acme")  # a read of its own, not the one from before
    assert snapshot.calls == 2 and after.get(model, None).max_context == 1234
    assert old.get(model, None).max_context != 1234
    assert await source.models_for("acme") is after and snapshot.calls == 2


# PostgreSQL only: a read commits nothing on SQLite (its driver begins a transaction at
# the first write), so there is nothing to count there.
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_an_expired_entry_is_one_transaction_for_providers_and_overrides(database_url, monkeypatch):
    # Runs ask for the tenant's models once a second while they come (each entry is
    # remembered a second): one commit of the database per expiry, not one per table read.
    store = await SqlStore.open(database_url)
    try:
        source = OverriddenModelSource(SqlProviderStore(store, lambda: None), SqlModelOverrideStore(store),
                                       load_registry(env={"OPENAI_API_KEY": "sk-operator"}), Settings())
        model = next(iter(source.base.names()))
        await source.overrides.set_override("acme", model, {"max_context": 1234})
        for module in (tenant_models, model_overrides):
            monkeypatch.setattr(module, "CACHE_TTL_S", -1.0)  # every entry expired at once
        commits = _Commits(store, database_url)
        await commits.start()
        before = await commits.count()
        found = [await source.models_for("acme") for _ in range(3)]
        after = await commits.count()
        assert all(registry.get(model, None).max_context == 1234 for registry in found)
        assert after - before - 1 == 3  # less the flush of the counters by the count
    finally:
        await store.close()


async def test_a_failed_read_reaches_every_caller_and_the_next_call_reads_again(source):
    snapshot = source.providers.snapshot
    snapshot.open.clear()
    snapshot.fail = StoreError("the store is away")
    callers = [asyncio.create_task(source.models_for("acme")) for _ in range(3)]
    await asyncio.sleep(0.05)
    snapshot.open.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(outcome, StoreError) for outcome in outcomes) and snapshot.calls == 1
    snapshot.fail = None
    assert await source.models_for("acme") is not None and snapshot.calls == 2
