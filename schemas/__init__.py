"""Pydantic models of workflows, node configs, events, run records and stored records."""

from .events import (
    Event,
    InterruptEvent,
    NodeDelta,
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
from .records import DEFAULT_TENANT, ChatMessage, MessagePart, MessageStatus, OwnerInfo, RunCommand, RunSummary
from .run import EdgeStatus, Interrupt, NodeError, NodeRun, RunState, Usage
from .types import NodeRunStatus, Ref, RunStatus, Selector, VarType, parse_selector
from .values import InputBinding
from .workflow import Edge, ErrorStrategy, InputVar, NodeBase, RunLimits, Workflow, node_model, workflow_json_schema

__all__ = [
    "DEFAULT_TENANT",
    "ChatMessage",
    "MessagePart",
    "MessageStatus",
    "OwnerInfo",
    "RunCommand",
    "RunSummary",
    "Edge",
    "EdgeStatus",
    "ErrorStrategy",
    "Event",
    "InputBinding",
    "Interrupt",
    "InterruptEvent",
    "InputVar",
    "NodeBase",
    "NodeConfig",
    "NodeDelta",
    "NodeError",
    "NodeFinished",
    "NodeRun",
    "NodeRunStatus",
    "NodeStarted",
    "Ref",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunLimits",
    "RunPaused",
    "RunResumed",
    "RunStarted",
    "RunState",
    "RunStatus",
    "Selector",
    "Usage",
    "VarType",
    "Workflow",
    "node_model",
    "parse_selector",
    "workflow_json_schema",
]
