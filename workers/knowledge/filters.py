"""Metadata filters as SQL, for SQLite (JSON1 functions) and PostgreSQL (``jsonb``).

A filter names a field of the document's metadata (a JSON object). Semantics, the same
on both databases:

* ``eq`` / ``ne``: equal / not equal (a missing field is "not equal");
* ``in``: equal to one of the values of a list;
* ``contains``: a string field holding the value as a substring, or a list field
  holding the value as an element;
* ``gt`` ``gte`` ``lt`` ``lte``: ordered comparison of numbers with a number value, of
  strings (byte order, so ISO times compare as times) with a string value; a field of
  the other type does not pass;
* ``exists``: the field is present (``value`` False: absent).

Each builder returns ``(sql, params)`` where ``sql`` is a boolean expression over the
document alias ``d`` and ``params`` its bound values, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic_core import to_json

from engine.ports import StoreError
from schemas.knowledge import MetadataFilter

__all__ = ["postgres_filters", "sqlite_filters"]


def _check(flt: MetadataFilter) -> None:
    if '"' in flt.field or "\\" in flt.field:
        raise StoreError(f"metadata filter field {flt.field!r}: quotes and backslashes are not allowed")
    if flt.op == "in" and not isinstance(flt.value, (list, tuple)):
        raise StoreError(f"metadata filter on {flt.field!r}: 'in' needs a list value")
    if flt.op in ("gt", "gte", "lt", "lte") and (
        isinstance(flt.value, bool) or not isinstance(flt.value, (int, float, str))
    ):
        raise StoreError(f"metadata filter on {flt.field!r}: {flt.op!r} needs a number or a string")


_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


# ----------------------------------------------------------------------------- SQLite


def _sqlite_value(value: Any) -> Any:
    """A Python value as json_extract returns the JSON one (booleans are 1/0, lists and
    objects JSON text)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (list, dict)):
        return to_json(value).decode()
    return value


def _sqlite_one(flt: MetadataFilter) -> tuple[str, list[Any]]:
    path = f'$."{flt.field}"'.replace("'", "''")  # inside a SQL string literal
    value = f"json_extract(d.metadata, '{path}')"
    kind = f"json_type(d.metadata, '{path}')"
    op = flt.op
    if op == "exists":
        return (f"{kind} IS NOT NULL" if flt.value is not False else f"{kind} IS NULL"), []
    if op == "eq":
        return f"{value} = ?", [_sqlite_value(flt.value)]
    if op == "ne":
        return f"{value} IS NOT ?", [_sqlite_value(flt.value)]
    if op == "in":
        values = [_sqlite_value(v) for v in flt.value]
        if not values:
            return "0", []
        return f"{value} IN ({', '.join('?' * len(values))})", values
    if op == "contains":
        return (
            f"(CASE {kind} WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each(d.metadata, '{path}') "
            f"WHERE json_each.value = ?) WHEN 'text' THEN instr({value}, ?) > 0 ELSE 0 END)",
            [_sqlite_value(flt.value), str(flt.value)],
        )
    types = "('text')" if isinstance(flt.value, str) else "('integer', 'real')"
    return f"({kind} IN {types} AND {value} {_COMPARE[op]} ?)", [flt.value]


def sqlite_filters(filters: Sequence[MetadataFilter]) -> tuple[str, list[Any]]:
    """The filters as one SQLite expression (``1`` when there are none). The field is
    part of the JSON path in the SQL text (checked: no quote or backslash)."""
    return _join(filters, _sqlite_one, "1")


# ------------------------------------------------------------------------- PostgreSQL


def _postgres_one(flt: MetadataFilter, param: Callable[[Any], str]) -> str:
    key = param(flt.field)
    value = f"(d.metadata -> {key})"
    op = flt.op
    if op == "exists":
        return f"(d.metadata ? {key})" if flt.value is not False else f"NOT (d.metadata ? {key})"
    if op == "eq":
        return f"({value} = {param(to_json(flt.value).decode())}::jsonb)"
    if op == "ne":
        return f"({value} IS DISTINCT FROM {param(to_json(flt.value).decode())}::jsonb)"
    if op == "in":
        if not flt.value:
            return "false"
        return f"({value} = ANY({param([to_json(v).decode() for v in flt.value])}::jsonb[]))"
    if op == "contains":
        element = param(to_json([flt.value]).decode())
        return (
            f"(CASE jsonb_typeof({value}) WHEN 'array' THEN {value} @> {element}::jsonb "
            f"WHEN 'string' THEN strpos({value} #>> '{{}}', {param(str(flt.value))}) > 0 ELSE false END)"
        )
    if isinstance(flt.value, str):
        return (
            f"(jsonb_typeof({value}) = 'string' AND ({value} #>> '{{}}') COLLATE \"C\" "
            f'{_COMPARE[op]} {param(flt.value)}::text COLLATE "C")'
        )
    return (
        f"(jsonb_typeof({value}) = 'number' AND ({value} #>> '{{}}')::float8 "
        f"{_COMPARE[op]} {param(float(flt.value))}::float8)"
    )


def postgres_filters(filters: Sequence[MetadataFilter], first_param: int) -> tuple[str, list[Any]]:
    """The filters as one PostgreSQL expression (``true`` when there are none), with
    asyncpg placeholders numbered from ``first_param``."""
    params: list[Any] = []

    def param(value: Any) -> str:
        params.append(value)
        return f"${first_param + len(params) - 1}"

    parts = []
    for flt in filters:
        _check(flt)
        parts.append(_postgres_one(flt, param))
    return (" AND ".join(parts) if parts else "true"), params


def _join(
    filters: Sequence[MetadataFilter], one: Callable[[MetadataFilter], tuple[str, list[Any]]], empty: str
) -> tuple[str, list[Any]]:
    parts, params = [], []
    for flt in filters:
        _check(flt)
        sql, values = one(flt)
        parts.append(sql)
        params.extend(values)
    return (" AND ".join(parts) if parts else empty), params
