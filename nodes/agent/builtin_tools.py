"""Builtin tools: small utilities that need no account, offered natively to models.

A ``tool_call`` or ``agent`` node lists them in ``builtin_tools``
(:class:`~schemas.nodes_agent.BuiltinToolRef`); a ``code`` node with ``tool`` runs one
directly (imported Dify tool nodes). They are the account-free tools of Dify's builtin
providers, with Dify's provider, tool and parameter names, so imported flows behave alike:

- ``time``: ``current_time`` (``format``, ``timezone``), ``weekday`` (``year``, ``month``,
  ``day``), ``timezone_conversion`` (``current_time``, ``current_timezone``,
  ``target_timezone``), ``timestamp_to_localtime`` / ``localtime_to_timestamp``
  (``timestamp`` / ``localtime``, ``timezone``, default UTC).
- ``json_process``: ``json_parse``, ``json_replace``, ``json_insert``, ``json_delete``
  (``content``: JSON text, ``query`` / ``json_filter``: a JSONPath evaluated with
  jsonpath-ng, as Dify does).
- ``maths``: ``eval_expression`` - arithmetic evaluated by simpleeval (numbers,
  ``+ - * / // % **``, comparisons, parentheses, ``pi``, ``e`` and a few :mod:`math`
  functions, exponents up to 1000); never Python's ``eval``. Dify uses numexpr, which
  reads the same arithmetic.
- ``regex``: ``regex_extract`` (``content``, ``expression``) - every match, as
  ``re.findall`` gives them (the groups when the pattern has groups), with the ``regex``
  module and a 2 s timeout so that a pattern that backtracks for ever stops.

Every tool only reads (risk ``read``) and runs in-process: it is Flowloom's own code,
not user code. Network tools (web scrapers, search) and tools needing an API key are not
builtin; the importer reports them. A tool gives a :class:`ToolResult`: its text (what
Dify's text output holds, what a model reads; JSON for a JSON document or a list of
matches, where Dify prints a Python list) and its value as data (the parsed object of
``json_parse``, not text). Bad arguments raise :class:`ToolArgumentError`, which the tool
loop gives back to the model and a code node reports as a node error.
"""

from __future__ import annotations

import ast
import calendar
import json
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from schemas.nodes_agent import BUILTIN_TOOL_NAMES

__all__ = [
    "BUILTIN_TOOLS",
    "BuiltinTool",
    "ToolArgumentError",
    "ToolResult",
    "builtin_tool",
    "dify_builtin",
    "run_builtin",
]


class ToolArgumentError(ValueError):
    """The arguments do not fit the tool (missing, wrong type, not JSON); the message says which."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a builtin tool gives: ``text`` (Dify's text output, what a model reads) and
    ``value``, the result as data: the parsed object of ``json_parse``, the document
    of the other JSON tools, the list of matches of ``regex_extract``, the number of
    ``eval_expression``; the text itself for the tools that answer with text."""

    text: str
    value: Any


@dataclass(frozen=True, slots=True)
class BuiltinTool:
    """One builtin tool: ``provider`` is Dify's provider name, ``parameters`` the JSON Schema
    of the arguments, ``run(args) -> text or ToolResult`` the implementation (use
    :meth:`call`, which always gives a :class:`ToolResult`)."""

    name: str
    provider: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], str | ToolResult]
    risk: str = "read"

    def call(self, args: dict[str, Any]) -> ToolResult:
        """Run the tool on ``args``.

        Raises:
            ToolArgumentError: the arguments do not fit the tool.
        """
        out = self.run(dict(args))
        return out if isinstance(out, ToolResult) else ToolResult(out, out)


def _schema(required: list[str] | None = None, **props: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
        "required": required or [],
        "additionalProperties": False,
    }


def _text(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key)
    if value is None or value == "":
        if default is None:
            raise ToolArgumentError(f"argument {key!r} is required")
        return default
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _int(args: dict[str, Any], key: str) -> int:
    value: Any = args.get(key)  # whatever the model sent: int() refuses what is no integer
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolArgumentError(f"argument {key!r} must be an integer, got {value!r}") from None


def _zone(name: str) -> timezone | ZoneInfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolArgumentError(f"invalid timezone: {name}") from None


# ------------------------------------------------------------------ time


def _current_time(args: dict[str, Any]) -> str:
    fmt = _text(args, "format", "%Y-%m-%d %H:%M:%S %Z")
    try:
        zone = _zone(_text(args, "timezone", "UTC"))
    except ToolArgumentError as exc:
        return str(exc).replace("invalid", "Invalid")  # Dify answers with this text, not an error
    return datetime.now(zone).strftime(fmt)


