"""References and templates: resolving values against a run's variable pool.

Rules (README "References"):

1. ``inputs.NAME``, ``sys.NAME`` and ``vars.NAME`` read global inputs, system
   variables and run variables; ``NODE.OUTPUT`` (or ``nodes.NODE.OUTPUT`` for ids
   that are not identifiers) reads a node's output. A path follows: ``.key``,
   ``[index]``, ``["key with dots"]``.
2. Values keep their JSON types; nothing is stringified on the way.
3. Anything unresolvable - unknown node, node not run yet, unknown output, missing
   key, index out of range, indexing a non-container - raises
   :class:`~engine.errors.ReferenceFailed` naming the reference. Never an empty string.
4. A reference to a *skipped* node resolves to ``None`` (the branch was not taken).
5. Templates are Jinja2 in a :class:`~jinja2.sandbox.SandboxedEnvironment` with
   ``StrictUndefined``: an undefined name or attribute is an error, not ``""``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterator, Mapping

import jinja2
from jinja2 import meta, nodes as jnodes
from jinja2.sandbox import SandboxedEnvironment

from schemas.run import RunState
from schemas.types import NodeRunStatus, Ref, Selector

from .errors import ReferenceFailed, TemplateFailed

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
                raise ReferenceFailed(f"{where}: index [{seg}] out of range (length {len(value)})", node_id=node_id)
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
    else:
        pool, scope_name = state.variables, "the run variables"
    value = pool.get(sel.field, _MISSING)
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


class _Undefined(jinja2.StrictUndefined):
    """Strict undefined whose message says what *is* there (keys of the object read)."""

    @property
    def _undefined_message(self) -> str:
        obj, name = self._undefined_obj, self._undefined_name
        if isinstance(obj, dict) and name is not None:
            keys = ", ".join(sorted(map(str, obj))[:10]) or "none"
            return f"key {name!r} not found (keys: {keys})"
        return super()._undefined_message


@functools.cache
def template_env() -> SandboxedEnvironment:
    """The one sandboxed Jinja2 environment (no autoescape, strict undefined)."""
    env = SandboxedEnvironment(undefined=_Undefined, autoescape=False, keep_trailing_newline=True)
    env.filters["json"] = _tojson
    return env


@functools.lru_cache(maxsize=4096)
def _compiled(source: str) -> tuple[jinja2.Template, frozenset[str]]:
    env = template_env()
    ast = env.parse(source)
    names = frozenset(meta.find_undeclared_variables(ast)) - set(env.globals)
    return env.from_string(ast), names


def template_names(source: str) -> frozenset[str]:
    """Top-level names a template reads (excluding Jinja globals).

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    return _compiled(source)[1]


def template_selectors(source: str) -> Iterator[tuple[str, str | None]]:
    """Yield ``(head, field)`` for every ``name.attr`` / ``name["key"]`` access in a template.

    ``head`` is a top-level name; for ``nodes["id"].field`` it is ``nodes.id``. ``field``
    is None when the name is used whole (``{{ n1 }}``) or with a dynamic key.

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    ast = template_env().parse(source)
    seen_inner: set[int] = set()

    def key_of(node: jnodes.Node) -> str | None:
        if isinstance(node, jnodes.Getattr):
            return node.attr
        if isinstance(node, jnodes.Getitem) and isinstance(node.arg, jnodes.Const) and isinstance(node.arg.value, str):
            return node.arg.value
        return None

    for node in ast.find_all((jnodes.Getattr, jnodes.Getitem)):
        if id(node) in seen_inner:
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


def template_context(state: RunState, names: frozenset[str], extra: Mapping[str, Any] | None) -> dict[str, Any]:
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
        elif name == "nodes":
            ctx[name] = _NodesView(state)
        else:
            run = state.find_node_run(name)
            if run is not None:
                ctx[name] = _node_view(run)
    return ctx


def _node_view(run: Any) -> Any:
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
        return _node_view(run)

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
) -> str:
    """Render ``source`` with the run's references and ``extra`` names.

    Raises:
        TemplateFailed: syntax error, undefined name/attribute, sandbox violation;
            the message names the node and field.
    """
    try:
        template, names = _compiled(source)
        return template.render(template_context(state, names, extra))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateFailed(f"{field}: template syntax error at line {exc.lineno}: {exc.message}", node_id=node_id) from exc
    except jinja2.UndefinedError as exc:
        raise TemplateFailed(f"{field}: undefined value in template: {exc.message}", node_id=node_id) from exc
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateFailed(f"{field}: template not allowed by the sandbox: {exc}", node_id=node_id) from exc
    except TemplateFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - any render failure is the template's
        raise TemplateFailed(f"{field}: template failed: {type(exc).__name__}: {exc}", node_id=node_id) from exc
