"""Flowloom's engine: compile workflow JSON with networkx and run it on asyncio.

Public surface: the contracts others plug into (:class:`NodeCatalog`, :class:`KindSpec`,
:class:`NodeExecutor`, :class:`NodeResult`, the storage ports in :mod:`engine.ports`),
:func:`compile_workflow`, :func:`check_workflow`, :func:`run_workflow`,
:func:`stream_workflow`, :func:`resume_run`, :func:`new_run_state`, :class:`CancelToken`,
:class:`RunDeps`, :class:`Settings` and the errors. The run lifecycle (durable runs,
owners, cancel from any process, chats) is :mod:`engine.service`.

The names are loaded on first access (module ``__getattr__``), so importing one
submodule (``from engine.compiler import check_workflow``) does not load the runner,
the scheduler and the settings: ``flowloom validate`` and ``--help`` start faster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemas.lazy import lazy_exports

#: Exported name -> the submodule defining it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("KindSpec", "NodeCatalog", "NodeExecutor"), "catalog"),
    **dict.fromkeys(("CompiledPlan", "check_workflow", "compile_workflow"), "compiler"),
    **dict.fromkeys(("CancelToken", "InterruptRequested", "NodeContext", "NodeResult", "RunDeps"), "context"),
    **dict.fromkeys(
        (
            "CompileError",
            "DefinitionError",
            "FlowloomError",
            "InvalidInputs",
            "NodeFailed",
            "NodeTimeout",
            "Problem",
            "RunCancelledError",
            "RunError",
            "RunLimitExceeded",
        ),
        "errors",
    ),
    **dict.fromkeys(
        (
            "answer_interrupts",
            "coerce_input",
            "new_run_state",
            "resume_run",
            "run_workflow",
            "stream_workflow",
        ),
        "runner",
    ),
    **dict.fromkeys(("Settings", "get_settings"), "settings"),
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see
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
        RunCancelledError,
        RunError,
        RunLimitExceeded,
    )
    from .runner import (
        answer_interrupts,
        coerce_input,
        new_run_state,
        resume_run,
        run_workflow,
        stream_workflow,
    )
    from .settings import Settings, get_settings
