"""References and templates as the importers write them (README "References").

A source reference (FastGPT ``[nodeId, outputId]``, Dify ``[node_id, var]``) becomes a
:class:`Target`: a Flowloom scope (``node``, ``inputs``, ``sys``, ``vars`` or a name bound
by the node itself), a field and a path, plus the type when known. A target is written
either as a structured reference (:meth:`Target.ref`, ``{"ref": "..."}``) or inside a
Jinja2 template (:func:`interpolation`). Literal text around references is escaped so
that nothing in it is read as Jinja2 (:func:`join_template`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from schemas.nodes import OUTPUT_NAME
from schemas.types import RESERVED_SCOPES, VarType

__all__ = [
    "CODE_OUTPUT",
    "IDENT",
    "Target",
    "Unconvertible",
    "identifier",
    "interpolation",
    "is_simple_name",
    "join_template",
    "json_string_state",
    "literal",
    "var_type",
]

#: An ASCII identifier (input, variable, output and code parameter names).
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A code output name (:class:`schemas.nodes_code.CodeOutput`): any key without both quote kinds.
CODE_OUTPUT = re.compile(OUTPUT_NAME)
#: Names a bare ``{{ name }}`` cannot use: Jinja2 keywords, constants and globals.
_JINJA_WORDS = frozenset(
    {
        "and",
        "or",
        "not",
        "in",
        "is",
        "if",
        "else",
        "elif",
        "for",
        "endfor",
        "true",
        "false",
        "none",
        "True",
        "False",
        "None",
        "block",
        "with",
        "recursive",
        "import",
        "from",
        "as",
        "set",
        "macro",
        "call",
        "filter",
        "raw",
        "include",
        "extends",
        "loop",
        "self",
        "varargs",
        "kwargs",
        "caller",
        "range",
        "dict",
        "lipsum",
        "cycler",
        "joiner",
        "namespace",
    }
)
#: Keys that ``x.key`` would read as a method instead of the value: of a dict (node
#: outputs, ``inputs``/``sys``/``vars``), and deeper in a path also of a list or string.
_DICT_SHADOWED = frozenset(dir(dict))
_SHADOWED = frozenset(n for t in (dict, list, str) for n in dir(t))
_PATH_KEY = re.compile(r"^[^.\[\]]+$")


class Unconvertible(Exception):
    """A node (or a part of it) has no Flowloom equivalent; the message says why."""

    def __init__(self, reason: str, code: str = "unsupported_node"):
        super().__init__(reason)
        self.reason = reason
        self.code = code


def is_simple_name(name: str) -> bool:
    """True when ``{{ name }}`` reads the name (identifier, not a Jinja word or a reference scope)."""
    return bool(IDENT.match(name)) and name not in _JINJA_WORDS and name not in RESERVED_SCOPES


def identifier(text: str, taken: Iterable[str] = (), prefix: str = "v") -> str:
    """A deterministic ASCII identifier for ``text`` (``[A-Za-z_][A-Za-z0-9_]*``) not in ``taken``."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    if not base or not IDENT.match(base):
        base = f"{prefix}_{base}" if base else prefix
    used = set(taken)
    candidate, n = base, 2
    while candidate in used:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def _accessor(key: str | int, shadowed: frozenset[str] = _SHADOWED) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    # the sandbox refuses attribute names starting with "_": read those as keys
    if IDENT.match(key) and not key.startswith("_") and key not in shadowed and key not in _JINJA_WORDS:
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=False)}]"


def _ref_key(key: str) -> str:
    """``key`` in a reference: ``.key``, else ``["key"]`` / ``['key']`` (a quoted key holds
    anything but its own quote).

    Raises:
        Unconvertible: the key holds both quote kinds.
    """
    if _PATH_KEY.match(key):
        return f".{key}"
    if '"' not in key:
        return f'["{key}"]'
    if "'" not in key:
        return f"['{key}']"
    raise Unconvertible(
        f"the name {key!r} holds both quote kinds and cannot be written in a reference",
        "unsupported_reference",
    )


