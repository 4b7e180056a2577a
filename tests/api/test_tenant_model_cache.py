"""Each tenant's model registry as the API's run service reads it (api.tenant_models,
api.model_overrides) on a real SQL store: callers that find the tenant's entry expired
share the read in flight instead of each reading; a read in flight when the tenant is
forgotten (a change through the routes) serves who joined it but is not remembered; a
failed read reaches every caller of it and the next call reads again."""

from __future__ import annotations

import asyncio

import pytest

from api.model_overrides import OverriddenModelSource
from engine.ports import StoreError
from engine.settings import Settings
from nodes.llm.model_registry import load_registry
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
    assert snapshot.calls == 1 and overrides.calls == 1
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
    overrides = source.overrides.overrides
    overrides.open.clear()
    before = asyncio.create_task(source.models_for("acme"))  # read the overrides before the change
    await overrides.read.wait()  # done, and held by the gate
    await source.overrides.set_override("acme", model, {"max_context": 1234})
    source.forget("acme")  # as the route that set it does
    overrides.open.set()
    old = await before
    after = await source.models_for("acme")  # a read of its own, not the one from before
    assert overrides.calls == 2 and after.get(model, None).max_context == 1234
    assert old.get(model, None).max_context != 1234
    assert await source.models_for("acme") is after


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
