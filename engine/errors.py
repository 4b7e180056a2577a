"""Flowloom's exceptions: one tree, definition errors apart from run errors.

::

    FlowloomError
    ├── DefinitionError            the builder can fix the workflow
    │   └── CompileError           every Problem found by the compiler, at once
    └── RunError                   raised while a run executes; carries node_id
        ├── NodeFailed             a node's own failure (bad input, HTTP error, ...)
        │   ├── ReferenceFailed    a reference could not be resolved at run time
        │   ├── TemplateFailed     a template could not be rendered
        │   └── BlockedAddress     HTTP target refused by the address policy
        ├── NodeTimeout            a node attempt exceeded its timeout
        ├── RunLimitExceeded       max node executions / max wall time reached
        └── RunCancelledError      the cancellation token fired

Every ``RunError`` has ``node_id`` (None when no node is to blame) and ``reason``, a
short machine-readable code shown in ``run_failed`` events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BlockedAddress",
    "CompileError",
    "DefinitionError",
    "FlowloomError",
    "InvalidInputs",
    "UnknownInterrupt",
    "NodeFailed",
    "NodeTimeout",
    "Problem",
    "ReferenceFailed",
    "RunCancelledError",
    "RunError",
    "RunLimitExceeded",
    "TemplateFailed",
    "MissingModelKey",
]


class FlowloomError(Exception):
    """Base of every error Flowloom raises on purpose."""


class DefinitionError(FlowloomError):
    """The workflow document is wrong; the message says where and how to fix it."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One compile finding. ``code`` is stable (tests and the canvas key on it).

    ``node_id`` / ``edge_id`` / ``path`` locate it; ``path`` is a field path inside the
    node (``config.cases[0].conditions[1].left``) or the document.
    """

    code: str
    message: str
    node_id: str | None = None
    edge_id: str | None = None
    path: str | None = None
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = []
        if self.node_id is not None:
            where.append(f"node {self.node_id!r}")
        if self.edge_id is not None:
            where.append(f"edge {self.edge_id!r}")
        if self.path:
            where.append(self.path)
        prefix = f"[{self.code}] " + (" ".join(where) + ": " if where else "")
        return prefix + self.message

    def to_dict(self) -> dict[str, str | None]:
        """JSON form used by ``flowloom validate --json`` and the API."""
        return {
            "code": self.code,
            "severity": self.severity,
            "node_id": self.node_id,
            "edge_id": self.edge_id,
            "path": self.path,
            "message": self.message,
        }


class CompileError(DefinitionError):
    """The compiler found errors; ``problems`` lists all of them (warnings included)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        errors = [p for p in problems if p.severity == "error"]
        super().__init__(f"{len(errors)} problem(s) in workflow:\n" + "\n".join(f"  - {p}" for p in errors))


class RunError(FlowloomError):
    """An error during a run. ``reason`` is a stable code; ``node_id`` names the node."""

    reason = "node_error"

    def __init__(
        self,
        message: str,
        *,
        node_id: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.node_id = node_id
        #: structured extras kept in the node run's error record (e.g. a code traceback)
        self.details = details
        if reason is not None:
            self.reason = reason


class NodeFailed(RunError):
    """A node could not do its work (invalid input, remote error, ...)."""


class ReferenceFailed(NodeFailed):
    """A reference could not be resolved: unknown node/field, missing path, null required input."""

    reason = "unresolved_reference"


class TemplateFailed(NodeFailed):
    """A template raised while rendering (undefined name, sandbox violation, ...)."""

    reason = "template_error"


class BlockedAddress(NodeFailed):
    """The HTTP target resolves to an address the policy refuses (SSRF guard)."""

    reason = "blocked_address"


class NodeTimeout(RunError):
    """A node attempt ran longer than its ``timeout``."""

    reason = "node_timeout"


class RunLimitExceeded(RunError):
    """A per-run limit was hit: ``reason`` is ``max_node_executions`` or ``max_wall_time``."""


class RunCancelledError(RunError):
    """The run's cancellation token fired."""

    reason = "cancelled"


class UnknownInterrupt(FlowloomError, ValueError):
    """An answer names an interrupt that is not pending in the run (the message lists those that are)."""


class InvalidInputs(FlowloomError):
    """The inputs given to a run do not match the workflow's declared inputs.

    ``problems`` holds one message per input (missing, wrong type, undeclared).
    """

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid workflow inputs:\n" + "\n".join(f"  - {p}" for p in problems))


class UnknownDatasets(FlowloomError):
    """A run that would search a dataset its tenant does not have: refused before
    anything runs, since it would fail at that search after the nodes before it ran (and
    were paid for). ``problems`` has one ``unknown_dataset`` error per node and field,
    with the commands that make the dataset."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(
            "the workflow searches a dataset this tenant does not have (nothing was run): "
            + "; ".join(f"{p.node_id}: {p.message}" for p in problems)
        )


class MissingModelKey(FlowloomError):
    """A run that would call a model whose provider key this deployment does not set:
    refused before anything runs, since it would fail at the first such node after the
    nodes before it ran (and were paid for). ``problems`` has one ``missing_api_key``
    error per node and model field, naming the variable to set, then the launch's
    ``unknown_dataset`` errors (as :class:`UnknownDatasets` has them), so one refusal names
    all there is to fix, as ``flowloom run`` does."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        # one line per distinct message (nodes sharing a model share its remedy), so a flow
        # of ten chat nodes on one model reads as one sentence, not ten
        nodes_of: dict[str, list[str]] = {}
        for p in problems:
            nodes_of.setdefault(p.message, []).append(str(p.node_id))
        super().__init__(
            "this deployment lacks what the workflow needs (nothing was run): "
            + "; ".join(
                f"{'nodes ' + ', '.join(ids) if len(ids) > 1 else ids[0]}: {message}"
                for message, ids in nodes_of.items()
            )
        )