@dataclass(frozen=True, slots=True)
class Target:
    """What a source reference reads, in Flowloom terms.

    ``scope``: ``node`` (``name`` is the node id, ``field`` the output), ``inputs`` /
    ``sys`` / ``vars`` (``name`` is the variable), or ``local`` (a name the node binds
    itself, e.g. a template variable or ``quote``; templates only).
    """

    scope: str
    name: str
    field: str | None = None
    path: tuple[str | int, ...] = ()
    type: VarType | None = None

    def with_path(self, *more: str | int, type: VarType | None = None) -> Target:
        """This target, deeper: the type becomes ``type`` (unknown by default)."""
        return Target(self.scope, self.name, self.field, self.path + tuple(more), type)

    def ref(self) -> str:
        """The structured reference text (``node.field.key[0]`` / ``inputs.x``).

        Raises:
            Unconvertible: a local name, or a path key a reference cannot spell.
        """
        if self.scope == "local":
            raise Unconvertible(f"{self.name!r} can only be used in a template", "unsupported_reference")
        head = self.field if self.scope == "node" else self.name
        text = (self.name if self.scope == "node" else self.scope) + _ref_key(head or "")
        for seg in self.path:
            text += f"[{seg}]" if isinstance(seg, int) else _ref_key(seg)
        return text

    def as_ref(self) -> dict[str, str]:
        """``{"ref": ...}``."""
        return {"ref": self.ref()}

    def expr(self, local_names: frozenset[str] | set[str] = frozenset()) -> str:
        """The Jinja2 expression reading this target (``nodes['17a'].answer``, ``inputs.q``, ...)."""
        if self.scope == "node":
            head = (
                self.name
                if is_simple_name(self.name) and self.name not in local_names
                else f"nodes['{self.name}']"
            )
            text = head + _accessor(self.field or "", _DICT_SHADOWED)
        elif self.scope == "local":
            text = self.name
        else:
            text = self.scope + _accessor(self.name, _DICT_SHADOWED)
        for seg in self.path:
            text += _accessor(seg)
        return text


def interpolation(
    target: Target, local_names: frozenset[str] | set[str] = frozenset(), *, in_json_string: bool = False
) -> str:
    """``{{ ... }}`` writing ``target`` into text the way FastGPT and Dify do.

    Strings are inserted as they are; other values as JSON (a number as ``5``, a list
    as ``["a", "b"]``, ``true``/``false``/``null``). Inside a JSON string literal (HTTP
    bodies) the text is JSON-escaped so the body stays valid JSON.
    """
    e = target.expr(local_names)
    if target.type is VarType.string:
        text = e
    elif target.type in (None, VarType.any, VarType.file):
        text = f"{e} if {e} is string else {e} | json"
    else:
        text = f"{e} | json"
    if in_json_string:
        return "{{ ((" + text + ") | json)[1:-1] }}"
    return "{{ " + text + " }}"


def literal(text: str) -> tuple[str, str]:
    """A literal piece for :func:`join_template`."""
    return ("lit", text)


def join_template(pieces: Iterable[tuple[str, str]]) -> str:
    """Join ``("lit", text)`` and ``("expr", "{{ ... }}")`` pieces into one Jinja2 template.

    Literal text is escaped: a ``{`` that would start ``{{``, ``{%`` or ``{#`` - also
    across a piece boundary - is written as ``{{ '{' }}``.
    """
    items = [p for p in pieces if p[1]]
    out: list[str] = []
    for i, (kind, text) in enumerate(items):
        if kind != "lit":
            out.append(text)
            continue
        following = items[i + 1][1][:1] if i + 1 < len(items) else ""
        for j, ch in enumerate(text):
            nxt = text[j + 1] if j + 1 < len(text) else following
            out.append("{{ '{' }}" if ch == "{" and nxt in ("{", "%", "#") and nxt else ch)
    return "".join(out)


def json_string_state(text: str) -> Callable[[int], bool]:
    """``inside(pos)``: True when ``pos`` is inside a JSON string literal of ``text``
    (a request body with references in it; the references contain no quotes)."""
    inside_at: list[bool] = []
    inside = escaped = False
    for ch in text:
        inside_at.append(inside)
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
    return lambda pos: inside_at[pos] if pos < len(inside_at) else False


_TYPES = {
    # FastGPT valueType
    "string": VarType.string,
    "number": VarType.number,
    "boolean": VarType.boolean,
    "object": VarType.object,
    "arraystring": VarType.array,
    "arraynumber": VarType.array,
    "arrayboolean": VarType.array,
    "arrayobject": VarType.array,
    "arrayany": VarType.array,
    "chathistory": VarType.array,
    "datasetquote": VarType.array,
    "any": VarType.any,
    "dynamic": VarType.any,
    # Dify value types
    "secret": VarType.string,
    "integer": VarType.number,
    "float": VarType.number,
    "bool": VarType.boolean,
    "file": VarType.file,
    "array": VarType.array,
    "text-input": VarType.string,
    "paragraph": VarType.string,
    "select": VarType.string,
    "json_object": VarType.object,
}


def var_type(name: str | None) -> VarType | None:
    """The Flowloom type of a FastGPT ``valueType`` / Dify value type (None when unknown).

    ``array[...]`` and ``arrayX`` are arrays; ``any``/``dynamic`` are ``any``.
    """
    if not name or not isinstance(name, str):
        return None
    key = name.strip().lower()
    if key.startswith("array"):
        return VarType.array
    return _TYPES.get(key)
