"""Shared value types: variable types, typed ids, references and lifecycle enums.

These are the vocabulary every other part of Flowloom speaks (engine, nodes, CLI,
later the API and the canvas), so they live in one module with no engine logic.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, NewType

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = [
    "EdgeId",
    "NodeId",
    "NodeRunStatus",
    "Ref",
    "RunId",
    "RunStatus",
    "Selector",
    "VarType",
    "WorkflowId",
    "is_ref",
    "parse_selector",
    "type_of_value",
    "value_matches",
]

WorkflowId = NewType("WorkflowId", str)
NodeId = NewType("NodeId", str)
EdgeId = NewType("EdgeId", str)
RunId = NewType("RunId", str)


class VarType(StrEnum):
    """Declared type of a global input, node output or node input.

    ``any`` is only used for outputs whose shape is not known statically (e.g. the
    parsed body of an HTTP response); a reference to an ``any`` output type-checks
    against every declared input type and is checked again at run time.
    """

    string = "string"
    number = "number"
    boolean = "boolean"
    object = "object"
    array = "array"
    file = "file"
    any = "any"


class RunStatus(StrEnum):
    """Lifecycle of a run; shared by the engine, CLI, API and storage."""

    pending = "pending"
    running = "running"
    paused = "paused"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class NodeRunStatus(StrEnum):
    """Lifecycle of one node run: pending, running, then succeeded, failed, skipped or cancelled.

    ``waiting``: the node raised an interrupt and waits for an answer.
    """

    pending = "pending"
    running = "running"
    waiting = "waiting"
    succeeded = "succeeded"
    failed = "failed"
    skipped = "skipped"
    cancelled = "cancelled"


def type_of_value(value: Any) -> VarType | None:
    """Return the :class:`VarType` of a JSON value, or None for ``null``.

    ``bool`` is checked before numbers because ``True`` is an ``int`` in Python; a
    file is represented as an object (``{"name", "url"|"path", ...}``).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return VarType.boolean
    if isinstance(value, (int, float)):
        return VarType.number
    if isinstance(value, str):
        return VarType.string
    if isinstance(value, (list, tuple)):
        return VarType.array
    if isinstance(value, dict):
        return VarType.object
    return VarType.any


def value_matches(value: Any, declared: VarType | None) -> bool:
    """True when ``value`` fits ``declared`` (``None`` always fits; ``any`` fits all).

    A file value is an object, so an object value fits a ``file`` declaration.
    """
    if value is None or declared is None or declared is VarType.any:
        return True
    actual = type_of_value(value)
    if declared is VarType.file:
        return actual in (VarType.object, VarType.string)
    return actual is declared


# ---------------------------------------------------------------- references

#: Scopes that are not node ids. Node ids may not take these names (compile error).
RESERVED_SCOPES = frozenset({"inputs", "sys", "vars", "conversation", "nodes", "env"})
#: System variables (``sys.<name>``) and their types.
SYS_VARIABLES: dict[str, VarType] = {
    "run_id": VarType.string,
    "chat_id": VarType.string,
    "workflow_id": VarType.string,
    "now": VarType.string,
    "query": VarType.string,
    "user_id": VarType.string,
    "history": VarType.array,
}

#: ``.key``, ``[index]``, ``["key"]`` or ``['key']``: a quoted key may hold anything but its
#: own quote, so any output name can be spelled (``["it's"]``, ``['say "hi"']``, ``["a.b[0]"]``).
_SEGMENT = re.compile(r"""\.([^.\[\]]+)|\[(-?\d+)\]|\["([^"]*)"\]|\['([^']*)'\]""")
_PLAIN_KEY = re.compile(r"[^.\[\]]+")


def _key_text(key: str) -> str:
    """``.key`` when the key reads plainly, else the quoted form ``["key"]`` / ``['key']``."""
    if _PLAIN_KEY.fullmatch(key):
        return f".{key}"
    return f"['{key}']" if '"' in key else f'["{key}"]'


_HEAD = re.compile(r"[^.\[\]]+")


class Selector(BaseModel):
    """A parsed reference: ``scope`` is ``inputs``/``sys``/``vars``/``conversation``/``env`` or ``node``.

    For a node reference ``node`` is the node id and ``field`` the output name; for
    the other scopes ``field`` is the variable name. ``path`` walks into the value:
    strings are object keys, ints are list indexes (negative counts from the end).
    """

    model_config = ConfigDict(frozen=True)

    scope: str
    node: str | None = None
    field: str
    path: tuple[str | int, ...] = ()

    def __str__(self) -> str:
        if self.scope != "node":
            head = self.scope
        elif (
            _PLAIN_KEY.fullmatch(self.node or "")
            and self.node not in RESERVED_SCOPES
            and " " not in (self.node or "")
        ):
            head = self.node or ""
        else:  # an id that does not read plainly: the nodes["<id>"] form (module README "References")
            head = "nodes" + _key_text(self.node or "")
        text = f"{head}{_key_text(self.field)}"
        for seg in self.path:
            text += f"[{seg}]" if isinstance(seg, int) else _key_text(seg)
        return text


def parse_selector(text: str) -> Selector:
    """Parse ``"node.output.key[0].name"`` / ``"inputs.q"`` / ``"sys.run_id"``.

    Raises:
        ValueError: the text is not ``head.field`` followed by ``.key`` / ``[index]``
            / ``["quoted key"]`` segments; the message quotes the text.
    """
    head_match = _HEAD.match(text)
    if not head_match:
        raise ValueError(f"reference {text!r} must start with a node id, 'inputs', 'sys' or 'vars'")
    head = head_match.group(0)
    pos = head_match.end()
    segments: list[str | int] = []
    while pos < len(text):
        m = _SEGMENT.match(text, pos)
        if not m:
            raise ValueError(f"reference {text!r} has an invalid path at position {pos}: {text[pos:]!r}")
        key, index, double, single = m.groups()
        if index is not None:
            segments.append(int(index))
        else:
            segments.append(next(k for k in (key, double, single) if k is not None))
        pos = m.end()
    if not segments or not isinstance(segments[0], str):
        raise ValueError(f"reference {text!r} must name a field after {head!r} (e.g. {head}.output)")
    field, path = segments[0], tuple(segments[1:])
    if head in ("inputs", "sys", "vars", "conversation", "env"):
        return Selector(scope=head, field=field, path=path)
    if head == "nodes":
        # nodes.<id>.<field> form, for node ids that are not identifiers
        if not path or not isinstance(path[0], str):
            raise ValueError(f"reference {text!r}: 'nodes.<id>' must be followed by an output name")
        return Selector(scope="node", node=field, field=path[0], path=path[1:])
    return Selector(scope="node", node=head, field=field, path=path)


class Ref(BaseModel):
    """A structured reference in a node config: ``{"ref": "node_id.output[0].name"}``.

    Serialised as an object with one key so a literal string that merely looks like a
    reference is never mistaken for one. Parsed once at validation time.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str = Field(
        description="node_id.output[.path] | inputs.NAME | sys.NAME | vars.NAME | conversation.NAME"
    )

    _selector: Selector = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        # parse once; a bad reference fails validation with the text quoted
        self._selector = parse_selector(self.ref)

    @property
    def selector(self) -> Selector:
        """The parsed selector."""
        # from pydantic's private store: ``self._selector`` goes through
        # BaseModel.__getattr__, about 25x the cost of a field read, once per reference rendered
        return self.__pydantic_private__["_selector"]  # type: ignore[index]  # pydantic types it Optional; set for every model with private attributes


def is_ref(value: Any) -> bool:
    """True for a :class:`Ref` instance."""
    return isinstance(value, Ref)
