"""A recording pass-through between Flowloom and a real model server.

The real-model tier checks what Flowloom asked of the model server and what the server
said back, not only what Flowloom reports: each ``POST .../chat/completions`` is
forwarded as it is (streamed replies relayed chunk by chunk) and recorded as a
:class:`Call`: the request's ``max_tokens``, whether it offered tools and asked for
usage in the stream, and the reply's finish reason, text and usage as the server sent
them (``None`` when it sent none). Every other request is forwarded unrecorded.
Runs on 127.0.0.1 (a free port) in a thread of its own: :func:`recording_proxy`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["Call", "Recorder", "recording_proxy"]


@dataclass
class Call:
    """One chat-completions request and the server's reply to it."""

    path: str
    max_tokens: int | None
    stream: bool
    tools: bool
    tool_choice: Any
    include_usage: bool
    status: int = 0
    finish_reason: str | None = None
    text: str = ""
    tool_calls: int = 0
    usage: dict[str, Any] | None = None
    seconds: float = 0.0


@dataclass
class Recorder:
    """The calls seen so far (appended as each reply ends)."""

    upstream: str
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, mark: int) -> list[Call]:
        """The calls recorded after the first ``mark`` ones."""
        with self.lock:
            return list(self.calls[mark:])

    def mark(self) -> int:
        with self.lock:
            return len(self.calls)

    def add(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)


def _fold_chunk(call: Call, data: dict[str, Any]) -> None:
    """What one streamed chunk adds to ``call``."""
    if data.get("usage"):
        call.usage = data["usage"]
    for choice in data.get("choices") or []:
        delta = choice.get("delta") or {}
        call.text += delta.get("content") or ""
        call.tool_calls += sum(1 for t in delta.get("tool_calls") or [] if t.get("id"))
        call.finish_reason = choice.get("finish_reason") or call.finish_reason


def _fold_reply(call: Call, data: dict[str, Any]) -> None:
    call.usage = data.get("usage") or None
    for choice in data.get("choices") or []:
        message = choice.get("message") or {}
        call.text += message.get("content") or ""
        call.tool_calls += len(message.get("tool_calls") or [])
        call.finish_reason = choice.get("finish_reason") or call.finish_reason


def _app(recorder: Recorder) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))

    async def forward(request: Request) -> Response:
        path = request.url.path
        body = await request.body()
        upstream = recorder.upstream.rstrip("/") + path.removeprefix("/v1")
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        if request.method != "POST" or not path.endswith("/chat/completions"):
            reply = await client.request(request.method, upstream, content=body, headers=headers)
            return Response(reply.content, status_code=reply.status_code,
                            media_type=reply.headers.get("content-type"))
        sent = json.loads(body)
        call = Call(path=path, max_tokens=sent.get("max_tokens") or sent.get("max_completion_tokens"),
                    stream=bool(sent.get("stream")), tools=bool(sent.get("tools")), tool_choice=sent.get("tool_choice"),
                    include_usage=bool((sent.get("stream_options") or {}).get("include_usage")))
        started = time.monotonic()
        reply = await client.send(client.build_request("POST", upstream, content=body, headers=headers), stream=True)
        call.status = reply.status_code
        if not call.stream or reply.status_code != 200:
            content = await reply.aread()
            await reply.aclose()
            with contextlib.suppress(ValueError):
                _fold_reply(call, json.loads(content))
            call.seconds = time.monotonic() - started
            recorder.add(call)
            return Response(content, status_code=reply.status_code, media_type=reply.headers.get("content-type"))

        async def relay() -> AsyncIterator[bytes]:
            pending = b""
            try:
                async for piece in reply.aiter_raw():
                    yield piece
                    pending += piece
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        text = line.strip()
                        if text.startswith(b"data:") and text[5:].strip() not in (b"", b"[DONE]"):
                            with contextlib.suppress(ValueError):
                                _fold_chunk(call, json.loads(text[5:]))
            finally:
                await reply.aclose()
                call.seconds = time.monotonic() - started
                recorder.add(call)

        return StreamingResponse(relay(), status_code=reply.status_code,
                                 media_type=reply.headers.get("content-type", "text/event-stream"))

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


@contextlib.contextmanager
def recording_proxy(upstream: str) -> Iterator[tuple[str, Recorder]]:
    """Serve the pass-through to ``upstream`` (a base URL ending in ``/v1``) on a free
    port of 127.0.0.1; yields ``(its base URL ending in /v1, the recorder)``."""
    import uvicorn

    recorder = Recorder(upstream)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_app(recorder), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="recording-proxy", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the recording proxy did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", recorder
    finally:
        server.should_exit = True
        thread.join(30)
