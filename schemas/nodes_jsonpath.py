"""JSONPath as HTTP request nodes write it (FastGPT's dialect): rewriting a path into the
expression the evaluator accepts, and telling whether it may select several values.
Re-exported by :mod:`schemas.nodes`."""

from __future__ import annotations

import re

__all__ = ["jsonpath_expression", "jsonpath_many"]

_NON_IDENT_KEY = re.compile(r"(\.\.?|@\.)([^\s.\[\]()'\"*@$?&|<>=!,~^`]+)")
_MANY = re.compile(r"\*|\[-?\d*:-?\d*(?::-?\d*)?\]|\[\s*\?|\.\.|,")


def jsonpath_expression(path: str) -> str:
    """``path`` in the syntax of jsonpath-ng's extended parser (what FastGPT users write).

    A path not starting with ``$`` is read from the root (``data.items`` ->
    ``$.data.items``, as FastGPT does); a key that is not an ASCII identifier after ``.``,
    ``..`` or ``@.`` is quoted (``$.结果`` -> ``$."结果"``: the parser reads ASCII names
    only); ``&&`` in a filter is jsonpath-ng's ``&``.

    Raises:
        ValueError: the path does not parse, or uses a feature that would be evaluated
            differently (``||``, ``.length``, script expressions ``(...)``, ``@parent``,
            ``~`` property names); the message quotes the path.
    """
    text = path.strip()
    if not text:
        raise ValueError("the JSONPath is empty")
    if not text.startswith("$"):
        text = "$." + text.lstrip(".")
    for pattern, why in (
        (r"\|\|", "'||' in filters"),
        (r"\.length\b", "'.length'"),
        (r"(?<!\?)\(", "script expressions '(...)'"),
        (r"@(parent|property|path|root)\b", "'@parent'/'@property'"),
        (r"~", "'~' (property names)"),
    ):
        if re.search(pattern, text):
            raise ValueError(
                f"JSONPath {path!r} uses {why}, which Flowloom's JSONPath library (jsonpath-ng) "
                "does not evaluate"
            )

    def quote(m: re.Match[str]) -> str:
        key = m.group(2)
        return m.group(0) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\d+", key) else f'{m.group(1)}"{key}"'

    parts = re.split(r"(\"[^\"]*\"|'[^']*')", text)  # rewrite outside string literals only
    text = "".join(
        part if i % 2 else _NON_IDENT_KEY.sub(quote, part).replace("&&", "&") for i, part in enumerate(parts)
    )
    from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
    from jsonpath_ng.ext import parse

    try:
        parse(text)
    except (
        JsonPathLexerError,
        JsonPathParserError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
    ) as exc:
        raise ValueError(f"JSONPath {path!r} does not parse: {exc}") from None
    return text


def jsonpath_many(path: str) -> bool:
    """True when ``path`` may select several values - a wildcard ``*``, a slice ``[a:b]``, a
    filter ``[?(...)]``, recursive descent ``..`` or a union ``,`` - so its value is the list
    of matches, else the first match. FastGPT decides the same way (its HTTP node runs
    JSONPath-plus and returns the array for exactly these forms)."""
    return bool(_MANY.search(path))
