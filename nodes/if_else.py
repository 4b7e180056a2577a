"""if_else: typed conditions, first matching case wins, else ``else``.

Comparison rules (README "If / else"):

- Values keep their types. ``equals`` is true only for values of the same type
  (``5 == 5.0`` is true; ``5`` vs ``"5"`` and ``1`` vs ``true`` are false).
- With ``condition.type`` set, both operands are first converted by :func:`coerce`;
  a value that does not convert is a node error naming the condition.
- Ordering operators (gt/gte/lt/lte) need numbers on both sides: a non-number is a
  node error (hint: set ``type: number``); a null operand is never greater or smaller.
- ``contains``: substring for strings, element for arrays, key for objects; null
  contains nothing. ``starts_with``/``ends_with`` need strings (null: false).
- ``empty``: null, ``""``, ``[]``, ``{}``. ``regex``: Python ``regex`` search with a
  1 s timeout (a catastrophic pattern fails the node instead of hanging it).
- ``in``/``not_in``: the left value is (not) an element of the right-hand array.
"""

from __future__ import annotations

import json
from typing import Any

import regex

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.references import resolve_value
from schemas.nodes_flow import ORDER_OPS, Condition, ConditionOp, IfElseConfig
from schemas.run import RunState
from schemas.types import VarType, type_of_value

from .variables import is_empty

__all__ = ["IfElseNode", "check_condition", "coerce", "evaluate"]

REGEX_TIMEOUT_S = 1.0
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def coerce(value: Any, to: VarType) -> Any:
    """Convert ``value`` to ``to`` deterministically; ``None`` stays ``None``.

    string: numbers as ``str()``, booleans as ``true``/``false``, objects/arrays as
    JSON. number: numeric strings (stripped; int when integral text, else float);
    booleans are refused. boolean: ``true/false/1/0/yes/no`` strings, numbers 0/1.
    object/array: JSON text of that shape.

    Raises:
        ValueError: the value does not convert (the message says why).
    """
    if value is None or to in (VarType.any, VarType.file):
        return value
    actual = type_of_value(value)
    if actual is to:
        return value
    if to is VarType.string:
        if actual is VarType.boolean:
            return "true" if value else "false"
        if actual is VarType.number:
            return str(value)
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if to is VarType.number:
        if actual is VarType.string:
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                try:
                    number = float(text)
                except ValueError:
                    raise ValueError(f"{value!r} is not a number") from None
                if number != number or number in (float("inf"), float("-inf")):
                    raise ValueError(f"{value!r} is not a finite number") from None
                return number
        raise ValueError(
            f"{actual.value if actual else 'null'} {value!r:.60} cannot be converted to a number"
        )
    if to is VarType.boolean:
        if actual is VarType.string and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if actual is VarType.number and value in (0, 1):
            return bool(value)
        raise ValueError(f"{value!r:.60} is not a boolean (true/false/1/0/yes/no)")
    if actual is VarType.string:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{value!r:.60} is not JSON: {exc.msg}") from None
        if type_of_value(parsed) is to:
            return parsed
    raise ValueError(f"{value!r:.60} is not an {to.value}")


