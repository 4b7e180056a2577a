"""An OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with the protobuf export
request the SDK's exporter sends (decoded with ``opentelemetry-proto``), keeping every
span as a :class:`ReceivedSpan`. Run in a thread of the test process; ``url`` is the
endpoint to put in ``OTEL_EXPORTER_OTLP_ENDPOINT``.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OtlpReceiver", "ReceivedSpan", "otlp_receiver"]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass
class ReceivedSpan:
    """One span as exported: ids in hex, attributes and event attributes decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service: str
    links: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        server.receive(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.lock = threading.Lock()

    def receive(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(), kind=span.kind,
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        events=[(e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in span.events],
                        status_code=span.status.code, status_message=span.status.message,
                        service=str(resource.get("service.name", "")),
                        links=[link.span_id.hex() for link in span.links]))
        with self.lock:
            self.requests += 1
            self.spans.extend(found)


class OtlpReceiver:
    """The receiver's spans so far and a wait for the ones a test expects."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._server.lock:
            return list(self._server.spans)

    @property
    def requests(self) -> int:
        return self._server.requests

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 60.0) -> list[ReceivedSpan]:
        """The spans once ``done(spans)`` holds (AssertionError naming what came after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans
            if done(spans):
                return spans
            assert time.monotonic() < deadline, f"spans received: {sorted(s.name for s in spans)}"
            time.sleep(0.05)


def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A running receiver (a generator for a fixture: stopped after the test)."""
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield OtlpReceiver(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
