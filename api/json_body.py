"""Checks of a JSON request body that the JSON parser itself does not make.

- **Nesting depth**: Python's parser recurses once per array/object and fails with a
  ``RecursionError`` somewhere past ~900 levels, a limit that depends on the call
  stack; :data:`MAX_JSON_DEPTH` is a fixed limit below it, so the answer (and the
  message naming the limit) is the same on every route. Workflow documents have a
  lower, operator-set cap (``max_document_depth``, at most 500).
- **Lone UTF-16 surrogates** (``"\\ud800"`` not followed by a low surrogate): the
  parser accepts them, but they are not characters, so the text cannot be stored or
  sent on as UTF-8 and would fail much later (a store error, a serialization error).
  :func:`lone_surrogate_path` names the field holding one.

Both are cheap for usual bodies: the depth is only computed when the body holds more
openers (``[``, ``{``) than the limit, and the body is only parsed again when its
bytes hold a surrogate escape that is not part of a pair.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "SURROGATE_ESCAPE",
    "json_depth_over",
    "lone_surrogate_path",
    "may_hold_surrogate",
    "printable",
]

#: the deepest nesting of arrays and objects a request body may have (below the parser's own limit)
MAX_JSON_DEPTH = 512

#: a ``\\uD800``-``\\uDBFF`` escape not followed by a low one, or a ``\\uDC00``-``\\uDFFF``
#: escape not preceded by a high one: bytes that may hold a lone surrogate (an escaped
#: backslash before ``u`` also matches; the parse that follows tells them apart)
SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def may_hold_surrogate(data: bytes) -> bool:
    """Whether ``data`` holds a :data:`SURROGATE_ESCAPE`. Every one starts with ``\\u``,
    which a C-level search rules out in a few ms over a 1.4 MB body, where the regex
    alone took about 20 times as long."""
    return b"\\u" in data and SURROGATE_ESCAPE.search(data) is not None


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')
#: objects count as arrays: only the nesting matters
_AS_ARRAYS = bytes.maketrans(b"{}", b"[]")
_LONE = re.compile("[\ud800-\udfff]")


def json_depth_over(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``body`` (JSON text) nests arrays/objects more than ``limit`` levels.

    Strings are removed first (a bracket inside one does not count), then everything but
    brackets. A few C-speed passes then remove the empty pairs (the innermost ones:
    each pass lowers the deepest nesting by exactly one, which is counted), so a body
    of many shallow values costs those passes, not one Python step per byte."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _outside_strings(body).translate(_AS_ARRAYS, _NOT_BRACKET)
    removed = 0
    for _ in range(16):
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            break
        brackets, removed = shorter, removed + 1
    depth = removed
    for byte in brackets:
        depth += 1 if byte == 0x5B else -1  # "["
        if depth > limit:
            return True
    return False


def _outside_strings(body: bytes) -> bytes:
    """``body`` without the strings :data:`_STRING` finds in it, as far as its brackets go.

    Without a backslash in ``body`` a string is a quote, anything but a quote, a quote:
    the regex pairs the quotes in order (the first with the second...), and a last quote
    left without a partner opens nothing. So the pieces between quotes alternate outside
    and inside, the piece after an unpaired last quote outside too - found by C-level
    ``translate`` and ``split``, 4-5 times faster than the regex over a 1.4 MB workflow
    (only brackets and quotes are kept first). A body with a backslash, whose escapes
    the regex reads, goes through the regex."""
    if b"\\" in body:
        return _STRING.sub(b"", body)
    pieces = body.translate(None, _NOT_BRACKET_OR_QUOTE).split(b'"')
    outside = pieces[0::2] if len(pieces) % 2 else [*pieces[0::2], pieces[-1]]
    return b"".join(outside)


def lone_surrogate_path(data: Any) -> list[str | int] | None:
    """The path (keys and indexes) of the first string in ``data`` (parsed JSON) holding
    a lone surrogate, a key holding one included (its path ends with that key); None
    when there is none."""
    stack: list[tuple[list[str | int], Any]] = [([], data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _LONE.search(value):
                return path
        elif isinstance(value, dict):
            for key in reversed(list(value)):
                if _LONE.search(key):
                    return [*path, printable(key)]
                stack.append(([*path, key], value[key]))
        elif isinstance(value, list):
            stack.extend(([*path, index], item) for index, item in reversed(list(enumerate(value))))
    return None


def printable(key: str) -> str:
    """``key`` with each surrogate as its ``\\udXXX`` escape: a path naming a key that
    holds one must itself be encodable as UTF-8 to be sent back."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")
