"""OpenTelemetry traces of a Flowloom process: the engine's telemetry port, traced.

Configured only by the standard ``OTEL_*`` environment variables
(:func:`workers.tracing_env.configured` says when). When they ask for none this module is never imported and no SDK is set up: the engine's no-op spans cost a method
call. When on, :class:`Tracing` holds the process's tracer provider - its own, not the
global one, so two apps in one process (tests) do not share it - exporting with OTLP
over HTTP in batches; the sampler (``OTEL_TRACES_SAMPLER``, ``OTEL_TRACES_SAMPLER_ARG``),
the service name (``OTEL_SERVICE_NAME``, default ``flowloom``), resource attributes,
headers and timeouts are the SDK's own reading of those variables.

What is traced (:class:`TracedTelemetry`, over the metrics of the process):

- one span per execution of a run (``workflow <id>``), a child of the trace context
  stored with the run when it was created (the API request's span; the caller's when
  its request carried a ``traceparent``), so a run queued to a worker, recovered or
  resumed later stays in the same trace;
- one span per node run (``node <id>``), current while the node runs: a loop's body
  nodes, a node's model calls and HTTP requests nest under it;
- one span per model call following the GenAI semantic conventions (``chat <model>``,
  ``embeddings <model>``); prompts and completions as events only with
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``;
- one span per tool call (``execute_tool <name>``), and per MCP call (``tools/call
  <tool>``, whose HTTP requests carry ``traceparent``: :mod:`nodes.agent.mcp_tools`);
- HTTP requests made with httpx (the HTTP node, HTTP tools, model SDKs) by the httpx
  instrumentation, which sends ``traceparent``; their URL attributes keep no query,
  fragment or user info (:func:`safe_url`).

Attributes carry ids, kinds, statuses, counts and Flowloom's reason codes - never an
input, an output, a header value or a key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from engine.context import InterruptRequested
from engine.errors import RunCancelledError
from engine.telemetry import TRACE_KEY, Span, Telemetry, run_scope
from schemas.run import Usage
from schemas.types import NodeRunStatus, RunStatus

from .tracing_env import CAPTURE_CONTENT

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from schemas.run import NodeRun, RunState

__all__ = ["TracedTelemetry", "Tracing", "safe_url"]

logger = logging.getLogger("flowloom.tracing")

#: longest string attribute or event payload kept (an error message, a captured prompt)
_TEXT_MAX = 4096


def safe_url(url: str) -> str:
    """``url`` without user info, query and fragment: where a workflow puts a key in a URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Tracing:
    """The process's tracer provider and what it instrumented (module docstring).
    :meth:`close` flushes the spans not exported yet and stops the exporter."""

    def __init__(self, provider: TracerProvider, capture_content: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("flowloom")
        self.capture_content = capture_content
        self._httpx: Any = None

    @classmethod
    def from_env(cls, default_service: str = "flowloom") -> Tracing:
        """A provider exporting OTLP/HTTP as the ``OTEL_*`` variables say."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: default_service}))
        provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER, read by the SDK
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        capture = os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"
        return cls(provider, capture)

    def instrument_httpx(self) -> None:
        """Trace every httpx request of the process (and send ``traceparent``), URLs cut to :func:`safe_url`."""
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        instrumentor = HTTPXClientInstrumentor()
        if instrumentor.is_instrumented_by_opentelemetry:
            return  # another app of this process did; its provider keeps the requests
        instrumentor.instrument(
            tracer_provider=self.provider, request_hook=_cut_url, async_request_hook=_acut_url
        )
        self._httpx = instrumentor

    def instrument_app(self, app: Any) -> None:
        """Trace the requests of a FastAPI ``app``: a server span each, a child of the
        caller's ``traceparent`` when it sends one (not the scrape of ``/metrics``, nor ``/health``)."""
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=self.provider,
            excluded_urls="/metrics,/health",
            exclude_spans=["receive", "send"],
        )

    def close(self) -> None:
        if self._httpx is not None:
            self._httpx.uninstrument()
            self._httpx = None
        try:
            self.provider.shutdown()  # exports what is left
        except Exception as exc:
            logger.warning("tracing: the last spans could not be exported (%s)", exc)


