"""What one template render may build: size, memory and time limits (README "Limits").

A template is code a tenant writes and the server runs in its own process, between
other runs' events; it must not be able to make that process allocate gigabytes or
stall for seconds. Rules:

1. **Cap** (``max_template_output_bytes``): no value a render builds - the output, and
   every intermediate value: ``~``, ``+``, ``*``, ``%``, ``**``, ``join``, ``format``,
   padding, replacing, a list grown by ``append`` - is larger than the cap. Sizes are
   characters for text and ``sys.getsizeof`` (bytes) for other values. An operation whose
   result can be much larger than its operands is refused *before* it runs, from its
   operands (``'a' * n``, ``s ~ s``, ``sep.join(items)``, ``'%9999s' | format(x)``); any
   other is checked after it runs, so one operation allocates at most a few times the cap
   before it is refused.
2. **Memory budget** (``max_template_memory_bytes``): every value a render builds is
   charged to it when built, whether or not a rule of 1 knows the operation (calls,
   filters, operators, slices, printed pieces), and a list or dict grown by a method is
   charged for its growth. Text is given back only when a namespace attribute that held
   its last reference is overwritten (``{% set ns.s = ns.s ~ x %}`` holds one string at a
   time, not all of them). So however values are built and kept, what a render holds
   at once stays under the budget.
3. **Time budget** (``max_template_seconds``): every loop iteration, call, filter and
   operator checks the render's deadline (wall clock, checked every few steps), so nested
   loops or recursive macros stop instead of stalling the process.

Exceeding 1 or 2 raises :class:`TemplateTooLarge`, 3 :class:`TemplateTooSlow`; both name
the setting. The budget of the render in progress is held in a context variable, set by
:func:`budget_for` around a render.
"""

from __future__ import annotations

import contextvars
import functools
import math
import re
import string
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

import jinja2
from jinja2 import nodes as jnodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import Namespace, _PassArg

__all__ = [
    "BudgetedCodeGenerator",
    "BudgetedEnvironment",
    "RenderBudget",
    "TemplateTooLarge",
    "TemplateTooSlow",
    "budget_for",
    "text_size",
]


class TemplateTooLarge(jinja2.exceptions.TemplateRuntimeError):
    """A value the render builds would pass the cap, or all it built the memory budget."""


class TemplateTooSlow(jinja2.exceptions.TemplateRuntimeError):
    """The render ran past its time budget."""


#: time is read every this many steps (a step is a loop iteration, call, filter or operator)
_CLOCK_EVERY = 32


class RenderBudget:
    """The limits of one render: ``cap`` (characters or bytes of any one value),
    ``memory`` (bytes of everything built, rule 2), ``seconds`` (wall time, rule 3)."""

    __slots__ = ("cap", "memory", "seconds", "used", "deadline", "steps")

    def __init__(self, cap: int, memory: float, seconds: float) -> None:
        self.cap, self.memory, self.seconds = cap, memory, seconds
        self.used = 0
        self.deadline = time.monotonic() + seconds
        self.steps = 0

    def too_large(self, what: str, size: float) -> TemplateTooLarge:
        return TemplateTooLarge(
            f"{what} would be about {int(size)} bytes; the cap max_template_output_bytes is {self.cap}"
        )

    def check(self, what: str, size: float) -> None:
        """Refuse a value of ``size`` (rule 1) before or after it is built."""
        if size > self.cap:
            raise self.too_large(what, size)

    def charge(self, what: str, value: Any) -> Any:
        """Check ``value`` against the cap and charge its memory to the budget; returns it."""
        if type(value) is str:
            if len(value) > self.cap:
                raise self.too_large(what, len(value))
            self.used += sys.getsizeof(value)  # 1, 2 or 4 bytes a character
        else:
            size = size_of(value)
            if size > self.cap:
                raise self.too_large(what, size)
            self.used += size
        if self.used > self.memory:
            raise self.over_budget()
        return value

    def grow(self, size: int) -> None:
        self.used += size
        if self.used > self.memory:
            raise self.over_budget()

    def over_budget(self) -> TemplateTooLarge:
        return TemplateTooLarge(
            f"the values this template builds add up to more than {int(self.memory)} bytes; "
            f"the budget max_template_memory_bytes is {int(self.memory)}"
        )

    def give_back(self, size: int) -> None:
        self.used = max(0, self.used - size)

    def step(self) -> None:
        self.steps += 1
        if not self.steps % _CLOCK_EVERY and time.monotonic() > self.deadline:
            raise TemplateTooSlow(
                f"the template ran longer than {self.seconds:g} s; "
                f"the budget max_template_seconds is {self.seconds:g}"
            )


