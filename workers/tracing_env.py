"""Whether a process traces: read from the standard ``OTEL_*`` variables without importing
OpenTelemetry (a process that traces nothing never loads it).

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, or ``OTEL_TRACES_EXPORTER=otlp`` (the
SDK's default endpoint, ``http://localhost:4318``); off with ``OTEL_SDK_DISABLED=true``
or ``OTEL_TRACES_EXPORTER=none`` whatever else is set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["CAPTURE_CONTENT", "configured"]

#: the variable that turns on prompts and completions as span events (``true``)
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables of ``environ`` (default: the process's) ask for traces."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return exporter == "otlp" or any(env.get(name, "").strip() for name in _ENDPOINTS)
