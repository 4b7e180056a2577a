"""Pydantic models of workflows, nodes, events and run records.

Import order matters: node config modules register their kinds in
:data:`schemas.nodes.NODE_KINDS` before :mod:`schemas.workflow` builds the node union.
"""

from . import nodes as nodes  # noqa: F401  (registers the node kinds)
from . import nodes_llm as nodes_llm  # noqa: F401  (registers the LLM node kinds)
from . import nodes_agent as nodes_agent  # noqa: F401  (registers the agent node kinds)
from . import nodes_code as nodes_code  # noqa: F401  (registers the code node kind)
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
from .nodes import NODE_KINDS, NodeConfig
from .run import EdgeStatus, Interrupt, NodeError, NodeRun, RunState, Usage
from .types import NodeRunStatus, Ref, RunStatus, Selector, VarType, parse_selector
from .values import InputBinding
from .workflow import Edge, ErrorStrategy, InputVar, NodeBase, RunLimits, Workflow, node_model, workflow_json_schema

__all__ = [
    "NODE_KINDS",
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
