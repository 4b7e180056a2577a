"""variable_update and variable_aggregator."""

from __future__ import annotations

from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from schemas.nodes_flow import VariableAggregatorConfig, VariableUpdateConfig
from schemas.types import VarType, value_matches

__all__ = ["VariableAggregatorNode", "VariableUpdateNode", "is_empty"]


def is_empty(value: Any) -> bool:
    """Empty = null, ``""``, ``[]``, ``{}``. ``0`` and ``false`` are values."""
    return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)


class VariableUpdateNode(NodeExecutor[VariableUpdateConfig], kind="variable_update"):
    """Applies updates to run variables (``NAME``) and conversation variables
    (``conversation.NAME``) in order.

    Operations: ``set`` (replace), ``append`` (one item to an array), ``extend``
    (items of an array), ``add`` (number), ``clear`` (empty value of the declared type).

    Raises:
        NodeFailed: undeclared variable, wrong operand type, or a result that does
            not fit the variable's declared type.
    """

    async def run(self, ctx: NodeContext) -> NodeResult:
        wf = ctx.plan.workflow
        declared = {
            "vars": {v.name: v.type for v in wf.variables},
            "conversation": {v.name: v.type for v in wf.conversation_variables},
        }
        pools = {"vars": ctx.state.variables, "conversation": ctx.state.conversation}
        changed: dict[str, Any] = {}
        for i, update in enumerate(self.config.updates):
            scope, name = update.target()
            if name not in declared[scope]:
                where = "workflow.conversation_variables" if scope == "conversation" else "workflow.variables"
                kind = "conversation variable" if scope == "conversation" else "run variable"
                raise NodeFailed(
                    f"updates[{i}]: {kind} {name!r} is not declared in {where}", node_id=ctx.node_id
                )
            value = ctx.resolve(update.value, record_as=f"updates[{i}].value")
            new = _apply(
                update.operation, pools[scope].get(name), value, declared[scope][name], i, ctx.node_id
            )
            if not value_matches(new, declared[scope][name]):
                raise NodeFailed(
                    f"updates[{i}]: {update.variable!r} is {declared[scope][name].value}, cannot hold "
                    f"{type(new).__name__}",
                    node_id=ctx.node_id,
                )
            pools[scope][name] = new
            changed[update.variable] = new
        return NodeResult(changed)


def _apply(operation: str, current: Any, value: Any, declared: VarType, i: int, node_id: str) -> Any:
    """The variable's new value after ``operation`` (see :class:`VariableUpdateNode`)."""
    if operation == "set":
        return value
    if operation == "append":
        return list(current or []) + [value]
    if operation == "extend":
        if not isinstance(value, list):
            raise NodeFailed(
                f"updates[{i}]: extend needs an array, got {type(value).__name__}", node_id=node_id
            )
        return list(current or []) + value
    if operation == "add":
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or isinstance(current, bool)
            or not isinstance(current or 0, (int, float))
        ):
            raise NodeFailed(f"updates[{i}]: add needs numbers, got {current!r} + {value!r}", node_id=node_id)
        return (current or 0) + value
    return {"string": "", "number": 0, "boolean": False, "object": {}, "array": []}.get(declared.value)


class VariableAggregatorNode(NodeExecutor[VariableAggregatorConfig], kind="variable_aggregator"):
    """Outputs the first non-empty value among ``refs`` (in order); null when all are empty."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        for i, ref in enumerate(self.config.refs):
            value = ctx.resolve(ref, record_as=f"refs[{i}]")
            if not is_empty(value):
                if not value_matches(value, self.config.type):
                    raise NodeFailed(
                        f"refs[{i}] ({ref.ref}) must be {self.config.type.value}, got {type(value).__name__}",
                        node_id=ctx.node_id,
                    )
                return NodeResult({"output": value})
        return NodeResult({"output": None})