#: Outside a render (compiling, which folds constant filters; a test rendering directly)
#: values are small: a larger constant is left to be computed by the render itself.
_OUTSIDE = RenderBudget(cap=64 * 1024, memory=math.inf, seconds=math.inf)
_BUDGET: contextvars.ContextVar[RenderBudget] = contextvars.ContextVar("template_budget", default=_OUTSIDE)


def current() -> RenderBudget:
    return _BUDGET.get()


class budget_for:
    """Run the block (a render) under a new :class:`RenderBudget` (a plain context manager:
    renders are frequent)."""

    __slots__ = ("budget", "token")

    def __init__(self, cap: int, memory: float, seconds: float) -> None:
        self.budget = RenderBudget(cap, memory, seconds)

    def __enter__(self) -> RenderBudget:
        self.token = _BUDGET.set(self.budget)
        return self.budget

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self.token)


# ----------------------------------------------------------------------- sizes

_TEXT = (str, bytes, bytearray)


def size_of(value: Any) -> int:
    """Characters of text, else the bytes ``sys.getsizeof`` reports (a container's own
    size, not its items': those were charged when they were built)."""
    if isinstance(value, str):
        return len(value)
    try:
        return sys.getsizeof(value)
    except TypeError:
        return 0


def text_size(value: Any, limit: int, indent: int = 0, _depth: int = 0) -> int:
    """At least how many characters ``value`` prints as (its JSON for a list or an object,
    ``indent`` spaces a level when indented; its repr for a namespace or a dict view),
    counted only until ``limit`` is passed: the walk costs at most about ``limit`` steps.
    A list holding the same long string a thousand times prints it a thousand times."""
    if isinstance(value, _TEXT):
        return len(value) + 2
    if isinstance(value, (list, tuple)):
        items: Iterable[Any] = value
        pairs = False
    elif isinstance(value, (dict, Mapping, Namespace)):
        items = (value._Namespace__attrs if isinstance(value, Namespace) else value).items()
        pairs = True
    elif isinstance(value, Collection):  # a set, a dict view
        items, pairs = value, False
    else:
        return 8  # a number, null, a boolean: printed short (long numbers are refused as built)
    if _depth > 200:  # cyclic or absurdly deep: printing fails on its own
        return 2
    total = 2
    line = indent * (_depth + 1) + 1 if indent else 0  # a newline and the indentation of an item
    for item in items:
        if pairs:
            total += (
                text_size(item[0], limit, indent, _depth + 1)
                + text_size(item[1], limit, indent, _depth + 1)
                + 2
                + line
            )
        elif isinstance(item, str):
            total += len(item) + 3 + line
        else:
            total += text_size(item, limit, indent, _depth + 1) + 1 + line
        if total > limit:
            break
    return total


def _largest_text(values: Iterable[Any], limit: int) -> int:
    largest = 0
    for value in values:
        if isinstance(value, str):
            size = len(value)
        elif isinstance(value, (int, float)) or value is None:
            size = 32  # a number's longest text (a long integer is refused as built)
        else:
            size = text_size(value, limit)
        largest = max(largest, size)
    return largest


# ----------------------------------------------------------------------- predictions (rule 1)

#: a printf-style conversion: ``%(name)-9.3f``; ``*`` takes the width or precision from the arguments
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d+|\*)?(?:\.(\d+|\*))?[hlL]?([a-zA-Z%])")
_DIGITS = re.compile(r"\d+")
_PADDING = frozenset({"center", "ljust", "rjust", "zfill"})


