"""Fixtures of the HTTP API tests: the real app (lifespan run, real stores) on SQLite
and on PostgreSQL, reached in-process through ``httpx.ASGITransport`` and, for streams
that must be read while they are produced, over real HTTP from a uvicorn server in the
test's event loop; plus a local HTTP server with slow and quick endpoints for
``http_request`` nodes, and a model registry file pointing at the scripted OpenAI server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from engine.settings import Settings
from tests.support.http_reply import reply_json
from tests.support.knowledge_files import knowledge_models

SECRET_HEADER_VALUE = "hdr-secret-5f1c9a7e2d"
SCRIPTED_KEY_ENV = "FLOWLOOM_API_TEST_LLM_KEY"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        if self.path.startswith("/slow"):
            server.slow_started.set()
            server.stopping.wait(20)
        elif self.path.startswith("/delay"):
            server.stopping.wait(0.15)
        body = b'{"ok": true}'
        reply_json(self, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.slow_started = threading.Event()
        self.stopping = threading.Event()


@dataclass
class TargetServer:
    """A local HTTP server: ``/ok`` answers at once, ``/slow`` only when the test ends."""

    server: _Server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def target() -> Iterator[TargetServer]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield TargetServer(server)
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


class LiveServer:
    """The app served over real HTTP by uvicorn in the test's event loop (the app's
    lifespan is the fixture's, so ``lifespan="off"`` here)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.server: Any = None
        self.task: asyncio.Task[Any] | None = None
        self.url = ""

    async def start(self) -> LiveServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(self.app, lifespan="off", log_level="warning", http="httptools",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]))
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            assert not self.task.done(), self.task
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.task, 10)


@dataclass
class Api:
    """A running app: ``client`` (in-process), ``keys`` (its key store), an admin key
    of tenant ``default`` (``key``) and one of tenant ``tenant-b`` (``other_key``)."""

    app: Any
    client: httpx.AsyncClient
    key: str
    other_key: str
    settings: Settings
    live: LiveServer | None = None
    _http: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def keys(self) -> Any:
        return self.app.state.keys

    @property
    def service(self) -> Any:
        return self.app.state.service

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def http(self) -> httpx.AsyncClient:
        """A client of the app over real HTTP (streams are read as they come)."""
        if self.live is None:
            self.live = await LiveServer(self.app).start()
        client = httpx.AsyncClient(base_url=self.live.url, timeout=20)
        self._http.append(client)
        return client


@pytest.fixture
def models_file(tmp_path, openai_server, monkeypatch) -> Path:
    """A model registry whose model ``default`` is the scripted OpenAI server."""
    monkeypatch.setenv(SCRIPTED_KEY_ENV, "sk-scripted-test")
    return knowledge_models(tmp_path / "models.toml", openai_server.base_url, SCRIPTED_KEY_ENV,
                            embedding=False, rerank=False)


@contextlib.asynccontextmanager
async def open_api(settings: Settings, **app_options: Any) -> AsyncIterator[Api]:
    """The app of ``settings`` (``app_options`` go to ``create_app``), started (lifespan)
    with an admin key of tenant ``default`` and one of ``tenant-b``; stopped on exit."""
    app = create_app(settings, heartbeat_s=0.2, shutdown_grace_s=2, **app_options)
    async with app.router.lifespan_context(app):
        keys = app.state.keys
        _record, key = await keys.create_key("default", name="test admin", admin=True)
        await keys.ensure_tenant("tenant-b")
        _other, other_key = await keys.create_key("tenant-b", name="tenant b admin", admin=True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://flowloom.test", timeout=30) as client:
            handle = Api(app=app, client=client, key=key, other_key=other_key, settings=settings)
            try:
                yield handle
            finally:
                for http in handle._http:
                    await http.aclose()
                if handle.live is not None:
                    await handle.live.stop()


@pytest.fixture
async def api(database_url, tmp_path, request) -> AsyncIterator[Api]:
    """The app over the test's database (``database_url``: each backend, a fresh database),
    started (lifespan) and stopped after the test."""
    models = request.getfixturevalue("models_file") if "models_file" in request.fixturenames else None
    settings = Settings(home=tmp_path / "home", database_url=database_url, http_allow=["127.0.0.1"],
                        models=models)
    async with open_api(settings) as handle:
        yield handle


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The messages of an SSE body: ``{"event", "id", "data"}`` (comments as ``{"comment"}``)."""
    import json

    messages = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        message: dict[str, Any] = {"event": "message", "id": None, "data": None}
        for line in block.split("\n"):
            if line.startswith(":"):
                message = {"comment": line[1:].strip()}
                break
            name, _, value = line.partition(": ")
            if name == "data":
                message["data"] = json.loads(value)
            elif name == "id":
                message["id"] = int(value)
            elif name == "event":
                message["event"] = value
        messages.append(message)
    return messages


async def read_messages(response: httpx.Response, stop_after: int | None = None) -> list[dict[str, Any]]:
    """Read SSE messages (comments skipped) from a live response as they come; stop
    after ``stop_after`` messages with an id (None: read to the end)."""
    messages: list[dict[str, Any]] = []
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            parsed = parse_sse(block + "\n\n")
            messages += [m for m in parsed if "comment" not in m]
            if stop_after is not None and sum(1 for m in messages if m.get("id") is not None) >= stop_after:
                return messages
    return messages


def hello_workflow() -> dict[str, Any]:
    import json

    return json.loads((Path(__file__).resolve().parents[2] / "examples" / "hello.json").read_text())


def order_workflow() -> dict[str, Any]:
    import json

    return json.loads((Path(__file__).resolve().parents[2] / "examples" / "order_confirm.json").read_text())


def http_chain(url: str, steps: int, *, path: str = "/delay", headers: dict[str, str] | None = None) -> dict[str, Any]:
    """start -> ``steps`` GET requests to ``url + path`` -> answer."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}]
    for i in range(steps):
        nodes.append({"id": f"h{i}", "type": "http_request",
                      "config": {"url": url + path, "headers": headers or {}, "timeout": 30}})
    nodes.append({"id": "say", "type": "answer", "config": {"text": "done {{ h0.status_code }}"}})
    ids = [n["id"] for n in nodes]
    edges = [{"id": f"e{i}", "source": a, "target": b} for i, (a, b) in enumerate(pairwise(ids))]
    return {"id": "http_chain", "name": "HTTP chain", "nodes": nodes, "edges": edges}
