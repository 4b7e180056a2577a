"""``GET /ready`` checks what ``GET /health`` does not: the run store answers a query
(SQLite and PostgreSQL), a SQLite store's disk has room, Redis answers when it is
configured. A failed check is 503 ``not_ready`` naming it while ``/health`` (liveness)
stays 200; neither needs a key."""

from __future__ import annotations

import socket

import pytest
from sqlalchemy.engine import make_url

import api.routes.health as health
from engine.settings import Settings
from tests.support.postgres import _admin

from .conftest import open_api


async def test_ready_answers_200_with_its_checks_while_the_store_answers(api):
    ready = await api.client.get("/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready" and ready.json()["checks"] == {"store": {"ok": True, "message": ""}}
    assert (await api.client.get("/health")).json()["status"] == "ok"


@pytest.fixture
def postgres_url(make_postgres_database) -> str:
    """A fresh PostgreSQL database (made in a sync fixture: its maker runs its own loop)."""
    return make_postgres_database()


@pytest.mark.slow
async def test_a_postgresql_store_that_stops_answering_is_not_ready_while_health_stays_ok(
        postgres_url, postgres_server_url, tmp_path):
    url = postgres_url
    name = make_url(url).database
    settings = Settings(home=tmp_path / "home", database_url=url)
    async with open_api(settings) as api:
        assert (await api.client.get("/ready")).status_code == 200
        await _admin(postgres_server_url, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await _admin(postgres_server_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                          f"WHERE datname = '{name}' AND pid <> pg_backend_pid()")
        try:
            down = await api.client.get("/ready")
            assert down.status_code == 503, down.text
            body = down.json()
            assert body["status"] == "not_ready" and not body["checks"]["store"]["ok"], body
            assert body["checks"]["store"]["message"] == "the run store does not answer (see the server log)"
            assert name not in down.text, "the store's error stays in the server log"
            assert (await api.client.get("/health")).status_code == 200
        finally:
            await _admin(postgres_server_url, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


async def test_a_sqlite_store_on_a_full_disk_is_not_ready(tmp_path, monkeypatch):
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'flowloom.db'}")
    async with open_api(settings) as api:
        assert (await api.client.get("/ready")).status_code == 200
        monkeypatch.setattr(health, "MIN_FREE_BYTES", 2**62)  # more than any disk has: as full as it gets
        full = await api.client.get("/ready")
        assert full.status_code == 503, full.text
        assert full.json()["checks"]["store"]["message"].startswith("the run store's disk is full (")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
async def test_redis_is_checked_when_configured(redis_url, tmp_path):
    database = f"sqlite:///{tmp_path / 'flowloom.db'}"
    async with open_api(Settings(home=tmp_path / "a", database_url=database, redis_url=redis_url)) as api:
        ready = await api.client.get("/ready")
        assert ready.status_code == 200 and ready.json()["checks"]["redis"]["ok"], ready.text
    gone = f"redis://127.0.0.1:{_closed_port()}/0"
    async with open_api(Settings(home=tmp_path / "b", database_url=database, redis_url=gone)) as api:
        down = await api.client.get("/ready")
        assert down.status_code == 503, down.text
        checks = down.json()["checks"]
        assert checks["store"]["ok"] and checks["redis"] == {"ok": False,
                                                              "message": "Redis does not answer (see the server log)"}
        assert (await api.client.get("/health")).status_code == 200