def _cut_url(span: Any, request: Any) -> None:
    attributes = getattr(span, "attributes", None) or {}
    for key in ("url.full", "http.url"):
        if key in attributes:
            span.set_attribute(key, safe_url(str(attributes[key])))


async def _acut_url(span: Any, request: Any) -> None:
    _cut_url(span, request)


class TracedTelemetry(Telemetry):
    """The process's telemetry: the metrics of ``inner`` (reports passed on) and the
    spans of :class:`Tracing` (module docstring)."""

    def __init__(self, inner: Telemetry, tracing: Tracing) -> None:
        self.inner, self.tracing, self._tracer = inner, tracing, tracing.tracer

    # metrics: the inner telemetry's
    def run_event(self, workflow_id: str, event: Any) -> None:
        self.inner.run_event(workflow_id, event)

    def checkpoint(self, seconds: float) -> None:
        self.inner.checkpoint(seconds)

    def model_call(self, *, model: str, provider: str, outcome: str, usage: Usage | None) -> None:
        self.inner.model_call(model=model, provider=provider, outcome=outcome, usage=usage)

    def recovered(self, outcome: str) -> None:
        self.inner.recovered(outcome)

    def subscribers(self, change: int) -> None:
        self.inner.subscribers(change)

    # traces
    def trace_context(self) -> dict[str, str] | None:
        if not trace.get_current_span().get_span_context().is_valid:
            return None  # no request span: the run's own span starts its trace
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier or None

    def run_span(self, workflow_id: str, state: RunState | None) -> Span:
        # a run started by a node (a workflow called as a tool) is a child of that node's
        # span; a run of its own continues the context stored with it at its creation
        scope = run_scope.get()
        stored = state.sys.get(TRACE_KEY) if state is not None and not (scope and scope[2]) else None
        parent = propagate.extract(stored) if isinstance(stored, dict) else None
        attributes: dict[str, Any] = {"flowloom.workflow.id": workflow_id, "openinference.span.kind": "CHAIN"}
        if state is not None:
            attributes.update(
                {
                    "flowloom.run.id": state.run_id,
                    "flowloom.tenant.id": state.tenant_id,
                    "flowloom.run.resumed": state.status is not RunStatus.pending,
                }
            )
            if state.workflow_version:
                attributes["flowloom.workflow.version"] = state.workflow_version
        span = self._tracer.start_span(
            f"workflow {workflow_id}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
        )
        return _Traced(span, self.tracing)

    def node_span(self, state: RunState, node_id: str, kind: str) -> Span:
        span = self._tracer.start_span(
            f"node {node_id}",
            attributes={
                "flowloom.node.id": node_id,
                "flowloom.node.kind": kind,
                "flowloom.run.id": state.run_id,
                "openinference.span.kind": _NODE_KINDS.get(kind, "CHAIN"),
            },
        )
        return _Traced(span, self.tracing)

    def model_span(self, operation: str, model: str, node_id: str | None = None) -> Span:
        attributes = {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model,
            "openinference.span.kind": "EMBEDDING" if operation == "embeddings" else "LLM",
            "llm.model_name": model,
        }
        if node_id:
            attributes["flowloom.node.id"] = node_id
        span = self._tracer.start_span(f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attributes)
        return _Traced(span, self.tracing)

    def span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Span:
        span = self._tracer.start_span(name, attributes=_clean(attributes or {}))
        return _Traced(span, self.tracing)


#: OpenInference span kinds (what Phoenix shows) of node kinds that are not plain steps
_NODE_KINDS = {"llm": "LLM", "agent": "AGENT", "tool_call": "TOOL", "knowledge_retrieval": "RETRIEVER"}


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry takes: None dropped, long strings cut."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str) and len(value) > _TEXT_MAX:
            value = value[:_TEXT_MAX]
        out[key] = value
    return out


