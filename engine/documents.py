"""A workflow document as the compiler takes it: parsed from JSON text or a model, and
within the operator's caps (``Settings.max_document_bytes``/``max_document_depth``/
``max_nodes``/``max_id_length``/``max_name_length``) before any other pass looks at it,
so a hostile document costs one cheap pass and is never echoed back.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from schemas.workflow import Workflow

from .errors import CompileError, Problem
from .settings import Settings, get_settings

__all__ = ["as_document", "check_document_limits"]


def as_document(source: Workflow | Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    """The document as a dict, within the document caps (:func:`check_document_limits`)."""
    settings = get_settings()
    if isinstance(source, Workflow):
        return source.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(source, (str, bytes)):
        if len(source) > settings.max_document_bytes:
            raise CompileError([_too_large(len(source), settings.max_document_bytes)])
        try:
            doc = json.loads(source)
        except json.JSONDecodeError as exc:
            raise CompileError([Problem("invalid_document", f"not valid JSON: {exc}")]) from exc
        except RecursionError:
            raise CompileError([_too_deep(settings.max_document_depth)]) from None
        if not isinstance(doc, dict):
            raise CompileError([Problem("invalid_document", "a workflow must be a JSON object")])
        source = doc
    doc = dict(source)
    problems = check_document_limits(doc, settings)
    if problems:
        raise CompileError(problems)
    return doc


def _too_deep(cap: int, path: str | None = None) -> Problem:
    return Problem("document_too_deep", f"objects and arrays are nested more than max_document_depth={cap} levels",
                   path=path)


def _too_large(size: int, cap: int) -> Problem:
    return Problem("document_too_large", f"the document is at least {size} bytes as JSON; the cap "
                                         f"max_document_bytes is {cap}")


def _path_of(link: tuple[Any, Any] | None) -> str:
    """``nodes[3].config.x`` from the chain of (parent link, key) pairs of a container."""
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in reversed(keys)).lstrip(".")


def _shape_problem(doc: Mapping[str, Any], settings: Settings) -> Problem | None:
    """The first cap of the document's shape it exceeds: nesting deeper than
    ``max_document_depth`` (with the path where it does), or a JSON size over
    ``max_document_bytes``. The size is counted from the parsed values (string lengths,
    keys, punctuation), a lower bound of the text's size, because a document handed over
    already parsed (an API body, a CLI file) must meet the same cap as JSON text."""
    depth_cap, size_cap = settings.max_document_depth, settings.max_document_bytes
    size = 0
    stack: list[tuple[Any, int, tuple[Any, Any] | None]] = [(doc, 1, None)]
    while stack:
        value, depth, link = stack.pop()
        if depth > depth_cap:
            return _too_deep(depth_cap, _path_of(link) or None)
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        size += 1 + len(value)  # brackets and commas
        for key, item in pairs:
            if not isinstance(key, int):
                size += len(key) + 3  # quotes and colon
            if isinstance(item, str):
                size += len(item) + 2
            elif isinstance(item, (dict, list)):
                if item:
                    stack.append((item, depth + 1, (link, key)))
                else:
                    size += 2
            else:
                size += 4 if item is None or item is True else 5 if item is False else 1
        if size > size_cap:
            return _too_large(size, size_cap)
    return None


def check_document_limits(doc: Mapping[str, Any], settings: Settings) -> list[Problem]:
    """Problems of a document beyond the operator's caps (README "Limits"): nesting deeper
    than ``max_document_depth``, a JSON size over ``max_document_bytes``, more than
    ``max_nodes`` nodes, ids longer than ``max_id_length``, names or descriptions longer
    than ``max_name_length``. Checked before anything else, so a hostile document costs
    one pass and is never echoed back whole.
    """
    shape = _shape_problem(doc, settings)
    if shape is not None:
        return [shape]
    problems: list[Problem] = []
    nodes, edges = doc.get("nodes"), doc.get("edges")
    if isinstance(nodes, list) and len(nodes) > settings.max_nodes:
        problems.append(Problem("too_many_nodes", f"{len(nodes)} nodes; the cap max_nodes is {settings.max_nodes}",
                                path="nodes"))
    # One pass over every node and edge with the caps hoisted: a 5000-node document has
    # 10000 items, so a call and a list per item showed in the compile time.
    caps = (("id", settings.max_id_length, "max_id_length"),
            ("name", settings.max_name_length, "max_name_length"),
            ("description", settings.max_name_length, "max_name_length"))
    for where, items in (("nodes", nodes), ("edges", edges)):
        for index, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, dict):
                continue
            for key, cap, name in caps:
                value = item.get(key)
                if isinstance(value, str) and len(value) > cap:
                    problems.append(_too_long(f"{where}[{index}]", key, len(value), cap, name))
    return problems


def _too_long(where: str, key: str, length: int, cap: int, name: str) -> Problem:
    # Never the value, not even its start: it may be anything a client sent (README "Size limits").
    return Problem("too_long", f"{where}.{key} is {length} characters; the cap {name} is {cap}", path=f"{where}.{key}")
