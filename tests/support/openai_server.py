"""A scripted OpenAI-compatible chat-completions server for protocol-level LLM tests.

A REAL HTTP/1.1 server on 127.0.0.1 (free port, background thread) that answers
``POST /v1/chat/completions`` with replies a test scripts in advance, streaming (SSE,
chunked transfer encoding) or not, and records every request it received::

    def test_x(openai_server, scripted_registry):
        openai_server.script(text_reply("Hello world", chunk_size=3, usage=(12, 2)))
        resp = await call_llm(LLMRequest("tools-model", msgs), registry=scripted_registry)
        assert openai_server.bodies[0]["temperature"] == 0.3

The DSL: a :class:`Reply` is a list of steps played in order for one request.

=========================  ===========================================================
step                       on the wire (streaming)
=========================  ===========================================================
``text(s)``                a chunk with ``delta.content = s``
``reasoning(s)``           a chunk with ``delta.reasoning_content = s`` (DeepSeek/Qwen)
``tool_delta(i, ...)``     a chunk with one ``delta.tool_calls[0]`` of index ``i`` and
                           the given id / name / argument fragment
``usage(p, c)``            the final ``choices: []`` chunk with usage (only when the
                           request asked ``stream_options.include_usage``)
``finish(reason)``         a chunk with an empty delta and ``finish_reason``
``raw(b, split_at=n)``     raw bytes, written in two TCP writes split at byte ``n``
``delay(s)``               sleep ``s`` seconds before the next step
``stall()``                stop sending; wait until the client hangs up (or the server stops)
``disconnect()``           drop the connection without ending the chunked body
``stream_error(msg)``      an in-stream ``data: {"error": {...}}`` event (a 5xx after tokens)
=========================  ===========================================================

Other routes a server has (llama.cpp's ``/props``, vLLM's ``/v1/models``, Ollama's
``/api/show``) answer fixed JSON: ``server.json_routes["/props"] = {...}``.

``http_error(429, "slow down")`` answers with that status and an OpenAI-style error
body instead. ``data: [DONE]`` ends a stream unless the reply has ``done=False`` or
ends with ``stall()`` / ``disconnect()``. Non-streaming requests get one
``chat.completion`` JSON folded from the same steps.

The named scripts (``utf8_split_reply``, ``parallel_tool_calls_reply``, ...) are the
failure modes the LLM layer must survive; tests of LLM nodes reuse them. The steps and
scripts live in :mod:`tests.support.openai_script` and are re-exported here.

Embeddings and rerank (knowledge bases): ``POST /v1/embeddings`` (deterministic hashed
bag-of-words vectors) and ``POST /v1/rerank``, with a counter of the texts embedded and
held requests, are the routes of :mod:`tests.support.openai_embeddings`.

Fixtures: ``openai_server`` (a started server, stopped after the test) and
``scripted_registry`` (a :class:`~nodes.llm.model_registry.ModelRegistry` pointing at it
with the key :data:`TEST_API_KEY` set in the environment). :func:`registry_for`
builds such a registry for any server.
"""

from __future__ import annotations

import collections
import json
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import pytest_asyncio

from nodes.llm.model_registry import Capabilities, ModelRegistry, ModelSpec, PriceTier, Pricing, ProviderSpec
from tests.support.openai_embeddings import EmbeddingControls, EmbeddingRoutes, embed_text, rerank_score
from tests.support.openai_script import (  # the DSL lives there; re-exported here
    Delay,
    Disconnect,
    Finish,
    Raw,
    Reasoning,
    Reply,
    Stall,
    StreamError,
    Text,
    ToolDelta,
    Usage,
    _chunk_json,
    bench_responder,
    delay,
    disconnect,
    disconnect_reply,
    error_after_tokens,
    fenced_json_reply,
    finish,
    http_error,
    malformed_frame_reply,
    malformed_json_reply,
    parallel_tool_calls_reply,
    rate_limited,
    raw,
    reasoning,
    reasoning_reply,
    reply,
    reused_index_tool_calls_reply,
    stall,
    stalled_reply,
    stream_error,
    text,
    text_reply,
    tool_args_split_reply,
    tool_delta,
    usage,
    utf8_split_reply,
)

