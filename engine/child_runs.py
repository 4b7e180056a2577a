"""Child runs: a workflow run by a node of another run (a workflow tool), to its end.

The child gets a fresh run state (own run id ``<parent run id>.<suffix>``, own limits and
deadline from its document), the parent's settings, model registry and node memory, and
the parent's cancel token (cancelling the parent cancels the child). Its events are not
mixed into the parent's stream. Calls nest: a workflow already running in the chain of
parents, or a chain deeper than :data:`MAX_DEPTH`, is refused (:class:`WorkflowRecursion`),
so a workflow that lists itself as a tool cannot recurse forever.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .context import CancelToken, RunDeps
from .errors import DefinitionError

if TYPE_CHECKING:
    from .compiler import CompiledPlan

__all__ = ["MAX_DEPTH", "WorkflowRecursion", "run_child"]

#: Deepest chain of child runs (parent -> child -> grandchild ...).
MAX_DEPTH = 4

_CHAIN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "flowloom_workflow_chain", default=()
)


class WorkflowRecursion(DefinitionError):
    """A child run would call a workflow already running in its chain, or nest too deep."""


async def run_child(
    plan: CompiledPlan,
    inputs: Mapping[str, Any],
    *,
    parent_deps: RunDeps,
    cancel: CancelToken | None = None,
    run_id: str | None = None,
    caller: str | None = None,
    **sys: Any,
) -> Any:
    """Run ``plan`` as a child run (module docstring); returns its final :class:`RunState`.

    ``caller`` is the id of the workflow making the call (it joins the chain, so a child
    calling its caller back is refused too).

    Raises:
        WorkflowRecursion: the workflow is already running in this chain, or the chain is too deep.
        InvalidInputs: ``inputs`` do not fit the child's declared inputs.
    """
    chain = _CHAIN.get()
    if caller is not None and caller not in chain:
        chain = chain + (caller,)
    workflow_id = plan.workflow.id
    if workflow_id in chain:
        raise WorkflowRecursion(
            f"workflow {workflow_id!r} is already running in this chain "
            f"({' -> '.join(chain + (workflow_id,))}); a workflow cannot call itself"
        )
    if len(chain) >= MAX_DEPTH:
        raise WorkflowRecursion(
            f"child runs nest deeper than {MAX_DEPTH} ({' -> '.join(chain + (workflow_id,))})"
        )
    from .runner import run_workflow

    deps = RunDeps(
        settings=parent_deps.settings,
        models=parent_deps.models,
        memory=parent_deps.memory,
        workflows=parent_deps.workflows,
    )
    token = _CHAIN.set(chain + (workflow_id,))
    try:
        return await run_workflow(plan, dict(inputs), deps=deps, cancel=cancel, run_id=run_id, **sys)
    finally:
        _CHAIN.reset(token)
