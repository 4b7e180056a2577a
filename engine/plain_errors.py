"""Validation errors in plain words, for the people who read them.

pydantic words its errors for programmers ("Input should be a valid integer, unable to
parse string as an integer", "Extra inputs are not permitted"). A workflow author or an
operator setting an environment variable reads them instead: :func:`plain_message`
rewords one pydantic error (a dict of ``ValidationError.errors()``) by its ``type``,
naming what was expected and, for unknown fields, the fields that exist.

Kept free of heavy imports (only ``difflib`` and ``re``) so the command line can use it on its
error paths without loading the engine.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["a_or_an", "closest", "did_you_mean", "fields_at", "plain_message"]

_KIND_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "decimal": "a number",
    "bool": "true or false",
    "string": "text",
    "str": "text",
    "list": "a list",
    "tuple": "a list",
    "set": "a list",
    "dict": "an object",
    "model": "an object",
    "model_attributes": "an object",
    "dataclass": "an object",
    "url": "a URL",
    "bytes": "text",
    "none": "empty (null)",
    "datetime": "a date and time",
    "date": "a date",
    "time": "a time",
    "timedelta": "a duration",
    "uuid": "a UUID",
    "path": "a file path",
    "json": "valid JSON",
    "enum": "one of the allowed values",
    "callable": "a function",
}

_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
    "multiple_of": ("multiple_of", "a multiple of"),
}


def a_or_an(word: str) -> str:
    """``word`` after its indefinite article: ``"an if_else"``, ``"an elf"``, ``"a chat"``.

    Node kinds, value types and file types are put into sentences ("node 'x' is an
    iteration node"); a fixed "a" misspeaks before a vowel. "an" goes before a, e, i, o
    and "un" (``unsupported``), "a" before any other letter, ``u`` included (``a
    user_select``): by spelling, since the words are identifiers, not spoken acronyms.
    """
    lowered = word.lower()
    return f"an {word}" if lowered[:1] in ("a", "e", "i", "o") or lowered.startswith("un") else f"a {word}"


def did_you_mean(name: object, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when ``name`` is close to one of ``candidates``, else ``""``.

    A typo is the most common cause of an unknown name; naming the close match saves
    the reader from scanning the whole list. Uses ``difflib.get_close_matches``
    (cutoff 0.6), case-insensitively, and suggests at most one name.
    """
    match = closest(name, candidates)
    return f"; did you mean {match!r}?" if match is not None else ""


def closest(name: object, candidates: Iterable[str]) -> str | None:
    """The one of ``candidates`` :func:`did_you_mean` would suggest for ``name`` (None: none
    is close, or ``name`` is one of them): for a message that puts it elsewhere, such as
    into the command to type."""
    if not isinstance(name, str) or not name:
        return None
    options = [c for c in candidates if isinstance(c, str)]
    folded = {c.casefold(): c for c in options}
    match = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)
    return folded[match[0]] if match and folded[match[0]] != name else None


def _shown(value: Any) -> str:
    """A short, quoted rendering of the value a person gave."""
    text = value if isinstance(value, str) else str(value)
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _expected(ctx: Mapping[str, Any]) -> str:
    """pydantic's ``expected`` text (``"'a', 'b' or 'c'"``) as it is: already words."""
    return str(ctx.get("expected", "one of the allowed values"))


def plain_message(error: Mapping[str, Any], fields: Iterable[str] = ()) -> str:
    """One pydantic error (``type``, ``msg``, ``input``, ``ctx``) in plain words.

    ``fields``: the valid field names at the error's location; an unknown field
    (``extra_forbidden``) is then reported with a close match and the list, because
    the reader needs to know what the object does accept.

    Never raises: an error type without a rewording keeps pydantic's message, with its
    "Value error, " prefix and its "Input should be" phrasing turned into "must be".
    """
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return "required, but missing"
    if kind == "extra_forbidden":
        names = sorted(fields)
        field = error.get("loc", ("",))[-1] if error.get("loc") else ""
        hint = did_you_mean(field, names)
        listing = f" (fields: {', '.join(names)})" if names else ""
        return f"unknown field {str(field)!r}{hint}{listing}"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)} (got {_shown(value)})"
    if kind in ("literal_error", "enum"):
        # the options are quoted in pydantic's text ("'user' or 'assistant'"): a misspelt
        # one (a role 'usr', a method 'GTE') is told the closest
        hint = did_you_mean(value, re.findall(r"'([^']*)'", _expected(ctx)))
        return f"must be {_expected(ctx)} (got {_shown(value)}){hint}"
    if kind in ("too_short", "string_too_short"):
        unit = "character(s)" if kind.startswith("string") else "item(s)"
        return f"must have at least {ctx.get('min_length')} {unit}"
    if kind in ("too_long", "string_too_long"):
        unit = "character(s)" if kind.startswith("string") else "item(s)"
        return f"must have at most {ctx.get('max_length')} {unit}"
    if kind == "string_pattern_mismatch":
        return f"{_shown(value)} does not have the expected form (pattern {ctx.get('pattern')})"
    if kind in ("value_error", "assertion_error"):
        reason = ctx.get("error")
        return str(reason) if reason is not None else _reworded(str(error.get("msg", "")))
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = ctx.get("expected_tags")
        return f"unknown type {_shown(ctx.get('tag', value))}" + (f" (one of {tags})" if tags else "")
    for prefix, words in _KIND_WORDS.items():
        if kind.startswith(prefix + "_") or kind == prefix:
            got = "" if isinstance(value, (dict, list)) else f" (got {_shown(value)})"
            return f"must be {words}{got}"
    return _reworded(str(error.get("msg", "")))


def _reworded(msg: str) -> str:
    """pydantic's own message, without its programmer phrasing."""
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if msg.startswith("Input should be "):
        msg = "must be " + msg[len("Input should be ") :]
    return msg


def fields_at(model: Any, loc: Iterable[int | str]) -> list[str]:
    """The field names (aliases where set) of the object at ``loc`` below pydantic model
    class ``model``, for "unknown field" messages; ``[]`` when the path cannot be
    followed (a union, a dict of values).

    ``loc`` is an error location that ends with the unknown field itself (dropped here).
    """
    import typing

    from pydantic import BaseModel

    parts = list(loc)[:-1]
    current: Any = model
    for part in parts:
        if isinstance(part, int):
            continue  # an index: the list's item type was taken with the field
        fields = getattr(current, "model_fields", None) if isinstance(current, type) else None
        if fields is None:
            return []
        by_alias = {(info.alias or name): info for name, info in fields.items()}
        info = by_alias.get(part) or fields.get(part)
        if info is None:
            return []
        current = _model_in(info.annotation, typing, BaseModel)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None) if isinstance(current, type) else None
    return sorted((info.alias or name) for name, info in (fields or {}).items())


def _model_in(annotation: Any, typing: Any, base: type) -> Any:
    """The one model class inside ``annotation`` (``list[X]``, ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    found = [m for m in (_model_in(a, typing, base) for a in typing.get_args(annotation)) if m is not None]
    return found[0] if len(set(found)) == 1 else None
