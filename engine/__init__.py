"""Flowloom's engine: compile workflow JSON with networkx and run it on asyncio.

Public surface: the contracts others plug into (:class:`NodeCatalog`, :class:`KindSpec`,
:class:`NodeExecutor`, :class:`NodeResult`, the storage ports in :mod:`engine.ports`),
:func:`compile_workflow`, :func:`check_workflow`, :func:`run_workflow`,
:func:`stream_workflow`, :func:`resume_run`, :func:`new_run_state`, :class:`CancelToken`,
:class:`RunDeps`, :class:`Settings` and the errors. The run lifecycle (durable runs,
owners, cancel from any process, chats) is :mod:`engine.service`.
"""

from .catalog import KindSpec, NodeCatalog, NodeExecutor
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
    "KindSpec",
    "NodeCatalog",
    "NodeExecutor",
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
