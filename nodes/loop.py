"""iteration, loop and loop_break: container nodes that run their body per item / round.

The body (nodes with ``parent`` = the container) is a sub-plan compiled by
:mod:`engine.loops`; each item / round runs it in a fresh child scope through the
scheduler (``ctx.scheduler.run_nested``), so node runs and events carry the loop id
and the iteration index, and limits, cancellation and the run's deadline apply inside.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed, ReferenceFailed, RunCancelledError, RunError, RunLimitExceeded
from engine.loops import LoopLimitExceeded, loop_limit
from engine.references import resolve_value
from schemas.node_records import BodyRun, body_run
from schemas.nodes_flow import IterationConfig, LoopBreakConfig, LoopConfig
from schemas.run import RunState
from schemas.types import NodeRunStatus, value_matches

from .if_else import check_condition

__all__ = ["IterationNode", "LoopBreakNode", "LoopNode"]


def _body_record(state: RunState, container: str, index: int, error: RunError | None) -> BodyRun:
    runs = [r.model_dump(mode="json") for nid, r in state.node_runs.items() if nid != container]
    return body_run(index, runs, error)


def _fatal(error: RunError) -> bool:
    """Errors that end the whole run, whatever the loop's own error handling says."""
    return isinstance(error, (RunCancelledError, RunLimitExceeded))


class IterationNode(NodeExecutor[IterationConfig], kind="iteration"):
    """Runs the body once per item (``concurrency`` at a time); see :class:`~schemas.nodes_flow.IterationConfig`.

    Outputs ``results`` (per item, in item order), ``statuses`` (``{index, status,
    error?}`` per item) and ``count``; ``node_run.data["items"]`` keeps every item's
    node runs.

    Raises:
        NodeFailed: ``items`` is not an array; an item failed under ``item_error: fail``.
        LoopLimitExceeded: more items than the limit.
    """

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg, node_id = self.config, ctx.node_id
        items = ctx.resolve(cfg.items, record_as="items")
        if not isinstance(items, list):
            raise NodeFailed(
                f"config.items must resolve to an array, got {type(items).__name__}", node_id=node_id
            )
        limit = loop_limit(cfg.max_iterations, ctx.plan.workflow)
        if len(items) > limit:
            raise LoopLimitExceeded(
                f"iteration {node_id!r} got {len(items)} items; its limit is {limit}", node_id=node_id
            )
        body = ctx.plan.nodes[node_id].body
        assert body is not None
        results: list[Any] = [None] * len(items)
        statuses: list[dict[str, Any]] = [{"index": i, "status": "pending"} for i in range(len(items))]
        records: list[BodyRun | None] = [None] * len(items)
        gate = asyncio.Semaphore(cfg.concurrency)

        async def one(index: int, item: Any) -> None:
            async with gate:
                state = ctx.child_scope({"item": item, "index": index})
                nested = await ctx.scheduler.run_nested(body, state, node_id, index)
                error = nested.ending
                if error is None:
                    try:
                        results[index] = resolve_value(state, cfg.collect, node_id=node_id)
                    except ReferenceFailed as exc:
                        error = exc
                records[index] = _body_record(state, node_id, index, error)
                if error is None:
                    statuses[index] = {"index": index, "status": "succeeded"}
                    return
                if _fatal(error):
                    raise error
                statuses[index] = {"index": index, "status": "failed", "error": str(error)}
                if cfg.item_error == "fail":
                    where = f" at node {error.node_id!r}" if error.node_id else ""
                    raise NodeFailed(f"item {index} failed{where}: {error}", node_id=node_id)

        try:
            async with asyncio.TaskGroup() as group:
                for index, item in enumerate(items):
                    group.create_task(one(index, item))
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
        finally:
            ctx.node_run.data["items"] = [r for r in records if r is not None]
        if cfg.item_error == "skip":
            kept = [i for i, s in enumerate(statuses) if s["status"] == "succeeded"]
            results = [results[i] for i in kept]
        return NodeResult({"results": results, "statuses": statuses, "count": len(items)})


class LoopNode(NodeExecutor[LoopConfig], kind="loop"):
    """Repeats the body; see :class:`~schemas.nodes_flow.LoopConfig` for the round rules.

    ``node_run.data["rounds"]`` keeps every round's node runs.

    Raises:
        LoopLimitExceeded: ``max_iterations`` (or the run's limit) rounds ran and the
            loop still was not done.
        NodeFailed: a round failed (names the round and the node), or an update does
            not fit its variable's type.
    """

    def _done(self, state: RunState, node_id: str) -> bool:
        checks = (
            check_condition(state, c, f"break_when[{i}]", node_id)
            for i, c in enumerate(self.config.break_when)
        )
        return bool(self.config.break_when) and (all(checks) if self.config.logic == "and" else any(checks))

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg, node_id = self.config, ctx.node_id
        values = ctx.bind(cfg.variables)
        declared = {v.name: v.type for v in cfg.variables}
        limit = loop_limit(cfg.max_iterations, ctx.plan.workflow)
        body = ctx.plan.nodes[node_id].body
        assert body is not None
        rounds: list[BodyRun] = []
        ctx.node_run.data["rounds"] = rounds
        index = 0
        while True:
            state = ctx.child_scope({**values, "index": index, "rounds": index})
            if self._done(state, node_id):
                break
            if index == limit:
                raise LoopLimitExceeded(
                    f"loop {node_id!r} reached its limit of {limit} rounds without meeting "
                    "break_when; raise max_iterations or limits.max_loop_iterations",
                    node_id=node_id,
                )
            nested = await ctx.scheduler.run_nested(body, state, node_id, index)
            rounds.append(_body_record(state, node_id, index, nested.ending))
            if nested.ending is not None:
                if _fatal(nested.ending):
                    raise nested.ending
                where = f" at node {nested.ending.node_id!r}" if nested.ending.node_id else ""
                raise NodeFailed(f"round {index} failed{where}: {nested.ending}", node_id=node_id)
            for i, update in enumerate(cfg.update):
                new = resolve_value(state, update.value, node_id=node_id)
                expected = declared[update.variable]
                if not value_matches(new, expected):
                    raise NodeFailed(
                        f"config.update[{i}]: loop variable {update.variable!r} is "
                        f"{expected}, got {type(new).__name__}",
                        node_id=node_id,
                    )
                values[update.variable] = new
            index += 1
            broke = any(
                r.kind == "loop_break" and r.status is NodeRunStatus.succeeded
                for r in state.node_runs.values()
            )
            if broke:
                break
        return NodeResult({**values, "rounds": index, "index": max(index - 1, 0)})


class LoopBreakNode(NodeExecutor[LoopBreakConfig], kind="loop_break"):
    """Marks the current round as the last one (the loop node checks for it)."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        return NodeResult({}, handles=())
