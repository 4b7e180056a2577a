"""The server's traces: OpenTelemetry, configured by the standard ``OTEL_*`` variables.

:func:`instrument` (called by :func:`api.app.create_app`, before the app starts: its
middleware cannot be added later) sets up :class:`workers.tracing.Tracing` when the
variables ask for traces (:func:`workers.tracing.configured`) and traces the app's
requests, so a run created by a request carries that request's trace context (the
caller's, when it sent a ``traceparent``). :func:`start_traces` (the lifespan) makes the
process's telemetry a :class:`workers.tracing.TracedTelemetry` over the metrics and
traces httpx requests; :func:`stop_traces` undoes it and exports the last spans. With no
``OTEL_*`` variable none of it imports OpenTelemetry's SDK.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.telemetry import install_telemetry, telemetry

__all__ = ["instrument", "start_traces", "stop_traces"]


def instrument(app: Any) -> None:
    """Trace ``app``'s requests when the ``OTEL_*`` variables ask for traces; ``app.state.tracing``
    holds the :class:`workers.tracing.Tracing` (None: not traced)."""
    app.state.tracing = None
    app.state.traced_previous = None
    from workers.tracing_env import configured

    if not configured():
        return
    from workers.tracing import Tracing

    tracing = Tracing.from_env()
    tracing.instrument_app(app)
    app.state.tracing = tracing


def start_traces(app: Any) -> None:
    """Make the process's telemetry trace too (over the metrics installed before)."""
    tracing = app.state.tracing
    if tracing is None:
        return
    from workers.tracing import TracedTelemetry

    tracing.instrument_httpx()
    app.state.traced_previous = install_telemetry(TracedTelemetry(telemetry(), tracing))


async def stop_traces(app: Any) -> None:
    """Put back the telemetry :func:`start_traces` replaced; export the spans left (off the event loop)."""
    tracing = app.state.tracing
    if tracing is None:
        return
    install_telemetry(app.state.traced_previous)
    app.state.tracing = None
    await asyncio.to_thread(tracing.close)
