"""The checkpoint's run UPDATE finds the run by its primary key, on a new database too.

A database whose ``runs`` table has no statistics yet (a new one, until autovacuum
analyzes it) made PostgreSQL's planner pick the (tenant, workflow) index for the
checkpoint's ``runs.run_id = $2 AND runs.tenant_id = $3``: every checkpoint then read one
index entry per run of the tenant, a cost that grew with each run. These tests read the
plans of the statement a checkpoint runs, on a database copied from a freshly migrated
one, with a few runs of one tenant in it.
"""

from __future__ import annotations

import asyncpg
from sqlalchemy.engine import make_url

from workers.sql.checkpoint import CheckpointWrite, PostgresCheckpointWriter, _raw_connection
from workers.sql.rows import run_columns

from .conftest import new_state, owner

#: PostgreSQL's two ways of planning a prepared statement: with its parameters' values
#: (the first five executions) and without (the generic plan it may keep after that)
PLAN_MODES = ("force_custom_plan", "force_generic_plan")
#: the parameters' types of the PostgreSQL checkpoint statement, for ``PREPARE``
PARAM_TYPES = "json, text, text, text, json, json, json"


async def _runs_of_one_tenant(store, count: int = 3):
    states = [new_state(tenant="t-plan") for _ in range(count)]
    for state in states:
        await store.create_run(state, owner=owner())
    return states[-1]


def _literal(value: str | None) -> str:
    """``value`` as an SQL literal (``EXECUTE`` takes no bind parameters)."""
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


async def _postgres_plans(database_url: str, sql: str, args: tuple) -> dict[str, str]:
    """EXPLAIN of ``sql`` with ``args`` in each of :data:`PLAN_MODES`, on a connection of its own."""
    url = make_url(database_url)
    conn = await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password,
                                 database=url.database)
    try:
        await conn.execute(f"PREPARE checkpoint_plan ({PARAM_TYPES}) AS {sql}")
        values = ", ".join(_literal(value) for value in args)
        plans = {}
        for mode in PLAN_MODES:
            await conn.execute(f"SET plan_cache_mode = {mode}")
            rows = await conn.fetch(f"EXPLAIN EXECUTE checkpoint_plan({values})")
            plans[mode] = "\n".join(row[0] for row in rows)
        return plans
    finally:
        await conn.close()


async def test_the_checkpoint_update_finds_the_run_by_its_primary_key(store, database_url):
    state = await _runs_of_one_tenant(store)
    write = CheckpointWrite(state.run_id, state.tenant_id, "owner-1", run_columns(state))
    if store.backend == "postgresql":
        writer = store._writer
        assert isinstance(writer, PostgresCheckpointWriter)
        plans = await _postgres_plans(database_url, writer._statement(tuple(write.run_values)), writer._args(write))
        for mode, plan in plans.items():
            scans = [line.strip() for line in plan.splitlines() if " on runs " in line and "Scan" in line]
            assert scans and all("using runs_pkey on runs" in scan for scan in scans), (mode, plan)
    else:
        update, _batches = store._writer._statements(write)
        async with store._lock:
            driver = (await _raw_connection(await store._connection())).driver_connection
            rows = await driver.execute_fetchall(f"EXPLAIN QUERY PLAN {update[0]}", update[1])
        details = [row[3] for row in rows]
        assert any("(run_id=?)" in detail and "runs" in detail for detail in details), details