def _same(a: Any, b: Any) -> bool:
    return type_of_value(a) is type_of_value(b) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def evaluate(op: ConditionOp, left: Any, right: Any) -> bool:
    """Apply ``op`` to already-resolved (and coerced) operands.

    Raises:
        ValueError: operand types the operator does not accept; invalid regex; regex timeout.
    """
    if op is ConditionOp.empty:
        return is_empty(left)
    if op is ConditionOp.not_empty:
        return not is_empty(left)
    if op is ConditionOp.equals:
        return _same(left, right)
    if op is ConditionOp.not_equals:
        return not _same(left, right)
    if op in (ConditionOp.contains, ConditionOp.not_contains):
        if left is None:
            found = False
        elif isinstance(left, str):
            if not isinstance(right, str):
                raise ValueError(f"a string can only contain a string, got {type(right).__name__}")
            found = right in left
        elif isinstance(left, list):
            found = any(_same(item, right) for item in left)
        elif isinstance(left, dict):
            found = isinstance(right, str) and right in left
        else:
            raise ValueError(
                f"contains needs a string, array or object on the left, got {type(left).__name__}"
            )
        return found if op is ConditionOp.contains else not found
    if op in (ConditionOp.starts_with, ConditionOp.ends_with):
        if left is None:
            return False
        if not isinstance(left, str) or not isinstance(right, str):
            raise ValueError(
                f"{op.value} needs strings, got {type(left).__name__} and {type(right).__name__}"
            )
        return left.startswith(right) if op is ConditionOp.starts_with else left.endswith(right)
    if op in ORDER_OPS:
        if left is None or right is None:
            return False
        if not _is_number(left) or not _is_number(right):
            raise ValueError(
                f"{op.value} needs numbers, got {type(left).__name__} {left!r:.40} and {type(right).__name__} {right!r:.40}"
                " (set the condition's type to 'number' to convert)"
            )
        return {
            ConditionOp.gt: left > right,
            ConditionOp.gte: left >= right,
            ConditionOp.lt: left < right,
            ConditionOp.lte: left <= right,
        }[op]
    if op is ConditionOp.regex:
        if left is None:
            return False
        if not isinstance(left, str) or not isinstance(right, str):
            raise ValueError(f"regex needs a string and a pattern, got {type(left).__name__}")
        try:
            return regex.search(right, left, timeout=REGEX_TIMEOUT_S) is not None
        except regex.error as exc:
            raise ValueError(f"invalid regex {right!r}: {exc}") from None
        except TimeoutError:
            raise ValueError(f"regex {right!r:.60} took longer than {REGEX_TIMEOUT_S}s") from None
    if op in (ConditionOp.in_list, ConditionOp.not_in_list):
        if not isinstance(right, list):
            raise ValueError(f"{op.value} needs an array on the right, got {type(right).__name__}")
        found = any(_same(left, item) for item in right)
        return found if op is ConditionOp.in_list else not found
    raise ValueError(f"unknown operator {op!r}")  # pragma: no cover - enum is closed


def check_condition(
    state: RunState, cond: Condition, path: str, node_id: str, record: dict[str, Any] | None = None
) -> bool:
    """Resolve a condition's operands in ``state`` and evaluate it (rules in the module docstring).

    ``record`` receives the resolved operands under ``<path>.left`` / ``<path>.right``.

    Raises:
        ReferenceFailed: an operand reference cannot be resolved.
        NodeFailed: operands the operator does not accept, naming ``config.<path>``.
    """
    left = resolve_value(state, cond.left, node_id=node_id)
    right = resolve_value(state, cond.right, node_id=node_id)
    if record is not None:
        record[f"{path}.left"], record[f"{path}.right"] = left, right
    try:
        if cond.type is not None:
            left, right = coerce(left, cond.type), coerce(right, cond.type)
        return evaluate(cond.operator, left, right)
    except ValueError as exc:
        raise NodeFailed(f"config.{path}: {exc}", node_id=node_id) from None


class IfElseNode(NodeExecutor[IfElseConfig], kind="if_else"):
    """Checks cases in order; takes the first matching case's handle, else ``else``.

    Output ``case``: the id of the case taken (``"else"`` when none matched).
    """

    async def run(self, ctx: NodeContext) -> NodeResult:
        for ci, case in enumerate(self.config.cases):
            checks = (
                check_condition(
                    ctx.state, c, f"cases[{ci}].conditions[{i}]", ctx.node_id, ctx.node_run.inputs
                )
                for i, c in enumerate(case.conditions)
            )
            matched = all(checks) if case.logic == "and" else any(checks)
            if matched:
                return NodeResult({"case": case.id}, handles=(case.id,))
        return NodeResult({"case": "else"}, handles=("else",))
