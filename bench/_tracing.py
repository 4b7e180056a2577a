"""The tracing phases of ``bench/api.py --tracing``: Flowloom with OpenTelemetry on, next to
the same server with it off.

:func:`measure` starts an OTLP/HTTP sink (this file run as a script, a process of its own:
it decodes every export request the way a collector does, and counts the spans, so its CPU
is neither the server's nor the load generator's) and a second ``flowloom serve`` whose
only difference is ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at the sink (the SDK's default
batching: an export every 5 s or per 512 spans), then runs the same plumbing and model
phases against it. :func:`summary` sets the figures side by side: server CPU per run at
concurrency 16 and p50 latency at concurrency 1, off and on, and the spans received.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: the service name the traced server exports as
SERVICE = "flowloom-bench"


async def measure(
    api: Any, tmp: str, model_url: str, load: dict[str, int], idle_s: float, verbose: bool
) -> tuple[dict[str, Any], dict[str, int]]:
    """The traced sections (``flowloom_plumbing_traced``, ``flowloom_model_traced``) and
    what the sink received (``{"spans", "exports"}``: over the traced server's whole life,
    its last spans flushed when it stopped). ``api`` is the ``bench/api.py`` module."""
    port = api.free_port()
    sink = api.Server(
        "otlp sink",
        [sys.executable, os.path.abspath(__file__), "--port", str(port)],
        port,
        "/health",
        api._env(),
        api.HERE,
        os.path.join(tmp, "otlp-sink.log"),
    ).start(60)
    try:
        server, key, _env = api.start_flowloom(tmp, model_url, otel_endpoint=sink.url)
        try:
            sections = {
                "flowloom_plumbing_traced": {
                    "idle_cpu_ms_per_s": await api.idle_cpu(server, idle_s),
                    **await api.bench_flowloom(server, key, "plumbing", load, verbose),
                }
            }
            sections["flowloom_model_traced"] = await api.bench_flowloom(server, key, "model", load, verbose)
        finally:
            server.stop()  # flushes the spans still in the batch queue
        with urllib.request.urlopen(sink.url + "/count", timeout=10) as answer:
            received = json.loads(answer.read())
    finally:
        sink.stop()
    return sections, received


def summary(results: dict[str, Any], received: dict[str, int]) -> dict[str, Any]:
    """Tracing off and on, per workflow: ``cpu_ms_per_run`` (blocking, concurrency 16) and
    ``p50_c1_ms`` (blocking, concurrency 1), each ``{"off", "on", "overhead_pct"}``."""
    out: dict[str, Any] = {
        "exporter": "otlp/http protobuf to a local sink, the SDK's default batching",
        "spans_received": received.get("spans", 0),
        "exports": received.get("exports", 0),
    }
    for workflow in ("plumbing", "model"):
        off, on = results[f"flowloom_{workflow}"], results[f"flowloom_{workflow}_traced"]
        out[workflow] = {
            "cpu_ms_per_run": _pair(off["cpu_ms_per_run"], on["cpu_ms_per_run"]),
            "p50_c1_ms": _pair(off["blocking_c1"]["latency_p50_ms"], on["blocking_c1"]["latency_p50_ms"]),
        }
    return out


def _pair(off: float, on: float) -> dict[str, float | None]:
    return {"off": off, "on": on, "overhead_pct": round((on - off) / off * 100, 1) if off else None}


# ------------------------------------------------------------------ the sink (a process of its own)


class _Sink(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        server: Any = self.server
        if self.path == "/count":
            with server.lock:
                counts = {"spans": server.spans, "exports": server.exports}
            self._reply(200, json.dumps(counts).encode(), "application/json")
        else:
            self._reply(200 if self.path == "/health" else 404, b"{}", "application/json")

    def do_POST(self) -> None:
        import gzip

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        server: Any = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with server.lock:
            server.spans += spans
            server.exports += 1
        self._reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")


def main(argv: list[str] | None = None) -> int:
    """``python bench/_tracing.py --port N``: the sink, until it is terminated."""
    parser = argparse.ArgumentParser(description="an OTLP/HTTP trace sink that counts spans")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    server: Any = ThreadingHTTPServer(("127.0.0.1", args.port), _Sink)
    server.daemon_threads = True
    server.lock, server.spans, server.exports = threading.Lock(), 0, 0
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
