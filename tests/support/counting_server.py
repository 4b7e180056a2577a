"""A local HTTP service that counts a workflow's requests, for tests that must prove a
node ran once (or not again) across kills, recoveries, re-runs and workers.

``POST /hit/NAME`` answers ``{"node": NAME}`` at once; ``POST /gate/NAME`` waits until
:attr:`Counter.gate` is set (a node held mid-call, to kill or stop its run there). Every
request is recorded as ``(NAME, Idempotency-Key)``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.http_reply import reply_json

__all__ = ["Counter", "counter"]


class Counter:
    """The counting service on a free loopback port (see module docstring)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        self.gate = threading.Event()
        self.lock = threading.Lock()
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                _, kind, name = self.path.split("/")[:3]
                with counter.lock:
                    counter.requests.append((name, self.headers.get("Idempotency-Key")))
                if kind == "gate":
                    counter.gate.wait(60)
                body = json.dumps({"node": name}).encode()
                reply_json(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def names(self) -> list[str]:
        """The NAME of every request so far, in arrival order."""
        with self.lock:
            return [name for name, _ in self.requests]

    def keys(self, name: str) -> list[str | None]:
        """The Idempotency-Key of every request for ``name``."""
        with self.lock:
            return [key for n, key in self.requests if n == name]

    def wait_for(self, name: str, count: int = 1, timeout: float = 30.0) -> None:
        """Until ``name`` was requested ``count`` times (AssertionError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while self.names().count(name) < count:
            assert time.monotonic() < deadline, f"no request for {name!r}; got {self.names()}"
            time.sleep(0.02)


@pytest.fixture
def counter() -> Iterator[Counter]:
    """A running :class:`Counter`; its gate is opened and it is shut down afterwards."""
    server = Counter()
    yield server
    server.gate.set()
    server.server.shutdown()
