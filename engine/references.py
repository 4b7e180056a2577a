"""References and templates: resolving values against a run's variable pool.

Rules (README "References"):

1. ``inputs.NAME``, ``sys.NAME``, ``vars.NAME``, ``conversation.NAME`` and ``env.NAME``
   read global inputs, system variables, run variables, conversation variables and
   environment variables; ``NODE.OUTPUT`` (or ``nodes.NODE.OUTPUT`` for ids
   that are not identifiers) reads a node's output. A path follows: ``.key``,
   ``[index]``, ``["key with dots"]``.
2. Values keep their JSON types; nothing is stringified on the way.
3. Anything unresolvable - unknown node, node not run yet, unknown output, missing
   key, index out of range, indexing a non-container - raises
   :class:`~engine.errors.ReferenceFailed` naming the reference. Never an empty string.
4. A reference to a *skipped* node resolves to ``None`` (the branch was not taken).
5. Templates are Jinja2 in a :class:`~jinja2.sandbox.SandboxedEnvironment` with
   ``StrictUndefined``: an undefined name or attribute is an error, not ``""``.
6. In templates, ``x.key`` reads the data first: a key of an object wins over a
   method of the same name (``{{ r.json.items }}`` is the ``items`` key, as
   ``{"ref": "r.json.items"}`` is), for every method name. A method is only reached
   when the data has no such key (``{% for k, v in obj.items() %}``), and printing one
   is an error, never ``<built-in method ...>``.
7. Values print the way builders read them: a string as is, null as empty text, a
   boolean as ``true``/``false``, an object or a list as JSON - in ``{{ ... }}``, in
   ``~`` concatenation and in the ``string`` and ``join`` filters. Never a Python repr
   (``None``, ``{'a': 1}``).
8. A template error names the node, the config path of the template and, when a
   value is missing, the reference path that failed and why, in the words of rule 3
   (``config.template: undefined value in template of node 't', reference
   'search.json.items[0]': index [0] out of range (empty list)``).
9. A render is bounded: no value it builds is larger than ``max_template_output_bytes``,
   all it builds together stays under ``max_template_memory_bytes``, and it stops after
   ``max_template_seconds`` (:mod:`engine.template_limits`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import meta
from jinja2 import nodes as jnodes

from schemas.types import NodeRunStatus, Ref, Selector

from .errors import ReferenceFailed, TemplateFailed
from .plain_errors import did_you_mean
from .settings import get_settings
from .template_limits import (
    BudgetedCodeGenerator,
    BudgetedEnvironment,
    RenderBudget,
    TemplateTooLarge,
    TemplateTooSlow,
    budget_for,
)

if TYPE_CHECKING:  # annotations only: checking a workflow builds no run record
    from schemas.run import RunState

__all__ = [
    "render_template",
    "resolve_selector",
    "resolve_value",
    "template_env",
    "template_names",
    "template_selectors",
]

_MISSING = object()


def _walk_path(value: Any, sel: Selector, node_id: str | None) -> Any:
    for i, seg in enumerate(sel.path):
        where = f"reference {str(sel)!r}"
        if isinstance(seg, int):
            if not isinstance(value, (list, tuple)):
                raise ReferenceFailed(
                    f"{where}: cannot index {type(value).__name__} with [{seg}] (segment {i + 1} of the path)",
                    node_id=node_id,
                )
            if not -len(value) <= seg < len(value):
                raise ReferenceFailed(
                    f"{where}: index [{seg}] out of range (length {len(value)})", node_id=node_id
                )
            value = value[seg]
        else:
            if isinstance(value, dict):
                if seg not in value:
                    keys = ", ".join(sorted(map(str, value))[:10])
                    raise ReferenceFailed(f"{where}: key {seg!r} not found (keys: {keys})", node_id=node_id)
                value = value[seg]
            elif isinstance(value, str) and seg.isdigit():
                raise ReferenceFailed(f"{where}: use [{seg}] to index, not .{seg}", node_id=node_id)
            else:
                raise ReferenceFailed(
                    f"{where}: cannot read key {seg!r} of {type(value).__name__}", node_id=node_id
                )
    return value


def resolve_selector(state: RunState, sel: Selector, *, node_id: str | None = None) -> Any:
    """Resolve ``sel`` against ``state``; ``node_id`` is the reading node, for errors.

    Returns ``None`` when the referenced node was skipped (rule 4).

    Raises:
        ReferenceFailed: rule 3.
    """
    if sel.scope == "node":
        run = state.find_node_run(sel.node or "")
        if run is None:
            raise ReferenceFailed(f"reference {str(sel)!r}: node {sel.node!r} has not run", node_id=node_id)
        if run.status is NodeRunStatus.skipped:
            return None
        if run.outputs is None:
            raise ReferenceFailed(
                f"reference {str(sel)!r}: node {sel.node!r} has no outputs (status {run.status.value})",
                node_id=node_id,
            )
        pool: Mapping[str, Any] = run.outputs
        scope_name = f"node {sel.node!r}"
    elif sel.scope == "inputs":
        pool, scope_name = state.inputs, "the workflow inputs"
    elif sel.scope == "sys":
        pool, scope_name = state.sys, "the system variables"
    elif sel.scope == "conversation":
        pool, scope_name = state.conversation, "the conversation variables"
    elif sel.scope == "env":
        pool, scope_name = state.env, "the environment variables"
    else:
        pool, scope_name = state.variables, "the run variables"
    value = pool.get(sel.field, _MISSING)
    if value is _MISSING and sel.scope == "env":
        raise ReferenceFailed(
            f"reference {str(sel)!r}: environment variable {sel.field!r} is not set (a secret "
            "with no value: set it in the workflow's Environment section)",
            node_id=node_id,
        )
    if value is _MISSING:
        raise ReferenceFailed(
            f"reference {str(sel)!r}: {scope_name} has no field {sel.field!r} (has: {', '.join(sorted(pool)) or 'none'})",
            node_id=node_id,
        )
    return _walk_path(value, sel, node_id) if sel.path else value


def resolve_value(state: RunState, value: Any, *, node_id: str | None = None) -> Any:
    """Resolve a config value: a :class:`Ref`, or a literal possibly holding refs at any depth."""
    if isinstance(value, Ref):
        return resolve_selector(state, value.selector, node_id=node_id)
    if isinstance(value, dict):
        return {k: resolve_value(state, v, node_id=node_id) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_value(state, v, node_id=node_id) for v in value]
    return value


# ----------------------------------------------------------------------- templates


def _tojson(value: Any, indent: int | None = None) -> str:
    # Unlike jinja's |tojson this does not HTML-escape: output goes to models and APIs.
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


class _EnvValues(dict):
    """``env`` as templates read it: a missing name is a secret that is not set."""


class _Undefined(jinja2.StrictUndefined):
    """Strict undefined whose message says what *is* there (keys of the object read)."""

    @property
    def _undefined_message(self) -> str:
        obj, name = self._undefined_obj, self._undefined_name
        if isinstance(obj, _EnvValues) and name is not None:
            return (
                f"environment variable {name!r} is not set (a secret with no value: set it in the workflow's "
                f"Environment section)"
            )
        if isinstance(obj, dict) and name is not None:
            keys = ", ".join(sorted(map(str, obj))[:10]) or "none"
            return f"key {name!r} not found (keys: {keys})"
        return super()._undefined_message


class _NotData(jinja2.exceptions.TemplateRuntimeError):
    """A method was printed where a value was expected (rule 6)."""


def to_text(value: Any) -> Any:
    """How a value prints in a template (rule 7): a string as is, null as ``""``, a boolean
    as ``true``/``false``, an object or a list as JSON; other values unchanged (numbers).
    Undefined values pass through so that printing them still raises.

    Raises:
        jinja2.TemplateRuntimeError: the value is a method (a key that is not in the data).
    """
    if isinstance(value, str) or isinstance(value, jinja2.Undefined):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(
            value
            if isinstance(value, (dict, list))
            else (dict(value) if isinstance(value, Mapping) else list(value)),
            ensure_ascii=False,
            default=str,
        )
    if callable(value):
        owner = type(getattr(value, "__self__", None)).__name__
        name = getattr(value, "__name__", "?")
        raise _NotData(f"{name!r} is a method of {owner}, not a value: the data has no key {name!r}")
    return value


def _join(value: Any, d: str = "", attribute: str | int | None = None) -> str:
    env = template_env()
    items: Iterator[Any] = iter(value)
    if attribute is not None:
        items = (env.getitem(item, attribute) for item in items)
    return env.joined(items, str(d), "the join filter's text")


class _CodeGenerator(BudgetedCodeGenerator):
    """Compiles ``a ~ b`` with :func:`to_text` for each part (Jinja's own join uses ``str``)."""

    def visit_Concat(self, node: jnodes.Concat, frame: Any) -> None:
        self.write("environment.text_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Environment(BudgetedEnvironment):
    """The sandbox with the data-first lookup of rule 6, the printing of rule 7 and the
    limits of :mod:`engine.template_limits` (rule 9)."""

    code_generator_class = _CodeGenerator
    as_text = staticmethod(to_text)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                if attribute in obj:
                    return obj[attribute]
            except TypeError:
                pass
        return super().getattr(obj, attribute)


@functools.cache
def template_env() -> _Environment:
    """The one sandboxed Jinja2 environment (no autoescape, strict undefined, rules 6-7, 9)."""
    env = _Environment(undefined=_Undefined, autoescape=False, keep_trailing_newline=True)
    env.finalize = env.printed
    env.filters["json"] = _tojson
    env.filters["string"] = lambda value: str(to_text(value))
    env.filters["join"] = _join
    env.meter_filters()
    return env


@functools.lru_cache(maxsize=4096)
def _compiled(source: str) -> tuple[jinja2.Template, frozenset[str]]:
    env = template_env()
    ast = env.parse(source)
    names = frozenset(meta.find_undeclared_variables(ast)) - set(env.globals)
    return env.from_string(ast), names


#: ``{{ name }}`` / ``{{ name.key.key }}``: the one expression a plain template holds
_PLAIN_EXPR = re.compile(r"\{\{[ \t\n]*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)[ \t\n]*\}\}")
#: where Jinja starts an expression, a statement or a comment
_JINJA_OPEN = re.compile(r"\{(?=[{%#])")
#: names a plain template may not start with: Jinja's constants, operators and special names
_NOT_PLAIN = frozenset(
    {
        "true",
        "false",
        "none",
        "True",
        "False",
        "None",
        "and",
        "or",
        "not",
        "in",
        "is",
        "if",
        "else",
        "elif",
        "self",
        "caller",
        "varargs",
        "kwargs",
        "loop",
        "super",
    }
)

#: a plain template's pieces: text, or ``(name, keys)`` of one ``{{ name.key... }}``
_Plain = tuple[str | tuple[str, tuple[str, ...]], ...]


@functools.lru_cache(maxsize=16384)
def _plain(source: str) -> _Plain | None:
    """The pieces of ``source`` when it is *plain* - text and ``{{ name.key... }}``
    lookups only, no filter, statement, comment or carriage return - else None.

    Plumbing nodes mostly hold such templates (``{{ greet.output }}``), and compiling one
    to Python costs Jinja about a millisecond, each distinct text once: a workflow of ten
    thousand of them would spend seconds there. A plain template renders (and is checked)
    without it, with the same lookups and printing as the sandbox (rules 6-7, 9);
    anything else, or a lookup that does not find its key, takes the Jinja path."""
    if "\r" in source:
        return None  # Jinja normalizes newlines in the text
    pieces: list[str | tuple[str, tuple[str, ...]]] = []
    starts = set()
    at = 0
    for match in _PLAIN_EXPR.finditer(source):
        head, *keys = match.group(1).split(".")
        if head in _NOT_PLAIN or head in template_env().globals:
            return None
        if match.start() > at:
            pieces.append(source[at : match.start()])
        pieces.append((head, tuple(keys)))
        starts.add(match.start())
        at = match.end()
    if at < len(source):
        pieces.append(source[at:])
    # every place Jinja would open a tag must be one of these lookups ("{{{ a }}" is not)
    if any(found.start() not in starts for found in _JINJA_OPEN.finditer(source)):
        return None
    return tuple(pieces)


class _NotPlain(Exception):
    """A plain template's lookup that only the Jinja path answers (a missing key, a skipped node)."""


def _render_plain(pieces: _Plain, context: Mapping[str, Any], budget: RenderBudget) -> str:
    """Render a plain template as the sandbox would: a key of a mapping read, the value
    printed by the environment's ``finalize`` (checked and charged to ``budget``), the
    output capped as :func:`_render_capped` caps it.

    Raises:
        _NotPlain: a name or key is missing (the Jinja path then says why), or a value is
        not a mapping.
    """
    env = template_env()
    parts: list[str] = []
    size, cap = 0, budget.cap
    for piece in pieces:
        if isinstance(piece, str):
            text = piece
        else:
            head, keys = piece
            value = context.get(head, _MISSING)
            for key in keys:
                if type(value) is not dict or key not in value:
                    raise _NotPlain(key)
                value = value[key]
            if value is _MISSING:
                raise _NotPlain(head)
            text = str(env.printed(value))
        parts.append(text)
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size > cap:
            raise budget.too_large("the output", size)
    return "".join(parts)


def _plain_selectors(pieces: _Plain) -> Iterator[tuple[str, str | None]]:
    """:func:`template_selectors` of a plain template, as the Jinja AST walk finds them:
    ``(name, first key)`` for a lookup with a key (``nodes.ID.key``: ``("nodes.ID",
    "key")``); a whole name, or ``nodes.ID`` alone, yields nothing."""
    for piece in pieces:
        if isinstance(piece, str):
            continue
        head, keys = piece
        if head == "nodes":
            if len(keys) >= 2:
                yield f"nodes.{keys[0]}", keys[1]
        elif keys:
            yield head, keys[0]


def template_names(source: str) -> frozenset[str]:
    """Top-level names a template reads (excluding Jinja globals).

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    pieces = _plain(source)
    if pieces is not None:
        return frozenset(piece[0] for piece in pieces if type(piece) is not str)
    return _compiled(source)[1]


def template_selectors(source: str) -> Iterator[tuple[str, str | None]]:
    """Yield ``(head, field)`` for every ``name.attr`` / ``name["key"]`` access in a template.

    ``head`` is a top-level name; for ``nodes["id"].field`` it is ``nodes.id``. ``field``
    is None when the name is used whole (``{{ n1 }}``) or with a dynamic key.

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    pieces = _plain(source)
    if pieces is not None:
        yield from _plain_selectors(pieces)
        return
    ast = template_env().parse(source)
    seen_inner: set[int] = set()

    def key_of(node: jnodes.Node) -> str | None:
        if isinstance(node, jnodes.Getattr):
            return node.attr
        if (
            isinstance(node, jnodes.Getitem)
            and isinstance(node.arg, jnodes.Const)
            and isinstance(node.arg.value, str)
        ):
            return node.arg.value
        return None

    for node in ast.find_all((jnodes.Getattr, jnodes.Getitem)):
        if id(node) in seen_inner or not isinstance(node, (jnodes.Getattr, jnodes.Getitem)):
            continue
        inner = node.node
        if isinstance(inner, jnodes.Name) and inner.ctx == "load":
            if inner.name == "nodes":
                continue  # handled one level up
            yield inner.name, key_of(node)
        elif isinstance(inner, (jnodes.Getattr, jnodes.Getitem)) and isinstance(inner.node, jnodes.Name):
            if inner.node.name == "nodes":
                node_key = key_of(inner)
                if node_key is not None:
                    seen_inner.add(id(inner))
                    yield f"nodes.{node_key}", key_of(node)


def template_context(
    state: RunState, names: frozenset[str], extra: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Build the render context for the names a template reads (not the whole pool)."""
    ctx: dict[str, Any] = {}
    for name in names:
        if extra is not None and name in extra:
            ctx[name] = extra[name]
        elif name == "inputs":
            ctx[name] = state.inputs
        elif name == "sys":
            ctx[name] = state.sys
        elif name == "vars":
            ctx[name] = state.variables
        elif name == "conversation":
            ctx[name] = state.conversation
        elif name == "env":
            ctx[name] = _EnvValues(state.env)
        elif name == "nodes":
            ctx[name] = _NodesView(state)
        else:
            run = state.find_node_run(name)
            if run is not None:
                ctx[name] = node_view(run)
    return ctx


def node_view(run: Any) -> Any:
    """A node run's outputs as templates read them: a skipped node's fields all read as
    null (rule 4); a node with no outputs reads as an empty object."""
    if run.status is NodeRunStatus.skipped:
        return _SkippedOutputs()
    return run.outputs if run.outputs is not None else {}


class _NodesView(Mapping[str, Any]):
    """``nodes['id']`` in templates: node outputs looked up lazily through the scopes."""

    def __init__(self, state: RunState) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        run = self._state.find_node_run(key)
        if run is None:
            raise KeyError(key)
        return node_view(run)

    def __iter__(self) -> Iterator[str]:
        return iter(self._state.node_runs)

    def __len__(self) -> int:
        return len(self._state.node_runs)


class _SkippedOutputs(dict):
    """Outputs of a skipped node in a template: every field reads as None (rule 4)."""

    def __missing__(self, key: str) -> None:
        return None

    def __getattr__(self, key: str) -> None:
        return None


def render_template(
    state: RunState,
    source: str,
    *,
    extra: Mapping[str, Any] | None = None,
    node_id: str | None = None,
    field: str = "template",
    max_bytes: int | None = None,
    max_memory_bytes: int | None = None,
    max_seconds: float | None = None,
) -> str:
    """Render ``source`` with the run's references and ``extra`` names (rules 5-9).

    ``max_bytes``: the cap of the output and of every value built on the way;
    ``max_memory_bytes``: what the render may build in all; ``max_seconds``: how long it
    may run (defaults: the operator's ``max_template_output_bytes``,
    ``max_template_memory_bytes`` and ``max_template_seconds``). Rendering stops as soon
    as one is passed.

    Raises:
        TemplateFailed: syntax error, undefined name/attribute (naming the reference path
            that failed and why), a printed method, sandbox violation; a limit passed
            (reason ``output_too_large`` or ``template_timeout``, naming the setting); the
            message names the field (config path) and the node.
    """
    of = f" of node {node_id!r}" if node_id else ""
    if max_bytes is None or max_memory_bytes is None or max_seconds is None:
        settings = get_settings()
        max_bytes = settings.max_template_output_bytes if max_bytes is None else max_bytes
        max_memory_bytes = (
            settings.max_template_memory_bytes if max_memory_bytes is None else max_memory_bytes
        )
        max_seconds = settings.max_template_seconds if max_seconds is None else max_seconds
    pieces = _plain(source)
    context: dict[str, Any] | None = None
    if pieces is not None:
        context = template_context(state, template_names(source), extra)
        try:
            with budget_for(max_bytes, max_memory_bytes, max_seconds) as budget:
                return _render_plain(pieces, context, budget)
        except _NotPlain:
            pass  # the Jinja path renders it, or says what is missing
        except TemplateTooLarge as exc:
            raise TemplateFailed(
                f"{field}: template{of} output too large: {exc.message}",
                node_id=node_id,
                reason="output_too_large",
            ) from None
        except (TemplateTooSlow, _NotData):
            pass  # the Jinja path reports it in its words
    try:
        template, names = _compiled(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateFailed(
            f"{field}: template syntax error{of} at line {exc.lineno}: {exc.message}", node_id=node_id
        ) from exc
    if context is None:
        context = template_context(state, names, extra)
    try:
        with budget_for(max_bytes, max_memory_bytes, max_seconds) as budget:
            return _render_capped(template, context, budget)
    except TemplateTooLarge as exc:
        raise TemplateFailed(
            f"{field}: template{of} output too large: {exc.message}",
            node_id=node_id,
            reason="output_too_large",
        ) from None
    except TemplateTooSlow as exc:
        raise TemplateFailed(
            f"{field}: template{of} stopped: {exc.message}", node_id=node_id, reason="template_timeout"
        ) from None
    except (jinja2.UndefinedError, _NotData) as exc:
        found = _diagnose(source, context, names, state.node_runs)
        where = f"{of}, reference {found[0]!r}: {found[1]}" if found else f"{of}: {exc.message}"
        raise TemplateFailed(f"{field}: undefined value in template{where}", node_id=node_id) from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateFailed(
            f"{field}: template{of} not allowed by the sandbox: {exc}", node_id=node_id
        ) from None
    except TemplateFailed:
        raise
    except Exception as exc:
        raise TemplateFailed(
            f"{field}: template{of} failed: {type(exc).__name__}: {exc}", node_id=node_id
        ) from None


def _render_capped(template: jinja2.Template, context: dict[str, Any], budget: RenderBudget) -> str:
    """Render piece by piece, stopping once the output passes the cap in UTF-8 bytes (a
    loop that prints forever, a huge value)."""
    parts: list[str] = []
    size, cap = 0, budget.cap
    for piece in template.generate(context):
        parts.append(piece)
        size += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        if size > cap:
            raise budget.too_large("the output", size)
    return "".join(parts)


# ----------------------------------------------------------------------- diagnosing a failed render

_GUARDS = frozenset({"default", "d"})


def _chain(node: jnodes.Node) -> tuple[str, list[tuple[str, Any]]] | None:
    """``(root name, [("attr"|"item", key), ...])`` of a lookup chain with constant keys, cut
    before the first dynamic key; None when it does not start at a name."""
    steps: list[tuple[str, Any]] = []
    while isinstance(node, (jnodes.Getattr, jnodes.Getitem)):
        if isinstance(node, jnodes.Getattr):
            steps.append(("attr", node.attr))
        elif isinstance(node.arg, jnodes.Const) and isinstance(node.arg.value, (str, int)):
            steps.append(("item", node.arg.value))
        elif (
            isinstance(node.arg, jnodes.Neg)
            and isinstance(node.arg.node, jnodes.Const)
            and isinstance(node.arg.node.value, int)
        ):
            steps.append(("item", -node.arg.node.value))  # x[-1] parses as a negated constant
        else:
            steps.clear()  # a dynamic key: only the part before it can be checked
        node = node.node
    if not isinstance(node, jnodes.Name):
        return None
    return node.name, steps[::-1]


def _path_text(root: str, steps: list[tuple[str, Any]]) -> str:
    text = root
    for _, key in steps:
        if isinstance(key, int):
            text += f"[{key}]"
        elif key.isidentifier():
            text += f".{key}"
        else:
            text += f"[{json.dumps(key, ensure_ascii=False)}]"
    return text


def _why(value: Any, key: Any) -> str:
    """Why ``key`` cannot be read from ``value``, in the words of :func:`_walk_path`."""
    if value is None:
        return f"cannot read {key!r} of null"
    if isinstance(value, _EnvValues):
        return f"environment variable {key!r} is not set (a secret with no value: set it in the Environment section)"
    if isinstance(value, Mapping) and not isinstance(key, int):
        keys = ", ".join(sorted(map(str, value))[:10]) or "none"
        return f"key {key!r} not found (keys: {keys})"
    if isinstance(value, (list, tuple)) and isinstance(key, int):
        return f"index [{key}] out of range ({f'length {len(value)}' if value else 'empty list'})"
    if isinstance(key, int):
        return f"cannot index {type(value).__name__} with [{key}]"
    return f"cannot read key {key!r} of {type(value).__name__}"


def _walk_chain(
    context: Mapping[str, Any], root: str, steps: list[tuple[str, Any]], called: bool
) -> tuple[str, str] | None:
    """Follow one chain as the template does; ``(path so far, why)`` at the first step that fails."""
    env = template_env()
    value = context[root]
    for i, (kind, key) in enumerate(steps):
        nxt = env.getattr(value, key) if kind == "attr" and isinstance(key, str) else env.getitem(value, key)
        if isinstance(nxt, jinja2.Undefined):
            return _path_text(root, steps[: i + 1]), _why(value, key)
        if (
            callable(nxt)
            and isinstance(value, (Mapping, list, tuple))
            and not (called and i == len(steps) - 1)
        ):
            return _path_text(root, steps[: i + 1]), (
                f"{_why(value, key)}; {key!r} is a method of {type(value).__name__}, not data"
            )
        value = nxt
    return None


def _diagnose(
    source: str, context: Mapping[str, Any], names: frozenset[str], ran: Collection[str] = ()
) -> tuple[str, str] | None:
    """The first reference of ``source`` that cannot be read, as ``(path, why)``; lookups guarded
    by ``default`` or an ``is defined`` test are left out. None when no lookup explains the error.
    An unknown name gets the closest of ``ran`` (the ids of the nodes that ran), since a
    misspelt node id is its usual cause."""
    ast = template_env().parse(source)
    parents: dict[int, jnodes.Node] = {}
    for owner in ast.find_all(jnodes.Node):
        for child in owner.iter_child_nodes():
            parents[id(child)] = owner
    for name in ast.find_all(jnodes.Name):
        if name.ctx == "load" and name.name in names and name.name not in context:
            hint = did_you_mean(name.name, ran)
            return name.name, f"no such name (not a node that has run, nor inputs, sys, vars or nodes){hint}"
    for node in ast.find_all((jnodes.Getattr, jnodes.Getitem)):
        parent = parents.get(id(node))
        if isinstance(parent, (jnodes.Getattr, jnodes.Getitem)) and parent.node is node:
            continue  # not the whole chain
        chain = _chain(node)
        if chain is None or chain[0] not in context or _guarded(node, parents):
            continue
        found = _walk_chain(
            context, chain[0], chain[1], isinstance(parent, jnodes.Call) and parent.node is node
        )
        if found is not None:
            return found
    return None


def _guarded(node: jnodes.Node, parents: dict[int, jnodes.Node]) -> bool:
    parent = parents.get(id(node))
    while parent is not None:
        if isinstance(parent, jnodes.Filter) and parent.name in _GUARDS and parent.node is node:
            return True
        if isinstance(parent, jnodes.Test) and parent.name in ("defined", "undefined", "none"):
            return True
        if not isinstance(parent, (jnodes.Getattr, jnodes.Getitem)):
            return False
        node = parent
        parent = parents.get(id(node))
    return False
