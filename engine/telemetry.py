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
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from schemas.run import Usage

__all__ = ["RunScope", "Telemetry", "install_telemetry", "run_scope", "telemetry"]

#: ``(tenant_id, run_id, node_id)`` of the run (and node: "" outside one) the current task
#: works for; None outside a run. Log records written meanwhile carry them
#: (``api.logs.RunFields``). Set where tasks start (a task keeps the value it was created
#: with), so a node's own tasks - a model call's, a tool's - carry its scope too.
RunScope = tuple[str, str, str]
run_scope: ContextVar[RunScope | None] = ContextVar("flowloom_run_scope", default=None)


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


_current = Telemetry()


def telemetry() -> Telemetry:
    """The process's telemetry (a no-op :class:`Telemetry` unless one was installed)."""
    return _current


def install_telemetry(chosen: Telemetry | None) -> Telemetry:
    """Make ``chosen`` the process's telemetry (None: back to the no-op); returns the one it replaced."""
    global _current
    previous, _current = _current, chosen if chosen is not None else Telemetry()
    return previous
