"""Test helpers for the HTTP request node: a local HTTP server, a connect spy, a fake resolver.

Network rule of these tests: nothing may leave 127.0.0.0/8 and ::1. :class:`ConnectSpy`
replaces the connect of the backend the guard wraps (``httpcore.AnyIOBackend``), so a
guard bug shows up as a recorded call, not as a packet; :func:`install_socket_tripwire`
is the second net under it (raw socket connects and name lookups).
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import select
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpcore
import pytest

__all__ = ["ConnectSpy", "FakeResolver", "LocalServer", "is_loopback", "install_socket_tripwire"]


def is_loopback(host: str) -> bool:
    """True for an IP literal in 127.0.0.0/8 or ::1 (not for names)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback and (ip.version == 4 or ip == ipaddress.IPv6Address("::1"))


# ----------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    """Routes: /echo, /status/N, /text, /json, /problem, /badjson, /headers, /bytes?n=, /stream?n=,
    /gzip?n=, /drip?s=, /slow?s=, /loop, /redirect?to=&code=. HTTP/1.0: one request per connection."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str | None = "text/plain; charset=utf-8",
              extra: dict[str, str] | None = None, length: bool = True) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _route(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append({"method": self.command, "path": parts.path, "host": self.headers.get("Host")})
        path = parts.path
        if path.startswith("/echo"):
            doc = {
                "method": self.command,
                "path": path,
                "query": urllib.parse.parse_qs(parts.query, keep_blank_values=True),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", errors="replace"),
            }
            self._send(200, json.dumps(doc).encode(), "application/json")
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            self._send(code, f"status {code} body".encode())
        elif path == "/text":
            self._send(200, "héllo wörld".encode("latin-1"), "text/plain; charset=latin-1")
        elif path == "/json":
            self._send(200, b'{"a": [1, 2, {"b": null}], "ok": true}', "application/json")
        elif path == "/problem":
            self._send(422, b'{"title": "bad input"}', "application/problem+json")
        elif path == "/badjson":
            self._send(200, b'{"a": 1,', "application/json; charset=utf-8")
        elif path == "/headers":
            self.send_response(200)
            self.send_header("X-Custom-Thing", "v1")
            self.send_header("Set-Cookie", "a=1")
            self.send_header("Set-Cookie", "b=2")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif path == "/bytes":
            self._send(200, b"x" * int(query["n"]))
        elif path == "/stream":
            # No Content-Length: the client only learns the size by reading.
            self._send(200, b"", length=False)
            remaining = int(query["n"])
            while remaining > 0:
                chunk = min(remaining, 1024)
                try:
                    self.wfile.write(b"y" * chunk)
                except OSError:
                    return
                remaining -= chunk
        elif path == "/gzip":
            packed = gzip.compress(b"z" * int(query["n"]))
            self._send(200, packed, extra={"Content-Encoding": "gzip"})
        elif path == "/drip":
            # A byte every 0.05 s: no single read ever waits long, only the total is slow.
            self._send(200, b"", length=False)
            deadline = time.monotonic() + float(query.get("s", "5"))
            while time.monotonic() < deadline and not self.server.stopping.is_set():
                try:
                    self.wfile.write(b".")
                    self.wfile.flush()
                except OSError:
                    self.server.events.append("client_gone")
                    return
                time.sleep(0.05)
        elif path == "/slow":
            if self._wait_or_disconnect(float(query.get("s", "5"))):
                self._send(200, b"late")
        elif path == "/loop":
            self._send(302, b"again", extra={"Location": "/loop"})
        elif path == "/redirect":
            self._send(int(query.get("code", "302")), b"moved", extra={"Location": query["to"]})
        else:
            self._send(404, b"no route")

    def _wait_or_disconnect(self, seconds: float) -> bool:
        """Wait up to ``seconds``; False (and ``client_gone`` recorded) when the client hangs up first."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.server.stopping.is_set():
            ready, _, _ = select.select([self.connection], [], [], 0.02)
            if ready and self.connection.recv(1, socket.MSG_PEEK) == b"":
                self.server.events.append("client_gone")
                return False
        return True

    def _safe_route(self) -> None:
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client left early (size cap, timeout, cancel): expected in these tests

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _safe_route


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, Any]]
    events: list[str]
    stopping: threading.Event


@dataclass
class LocalServer:
    """A threaded HTTP server on 127.0.0.1 and a free port. ``seen``: requests received."""

    host: str = "127.0.0.1"
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    def start(self) -> LocalServer:
        server = _Server((self.host, 0), _Handler)
        server.seen, server.events, server.stopping = [], [], threading.Event()
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def seen(self) -> list[dict[str, Any]]:
        assert self._server is not None
        return self._server.seen

    @property
    def events(self) -> list[str]:
        assert self._server is not None
        return self._server.events

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"


# ---------------------------------------------------------------------- network spies


@dataclass
class ConnectSpy:
    """Replaces ``httpcore.AnyIOBackend.connect_tcp`` (what the guard's backend wraps).

    Every call is recorded in ``calls`` as ``(host, port)``. Loopback IP literals are
    connected for real (the local test server); anything else goes to ``handler``,
    which by default raises ``AssertionError`` - such a call means the guard let a
    non-loopback target through. A handler may also return a stream, e.g. by calling
    :meth:`real_connect` to a loopback address (a stand-in for a public server).
    """

    calls: list[tuple[str, int]] = field(default_factory=list)
    handler: Callable[[str, int], Awaitable[Any]] | None = None
    _original: Any = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> ConnectSpy:
        self._original = httpcore.AnyIOBackend.connect_tcp
        spy = self

        async def connect_tcp(backend: Any, host: str, port: int, timeout: float | None = None,
                              local_address: str | None = None, socket_options: Any = None) -> Any:
            spy.calls.append((host, port))
            if is_loopback(host):
                return await spy._original(backend, host, port, timeout, local_address, socket_options)
            if spy.handler is None:
                raise AssertionError(f"guard let a connection to {host}:{port} through")
            return await spy.handler(host, port)

        monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
        return self

    async def real_connect(self, host: str, port: int) -> Any:
        """Connect for real; only ever to loopback."""
        assert is_loopback(host), host
        return await self._original(httpcore.AnyIOBackend(), host, port)

    @property
    def outside(self) -> list[tuple[str, int]]:
        """Calls to non-loopback targets."""
        return [c for c in self.calls if not is_loopback(c[0])]


@dataclass
class FakeResolver:
    """Replaces ``GuardedBackend.resolve``: ``answers[host]`` is a list of answers, one per lookup.

    The last answer repeats. A host without answers raises ``AssertionError`` (no real DNS).
    """

    answers: dict[str, list[list[str]]]
    lookups: list[str] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
        from nodes.http.guard import GuardedBackend

        real = GuardedBackend.resolve
        fake = self

        async def resolve(backend: Any, host: str, port: int) -> list[str]:
            fake.lookups.append(host)
            if host in fake.answers:
                queue = fake.answers[host]
                return queue.pop(0) if len(queue) > 1 else list(queue[0])
            if is_loopback(host):
                return await real(backend, host, port)
            raise AssertionError(f"test tried to resolve {host!r} without a fake answer")

        monkeypatch.setattr(GuardedBackend, "resolve", resolve)
        return self


def install_socket_tripwire(monkeypatch: pytest.MonkeyPatch, violations: list[str]) -> None:
    """Refuse socket connects outside loopback and name lookups other than IP literals/localhost.

    Violations are recorded (the caller asserts the list stays empty) and raised as
    ``AssertionError`` so nothing is sent.
    """
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(address: Any) -> None:
        if isinstance(address, tuple) and not is_loopback(str(address[0])):
            violations.append(f"connect {address!r}")
            raise AssertionError(f"test tried to connect to {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(address)
        return real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in (None, "localhost"):
            try:
                real_getaddrinfo(name, None, flags=socket.AI_NUMERICHOST)
            except socket.gaierror:
                violations.append(f"getaddrinfo {name!r}")
                raise AssertionError(f"test tried to resolve {name!r}") from None
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
