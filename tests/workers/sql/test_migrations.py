"""Alembic migrations of the SQL store: upgrade from empty (``database_url`` of each
backend, marked to have no schema), downgrade to base, and the migrated schema equals the
store's tables (``workers.sql.tables``: autogenerate finds no difference)."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from workers.sql import SqlStore, current_revision, downgrade, head_revision, upgrade
from workers.sql.connect import make_engine
from workers.sql.tables import metadata

pytestmark = pytest.mark.empty_database  # upgrade from nothing, on both backends


def _store_table(name, type_, parent_names) -> bool:
    """Compare the run store's tables only: the knowledge tables (``kb_*``, migration 0006)
    are not in ``workers.sql.tables`` (the knowledge store writes them with SQL of its own) and a
    column that depends on the server (pgvector); tests/workers/knowledge checks them."""
    table = name if type_ == "table" else parent_names.get("table_name")
    return not (table or "").startswith("kb_")


async def _differences(url: str) -> list:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"compare_type": True, "include_name": _store_table}), metadata))
    finally:
        await engine.dispose()


async def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda sync: __import__("sqlalchemy").inspect(sync).get_table_names()))
    finally:
        await engine.dispose()


async def test_upgrade_from_empty_matches_models_and_downgrades_to_base(database_url):
    url = database_url
    assert await current_revision(url) is None
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert await _differences(url) == []
    assert set(metadata.tables) <= await _tables(url)
    await upgrade(url)  # up to date: nothing to do
    await downgrade(url, "base")
    assert await current_revision(url) is None
    assert not set(metadata.tables) & await _tables(url)
    await upgrade(url, head_revision())
    assert await _differences(url) == []


async def test_open_migrates_on_first_use(database_url):
    store = await SqlStore.open(database_url)
    try:
        assert await store.list_runs("default") == []
    finally:
        await store.close()
    assert await current_revision(database_url) == head_revision()


async def test_tenants_of_an_older_database_count_as_offered_the_examples(database_url):
    # whether a server offered them the examples before cannot be told: examples their
    # users deleted must not come back on the next start
    import sqlalchemy as sa

    await upgrade(database_url, "0013")
    engine = make_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("INSERT INTO tenants (tenant_id, name, created_at) VALUES ('default', 'd', 5)"))
        await upgrade(database_url)
        async with engine.connect() as conn:
            offered = (await conn.execute(sa.text("SELECT examples_offered_at FROM tenants"))).scalar()
    finally:
        await engine.dispose()
    assert offered == 5
