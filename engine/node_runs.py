"""The run service's part for one node: run a node on its own, and read the node's last
run (what it did, and the values it read) - the "run this step" of a builder's canvas.

:class:`NodeRuns` is a part of :class:`~engine.service.RunService` (a mixin): it uses the
service's stores, compiler and :meth:`execute`. The rules of a single-node run (what a
node reads, how given values are placed, the plan of one node) are in
:mod:`engine.single_node`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.run import NodeRun, RunState
from schemas.types import NodeRunStatus, RunStatus

from .runner import new_run_state
from .single_node import find_node, read_references, seed_single_node, values_from_run

if TYPE_CHECKING:
    from .compiler import CompiledPlan
    from .service import Stores

__all__ = ["LastNodeRun", "NodeRuns"]

#: runs of a workflow looked through, newest first, for a node's last run
_LOOK_BACK = 50


@dataclass(frozen=True, slots=True)
class LastNodeRun:
    """A node's latest node run in a workflow's runs (``run_id``: the run holding it), and
    the values its references had there (reference key -> value, what a new run of the
    node alone can start from)."""

    run_id: str
    node_run: NodeRun
    values: dict[str, Any]


class NodeRuns:
    """Running one node, and its last run (module docstring)."""

    stores: Stores

    if TYPE_CHECKING:  # the service's own parts

        def compile(self, doc: Mapping[str, Any]) -> CompiledPlan: ...
        def execute(self, tenant_id: str, run_id: str) -> AsyncIterator[Any]: ...

    async def last_node_run(
        self, tenant_id: str, workflow_id: str, node_id: str, doc: Mapping[str, Any]
    ) -> LastNodeRun | None:
        """The newest run of ``workflow_id`` (among its last 50) in which ``node_id`` ran
        (not skipped, not a given value), with the values its references had there as
        ``doc`` (the current draft) declares them; None when none.

        Raises:
            CompileError: ``doc`` does not compile. NodeRunRefused: no such node in it.
        """
        plan = self.compile(doc)
        find_node(plan, node_id)
        for summary in await self.stores.runs.list_runs(tenant_id, workflow_id=workflow_id, limit=_LOOK_BACK):
            if summary.status in (RunStatus.pending, RunStatus.running):
                continue
            state = await self.stores.runs.load_run(tenant_id, summary.run_id)
            run = _latest(state, node_id)
            if run is not None:
                return LastNodeRun(summary.run_id, run, values_from_run(plan, node_id, state))
        return None

    async def run_node(
        self,
        tenant_id: str,
        doc: Mapping[str, Any],
        node_id: str,
        values: Mapping[str, Any],
        *,
        from_last: bool = False,
        workflow_version: str | None = None,
        run_id: str | None = None,
    ) -> tuple[RunState, AsyncIterator[Any]]:
        """A new run of ``doc`` that executes ``node_id`` alone with ``values`` (reference
        key -> value, :func:`~engine.single_node.read_references`); ``from_last``: the
        values the node's last run read fill in what ``values`` leaves out.

        Returns the run's state (created, ``pending``) and its events as it executes. The
        run is stored like any run (kind ``single_node`` in ``sys.run_kind``), so the
        history lists it and its usage counts.

        Raises:
            CompileError: ``doc`` does not compile.
            NodeRunRefused: no such node. MissingNodeInputs: a reference without a value.
        """
        plan = self.compile(doc)
        given = dict(values)
        if from_last:
            last = await self.last_node_run(tenant_id, plan.workflow.id, node_id, doc)
            if last is not None:
                given = {**last.values, **given}
        refs = read_references(plan, node_id)
        inputs = {
            ref.field: given[ref.key]
            for ref in refs
            if ref.scope == "inputs" and ref.field is not None and ref.key in given
        }
        query = next(
            (given[r.key] for r in refs if r.key == "sys.query" and isinstance(given.get(r.key), str)), None
        )
        state = new_run_state(plan, inputs, run_id=run_id, query=query, partial=True)
        state.tenant_id, state.workflow_version = tenant_id, workflow_version
        seed_single_node(plan, state, node_id, given)
        await self.stores.runs.create_run(state, doc=doc)
        return state, self.execute(tenant_id, state.run_id)


def _latest(state: RunState, node_id: str) -> NodeRun | None:
    """``node_id``'s node run in ``state`` when it ran there (its last round for a node in
    a body), else None."""
    run = state.node_runs.get(node_id)
    if run is None:
        rounds = [r for r in state.history if r.node_id == node_id]
        run = rounds[-1] if rounds else None
    if run is None or run.status in (NodeRunStatus.skipped, NodeRunStatus.pending) or run.data.get("given"):
        return None
    return run
