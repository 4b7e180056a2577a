"""Small readers of values in source files, shared by the FastGPT and Dify importers:
the first key set, numbers written as text, canvas positions, typed literals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.types import VarType

__all__ = ["coerce_literal", "first", "number", "xy"]


def first(mapping: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """The first of ``keys`` present (and not None) in ``mapping``."""
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return default


def number(value: Any) -> float | int | None:
    """``value`` as a number (numeric strings included), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return None
    return None


def xy(pos: Any) -> dict[str, float]:
    """A canvas position ``{"x", "y"}`` as floats (missing or invalid: 0)."""
    pos = pos if isinstance(pos, dict) else {}
    return {"x": float(number(pos.get("x")) or 0.0), "y": float(number(pos.get("y")) or 0.0)}


def coerce_literal(value: Any, type_: VarType) -> Any:
    """A literal typed in a source editor, as a value of ``type_``: numeric text for a
    number, ``true``/``1``/``yes`` (any case) for a boolean; anything else unchanged."""
    if type_ is VarType.number and number(value) is not None:
        return number(value)
    if type_ is VarType.boolean and isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return value
