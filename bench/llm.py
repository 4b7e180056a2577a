"""LLM-layer benchmark: what ``call_llm`` adds over the raw openai SDK streaming loop.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/llm.py            # full run (~40 s on 2 cores)
    python bench/llm.py --quick    # smoke run (a few seconds)

Method. The scripted OpenAI server (``tests/support/openai_server.py``) runs in a
child process (so its threads do not share our GIL) with zero delay, answering every
request with ``max_tokens`` one-word chunks plus finish and usage chunks. On one
asyncio loop and one ``AsyncOpenAI`` client (same connection pool), we time, call by
call with ``time.process_time`` (CPU of this process only: the headline, since the
server's work and the machine's other load stay out) and ``time.perf_counter``:

- ``raw``: ``client.chat.completions.create(stream=True, include_usage)`` and an
  ``async for`` that appends each ``delta.content`` to a list - the least any caller
  must do;
- ``llm``: ``call_llm(LLMRequest(...), on_answer=list.append)`` - request building,
  idle timer, cancel watch, delta dispatch, tool-call/usage bookkeeping, the Usage
  record and price.

at two sizes, ``small`` (1 chunk) and ``large`` (200 chunks). Batches of the two
paths alternate, so background load hits both alike; each figure is the median over
all calls. ``overhead_per_chunk_us`` = (overhead(large) - overhead(small)) / (large -
small); ``overhead_per_call_us`` = overhead(small) minus one chunk's worth (CPU; the
``_wall_`` twins use wall time). Both are differences of medians: read them to a few µs.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _checkout import ROOT as _ROOT

from nodes.llm.call import LLMRequest, call_llm
from nodes.llm.model_registry import ModelRegistry, ModelSpec, Pricing, ProviderSpec

SCHEMA = "flowloom-bench-llm/1"
MESSAGES = [{"role": "system", "content": "You are a benchmark."}, {"role": "user", "content": "Say tok many times."}]


def _registry(url: str) -> ModelRegistry:
    provider = ProviderSpec(name="bench", base_url=url + "/v1", api_key_env=None)
    spec = ModelSpec(name="bench", provider="bench", max_context=200_000, max_output_tokens=100_000,
                     pricing=Pricing(input_per_1k=0.001, output_per_1k=0.002))
    return ModelRegistry([provider], [spec])


def _start_server() -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": _ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server"], cwd=_ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"scripted server did not start (got {url!r})")
    return proc, url


async def _raw(client: Any, chunks: int) -> str:
    parts: list[str] = []
    stream = await client.chat.completions.create(
        model="bench", messages=MESSAGES, temperature=0.7, max_tokens=chunks, stream=True,
        stream_options={"include_usage": True})
    async for chunk in stream:
        if chunk.choices:
            content = chunk.choices[0].delta.content
            if content:
                parts.append(content)
    return "".join(parts)


async def _layer(registry: ModelRegistry, chunks: int) -> str:
    parts: list[str] = []
    response = await call_llm(LLMRequest("bench", MESSAGES, max_tokens=chunks), registry=registry,
                              on_answer=parts.append)
    return response.text


async def _batch(fn: Callable[[], Awaitable[str]], calls: int, expect: str) -> tuple[list[float], list[float]]:
    """(wall µs, CPU µs) per call."""
    wall: list[float] = []
    cpu: list[float] = []
    gc.collect()
    for _ in range(calls):
        w0, c0 = time.perf_counter(), time.process_time()
        out = await fn()
        cpu.append((time.process_time() - c0) * 1e6)
        wall.append((time.perf_counter() - w0) * 1e6)
        assert out == expect, "unexpected reply from the scripted server"
    return wall, cpu


def _stats(raw: list[float], layer: list[float], kind: str) -> dict[str, float]:
    raw_med, layer_med = statistics.median(raw), statistics.median(layer)
    return {
        f"raw_{kind}_us_median": round(raw_med, 1),
        f"llm_{kind}_us_median": round(layer_med, 1),
        f"overhead_{kind}_us": round(layer_med - raw_med, 1),
        f"ratio_{kind}": round(layer_med / raw_med, 3),
    }


async def _measure(registry: ModelRegistry, chunks: int, calls: int, rounds: int, verbose: bool) -> dict[str, Any]:
    client = registry.client_for(registry.get("bench"))
    expect = "tok " * chunks
    samples: dict[str, tuple[list[float], list[float]]] = {"raw": ([], []), "llm": ([], [])}
    await _batch(lambda: _raw(client, chunks), 3, expect)  # warm-up: connections, imports, caches
    await _batch(lambda: _layer(registry, chunks), 3, expect)
    for r in range(rounds):
        pair = [("raw", lambda: _raw(client, chunks)), ("llm", lambda: _layer(registry, chunks))]
        for name, fn in pair if r % 2 == 0 else pair[::-1]:
            wall, cpu = await _batch(fn, calls, expect)
            samples[name][0].extend(wall)
            samples[name][1].extend(cpu)
        if verbose:
            print(f"  chunks={chunks} round {r + 1}/{rounds}", file=sys.stderr)
    return {
        "chunks": chunks,
        "calls_per_path": len(samples["raw"][0]),
        **_stats(samples["raw"][1], samples["llm"][1], "cpu"),
        **_stats(samples["raw"][0], samples["llm"][0], "wall"),
    }


# ---------------------------------------------------------------- layer only (no HTTP)


class _FakeStream:
    """Yields prebuilt SDK chunk objects: what ``AsyncStream`` hands out, minus the network."""

    def __init__(self, chunks: list[Any]) -> None:
        self._it = iter(chunks)

    def __aiter__(self) -> _FakeStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        pass


class _FakeClient:
    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks
        self.chat = self
        self.completions = self

    async def create(self, **body: Any) -> _FakeStream:
        return _FakeStream(self.chunks)


class _FakeRegistry(ModelRegistry):
    fake: _FakeClient

    def client_for(self, spec: ModelSpec) -> Any:  # type: ignore[override]
        return self.fake


def _sdk_chunks(n: int) -> list[Any]:
    from openai.types.chat import ChatCompletionChunk

    def chunk(delta: dict[str, Any], finish: str | None = None, use: dict[str, int] | None = None) -> Any:
        return ChatCompletionChunk.model_validate({
            "id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
            "choices": [] if use else [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": use})

    token = chunk({"content": "tok "})
    return [token] * n + [chunk({}, "stop"), chunk({}, None, {"prompt_tokens": 10, "completion_tokens": n,
                                                              "total_tokens": 10 + n})]


async def _raw_fake(client: _FakeClient) -> str:
    parts: list[str] = []
    stream = await client.create(model="bench", messages=MESSAGES, temperature=0.7, max_tokens=1, stream=True,
                                 stream_options={"include_usage": True})
    async for chunk in stream:
        if chunk.choices:
            content = chunk.choices[0].delta.content
            if content:
                parts.append(content)
    return "".join(parts)


async def _layer_only(calls: int, chunks: int, rounds: int) -> dict[str, Any]:
    """CPU µs per call of call_llm vs the raw loop over fake streams of ``chunks`` SDK chunks."""
    registry = _FakeRegistry([ProviderSpec(name="bench", base_url="http://unused/v1")],
                             [ModelSpec(name="bench", provider="bench", max_context=200_000,
                                        max_output_tokens=100_000)])
    registry.fake = _FakeClient(_sdk_chunks(chunks))
    expect = "tok " * chunks
    raw: list[float] = []
    layer: list[float] = []
    for r in range(rounds + 1):
        for name in (("raw", "llm") if r % 2 == 0 else ("llm", "raw")):
            fn = (lambda: _raw_fake(registry.fake)) if name == "raw" else (lambda: _layer(registry, chunks))
            gc.collect()
            c0 = time.process_time()
            for _ in range(calls):
                assert await fn() == expect
            if r:  # round 0 is the warm-up
                (raw if name == "raw" else layer).append((time.process_time() - c0) * 1e6 / calls)
    raw_med, layer_med = statistics.median(raw), statistics.median(layer)
    return {"chunks": chunks, "calls": calls * rounds, "raw_cpu_us_per_call": round(raw_med, 2),
            "llm_cpu_us_per_call": round(layer_med, 2), "overhead_cpu_us_per_call": round(layer_med - raw_med, 2)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    calls, rounds = (10, 2) if args.quick else (40, 6)
    small_n, large_n = 1, 200
    started = time.perf_counter()
    if args.verbose:
        print("layer only (fake SDK streams)", file=sys.stderr)
    only_small = await _layer_only(200 if args.quick else 2000, small_n, 3 if args.quick else 7)
    only_large = await _layer_only(10 if args.quick else 100, large_n, 3 if args.quick else 7)
    proc, url = _start_server()
    try:
        registry = _registry(url)
        small = await _measure(registry, small_n, calls, rounds, args.verbose)
        large = await _measure(registry, large_n, calls, rounds, args.verbose)
        await registry.aclose()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    span = large_n - small_n
    only_chunk = (only_large["overhead_cpu_us_per_call"] - only_small["overhead_cpu_us_per_call"]) / span
    http_chunk_cpu = (large["overhead_cpu_us"] - small["overhead_cpu_us"]) / span
    http_chunk_wall = (large["overhead_wall_us"] - small["overhead_wall_us"]) / span
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_1m": round(os.getloadavg()[0], 2)},
        "method": {
            "layer_only": "CPU time of call_llm vs the raw loop over fake streams yielding prebuilt "
                          "ChatCompletionChunk objects (no HTTP, no SSE parsing): the layer's own cost",
            "server": "tests/support/openai_server.py in a child process, zero delay, chunked SSE over 127.0.0.1",
            "raw": "AsyncOpenAI.chat.completions.create(stream=True) + async for, append delta.content",
            "llm": "nodes.llm.call.call_llm(..., on_answer=list.append)",
            "stat": "median per call over all timed calls; batches of the two paths alternate",
            "cpu": "time.process_time of this process (the server runs elsewhere)",
            "wall": "time.perf_counter; includes the server and the machine's other load",
        },
        "overhead_per_call_us": round(only_small["overhead_cpu_us_per_call"] - only_chunk * small_n, 1),
        "overhead_per_chunk_us": round(only_chunk, 2),
        "layer_only": {"small": only_small, "large": only_large},
        "over_http": {
            "small": small,
            "large": large,
            "overhead_per_call_cpu_us": round(small["overhead_cpu_us"] - http_chunk_cpu * small_n, 1),
            "overhead_per_chunk_cpu_us": round(http_chunk_cpu, 2),
            "overhead_per_call_wall_us": round(small["overhead_wall_us"] - http_chunk_wall * small_n, 1),
            "overhead_per_chunk_wall_us": round(http_chunk_wall, 2),
            "ratio_cpu_small": small["ratio_cpu"],
            "ratio_cpu_large": large["ratio_cpu"],
            "ratio_wall_small": small["ratio_wall"],
            "ratio_wall_large": large["ratio_wall"],
        },
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls (smoke test)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    result = asyncio.run(main_async(args))
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
