"""What a process tells its operator about the runs it executes: the telemetry port.

The engine and the nodes report what happens where it happens (an event of a run, a
checkpoint stored, a model call made, an orphaned run recovered, a follower of a run's
events joining or leaving); an implementation outside the engine turns those reports
into metrics (``workers.metrics``: Prometheus). The default, :class:`Telemetry`
itself, does nothing, so a process that installed none (the CLI, a test) pays one
method call per report.

One implementation is installed per process (:func:`install_telemetry`), because what it
feeds is per process too: a Prometheus registry is scraped per process, and an RQ
worker executes its runs in its own process. Every method must be cheap and must never
raise: a report is called on the run's hot path, and telemetry failing must never fail
a run.

Traces use the same port: :meth:`Telemetry.run_span`, :meth:`Telemetry.node_span`,
:meth:`Telemetry.model_span` and :meth:`Telemetry.span` return a :class:`Span`, a context
manager that makes the span current while its block runs (so a node's model calls nest
under the node, a loop's body nodes under the loop). The default returns
:data:`NOOP_SPAN`, one shared object whose methods do nothing, so a process without
tracing pays a method call and a ``with`` per node. An implementation
(``workers.tracing``) records them with OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from schemas.run import Usage

if TYPE_CHECKING:
    from schemas.run import NodeRun, RunState

__all__ = [
    "NOOP_SPAN",
    "TRACE_KEY",
    "RunScope",
    "Span",
    "Telemetry",
    "install_telemetry",
    "run_scope",
    "telemetry",
]

#: ``(tenant_id, run_id, node_id)`` of the run (and node: "" outside one) the current task
#: works for; None outside a run. Log records written meanwhile carry them
#: (``api.logs.RunFields``). Set where tasks start (a task keeps the value it was created
#: with), so a node's own tasks - a model call's, a tool's - carry its scope too.
RunScope = tuple[str, str, str]
run_scope: ContextVar[RunScope | None] = ContextVar("flowloom_run_scope", default=None)


#: the key of ``RunState.sys`` holding the trace context a run was created in (W3C headers:
#: ``traceparent``, ``tracestate``); not a variable a template can name
TRACE_KEY = "trace_context"


class Span:
    """A span of a trace, current while its ``with`` block runs; ended when the block
    exits (an exception leaving it marks the span failed). This base records nothing:
    :data:`NOOP_SPAN` is the one instance the default telemetry hands out.

    ``recording`` is False when nothing is recorded, so a caller can skip building
    attributes (content, JSON) it would only throw away."""

    __slots__ = ()
    recording = False

    def __enter__(self) -> Span:
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        return None

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes (str, bool, int, float or a list of one of them; None is skipped)."""

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        """Add a timestamped event (a retry, an interrupt, a prompt when content is captured)."""

    def fail(self, reason: str) -> None:
        """Mark the span failed with Flowloom's reason code (``http_status``, ``timeout``...).
        The reason, never the message: a message may quote a value of the run (a secret
        among them); the run record holds it, masked."""

    def node_run(self, run: NodeRun) -> None:
        """The node run this node span stands for: its status, attempts and error are read
        when the span ends."""

    def run_state(self, state: RunState) -> None:
        """The run state this run span stands for: its status and error are read when the span ends."""

    def model_result(
        self,
        *,
        provider: str,
        usage: Usage | None,
        finish_reason: str | None = None,
        response_model: str | None = None,
        attempts: int = 1,
    ) -> None:
        """What a model call returned: GenAI usage and finish reason."""

    def model_content(self, messages: Any, completion: Any) -> None:
        """The prompt and the completion of a model call: kept (as events) only when the
        operator turned content capture on."""

    def headers(self) -> dict[str, str]:
        """W3C trace-context headers (``traceparent``...) naming this span as the parent, for
        an outgoing request; empty when nothing is traced."""
        return {}


#: the shared span of a process that traces nothing
NOOP_SPAN = Span()


class Telemetry:
    """The reports a process makes (all no-ops here; subclasses override what they count).

    Units: seconds for durations; ``usage`` is the call's :class:`~schemas.run.Usage`
    (tokens, cost in USD, ``token_source``)."""

    def run_event(self, workflow_id: str, event: Any) -> None:
        """An event of a run this process executes (text deltas included), as it is published."""

    def checkpoint(self, seconds: float) -> None:
        """A run's checkpoint was stored; ``seconds`` is how long the store took, retries included."""

    def model_call(self, *, model: str, provider: str, outcome: str, usage: Usage | None) -> None:
        """A model call ended: ``outcome`` is ``ok`` or the error's reason code
        (``rate_limited``, ``timeout``...); ``usage`` is None when nothing was counted."""

    def recovered(self, outcome: str) -> None:
        """An orphaned run was handled by recovery: ``outcome`` is ``recovered`` (continued
        here or given to the queue again) or ``failed`` (the next look tries again)."""

    def subscribers(self, change: int) -> None:
        """A follower of a run's event stream (SSE) joined (``+1``) or left (``-1``)."""

    # ------------------------------------------------------------------ traces

    def trace_context(self) -> dict[str, str] | None:
        """The current trace context as W3C headers (``{"traceparent": ...}``), stored with a
        run when it is created so every execution of it (here, in a worker, resumed a day
        later) continues that trace; None when nothing is traced."""
        return None

    def run_span(self, workflow_id: str, state: RunState | None) -> Span:
        """The span of one execution of a run (a child of the trace context stored with it)."""
        return NOOP_SPAN

    def node_span(self, state: RunState, node_id: str, kind: str) -> Span:
        """The span of one node run (all its attempts), within the current span."""
        return NOOP_SPAN

    def model_span(self, operation: str, model: str, node_id: str | None = None) -> Span:
        """The span of one model call: ``operation`` is a GenAI operation name (``chat``,
        ``embeddings``); ``model`` the model as the workflow names it."""
        return NOOP_SPAN

    def span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Span:
        """Any other span of Flowloom's own (a tool call): ``name`` as shown, ``attributes`` set at start."""
        return NOOP_SPAN


_current = Telemetry()


def telemetry() -> Telemetry:
    """The process's telemetry (a no-op :class:`Telemetry` unless one was installed)."""
    return _current


def install_telemetry(chosen: Telemetry | None) -> Telemetry:
    """Make ``chosen`` the process's telemetry (None: back to the no-op); returns the one it replaced."""
    global _current
    previous, _current = _current, chosen if chosen is not None else Telemetry()
    return previous