class _Traced(Span):
    """A recording span: current between ``__enter__`` and ``__exit__``, then ended."""

    __slots__ = ("_span", "_tracing", "_token", "_node", "_state", "_failed")
    recording = True

    def __init__(self, span: Any, tracing: Tracing) -> None:
        self._span, self._tracing = span, tracing
        self._token: Any = None
        self._node: NodeRun | None = None
        self._state: RunState | None = None
        self._failed = False

    def __enter__(self) -> _Traced:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        span = self._span
        try:
            if self._node is not None:
                _end_node(self, self._node)
            if self._state is not None:
                _end_run(self, self._state)
            if error is not None and not self._failed:
                if isinstance(error, (asyncio.CancelledError, RunCancelledError)):
                    span.set_attribute("flowloom.cancelled", True)
                elif isinstance(error, InterruptRequested):
                    span.event(
                        "flowloom.interrupt"
                    )  # a question for a person: the run pauses, nothing failed
                elif self._node is None:  # a node's own end (its status) says more than the exception
                    # the reason code and type only: a library's message may quote what it was sent
                    self.fail(str(getattr(error, "reason", None) or "error"))
                    span.set_attribute("error.type", type(error).__name__)
        except Exception as exc:
            logger.debug("tracing: a span's end could not be recorded (%s)", exc)
        finally:
            otel_context.detach(self._token)
            span.end()

    def set(self, attributes: Mapping[str, Any]) -> None:
        self._span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        self._span.add_event(name, _clean(attributes or {}))

    def fail(self, reason: str) -> None:
        self._failed = True
        self._span.set_attribute("flowloom.error.reason", reason)
        self._span.set_status(Status(StatusCode.ERROR, reason))

    def node_run(self, run: NodeRun) -> None:
        self._node = run

    def run_state(self, state: RunState) -> None:
        self._state = state

    def model_result(
        self,
        *,
        provider: str,
        usage: Usage | None,
        finish_reason: str | None = None,
        response_model: str | None = None,
        attempts: int = 1,
    ) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.response.model": response_model,
            "flowloom.model.attempts": attempts,
        }
        if finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [finish_reason]
        if usage is not None:
            attributes.update(
                {
                    "gen_ai.usage.input_tokens": usage.tokens_in,
                    "gen_ai.usage.output_tokens": usage.tokens_out,
                    "llm.token_count.prompt": usage.tokens_in,
                    "llm.token_count.completion": usage.tokens_out,
                    "flowloom.usage.cost_usd": usage.cost,
                    "flowloom.usage.token_source": usage.token_source,
                }
            )
        self.set(attributes)

    def model_content(self, messages: Any, completion: Any) -> None:
        if not self._tracing.capture_content:
            return
        self.event("gen_ai.content.prompt", {"gen_ai.prompt": _json(messages)})
        self.event("gen_ai.content.completion", {"gen_ai.completion": _json(completion)})

    def headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self._span))
        return carrier


def _json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[: _TEXT_MAX * 4]


def _end_node(span: _Traced, run: NodeRun) -> None:
    """A node span's end, read from its node run (status, attempts, error reason)."""
    status = run.status
    span.set(
        {
            "flowloom.node.status": str(status.value),
            "flowloom.node_run.id": run.id,
            "flowloom.node.attempts": run.attempts,
            "flowloom.node.retries": run.retries,
            "flowloom.loop.id": run.loop_id,
            "flowloom.loop.iteration": run.iteration,
        }
    )
    if status is NodeRunStatus.waiting:
        span.event("flowloom.interrupt")
    elif status is NodeRunStatus.cancelled:
        span.event("flowloom.cancelled")
    if run.error is not None:
        span.set({"error.type": run.error.type})
        if status is NodeRunStatus.failed:
            span.fail(run.error.reason or "node_error")
        else:  # handled by the node's error strategy (a default output): recorded, not failed
            span.set({"flowloom.error.reason": run.error.reason or "node_error"})


def _end_run(span: _Traced, state: RunState) -> None:
    """A run span's end, read from the run state (status, error reason, pending questions)."""
    status = state.status
    span.set(
        {"flowloom.run.status": str(status.value), "flowloom.run.node_executions": state.node_executions}
    )
    if status is RunStatus.paused:
        span.event("flowloom.paused", {"flowloom.interrupts": len(state.interrupts)})
    elif status is RunStatus.cancelled:
        span.event("flowloom.cancelled")
    if status is RunStatus.failed:
        error = state.error
        span.fail((error.reason if error is not None else None) or "run_failed")
