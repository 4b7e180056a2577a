"""Fixtures of the engine tests: ``database_url``, a fresh run store of each backend
(SQLite in the test's folder; a PostgreSQL database made for the test), and
``model_service``, a run service over it whose models are the scripted OpenAI server
(a test module sets the server's ``responder``)."""

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.service import RunService, Stores
from engine.settings import Settings
from tests.support.catalog import TEST_CATALOG
from workers.sql import SqlStore


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    return request.getfixturevalue("make_postgres_database")()


@pytest.fixture
async def model_service(database_url, tmp_path, scripted_registry) -> AsyncIterator[Any]:
    store = await SqlStore.open(database_url)
    yield RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                     settings=Settings(home=tmp_path), models=scripted_registry)
    await store.close()
