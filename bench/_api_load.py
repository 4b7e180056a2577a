"""The load generator of ``bench/api.py``: a raw keep-alive HTTP/1.1 client and the phases.

Split out of ``bench/api.py`` (which loads it with ``sibling`` and re-binds its names):
:class:`Conn` sends pre-encoded requests on asyncio streams, :func:`phase` drives
``total`` samples through ``concurrency`` connections and reads the server's CPU around
them, and the ``*_sample`` factories time one blocking, streamed or async run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


class Server(Protocol):
    """What :func:`phase` needs of a bench server (``api.Server``): its port and the CPU
    seconds its process tree has used so far."""

    port: int

    def cpu_s(self) -> float: ...


# ------------------------------------------------------------------ HTTP client


class Conn:
    """One keep-alive HTTP/1.1 connection on asyncio streams: the load generator's client.
    Requests are pre-encoded bytes; bodies are read by ``Content-Length`` or chunks."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _ensure(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self.reader, self.writer

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None

    async def exchange(self, request: bytes, on_chunk: Callable[[bytes], None] | None = None) -> tuple[int, bytes]:
        """Send ``request``, read the whole answer: ``(status, body)``; ``on_chunk`` sees
        every piece of the body as it arrives."""
        reader, writer = await self._ensure()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        parts: list[bytes] = []
        if b"content-length" in headers:
            parts.append(await reader.readexactly(int(headers[b"content-length"])))
            if on_chunk is not None:
                on_chunk(parts[-1])
        elif headers.get(b"transfer-encoding") == b"chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append((await reader.readexactly(size + 2))[:-2])
                if on_chunk is not None:
                    on_chunk(parts[-1])
        if headers.get(b"connection") == b"close":
            await self.close()
        return status, b"".join(parts)


def encode(method: str, path: str, *, port: int, body: Any = None, headers: dict[str, str] | None = None) -> bytes:
    """A request as bytes (JSON body when ``body`` is not None)."""
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


# ------------------------------------------------------------------ phases


def _ms(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (seconds) in ms (nearest rank)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000, 3)


def _check(status: int, body: bytes, expected: tuple[int, ...], what: str) -> None:
    if status not in expected:
        raise RuntimeError(f"{what}: HTTP {status}, expected {expected}: {body[:300]!r}")


Sample = Callable[[Conn], Awaitable[dict[str, float]]]


async def phase(server: Server, sample: Sample, *, total: int, concurrency: int, warmup: int) -> dict[str, Any]:
    """``total`` samples by ``concurrency`` workers (one connection each) after ``warmup``
    ones; latencies and the other marks of every sample, server and client CPU."""
    conns = [Conn(server.port) for _ in range(concurrency)]
    for i in range(warmup):
        await sample(conns[i % concurrency])
    marks: dict[str, list[float]] = {}
    left = total

    async def worker(conn: Conn) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            for key, value in (await sample(conn)).items():
                marks.setdefault(key, []).append(value)

    cpu0, client0, t0 = server.cpu_s(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(conn) for conn in conns))
    elapsed, client, cpu = time.perf_counter() - t0, time.process_time() - client0, server.cpu_s() - cpu0
    for conn in conns:
        await conn.close()
    out: dict[str, Any] = {"requests": total, "concurrency": concurrency, "elapsed_s": round(elapsed, 3),
                           "per_s": round(total / elapsed, 1), "server_cpu_ms_per_req": round(cpu / total * 1000, 3),
                           "client_cpu_ms_per_req": round(client / total * 1000, 3)}
    for key, values in marks.items():
        out[f"{key}_p50_ms"], out[f"{key}_p99_ms"] = _ms(values, 0.5), _ms(values, 0.99)
    return out


def blocking_sample(request: bytes, what: str) -> Sample:
    """One request answered when its run is done: ``latency``."""

    async def sample(conn: Conn) -> dict[str, float]:
        t0 = time.perf_counter()
        status, body = await conn.exchange(request)
        latency = time.perf_counter() - t0
        _check(status, body, (200,), what)
        return {"latency": latency}

    return sample


def sse_sample(request: bytes, what: str, run_mark: bytes | None) -> Sample:
    """One streamed run: ``first_event`` (the first complete SSE message), ``run_event``
    (the first chunk holding ``run_mark``, when given) and ``latency`` (the stream's end)."""

    async def sample(conn: Conn) -> dict[str, float]:
        seen: dict[str, float] = {}
        buffer = bytearray()
        t0 = time.perf_counter()

        def on_chunk(chunk: bytes) -> None:
            now = time.perf_counter() - t0
            buffer.extend(chunk)
            if "first_event" not in seen and (b"\n\n" in buffer or b"\r\n\r\n" in buffer):
                seen["first_event"] = now
            if run_mark is not None and "run_event" not in seen and run_mark in buffer:
                seen["run_event"] = now

        status, body = await conn.exchange(request, on_chunk)
        seen["latency"] = time.perf_counter() - t0
        _check(status, body, (200,), what)
        if b"event: error" in body:
            raise RuntimeError(f"{what}: the stream ended with an error: {body[-300:]!r}")
        return seen

    return sample


def async_sample(request: bytes, events: Callable[[str], bytes], what: str) -> Sample:
    """``response_mode: async`` (202), then the run's events until the stream ends:
    ``latency`` from the POST to the end (the run is done)."""

    async def sample(conn: Conn) -> dict[str, float]:
        t0 = time.perf_counter()
        status, body = await conn.exchange(request)
        _check(status, body, (202,), what)
        status, stream = await conn.exchange(events(json.loads(body)["run_id"]))
        latency = time.perf_counter() - t0
        _check(status, stream, (200,), what + " events")
        if b'"status":"succeeded"' not in stream:
            raise RuntimeError(f"{what}: the run did not succeed: {stream[-300:]!r}")
        return {"latency": latency}

    return sample