def _weekday(args: dict[str, Any]) -> str:
    year, month, day = _int(args, "year"), _int(args, "month"), _int(args, "day")
    try:
        date = datetime(year, month, day)
    except ValueError:
        raise ToolArgumentError(f"{year}-{month}-{day} is not a valid date") from None
    return f"{calendar.month_name[month]} {date.day}, {date.year} is {calendar.day_name[date.weekday()]}."


_STAMP = "%Y-%m-%d %H:%M:%S"


def _parse_local(text: str, zone: timezone | ZoneInfo) -> datetime:
    try:
        return datetime.strptime(text, _STAMP).replace(tzinfo=zone)
    except ValueError:
        raise ToolArgumentError(f"time {text!r} is not in the format YYYY-MM-DD HH:MM:SS") from None


def _timezone_conversion(args: dict[str, Any]) -> str:
    source = _zone(_text(args, "current_timezone", "UTC"))
    target = _zone(_text(args, "target_timezone"))
    return _parse_local(_text(args, "current_time"), source).astimezone(target).strftime(_STAMP)


def _timestamp_to_localtime(args: dict[str, Any]) -> str:
    zone = _zone(_text(args, "timezone", "UTC"))
    return datetime.fromtimestamp(_int(args, "timestamp"), zone).strftime(_STAMP)


def _localtime_to_timestamp(args: dict[str, Any]) -> ToolResult:
    zone = _zone(_text(args, "timezone", "UTC"))
    stamp = int(_parse_local(_text(args, "localtime"), zone).timestamp())
    return ToolResult(str(stamp), stamp)


# ------------------------------------------------------------------ JSON


def _load(args: dict[str, Any]) -> Any:
    content = args.get("content")
    if isinstance(content, (dict, list)):
        return json.loads(json.dumps(content))
    try:
        return json.loads(_text(args, "content"))
    except ValueError as exc:
        raise ToolArgumentError(f"content is not valid JSON: {exc}") from None


def _matches(data: Any, path: str) -> list[Any]:
    from jsonpath_ng.ext import parse

    from schemas.nodes_flow import jsonpath_expression

    try:
        return parse(jsonpath_expression(path)).find(data)
    except ValueError as exc:
        raise ToolArgumentError(str(exc)) from None


def _dump(value: Any, args: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=bool(args.get("ensure_ascii", True)))


def _document(value: Any, args: dict[str, Any]) -> ToolResult:
    return ToolResult(_dump(value, args), value)


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _json_parse(args: dict[str, Any]) -> ToolResult:
    data = _load(args)
    found = [m.value for m in _matches(data, _text(args, "json_filter"))]
    result: Any = found[0] if len(found) == 1 else found
    if isinstance(result, (dict, list)):
        return ToolResult(_dump(result, args), result)
    return ToolResult(str(result), result)


def _json_replace(args: dict[str, Any]) -> ToolResult:
    data = _load(args)
    model = _text(args, "replace_model", "pattern")
    value: Any = args.get("replace_value", "")
    if model == "pattern":
        pattern = _text(args, "replace_pattern")
        for match in _matches(data, _text(args, "query")):
            if isinstance(match.value, str):
                data = match.full_path.update(data, match.value.replace(pattern, str(value)))
    elif model == "key":
        for match in _matches(data, _text(args, "query")):
            parent, key = (
                match.context.value if match.context else None,
                getattr(match.path, "fields", [None])[0],
            )
            if isinstance(parent, dict) and key in parent:
                parent[str(value)] = parent.pop(key)
    elif model == "value":
        new = _decoded(value) if args.get("value_decode") else value
        for match in _matches(data, _text(args, "query")):
            data = match.full_path.update(data, new)
    else:
        raise ToolArgumentError(f"replace_model must be pattern, key or value, got {model!r}")
    return _document(data, args)


def _json_insert(args: dict[str, Any]) -> ToolResult:
    data = _load(args)
    query, new = _text(args, "query"), _decoded(args.get("new_value"))
    index = args.get("index")
    matches = _matches(data, query)
    if not matches and args.get("create_path"):
        current = data
        parts = query.strip("$").strip(".").split(".")
        for i, part in enumerate(parts):
            if not isinstance(current, dict):
                raise ToolArgumentError(f"cannot create {query!r}: {part!r} is not inside an object")
            if i == len(parts) - 1:
                current[part] = new
            current = current.setdefault(part, {})
        return _document(data, args)
    for match in matches:
        if isinstance(match.value, dict):
            if not isinstance(new, dict):
                raise ToolArgumentError("cannot insert a value that is not an object into an object")
            match.value.update(new)
        elif isinstance(match.value, list):
            match.value.append(new) if index in (None, "") else match.value.insert(_int(args, "index"), new)
        else:
            data = match.full_path.update(data, [match.value, new])
    return _document(data, args)


