"""Fixtures of the SQL store tests: every store test runs on SQLite and on PostgreSQL, on
a database of its own (``database_url`` of :mod:`tests.support.databases`)."""

from __future__ import annotations

import time
import uuid

import pytest

from schemas.records import OwnerInfo
from schemas.run import RunState
from workers.sql import SqlStore


@pytest.fixture
async def store(database_url):
    """An open store (schema at head), closed after the test."""
    opened = await SqlStore.open(database_url)
    yield opened
    await opened.close()


def new_state(tenant: str = "default", **fields) -> RunState:
    """A running state with a unique run id."""
    return RunState(run_id=f"run-{uuid.uuid4().hex}", workflow_id="wf", workflow_hash="h" * 8, tenant_id=tenant,
                    status=fields.pop("status", "running"), **fields)


def owner(owner_id: str = "owner-1", seconds: float = 60.0) -> OwnerInfo:
    """An owner whose lease ends ``seconds`` from now."""
    return OwnerInfo(id=owner_id, host="host-a", pid=4242, lease_until=time.time() + seconds)
