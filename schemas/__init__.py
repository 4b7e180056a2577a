"""Pydantic models of workflows, node configs, events, run records and stored records.

The names below are loaded on first access (module ``__getattr__``): building the
pydantic models of every schema module costs tens of milliseconds, and a command such as
``flowloom validate`` needs the workflow models but not the events or run records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

#: Exported name -> the submodule defining it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        (
            "Event",
            "Interrupt",
            "InterruptEvent",
            "NodeDelta",
            "NodeError",
            "NodeFinished",
            "NodeStarted",
            "RunCancelled",
            "RunFailed",
            "RunFinished",
            "RunPaused",
            "RunResumed",
            "RunStarted",
        ),
        "events",
    ),
    "NodeConfig": "nodes",
    **dict.fromkeys(
        (
            "DEFAULT_TENANT",
            "ChatMessage",
            "MessagePart",
            "MessageStatus",
            "OwnerInfo",
            "RunCommand",
            "RunSummary",
        ),
        "records",
    ),
    **dict.fromkeys(("EdgeStatus", "NodeRun", "RunState", "Usage"), "run"),
    **dict.fromkeys(("NodeRunStatus", "Ref", "RunStatus", "Selector", "VarType", "parse_selector"), "types"),
    "InputBinding": "values",
    **dict.fromkeys(
        (
            "Edge",
            "ErrorStrategy",
            "InputVar",
            "NodeBase",
            "RunLimits",
            "Workflow",
            "node_model",
            "workflow_json_schema",
        ),
        "workflow",
    ),
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .events import (
        Event,
        Interrupt,
        InterruptEvent,
        NodeDelta,
        NodeError,
        NodeFinished,
        NodeStarted,
        RunCancelled,
        RunFailed,
        RunFinished,
        RunPaused,
        RunResumed,
        RunStarted,
    )
    from .nodes import NodeConfig
    from .records import (
        DEFAULT_TENANT,
        ChatMessage,
        MessagePart,
        MessageStatus,
        OwnerInfo,
        RunCommand,
        RunSummary,
    )
    from .run import EdgeStatus, NodeRun, RunState, Usage
    from .types import NodeRunStatus, Ref, RunStatus, Selector, VarType, parse_selector
    from .values import InputBinding
    from .workflow import (
        Edge,
        ErrorStrategy,
        InputVar,
        NodeBase,
        RunLimits,
        Workflow,
        node_model,
        workflow_json_schema,
    )