def _json_delete(args: dict[str, Any]) -> ToolResult:
    data = _load(args)
    for match in reversed(_matches(data, _text(args, "query"))):
        parent = match.context.value if match.context is not None else None
        if isinstance(parent, dict):
            parent.pop(getattr(match.path, "fields", [None])[0], None)
        elif isinstance(parent, list) and match.value in parent:
            parent.remove(match.value)
    return _document(data, args)


# ------------------------------------------------------------------ maths


def _power(base: Any, exponent: Any) -> Any:
    # simpleeval caps exponents at millions; numbers that large take seconds to print
    if abs(exponent) > 1000 or abs(base) > 1e6:
        raise ToolArgumentError("the power is too large")
    return operator.pow(base, exponent)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}


def _evaluator() -> Any:
    """A simpleeval evaluator reading arithmetic only: numbers, ``+ - * / // % **``,
    comparisons, :data:`_FUNCTIONS`, ``pi`` and ``e``; no attributes, no other names."""
    from simpleeval import DEFAULT_OPERATORS, SimpleEval

    operators = {op: fn for op, fn in DEFAULT_OPERATORS.items() if op is not ast.Pow}
    operators[ast.Pow] = _power
    return SimpleEval(operators=operators, functions=_FUNCTIONS, names={"pi": math.pi, "e": math.e})


def _eval_expression(args: dict[str, Any]) -> ToolResult:
    from simpleeval import InvalidExpression

    text = _text(args, "expression")
    if len(text) > 1000:
        raise ToolArgumentError("the expression is longer than 1000 characters")
    try:
        result = _evaluator().eval(text.strip())
    except SyntaxError as exc:
        raise ToolArgumentError(f"the expression does not parse: {exc.msg}") from None
    except InvalidExpression as exc:
        raise ToolArgumentError(
            f"{exc} (arithmetic only: numbers, + - * / // % **, parentheses, pi, e, "
            f"{', '.join(sorted(_FUNCTIONS))})"
        ) from None
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ToolArgumentError(f"the expression cannot be computed: {exc}") from None
    if not isinstance(result, (int, float)):
        raise ToolArgumentError(f"the expression gives {type(result).__name__}, not a number")
    return ToolResult(str(result), result)


# ------------------------------------------------------------------ regex


def _regex_extract(args: dict[str, Any]) -> ToolResult:
    import regex

    content, expression = _text(args, "content"), _text(args, "expression")
    try:
        # the regex module, for its timeout: a pattern that backtracks for ever stops
        found = regex.findall(expression, content, timeout=_REGEX_TIMEOUT_S)
    except regex.error as exc:
        raise ToolArgumentError(
            f"the expression {expression!r} is not a valid regular expression: {exc}"
        ) from None
    except TimeoutError:
        raise ToolArgumentError(
            f"the expression {expression!r} took longer than {_REGEX_TIMEOUT_S:g} s on this content"
        ) from None
    matches = [list(m) if isinstance(m, tuple) else m for m in found]
    return ToolResult(json.dumps(matches, ensure_ascii=False), matches)


_REGEX_TIMEOUT_S = 2.0


_S, _N, _B = "string", "integer", "boolean"
_CONTENT = (_S, "JSON text to process")

