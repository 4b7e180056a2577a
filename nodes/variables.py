"""variable_update and variable_aggregator."""

from __future__ import annotations

from typing import Any

from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from schemas.nodes import VariableAggregatorConfig, VariableUpdateConfig
from schemas.types import value_matches

from engine.catalog import NodeExecutor

__all__ = ["VariableAggregatorNode", "VariableUpdateNode", "is_empty"]


def is_empty(value: Any) -> bool:
    """Empty = null, ``""``, ``[]``, ``{}``. ``0`` and ``false`` are values."""
    return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)


class VariableUpdateNode(NodeExecutor[VariableUpdateConfig], kind="variable_update"):
    """Applies updates to run variables (``vars.NAME``) in order.

    Operations: ``set`` (replace), ``append`` (one item to an array), ``extend``
    (items of an array), ``add`` (number), ``clear`` (empty value of the declared type).

    Raises:
        NodeFailed: undeclared variable, wrong operand type, or a result that does
            not fit the variable's declared type.
    """

    async def run(self, ctx: NodeContext) -> NodeResult:
        declared = {v.name: v.type for v in ctx.plan.workflow.variables}
        changed: dict[str, Any] = {}
        for i, update in enumerate(self.config.updates):
            name = update.variable
            if name not in declared:
                raise NodeFailed(f"updates[{i}]: run variable {name!r} is not declared in workflow.variables",
                                 node_id=ctx.node_id)
            value = ctx.resolve(update.value, record_as=f"updates[{i}].value")
            current = ctx.state.variables.get(name)
            if update.operation == "set":
                new = value
            elif update.operation == "append":
                new = list(current or []) + [value]
            elif update.operation == "extend":
                if not isinstance(value, list):
                    raise NodeFailed(f"updates[{i}]: extend needs an array, got {type(value).__name__}", node_id=ctx.node_id)
                new = list(current or []) + value
            elif update.operation == "add":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(current, bool) \
                        or not isinstance(current or 0, (int, float)):
                    raise NodeFailed(f"updates[{i}]: add needs numbers, got {current!r} + {value!r}", node_id=ctx.node_id)
                new = (current or 0) + value
            else:
                new = {"string": "", "number": 0, "boolean": False, "object": {}, "array": []}.get(declared[name].value)
            if not value_matches(new, declared[name]):
                raise NodeFailed(f"updates[{i}]: {name!r} is {declared[name].value}, cannot hold {type(new).__name__}",
                                 node_id=ctx.node_id)
            ctx.state.variables[name] = new
            changed[name] = new
        return NodeResult(changed)


class VariableAggregatorNode(NodeExecutor[VariableAggregatorConfig], kind="variable_aggregator"):
    """Outputs the first non-empty value among ``refs`` (in order); null when all are empty."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        for i, ref in enumerate(self.config.refs):
            value = ctx.resolve(ref, record_as=f"refs[{i}]")
            if not is_empty(value):
                if not value_matches(value, self.config.type):
                    raise NodeFailed(f"refs[{i}] ({ref.ref}) must be {self.config.type.value}, got {type(value).__name__}",
                                     node_id=ctx.node_id)
                return NodeResult({"output": value})
        return NodeResult({"output": None})
