"""Fixtures of the engine tests: ``model_service``, a run service over a fresh run store
of each backend (``database_url`` of :mod:`tests.support.databases`) whose models are the
scripted OpenAI server (a test module sets the server's ``responder``)."""

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.service import RunService, Stores
from engine.settings import Settings
from tests.support.catalog import TEST_CATALOG
from workers.sql import SqlStore


@pytest.fixture
async def model_service(database_url, tmp_path, scripted_registry) -> AsyncIterator[Any]:
    store = await SqlStore.open(database_url)
    yield RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                     settings=Settings(home=tmp_path), models=scripted_registry)
    await store.close()
