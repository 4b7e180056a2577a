"""The telemetry port's spans when nothing traces: one shared no-op span, nothing recorded,
and no trace context to store with a run."""

from __future__ import annotations

from engine.telemetry import NOOP_SPAN, Telemetry


def test_the_default_telemetry_hands_out_one_shared_span_that_records_nothing():
    port = Telemetry()
    spans = [port.run_span("wf", None), port.model_span("chat", "m"), port.span("execute_tool t", {"a": 1})]
    assert all(span is NOOP_SPAN for span in spans) and not NOOP_SPAN.recording
    with NOOP_SPAN as inside:
        inside.set({"k": "v"})
        inside.event("retry")
        inside.fail("timeout")
        assert inside.headers() == {}
    assert port.trace_context() is None
