"""Flowloom's engine: compile workflow JSON with networkx and run it on asyncio.

Public surface: :func:`compile_workflow`, :func:`check_workflow`,
:func:`run_workflow`, :func:`stream_workflow`, :func:`resume_run`,
:func:`new_run_state`, :class:`CancelToken`, :class:`RunDeps` and the errors.
"""

from .compiler import CompiledPlan, check_workflow, compile_workflow
from .context import CancelToken, InterruptRequested, NodeContext, NodeResult, RunDeps
from .errors import (
    CompileError,
    DefinitionError,
    FlowloomError,
    InvalidInputs,
    NodeFailed,
    NodeTimeout,
    Problem,
    RunCancelled,
    RunError,
    RunLimitExceeded,
)
from .runner import answer_interrupts, coerce_input, new_run_state, resume_run, run_workflow, stream_workflow
from .settings import Settings, get_settings

__all__ = [
    "CancelToken",
    "CompileError",
    "CompiledPlan",
    "DefinitionError",
    "FlowloomError",
    "InterruptRequested",
    "InvalidInputs",
    "NodeContext",
    "NodeFailed",
    "NodeResult",
    "NodeTimeout",
    "Problem",
    "RunCancelled",
    "RunDeps",
    "RunError",
    "RunLimitExceeded",
    "answer_interrupts",
    "Settings",
    "check_workflow",
    "coerce_input",
    "compile_workflow",
    "get_settings",
    "new_run_state",
    "resume_run",
    "run_workflow",
    "stream_workflow",
]