@functools.lru_cache(maxsize=1024)
def _shape(template: str, style: str) -> tuple[int, int, bool]:
    """``(fields, widest, dynamic)`` of a ``%`` (``style`` "printf") or ``str.format``
    template: how many values it prints, its largest width or precision, and whether a
    width comes from the arguments (``%*s``, ``{:{w}}``)."""
    if style == "printf":
        found = [m for m in _PRINTF.finditer(template) if m.group(3) != "%"]
        numbers = [int(n) for m in found for n in m.group(1, 2) if n and n != "*"]
        dynamic = any("*" in (m.group(1) or "") + (m.group(2) or "") for m in found)
        return len(found), max(numbers, default=0), dynamic
    try:
        fields = [spec or "" for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:
        return 0, 0, False  # a malformed format string: formatting fails on its own
    numbers = [int(n) for spec in fields for n in _DIGITS.findall(spec)]
    return len(fields), max(numbers, default=0), any("{" in spec for spec in fields)


def _formatted(template: str, style: str, args: Iterable[Any], budget: RenderBudget) -> None:
    """``template`` filled from ``args``: each field prints at most the largest argument,
    padded to the widest width or precision (refused first when past the cap)."""
    fields, widest, dynamic = (
        _shape(template, style) if len(template) <= 512 else _shape.__wrapped__(template, style)
    )
    args = list(args)
    if dynamic:
        widest = max([widest, *(a for a in args if isinstance(a, int) and not isinstance(a, bool))])
    if widest > budget.cap:
        raise budget.too_large(f"a format width or precision of {widest}", widest)
    if fields:
        budget.check(
            "the formatted text", len(template) + fields * (_largest_text(args, budget.cap) + widest)
        )


def _values(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any]:
    """What a ``format`` call may print: the arguments, a mapping's values (``format_map``)."""
    out: list[Any] = [*args, *kwargs.values()]
    if len(args) == 1 and isinstance(args[0], Mapping):
        out.extend(args[0].values())
    return out


def _occurrences(text: str | bytes | bytearray, sub: str | bytes | bytearray) -> int:
    """``text.count(sub)``; 0 when one is str and the other bytes (the call itself then
    fails with the method's own TypeError)."""
    if isinstance(text, str):
        return text.count(sub) if isinstance(sub, str) else 0
    return 0 if isinstance(sub, str) else text.count(sub)


def predict_call(
    name: str, target: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], budget: RenderBudget
) -> None:
    """Refuse a str/bytes method or a filter called ``name`` on ``target`` whose result
    would pass the cap (rule 1), from its arguments, before it runs."""
    values = [*args, *kwargs.values()]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    texts = [v for v in values if isinstance(v, _TEXT)]
    size = len(target) if isinstance(target, _TEXT) else 0
    if name in _PADDING:
        for width in numbers:
            budget.check(f"{name}({width})", width)
    elif name == "expandtabs" and isinstance(target, _TEXT):
        tab = numbers[0] if numbers else 8
        budget.check(
            f"expandtabs({tab})",
            size + _occurrences(target, "\t" if isinstance(target, str) else b"\t") * tab,
        )
    elif name == "indent" and isinstance(target, str):
        width = values[0] if values else 4
        step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        budget.check(f"indent({step})", step)
        budget.check(f"indent({step})", size + (target.count("\n") + 1) * step)
    elif name == "wordwrap" and isinstance(target, str):
        wrap = max((len(t) for t in texts), default=1)
        width = max(numbers[0] if numbers else 79, 1)
        breaks = target.count(" ") + target.count("\n") + size // width + 1
        budget.check("wordwrap(...)", size + breaks * wrap)
    elif name == "urlize" and isinstance(target, str):
        budget.check("urlize(...)", 2 * size + (size // 4 + 1) * (sum(len(t) for t in texts) + 40))
    elif name == "replace" and isinstance(target, _TEXT) and len(values) >= 2:
        old, new = values[0], values[1]
        if isinstance(old, _TEXT) and isinstance(new, _TEXT):
            count = values[2] if len(values) > 2 and isinstance(values[2], int) and values[2] >= 0 else None
            hits = _occurrences(target, old) if old else size + 1
            budget.check(
                "replace(...)", size + min(hits, count if count is not None else hits) * (len(new) - len(old))
            )
    elif name == "translate" and isinstance(target, str) and values and isinstance(values[0], Mapping):
        longest = max((len(v) for v in values[0].values() if isinstance(v, str)), default=1)
        budget.check("translate(...)", size * longest)
    elif name == "join" and isinstance(target, _TEXT) and values and isinstance(values[0], (list, tuple)):
        total = size * max(len(values[0]) - 1, 0)
        for item in values[0]:
            total += len(item) if isinstance(item, _TEXT) else text_size(item, budget.cap)
            if total > budget.cap:
                break
        budget.check("joining text", total)
    elif name in ("format", "format_map") and isinstance(target, str):
        _formatted(target, "format", _values(args, kwargs), budget)
    elif name in ("split", "rsplit", "splitlines") and isinstance(target, str):
        sep = values[0] if values and isinstance(values[0], str) and name != "splitlines" else None
        parts = target.count(sep) if sep else sum(map(target.count, " \n\t\r"))
        budget.check(f"the list of {name}", 8 * (parts + 1))
    elif name == "list" and isinstance(target, (*_TEXT, list, tuple, dict, range)):
        budget.check("the list", 8 * len(target))
    elif name in ("batch", "slice") and numbers:
        per = 8 if name == "batch" else 64  # a slot of the batch; one list per slice
        budget.check(f"{name}({numbers[0]})", numbers[0] * per)


#: bits of the largest number a template computes: Python prints no integer longer than
#: this many digits, and multiplying far larger ones takes seconds in one step
_NUMBER_DIGITS = 4300
_NUMBER_BITS = int(_NUMBER_DIGITS * math.log2(10))


def _check_number(operator: str, left: int, right: int, budget: RenderBudget) -> None:
    if operator == "**":
        if abs(left) <= 1 or right <= 0:
            return
        bits = right * abs(left).bit_length()
        budget.check(f"{left} ** {right}", bits / 8)
    else:
        bits = left.bit_length() + right.bit_length()
    if bits > _NUMBER_BITS:
        raise TemplateTooLarge(
            f"{operator} would make a number of about {int(bits / math.log2(10))} digits; "
            f"a number in a template has at most {_NUMBER_DIGITS} (as many as can be printed)"
        )


def predict_binop(operator: str, left: Any, right: Any, budget: RenderBudget) -> None:
    """Refuse ``left <operator> right`` whose result would pass the cap, before it is computed."""
    if operator in ("*", "**") and isinstance(left, int) and isinstance(right, int):
        _check_number(operator, left, right, budget)
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(times, int) and times > 0:
                if isinstance(seq, _TEXT):
                    budget.check(f"repeating a {type(seq).__name__} {times} times", len(seq) * times)
                elif isinstance(seq, (list, tuple)):
                    budget.check(f"repeating a {type(seq).__name__} {times} times", 8 * len(seq) * times)
    elif operator == "+":
        if isinstance(left, _TEXT) and isinstance(right, _TEXT):
            budget.check("adding text", len(left) + len(right))
        elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            budget.check(f"adding {type(left).__name__}s", 8 * (len(left) + len(right)))
    elif operator == "%" and isinstance(left, _TEXT):
        template = left if isinstance(left, str) else bytes(left).decode("latin-1")
        values = (
            right.values() if isinstance(right, Mapping) else right if isinstance(right, tuple) else (right,)
        )
        _formatted(template, "printf", values, budget)


# ----------------------------------------------------------------------- the environment


class _Namespace(Namespace):
    """``namespace()`` whose overwritten text attribute gives its text back to the budget
    when the namespace held the last reference to it (rule 2): the text is freed now.

    Only text: every string a render makes is charged when made (a string it did not make
    is a constant or data, held elsewhere too), so nothing is given back that was not
    charged. A list or an object may be a literal, made without a charge."""

    def __setitem__(self, name: str, value: Any) -> None:
        attrs = self._Namespace__attrs
        old = attrs.get(name)
        attrs[name] = value
        # references: the name ``old`` and the argument of getrefcount; nothing else holds it
        if type(old) is str and sys.getrefcount(old) <= 2:
            current().give_back(sys.getsizeof(old))


class _Metered:
    """A for-loop's iterable: each iteration is a step of the time budget (rule 3)."""

    __slots__ = ("iterable",)

    def __init__(self, iterable: Any) -> None:
        self.iterable = iterable

    def __len__(self) -> int:
        return len(self.iterable)

    def __iter__(self) -> Iterator[Any]:
        step = current().step
        for item in self.iterable:
            step()
            yield item


def _metered_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a filter) as a step of the budget: predicted (rule 1), run, then charged (rule 2)."""
    skip = 0 if _PassArg.from_obj(fn) is None else 1  # the environment or context passed first
    printing = name in _PRINTING_FILTERS
    what = f"the result of the {name} filter"

    @functools.wraps(fn)
    def filtered(*args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        budget.step()
        if len(args) > skip:
            target, rest = args[skip], args[skip + 1 :]
            if name == "format":  # the filter formats with %
                predict_binop("%", target, dict(kwargs) or rest, budget)
            elif rest or kwargs or printing or name == "list":
                predict_call(name, target, rest, kwargs, budget)
            if printing:
                budget.check(
                    f"the {name} filter's text", text_size(target, budget.cap, _indent(rest, kwargs))
                )
        return budget.charge(what, fn(*args, **kwargs))

    return filtered


def _indent(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """The ``indent`` of a ``tojson``/``json`` filter call (spaces, or the text's length)."""
    indent = kwargs.get("indent", args[0] if args else 0)
    if isinstance(indent, str):
        return len(indent)
    return indent if isinstance(indent, int) and not isinstance(indent, bool) and indent > 0 else 0


#: filters that print a whole value (nested lists and objects included)
_PRINTING_FILTERS = frozenset({"tojson", "pprint", "urlencode", "xmlattr", "string", "json", "join"})


@jinja2.pass_environment
def _sum(
    environment: Any, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0
) -> Any:
    """Jinja's ``sum``, adding one item at a time through the checked ``+`` (rules 1-3):
    adding lists no longer copies a growing list in one uncheckable call."""
    total = start
    getter = (lambda item: environment.getitem(item, attribute)) if attribute is not None else None
    for item in iterable:
        total = environment.call_binop(None, "+", total, getter(item) if getter else item)
    return total


#: bytes charged for an entry added to a list, dict or set (its slot, a dict's hash and key)
_ENTRY = 64


def _held(value: Any) -> int:
    """What a container keeps when ``value`` is added to it (``append(x)``), or its items
    (``extend(items)``, ``update(mapping)``)."""
    if isinstance(value, Mapping):
        return sum(size_of(k) + size_of(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(size_of(v) for v in value)
    return size_of(value)


class BudgetedEnvironment(SandboxedEnvironment):
    """The sandbox with rules 1-3: operators, calls, filters, slices, loops and printed
    pieces all go through the render's :class:`RenderBudget`. ``as_text`` is how a value
    prints (a subclass sets it)."""

    intercepted_binops = frozenset({"+", "*", "%", "**"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["namespace"] = _Namespace
        self.filters["sum"] = _sum

    def meter_filters(self) -> None:
        """Wrap every filter registered so far (call once they all are)."""
        for name, fn in list(self.filters.items()):
            self.filters[name] = _metered_filter(name, fn)

    @staticmethod
    def as_text(value: Any) -> Any:
        return value

    def printed(self, value: Any) -> Any:
        """The ``finalize`` of a printed value: its text, checked and charged (the output or
        the block it is printed into holds it)."""
        budget = _BUDGET.get()
        budget.step()
        text = value if type(value) is str else self._text_of(value, budget)
        return budget.charge("a printed value", text) if isinstance(text, str) else text

    def _text_of(self, value: Any, budget: RenderBudget) -> Any:
        if not isinstance(value, (int, float)) and value is not None:
            budget.check("printing a value", text_size(value, budget.cap))
        return self.as_text(value)

    def literal(self, text: str) -> str:
        """Template text written at runtime (a loop of literal text into ``{% set %}`` grows)."""
        return _BUDGET.get().charge("the template's text", text)

    def text_join(self, parts: Iterable[Any]) -> str:
        """``a ~ b ~ ...``: each part as it prints, refused before joining past the cap."""
        return self.joined(parts, "", "joining text with ~")

    def joined(self, parts: Iterable[Any], separator: str, what: str) -> str:
        """``parts`` as they print, joined by ``separator``: refused before joining when the
        result would pass the cap; only the joined text is charged (a part exists already,
        or is charged when printing made it)."""
        budget = _BUDGET.get()
        budget.step()
        texts = []
        total = 0
        for part in parts:
            text = part if type(part) is str else self._text_of(part, budget)
            if text is not part and isinstance(text, str):
                budget.charge("a printed value", text)
            text = str(text)
            total += len(text) + len(separator)
            if total > budget.cap:
                raise budget.too_large(what, total)
            texts.append(text)
        return budget.charge(what, separator.join(texts))

    def metered(self, iterable: Any) -> _Metered:
        return _Metered(iterable)

    def sliced(self, obj: Any, key: slice) -> Any:
        """``x[a:b]``: a copy, charged (rule 2)."""
        return current().charge("a slice", obj[key])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        budget.step()
        predict_binop(operator, left, right, budget)
        return budget.charge(f"the result of {operator}", super().call_binop(context, operator, left, right))

    def wrap_str_format(self, value: Any) -> Any:
        """Jinja's sandboxed ``str.format``/``format_map``, predicted first (rule 1)."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template, name = value.__self__, value.__name__

        def checked(*args: Any, **kwargs: Any) -> Any:
            predict_call(name, template, args, kwargs, current())
            return wrapped(*args, **kwargs)

        return checked

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.step()
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        if isinstance(owner, _TEXT):
            if name == "join" and args and not isinstance(args[0], (list, tuple)):
                args = (list(args[0]), *args[1:])  # an iterator: its items are needed to predict
            predict_call(name, owner, args, kwargs, budget)
        grows = owner if isinstance(owner, (list, dict, set)) and not isinstance(owner, Namespace) else None
        before = len(grows) if grows is not None else 0
        if name == "generate_lorem_ipsum":
            count, longest = (
                kwargs.get("n", args[0] if args else 5),
                kwargs.get("max", args[3] if len(args) > 3 else 100),
            )
            if isinstance(count, int) and isinstance(longest, int):
                budget.check("lipsum(...)", count * longest * 12)
        result = super().call(__context, __obj, *args, **kwargs)
        if grows is not None and len(grows) > before:
            # the new entries, and what they hold as if it were new (it is kept alive now)
            budget.check(f"the {type(grows).__name__} grown by {name}", size_of(grows))
            budget.grow(_ENTRY * (len(grows) - before) + sum(_held(v) for v in (*args, *kwargs.values())))
        if result is None or result is owner:
            return result
        return budget.charge(f"the result of {name or 'a call'}", result)


def _is_metered(node: jnodes.Node) -> bool:
    return (
        isinstance(node, jnodes.Call)
        and isinstance(node.node, jnodes.EnvironmentAttribute)
        and node.node.name == "metered"
    )


class BudgetedCodeGenerator(CodeGenerator):
    """Compiles for-loop iterables, slices and template text through the environment's
    budget hooks (:class:`BudgetedEnvironment`)."""

    def visit_For(self, node: jnodes.For, frame: Any) -> None:
        if not _is_metered(node.iter):
            node.iter = jnodes.Call(
                jnodes.EnvironmentAttribute("metered"), [node.iter], [], None, None, lineno=node.iter.lineno
            )
        super().visit_For(node, frame)

    def visit_Getitem(self, node: jnodes.Getitem, frame: Any) -> None:
        if not isinstance(node.arg, jnodes.Slice):
            return super().visit_Getitem(node, frame)
        self.write("environment.sliced(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for i, part in enumerate((node.arg.start, node.arg.stop, node.arg.step)):
            self.write(", " if i else "")
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
        self.write("))")

    def visit_Output(self, node: jnodes.Output, frame: Any) -> None:
        self._into_buffer = frame.buffer is not None
        super().visit_Output(node, frame)

    def _output_const_repr(self, group: Iterable[Any]) -> str:
        # Text written into a block (``{% set %}``, a macro) grows it, a loop at a time;
        # text the template yields is counted by the render as output.
        text = super()._output_const_repr(group)
        return f"environment.literal({text})" if getattr(self, "_into_buffer", True) else text