#: Every builtin tool by name.
BUILTIN_TOOLS: dict[str, BuiltinTool] = {
    t.name: t
    for t in (
        BuiltinTool(
            "current_time",
            "time",
            "The current date and time, formatted with strftime, in a timezone.",
            _schema(
                format=(_S, "strftime format, default %Y-%m-%d %H:%M:%S %Z"),
                timezone=(_S, "IANA timezone such as Asia/Shanghai, default UTC"),
            ),
            _current_time,
        ),
        BuiltinTool(
            "weekday",
            "time",
            "The day of the week of a date.",
            _schema(["year", "month", "day"], year=(_N, "year"), month=(_N, "month 1-12"), day=(_N, "day")),
            _weekday,
        ),
        BuiltinTool(
            "timezone_conversion",
            "time",
            "Convert a time (YYYY-MM-DD HH:MM:SS) from one timezone to another.",
            _schema(
                ["current_time", "target_timezone"],
                current_time=(_S, "YYYY-MM-DD HH:MM:SS"),
                current_timezone=(_S, "its timezone, default UTC"),
                target_timezone=(_S, "the target"),
            ),
            _timezone_conversion,
        ),
        BuiltinTool(
            "timestamp_to_localtime",
            "time",
            "A Unix timestamp as local time (YYYY-MM-DD HH:MM:SS).",
            _schema(["timestamp"], timestamp=(_N, "seconds since 1970"), timezone=(_S, "default UTC")),
            _timestamp_to_localtime,
        ),
        BuiltinTool(
            "localtime_to_timestamp",
            "time",
            "A local time (YYYY-MM-DD HH:MM:SS) as a Unix timestamp.",
            _schema(["localtime"], localtime=(_S, "YYYY-MM-DD HH:MM:SS"), timezone=(_S, "default UTC")),
            _localtime_to_timestamp,
        ),
        BuiltinTool(
            "json_parse",
            "json_process",
            "Extract values from JSON text with a JSONPath.",
            _schema(
                ["content", "json_filter"],
                content=_CONTENT,
                json_filter=(_S, "JSONPath, e.g. $.items[0]"),
                ensure_ascii=(_B, "escape non-ASCII characters"),
            ),
            _json_parse,
        ),
        BuiltinTool(
            "json_replace",
            "json_process",
            "Replace a text pattern, a key or a value in JSON text.",
            _schema(
                ["content", "query"],
                content=_CONTENT,
                query=(_S, "JSONPath of what to change"),
                replace_model=(_S, "pattern, key or value"),
                replace_pattern=(_S, "text to replace"),
                replace_value=(_S, "the replacement"),
                value_decode=(_B, "parse the value as JSON"),
                ensure_ascii=(_B, "escape non-ASCII characters"),
            ),
            _json_replace,
        ),
        BuiltinTool(
            "json_insert",
            "json_process",
            "Insert a value into JSON text at a JSONPath.",
            _schema(
                ["content", "query", "new_value"],
                content=_CONTENT,
                query=(_S, "JSONPath"),
                new_value=(_S, "the value (JSON text or plain text)"),
                index=(_N, "list position"),
                create_path=(_B, "create missing keys"),
                ensure_ascii=(_B, "escape non-ASCII"),
            ),
            _json_insert,
        ),
        BuiltinTool(
            "json_delete",
            "json_process",
            "Delete what a JSONPath selects from JSON text.",
            _schema(
                ["content", "query"],
                content=_CONTENT,
                query=(_S, "JSONPath"),
                ensure_ascii=(_B, "escape non-ASCII characters"),
            ),
            _json_delete,
        ),
        BuiltinTool(
            "eval_expression",
            "maths",
            "Compute an arithmetic expression (numbers, + - * / // % **, sqrt, log, sin, ...).",
            _schema(["expression"], expression=(_S, "e.g. (3 + 4) * 2 ** 3")),
            _eval_expression,
        ),
        BuiltinTool(
            "regex_extract",
            "regex",
            "Every match of a regular expression in a text (the groups when it has groups).",
            _schema(
                ["content", "expression"],
                content=(_S, "the text to search"),
                expression=(_S, "a regular expression, e.g. \\d+"),
            ),
            _regex_extract,
        ),
    )
}
assert set(BUILTIN_TOOLS) == BUILTIN_TOOL_NAMES, (
    "schemas.nodes_agent.BUILTIN_TOOL_NAMES lists the builtin tools"
)


def builtin_tool(name: str) -> BuiltinTool:
    """The builtin tool ``name``.

    Raises:
        KeyError: no such tool; the message lists the builtin tools.
    """
    tool = BUILTIN_TOOLS.get(name)
    if tool is None:
        raise KeyError(f"{name!r} is not a builtin tool (builtin tools: {', '.join(sorted(BUILTIN_TOOLS))})")
    return tool


def run_builtin(name: str, args: dict[str, Any]) -> ToolResult:
    """Run builtin tool ``name`` with ``args``; returns its text and value.

    Raises:
        KeyError: no such tool.
        ToolArgumentError: the arguments do not fit the tool.
    """
    return builtin_tool(name).call(args)


def dify_builtin(provider: str, tool: str) -> BuiltinTool | None:
    """The builtin tool standing for Dify's ``provider``/``tool`` (provider ``time`` or the
    plugin id ``langgenius/time/time``), or None when Flowloom does not provide it."""
    found = BUILTIN_TOOLS.get(tool)
    name = provider.rstrip("/").rsplit("/", 1)[-1]
    return found if found is not None and found.provider == name else None
