"""Traces of MCP calls: an agent's call to a tool of an MCP server over HTTP is a span
(``execute_tool``, then ``tools/call``) in the run's trace, exported to a real OTLP
receiver, and the server receives a ``traceparent`` of that trace; the secret header sent
to the server is in no span."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engine import Settings
from engine.telemetry import Telemetry, install_telemetry
from schemas.types import RunStatus
from tests.nodes.agent.conftest import answer_reply, calls_reply
from tests.nodes.test_mcp_tools import flow, http_server, run, tool_results  # noqa: F401  (fixture)
from tests.support.openai_server import openai_server, scripted_registry  # noqa: F401  (fixtures)
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from otlp_receiver()


async def test_an_mcp_call_over_http_is_a_span_and_sends_the_runs_traceparent(
        openai_server, scripted_registry, http_server, receiver, monkeypatch):
    from workers.tracing import TracedTelemetry, Tracing

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("FLOWLOOM_SECRET_MCP_TOKEN", "s3cret-trace-41")
    _proc, url = http_server
    server = {"name": "remote", "url": url.replace("127.0.0.1", "localhost"),
              "headers": {"Authorization": "Bearer {{secret:MCP_TOKEN}}"}, "tools": ["traceparent"], "prefix": "r_"}
    openai_server.script(calls_reply(("c1", "r_traceparent", {})), answer_reply("done"))
    tracing = Tracing.from_env()
    previous = install_telemetry(TracedTelemetry(Telemetry(), tracing))
    try:
        _plan, _deps, state = await run(scripted_registry, flow("agent", mcp_servers=[server]),
                                        Settings(http_allow=["localhost"]))
    finally:
        install_telemetry(previous)
        tracing.close()
    assert state.status is RunStatus.succeeded, state.error
    spans = receiver.wait_for(lambda found: any(s.name == "tools/call traceparent" for s in found))
    run_span = next(s for s in spans if s.name.startswith("workflow "))
    tool = next(s for s in spans if s.name == "execute_tool r_traceparent")
    call = next(s for s in spans if s.name == "tools/call traceparent")
    assert call.parent_id == tool.span_id and {s.trace_id for s in (tool, call)} == {run_span.trace_id}
    assert call.attributes["mcp.method.name"] == "tools/call" and call.attributes["flowloom.mcp.server"] == "remote"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    received = tool_results(openai_server.bodies[1])["c1"]
    assert f"00-{run_span.trace_id}-" in received, received
    for span in spans:
        assert "s3cret-trace-41" not in json.dumps([span.attributes, span.events], default=str), span.name
