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
            raise CompileError([Problem("document_too_large", f"the document is {len(source)} bytes; the cap "
                                        f"max_document_bytes is {settings.max_document_bytes}")])
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


def check_document_limits(doc: Mapping[str, Any], settings: Settings) -> list[Problem]:
    """Problems of a document beyond the operator's caps (README "Limits"): nesting deeper
    than ``max_document_depth``, more than ``max_nodes`` nodes, ids longer than
    ``max_id_length``, names or descriptions longer than ``max_name_length``, ids that are
    not printable text or that take a name the engine gives its own nodes. Checked before
    anything else, so a hostile document costs one pass and is never echoed back whole.
    """
    depth_cap = settings.max_document_depth
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > depth_cap:
            return [_too_deep(depth_cap)]
        items = value.values() if isinstance(value, dict) else value
        for item in items:
            if isinstance(item, (dict, list)) and item:
                stack.append((item, depth + 1))
    problems: list[Problem] = []
    nodes, edges = doc.get("nodes"), doc.get("edges")
    if isinstance(nodes, list) and len(nodes) > settings.max_nodes:
        problems.append(Problem("too_many_nodes", f"{len(nodes)} nodes; the cap max_nodes is {settings.max_nodes}",
                                path="nodes"))
    for where, items in (("nodes", nodes), ("edges", edges)):
        for index, item in enumerate(items if isinstance(items, list) else ()):
            if isinstance(item, dict):
                problems += _field_limits(item, f"{where}[{index}]", settings)
    return problems


def _field_limits(item: dict[str, Any], where: str, settings: Settings) -> list[Problem]:
    out: list[Problem] = []
    for key, cap, name in (("id", settings.max_id_length, "max_id_length"),
                           ("name", settings.max_name_length, "max_name_length"),
                           ("description", settings.max_name_length, "max_name_length")):
        value = item.get(key)
        if isinstance(value, str) and len(value) > cap:
            # Never the value, not even its start: it may be anything a client sent (README "Size limits").
            out.append(Problem("too_long", f"{where}.{key} is {len(value)} characters; the cap {name} is {cap}",
                               path=f"{where}.{key}"))
    return out
