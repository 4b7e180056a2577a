"""Fixtures of the queued-execution tests: a real Redis, real ``flowloom worker`` processes,
the real API app (in-process, and as ``flowloom serve`` processes), a run store on SQLite
(a file in the test's folder) or PostgreSQL, and a local HTTP service counting requests.

Workers get ``FLOWLOOM_LEASE_TTL=3`` so a worker that dies on another host would be
noticed within seconds; a worker of this machine that dies is noticed at once (its pid).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.counting_server import counter  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[3]
FLOWLOOM = [sys.executable, "-m", "api.cli"]


# --------------------------------------------------------------------------- counter


def post(node_id: str, url: str) -> dict[str, Any]:
    return {"id": node_id, "type": "http_request", "name": f"Step {node_id}",
            "config": {"method": "POST", "url": url, "body": {"type": "json", "json": {"step": node_id}},
                       "timeout": 60}}


def chain(workflow_id: str, nodes: list[dict[str, Any]], outputs: dict[str, str] | None = None) -> dict[str, Any]:
    """start -> ``nodes`` -> end (whose outputs are ``name -> reference``)."""
    end = {"id": "end", "type": "end", "config": {"outputs": [
        {"name": k, "value": {"ref": v}} for k, v in (outputs or {}).items()]}}
    every = [{"id": "start", "type": "start"}, *nodes, end]
    ids = [n["id"] for n in every]
    edges = [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(pairwise(ids))]
    return {"id": workflow_id, "name": workflow_id, "nodes": every, "edges": edges}


# --------------------------------------------------------------------------- deployment


@dataclass
class Deployment:
    """Redis + a run store + worker processes (+ API processes) sharing them."""

    env: dict[str, str]
    tmp: Path
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def redis_url(self) -> str:
        return self.env["FLOWLOOM_REDIS_URL"]

    @property
    def database_url(self) -> str:
        return self.env["FLOWLOOM_DATABASE_URL"]

    def settings(self, **extra: Any) -> Any:
        from engine.settings import Settings

        values: dict[str, Any] = {"home": Path(self.env["FLOWLOOM_HOME"]), "database_url": self.database_url,
                                  "redis_url": self.redis_url, "http_allow": ["127.0.0.1"], "lease_ttl": 3}
        return Settings(**{**values, **extra})

    def start_worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        """``flowloom worker --name NAME ARGS`` logging to ``<tmp>/NAME.log``."""
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen([*FLOWLOOM, "worker", "--name", name, *args], env=self.env, cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT)
        self.workers[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def wait_for_workers(self, *names: str, timeout: float = 30.0) -> None:
        """Until every named worker is registered in Redis (listening on its queues)."""
        from redis import Redis
        from rq import Worker

        connection = Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        try:
            while {w.name for w in Worker.all(connection=connection)} < set(names):
                for name in names:
                    assert self.workers[name].poll() is None, self.log(name)
                assert time.monotonic() < deadline, {n: self.log(n)[-2000:] for n in names}
                time.sleep(0.05)
        finally:
            connection.close()

    def start_server(self) -> str:
        """``flowloom serve`` on a free port; its base URL (call :meth:`wait_server` before using it)."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        log = open(self.tmp / f"serve-{port}.log", "wb")
        proc = subprocess.Popen([*FLOWLOOM, "serve", "--port", str(port), "--heartbeat", "0.2"], env=self.env,
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.servers.append(proc)
        return f"http://127.0.0.1:{port}"

    def wait_server(self, url: str, timeout: float = 30.0) -> None:
        """Until the server at ``url`` answers ``/health``."""
        proc = self.servers[[f"http://127.0.0.1:{p.args[-3]}" for p in self.servers].index(url)]
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, (self.tmp / f"serve-{url.rsplit(':', 1)[1]}.log").read_text()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "flowloom serve did not start"
            time.sleep(0.1)

    def stop(self) -> None:
        procs = [*self.workers.values(), *self.servers]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _prepare_database(url: str) -> None:
    """Create and migrate the database once, before processes race to."""
    from workers.sql import SqlStore

    async def go() -> None:
        store = await SqlStore.open(url)
        await store.close()

    asyncio.run(go())


def make_env(tmp_path: Path, redis_url: str, database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env.update(FLOWLOOM_HOME=str(tmp_path / "home"), FLOWLOOM_REDIS_URL=redis_url,
               FLOWLOOM_DATABASE_URL=database_url, FLOWLOOM_HTTP_ALLOW="127.0.0.1", FLOWLOOM_LEASE_TTL="3",
               PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'flowloom.db'}"
    _prepare_database(url)
    return url


@pytest.fixture
def deployment(tmp_path: Path, redis_url: str, sqlite_url: str) -> Iterator[Deployment]:
    """Redis (pytest-redis, flushed after the test) and a SQLite file; workers started by the test."""
    found = Deployment(make_env(tmp_path, redis_url, sqlite_url), tmp_path)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def pg_deployment(tmp_path: Path, redis_url: str, make_postgres_database: Any) -> Iterator[Deployment]:
    """As :func:`deployment`, on a fresh PostgreSQL database."""
    url = make_postgres_database()
    _prepare_database(url)
    found = Deployment(make_env(tmp_path, redis_url, url), tmp_path)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(params=["postgres", "sqlite"])
def any_deployment(request: pytest.FixtureRequest) -> Deployment:
    """:func:`pg_deployment`, then :func:`deployment` (a sync fixture: the database is made here)."""
    return request.getfixturevalue("pg_deployment" if request.param == "postgres" else "deployment")


# --------------------------------------------------------------------------- API in-process


@dataclass
class Api:
    app: Any
    client: httpx.AsyncClient
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    @property
    def service(self) -> Any:
        return self.app.state.service

    async def start(self, doc: dict[str, Any], inputs: dict[str, Any] | None = None, mode: str = "async",
                    **headers: str) -> httpx.Response:
        return await self.client.post("/v1/runs", json={"workflow": doc, "inputs": inputs or {},
                                                        "response_mode": mode},
                                      headers={**self.auth, **headers})

    async def wait_status(self, run_id: str, statuses: set[str], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            status = (await self.service.get("default", run_id)).status.value
            if status in statuses:
                return status
            assert time.monotonic() < deadline, f"run {run_id} is still {status}"
            await asyncio.sleep(0.05)


async def open_api(deployment: Deployment, **settings: Any) -> AsyncIterator[Api]:
    from api.app import create_app

    app = create_app(deployment.settings(**settings), heartbeat_s=0.2, shutdown_grace_s=1)
    async with app.router.lifespan_context(app):
        _record, key = await app.state.keys.create_key("default", name="test", admin=True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://flowloom.test", timeout=30) as client:
            yield Api(app, client, key)


@pytest.fixture
async def api(deployment: Deployment) -> AsyncIterator[Api]:
    """The API app over the deployment's stores (queued mode: its settings name Redis)."""
    async for found in open_api(deployment):
        yield found
