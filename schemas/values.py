"""Config building blocks shared by node kinds: literal-or-reference values and bindings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from .types import Ref, VarType

__all__ = ["InputBinding", "RefFound", "Value", "walk_refs"]


def _to_refs(value: Any) -> Any:
    """Turn every ``{"ref": "..."}`` object (at any depth) into a :class:`Ref`.

    A one-key object whose key is ``ref`` is always a reference, so a malformed one
    fails validation loudly instead of passing as a literal dict.
    """
    if isinstance(value, dict):
        if len(value) == 1 and "ref" in value and isinstance(value["ref"], str):
            return Ref(ref=value["ref"])
        return {k: _to_refs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_refs(v) for v in value]
    return value


#: A literal JSON value, a reference, or a literal object/array containing references.
Value = Annotated[Any, BeforeValidator(_to_refs)]


class InputBinding(BaseModel):
    """A named, typed input of a node: ``{"name", "value", "type", "required", "default"}``.

    ``value`` is a literal or a reference. When the referenced node was skipped the
    value is ``default`` (null when none); a ``required`` binding that ends up null is
    a run error naming the node and the binding.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="identifier used in templates and code"
    )
    value: Value = None
    type: VarType | None = Field(default=None, description="declared type; checked against the reference")
    required: bool = False
    default: Any = None


class RefFound(NamedTuple):
    """One reference found in a node config: where it is, and the type expected there."""

    path: str
    ref: Ref
    expected: VarType | None = None


_SCALARS = (str, int, float, bool, type(None))


def walk_refs(obj: Any, path: str = "", expected: VarType | None = None) -> Iterator[RefFound]:
    """Yield every :class:`Ref` inside ``obj`` (models, dicts, lists) with its field path.

    The expected type comes from the closest enclosing declaration: an
    :class:`InputBinding`'s ``type`` or a model's ``ref_type(field)`` hook.
    Scalars are skipped without recursion (the compiler walks every node).
    """
    if isinstance(obj, _SCALARS):
        return
    if isinstance(obj, Ref):
        yield RefFound(path or "value", obj, expected)
    elif isinstance(obj, BaseModel):
        hook = getattr(obj, "ref_type", None)
        binding = obj if isinstance(obj, InputBinding) else None
        for name, info in type(obj).model_fields.items():
            value = getattr(obj, name)
            if isinstance(value, _SCALARS):
                continue
            sub_expected = (
                hook(name) if hook else (binding.type if binding is not None and name == "value" else None)
            )
            label = info.alias or name  # paths use the JSON names builders see
            yield from walk_refs(value, f"{path}.{label}" if path else label, sub_expected)
    elif isinstance(obj, dict):
        for key, val in obj.items():
            if not isinstance(val, _SCALARS):
                yield from walk_refs(val, f"{path}.{key}" if path else str(key), expected)
    elif isinstance(obj, list):
        for i, val in enumerate(obj):
            if not isinstance(val, _SCALARS):
                yield from walk_refs(val, f"{path}[{i}]", expected)
