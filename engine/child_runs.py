"""Child runs: a workflow run by a node of another run (a workflow tool), to its end.

The child gets a fresh run state (own run id ``<parent run id>.<suffix>``, own limits and
deadline from its document) of the parent's tenant, the parent's settings, model registry,
node memory, workflow source, knowledge search and secret store, and the parent's cancel
token (cancelling the parent cancels the child). The tenant is the parent's so that what
the child reads by tenant - the workflows it calls in turn, its secrets, its datasets -
is the caller's, never another tenant's. Its events are not
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
    tenant_id: str | None = None,
    **sys: Any,
) -> Any:
    """Run ``plan`` as a child run (module docstring); returns its final :class:`RunState`.

    ``caller`` is the id of the workflow making the call (it joins the chain, so a child
    calling its caller back is refused too). ``tenant_id``: the parent run's tenant (None:
    the default tenant, as for a run started without one).

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
    from .runner import new_run_state, run_workflow

    state = new_run_state(plan, dict(inputs), run_id=run_id, **sys)
    if tenant_id is not None:
        state.tenant_id = tenant_id
    deps = RunDeps(
        settings=parent_deps.settings,
        models=parent_deps.models,
        memory=parent_deps.memory,
        workflows=parent_deps.workflows,
        knowledge=parent_deps.knowledge,
        secrets=parent_deps.secrets,
    )
    token = _CHAIN.set(chain + (workflow_id,))
    try:
        return await run_workflow(plan, state, deps=deps, cancel=cancel)
    finally:
        _CHAIN.reset(token)