__all__ = [
    "TEST_API_KEY",
    "TEST_KEY_ENV",
    "RecordedRequest",
    "Reply",
    "ScriptedOpenAIServer",
    "delay",
    "disconnect",
    "disconnect_reply",
    "embed_text",
    "error_after_tokens",
    "fenced_json_reply",
    "finish",
    "http_error",
    "malformed_frame_reply",
    "malformed_json_reply",
    "openai_server",
    "parallel_tool_calls_reply",
    "rate_limited",
    "raw",
    "reasoning",
    "reasoning_reply",
    "reused_index_tool_calls_reply",
    "registry_for",
    "reply",
    "rerank_score",
    "scripted_registry",
    "stall",
    "stalled_reply",
    "stream_error",
    "text",
    "text_reply",
    "tool_args_split_reply",
    "tool_delta",
    "usage",
    "utf8_split_reply",
]

#: Env var the scripted provider reads its key from, and the key the fixture sets.
TEST_KEY_ENV = "FLOWLOOM_TEST_LLM_KEY"
TEST_API_KEY = "sk-test-SECRET-9f8e7d6c5b4a"

# ============================================================================ the server


@dataclass
class RecordedRequest:
    """A request the server received. ``body`` is the parsed JSON (None if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    received_at: float
    client_closed_at: float | None = None



class _Handler(EmbeddingRoutes, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        with self.server.owner._lock:
            self.server.owner._connections.discard(self.connection)

    # ------------------------------------------------------------------ routing

    def do_GET(self) -> None:
        self._record(b"")
        route = self.server.owner.json_routes.get(self.path.rstrip("/"))
        if route is not None:
            self._send_json(200, route)
            return
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        recorded = self._record(raw_body)
        route = self.path.rstrip("/")
        if route in self.server.owner.json_routes:
            self._send_json(200, self.server.owner.json_routes[route])
            return
        if route in ("/v1/embeddings", "/v1/rerank"):
            body = recorded.body if isinstance(recorded.body, dict) else {}
            if self.server.owner.embedding_latency:
                time.sleep(self.server.owner.embedding_latency)
            if route == "/v1/embeddings":
                self._embeddings(body, recorded)
            else:
                self._rerank(body)
            return
        if route != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        body = recorded.body if isinstance(recorded.body, dict) else {}
        scripted = self.server.owner._next_reply(body)
        if scripted.status != 200:
            self._send_json(scripted.status, {"error": scripted.error or {"message": "error"}}, scripted.headers)
            return
        if body.get("stream"):
            self._stream(scripted, body, recorded)
        else:
            self._complete(scripted, body, recorded)

    def _record(self, raw_body: bytes) -> RecordedRequest:
        try:
            parsed = json.loads(raw_body) if raw_body else None
        except ValueError:
            parsed = None
        recorded = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                   parsed, raw_body, time.monotonic())
        with self.server.owner._lock:
            self.server.owner.requests.append(recorded)
        return recorded

    # ------------------------------------------------------------------ writing

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _event(self, payload: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n")

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stall(self, seconds: float | None, recorded: RecordedRequest) -> None:
        """Wait (sending nothing) until the client closes, the server stops or ``seconds`` pass."""
        owner = self.server.owner
        end = None if seconds is None else time.monotonic() + seconds
        while not owner._stopping.is_set() and (end is None or time.monotonic() < end):
            readable, _, _ = select.select([self.connection], [], [], 0.02)
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        recorded.client_closed_at = time.monotonic()
                        return
                except OSError:
                    recorded.client_closed_at = time.monotonic()
                    return

    def _stream(self, scripted: Reply, body: dict[str, Any], recorded: RecordedRequest) -> None:
        model = str(body.get("model", ""))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        cid = f"chatcmpl-{len(self.server.owner.requests)}"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for k, v in scripted.headers.items():
            self.send_header(k, v)
        self.end_headers()
        first = True
        try:
            for step in scripted.steps:
                if isinstance(step, (Text, Reasoning, ToolDelta)):
                    delta: dict[str, Any] = {"role": "assistant"} if first else {}
                    first = False
                    if isinstance(step, Text):
                        delta["content"] = step.text
                    elif isinstance(step, Reasoning):
                        delta["reasoning_content"] = step.text
                    else:
                        call: dict[str, Any] = {"index": step.index}
                        if step.id is not None:
                            call["id"] = step.id
                            call["type"] = "function"
                        fn: dict[str, Any] = {}
                        if step.name is not None:
                            fn["name"] = step.name
                        if step.arguments is not None:
                            fn["arguments"] = step.arguments
                        call["function"] = fn
                        delta["tool_calls"] = [call]
                    self._event(_chunk_json(cid, model, delta, None, include_usage))
                elif isinstance(step, Finish):
                    self._event(_chunk_json(cid, model, {}, step.reason, include_usage))
                elif isinstance(step, Usage):
                    if include_usage:
                        total = step.prompt_tokens + step.completion_tokens
                        self._event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                                     "model": model, "choices": [],
                                     "usage": {"prompt_tokens": step.prompt_tokens,
                                               "completion_tokens": step.completion_tokens, "total_tokens": total}})
                elif isinstance(step, Raw):
                    cut = step.split_at
                    if cut is None:
                        self._write_chunk(step.data)
                    else:
                        self._write_chunk(step.data[:cut])
                        time.sleep(0.03)  # separate TCP segments (TCP_NODELAY is set)
                        self._write_chunk(step.data[cut:])
                elif isinstance(step, Delay):
                    time.sleep(step.seconds)
                elif isinstance(step, Stall):
                    self._stall(step.seconds, recorded)
                    if step.seconds is None:
                        self._drop()
                        return
                elif isinstance(step, Disconnect):
                    self._drop()
                    return
                elif isinstance(step, StreamError):
                    self._event({"error": {"message": step.message, "type": step.type, "code": step.code}})
            if scripted.done:
                self._write_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client went away (cancellation, idle timeout)
            recorded.client_closed_at = time.monotonic()
            self.close_connection = True

    def _complete(self, scripted: Reply, body: dict[str, Any], recorded: RecordedRequest) -> None:
        raw_parts = [s.data for s in scripted.steps if isinstance(s, Raw)]
        content, thought = "", ""
        calls: dict[int, dict[str, Any]] = {}
        finish_reason: str | None = None
        use: Usage | None = None
        for step in scripted.steps:
            if isinstance(step, Text):
                content += step.text
            elif isinstance(step, Reasoning):
                thought += step.text
            elif isinstance(step, ToolDelta):
                call = calls.setdefault(step.index, {"id": "", "type": "function",
                                                     "function": {"name": "", "arguments": ""}})
                call["id"] = step.id or call["id"]
                call["function"]["name"] = step.name or call["function"]["name"]
                call["function"]["arguments"] += step.arguments or ""
            elif isinstance(step, Finish):
                finish_reason = step.reason
            elif isinstance(step, Usage):
                use = step
            elif isinstance(step, Delay):
                time.sleep(step.seconds)
            elif isinstance(step, Stall):
                self._stall(step.seconds, recorded)
                if step.seconds is None:
                    self._drop()
                    return
            elif isinstance(step, Disconnect):
                self._drop()
                return
            elif isinstance(step, StreamError):
                self._send_json(500, {"error": {"message": step.message, "type": step.type, "code": step.code}})
                return
        if raw_parts:
            data = b"".join(raw_parts)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if thought:
            message["reasoning_content"] = thought
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.server.owner.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        }
        if use is not None:
            payload["usage"] = {"prompt_tokens": use.prompt_tokens, "completion_tokens": use.completion_tokens,
                                "total_tokens": use.prompt_tokens + use.completion_tokens}
        self._send_json(200, payload, scripted.headers)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedOpenAIServer


class ScriptedOpenAIServer(EmbeddingControls):
    """The server. :meth:`script` queues replies (served in order, one per request);
    ``responder(body) -> Reply`` answers once the queue is empty (default: a 500 saying
    no reply was scripted, so a test that calls more than it scripted fails loudly)."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None):
        self.requests: list[RecordedRequest] = []
        self.responder = responder
        #: path -> JSON answered to GET or POST (a server's own routes: llama.cpp's
        #: ``/props``, Ollama's ``/api/show``...)
        self.json_routes: dict[str, Any] = {}
        self._queue: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._init_embeddings()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ScriptedOpenAIServer:
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ scripting

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``url + "/v1"``)."""
        return self.url + "/v1"

    def script(self, *replies: Reply) -> ScriptedOpenAIServer:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not served yet."""
        with self._lock:
            return len(self._queue)

    @property
    def bodies(self) -> list[Any]:
        """JSON bodies of the chat-completion requests received, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return http_error(500, "scripted server: no reply scripted for this request", type="test_error")


# ============================================================================ registry + fixtures


def registry_for(server: ScriptedOpenAIServer, *, api_key_env: str | None = TEST_KEY_ENV) -> ModelRegistry:
    """A registry whose provider ``scripted`` is ``server``.

    - ``tools-model``: native tool calling + tool_choice + structured output + vision;
      context 8192 / output 1024; default temperature 0.3; tiered prices
      (input <= 1000 tokens: 0.001 / 0.002 per 1k; larger: 0.002 / 0.004).
    - ``plain-model``: no native tools, no tool_choice, reasoning; context 4096 /
      output 512; default temperature 0.7; flat 0.0005 / 0.0015; a default system prompt.
    - ``embed-model`` (embedding, upstream ``embed-dim32``: 32 dimensions, 0.0001 per 1k),
      ``embed-model-2`` (embedding, ``embed2-dim48``: 48 dimensions, 0.0002 per 1k),
      ``rerank-model`` (rerank).
    """
    provider = ProviderSpec(name="scripted", base_url=server.base_url, api_key_env=api_key_env)
    models = [
        ModelSpec(
            name="tools-model", provider="scripted", model="upstream-tools", max_context=8192, max_output_tokens=1024,
            capabilities=Capabilities(tool_calling=True, tool_choice=True, vision=True, structured_output=True),
            default_temperature=0.3,
            pricing=Pricing(tiers=[PriceTier(max_input_tokens=1000, input_per_1k=0.001, output_per_1k=0.002),
                                   PriceTier(max_input_tokens=None, input_per_1k=0.002, output_per_1k=0.004)]),
        ),
        ModelSpec(
            name="plain-model", provider="scripted", max_context=4096, max_output_tokens=512,
            capabilities=Capabilities(tool_calling=False, tool_choice=False, reasoning=True),
            default_system_prompt="You are a terse assistant.",
            pricing=Pricing(input_per_1k=0.0005, output_per_1k=0.0015),
        ),
        ModelSpec(name="embed-model", provider="scripted", type="embedding", model="embed-dim32", max_context=8192,
                  dimension=32, pricing=Pricing(input_per_1k=0.0001)),
        ModelSpec(name="embed-model-2", provider="scripted", type="embedding", model="embed2-dim48",
                  max_context=8192, dimension=48, pricing=Pricing(input_per_1k=0.0002)),
        ModelSpec(name="rerank-model", provider="scripted", type="rerank", model="rerank-v1", max_context=8192),
    ]
    return ModelRegistry([provider], models)


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAIServer]:
    """A started scripted server, stopped after the test."""
    server = ScriptedOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture
async def scripted_registry(openai_server: ScriptedOpenAIServer,
                            monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ModelRegistry]:
    """:func:`registry_for` the ``openai_server``, with :data:`TEST_API_KEY` in the environment.

    Its SDK clients are closed after the test (on the test's event loop)."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_API_KEY)
    registry = registry_for(openai_server)
    try:
        yield registry
    finally:
        await registry.aclose()


def main() -> None:  # pragma: no cover - used by bench/llm.py
    """``python -m tests.support.openai_server``: serve :func:`bench_responder` and print the URL."""
    import sys

    server = ScriptedOpenAIServer(responder=bench_responder).start()
    print(server.url, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        server.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
