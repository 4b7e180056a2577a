"""Finding one JSON value in a model's free-text reply.

Models asked for JSON reply with prose around it, code fences, trailing commas,
single quotes or comments. The rule - cut the JSON out of the text, then parse it
tolerantly - made precise here:

1. Candidates are the balanced ``{...}`` / ``[...]`` spans of the text, in order of
   their opening bracket. The scanner understands strings (double *and* single
   quoted, as JSON5 allows) with backslash escapes and ``//`` / ``/* */`` comments,
   so a bracket, brace or backtick inside a string value does not count, and a
   closing bracket of the wrong kind ends the candidate as malformed.
2. A candidate is parsed with :mod:`json5` (tolerant: trailing commas, comments,
   single quotes, unquoted keys). One that fails to parse, or that the caller does
   not accept (``expect`` / ``accept``), is dropped and the scan goes on from the
   character after its opening bracket - so prose such as ``(see [1])`` before the
   real value, a ``{placeholder}`` or an unclosed ``:-[`` never hides it, and a
   value nested in a rejected one can still be found.
3. The first accepted candidate wins: "the first COMPLETE JSON value". Text after
   it (more prose, another value, a closing fence) is ignored.

When nothing is accepted, :class:`JsonNotFound` says why with the position of the
most telling problem (a parse error inside a balanced candidate beats an
unclosed bracket beats "no bracket at all"), as a 1-based line and column, so an
error hint can point at it. The agent loop's JSON protocol reuses this module.

Bounds: texts longer than :data:`MAX_SCAN_CHARS` are scanned only up to that
length, at most :data:`MAX_CANDIDATES` candidates are parsed and the scan stops
after :data:`MAX_SCAN_WORK` characters have been walked in all, so a hostile reply
(thousands of unclosed brackets) costs bounded time instead of quadratic time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import json5

__all__ = [
    "MAX_CANDIDATES",
    "MAX_SCAN_CHARS",
    "MAX_SCAN_WORK",
    "JsonMatch",
    "JsonNotFound",
    "candidate_spans",
    "find_json",
    "line_col",
    "scan_json",
]

#: Characters of a reply that are scanned (a model reply is far shorter).
MAX_SCAN_CHARS = 500_000
#: Balanced candidates parsed before giving up.
MAX_CANDIDATES = 200
#: Characters walked over all candidates before giving up (each candidate rescans its span).
MAX_SCAN_WORK = 1_000_000

_OPEN = {"{": "}", "[": "]"}
_CLOSE = {"}", "]"}
_SPECIAL = re.compile(r"[\"'/{}\[\]]")
#: Closing quote of a string: an unescaped quote of the same kind (escapes are pairs).
_STRING_END = {q: re.compile(rf"(?:[^{q}\\]|\\.)*{q}", re.S) for q in "\"'"}
_JSON5_POS = re.compile(r"<string>:(\d+) .* at column (\d+)")

Expect = Literal["any", "object", "array"]


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of offset ``pos`` in ``text``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


@dataclass(frozen=True, slots=True)
class JsonMatch:
    """The value found and where: ``text[start:end]`` is its source."""

    value: Any
    start: int
    end: int
    source: str

    @property
    def prefix(self) -> str:
        """Text before the value (prose, an opening fence)."""
        return self.source[: self.start]

    @property
    def suffix(self) -> str:
        """Text after the value."""
        return self.source[self.end :]


class JsonNotFound(ValueError):
    """No acceptable JSON value in the text.

    ``position`` is the offset of the problem (None when the text has no bracket at
    all), ``line``/``column`` are 1-based, ``reason`` is a stable code:
    ``empty``, ``no_json``, ``unclosed``, ``invalid_json``, ``not_accepted``.
    """

    def __init__(self, reason: str, message: str, *, text: str, position: int | None = None):
        self.reason = reason
        self.position = position
        self.line: int | None
        self.column: int | None
        if position is not None:
            self.line, self.column = line_col(text, position)
            message = f"{message} (line {self.line}, column {self.column})"
        else:
            self.line = self.column = None
        super().__init__(message)

    def hint(self, text: str, width: int = 40) -> str:
        """The message plus an excerpt of ``text`` around the problem, for a retry prompt or a log."""
        if self.position is None:
            return str(self)
        lo, hi = max(0, self.position - width), min(len(text), self.position + width)
        excerpt = text[lo:hi].replace("\n", "\\n")
        return f"{self} near: {'...' if lo else ''}{excerpt}{'...' if hi < len(text) else ''}"


def _span_end(text: str, start: int, limit: int) -> tuple[int | None, int]:
    """Scan the value opening at ``text[start]``.

    Returns ``(end, stop)``: ``end`` is one past the matching closer, or None when the
    span is unbalanced; ``stop`` is where scanning stopped (the offending closer, or
    ``limit`` when the text ended first).
    """
    stack = [_OPEN[text[start]]]
    i = start + 1
    while True:
        # Jump to the next character that matters; plain text costs one regex step.
        m = _SPECIAL.search(text, i, limit)
        if m is None:
            return None, limit
        i = m.start()
        ch = text[i]
        if ch == '"' or ch == "'":
            close = _STRING_END[ch].search(text, i + 1, limit)
            if close is None:
                return None, limit
            i = close.end()
            continue
        if ch == "/":
            nxt = text[i + 1] if i + 1 < limit else ""
            if nxt == "/":
                nl = text.find("\n", i, limit)
                if nl < 0:
                    return None, limit
                i = nl + 1
                continue
            if nxt == "*":
                close_at = text.find("*/", i + 2, limit)
                if close_at < 0:
                    return None, limit
                i = close_at + 2
                continue
        elif ch in _OPEN:
            stack.append(_OPEN[ch])
        else:  # a closer
            if ch != stack.pop():
                return None, i
            if not stack:
                return i + 1, i + 1
        i += 1


def candidate_spans(text: str) -> Iterator[tuple[int, int | None, int]]:
    """Yield ``(start, end, stop)`` for every opening bracket, in order.

    ``end`` is None for an unbalanced one (see :func:`_span_end`). Every opening
    bracket is a candidate, nested ones included; callers stop at the first they accept.
    """
    limit = min(len(text), MAX_SCAN_CHARS)
    i = 0
    while i < limit:
        # Jump straight to the next bracket: prose is skipped without a Python-level loop.
        next_obj, next_arr = text.find("{", i, limit), text.find("[", i, limit)
        starts = [p for p in (next_obj, next_arr) if p >= 0]
        if not starts:
            return
        i = min(starts)
        end, stop = _span_end(text, i, limit)
        yield i, end, stop
        i += 1


def _json5_error_pos(exc: Exception, source: str, offset: int) -> int:
    m = _JSON5_POS.search(str(exc))
    if not m:
        return offset
    line, col = int(m.group(1)), int(m.group(2))
    pos = 0
    for _ in range(line - 1):
        nl = source.find("\n", pos)
        if nl < 0:
            break
        pos = nl + 1
    return offset + min(len(source), pos + max(col - 1, 0))


def _accepts(expect: Expect, accept: Callable[[Any], bool] | None, value: Any) -> bool:
    if expect == "object" and not isinstance(value, dict):
        return False
    if expect == "array" and not isinstance(value, list):
        return False
    return accept is None or bool(accept(value))


def find_json(text: str, *, expect: Expect = "any", accept: Callable[[Any], bool] | None = None) -> JsonMatch:
    """The first complete JSON object/array in ``text`` that fits ``expect`` and ``accept``.

    ``expect``: ``object`` / ``array`` restrict the kind; ``accept(value)`` may check
    the shape further (e.g. "an array of strings"), so look-alikes in prose are
    skipped. See the module docstring for the rules.

    Raises:
        JsonNotFound: nothing acceptable; ``reason``, ``position``, ``line``, ``column``
            locate the most telling problem.
    """
    if not text or not text.strip():
        raise JsonNotFound("empty", "the reply is empty", text=text or "")
    first_invalid: tuple[int, str] | None = None
    first_unclosed: int | None = None
    first_rejected: int | None = None
    parsed = work = 0
    for start, end, stop in candidate_spans(text):
        work += (end or stop) - start
        if work > MAX_SCAN_WORK:
            break
        if end is None:
            if first_unclosed is None:
                first_unclosed = stop if stop < len(text) and text[stop] in _CLOSE else start
            continue
        if parsed >= MAX_CANDIDATES:
            break
        parsed += 1
        source = text[start:end]
        try:
            value = json5.loads(source)
        except Exception as exc:
            if first_invalid is None:
                first_invalid = (_json5_error_pos(exc, source, start), str(exc).split(" ", 1)[-1])
            continue
        if _accepts(expect, accept, value):
            return JsonMatch(value=value, start=start, end=end, source=text)
        if first_rejected is None:
            first_rejected = start
    what = {"any": "JSON object or array", "object": "JSON object", "array": "JSON array"}[expect]
    if first_invalid is not None:
        pos, msg = first_invalid
        raise JsonNotFound("invalid_json", f"no valid {what}: {msg}", text=text, position=pos)
    if first_rejected is not None:
        raise JsonNotFound(
            "not_accepted",
            f"found JSON, but not the expected {what} shape",
            text=text,
            position=first_rejected,
        )
    if first_unclosed is not None:
        raise JsonNotFound(
            "unclosed",
            f"no complete {what}: a bracket is never closed or closed by the wrong kind",
            text=text,
            position=first_unclosed,
        )
    raise JsonNotFound("no_json", f"the reply contains no {what}", text=text)


def scan_json(
    text: str, *, expect: Expect = "any", accept: Callable[[Any], bool] | None = None
) -> JsonMatch | None:
    """:func:`find_json` returning None instead of raising."""
    try:
        return find_json(text, expect=expect, accept=accept)
    except JsonNotFound:
        return None
