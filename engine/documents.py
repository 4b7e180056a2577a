"""A workflow document as the compiler takes it: parsed from JSON text or a model, and
within the operator's caps (``Settings.max_document_bytes``/``max_document_depth``/
``max_nodes``/``max_id_length``/``max_name_length``) before any other pass looks at it,
so a hostile document costs one cheap pass and is never echoed back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import chain, compress, repeat
from operator import not_
from typing import Any

from schemas.workflow import Workflow

from .errors import CompileError, Problem
from .settings import Settings, get_settings

__all__ = [
    "DocumentCaps",
    "as_document",
    "canonical_document",
    "canonical_json",
    "check_document_limits",
    "checked_document_text",
    "document_caps",
]

#: The document caps of a :class:`Settings`, in one comparable value:
#: ``(max_document_depth, max_document_bytes, max_nodes, max_id_length, max_name_length)``.
DocumentCaps = tuple[int, ...]


def as_document(source: Workflow | Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    """The document as a dict, within the document caps (:func:`check_document_limits`)."""
    return canonical_document(source)[0]


def canonical_document(
    source: Workflow | Mapping[str, Any] | str | bytes, checked: tuple[str, DocumentCaps] | None = None
) -> tuple[dict[str, Any], str]:
    """The document as a dict, within the document caps, and its canonical JSON text
    (:func:`canonical_json`: the compiler hashes it, so it is made once).

    ``checked``: ``(text, caps)`` from :func:`checked_document_text` of this very
    ``source`` (a mapping) by a caller that checked it first (a route, with the app's
    settings). When ``caps`` are the process's own, the document was found within them
    and ``text`` is its canonical text, so neither is made again: a run start checks and
    encodes its document once, not twice. With other caps the check is done here.

    Raises:
        CompileError: not JSON, not an object, or over a cap.
    """
    settings = get_settings()
    if checked is not None and isinstance(source, Mapping) and checked[1] == document_caps(settings):
        return dict(source), checked[0]
    if isinstance(source, Workflow):
        doc = source.model_dump(mode="json", by_alias=True, exclude_none=True)
        return doc, canonical_json(doc)
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
    problems, text = _limits(doc, settings)
    if problems:
        raise CompileError(problems)
    assert text is not None  # within the caps: the text was made
    return doc, text


def canonical_json(doc: Mapping[str, Any]) -> str:
    """The canonical JSON text of ``doc``: sorted keys, compact, not ASCII-escaped (values
    JSON cannot hold as their ``str``). Its SHA-256 is the document's content hash."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _too_deep(cap: int, path: str | None = None) -> Problem:
    return Problem(
        "document_too_deep",
        f"objects and arrays are nested more than max_document_depth={cap} levels",
        path=path,
    )


def _too_large(size: int, cap: int) -> Problem:
    return Problem(
        "document_too_large",
        f"the document is at least {size} bytes as JSON; the cap max_document_bytes is {cap}",
    )


def _path_of(link: tuple[Any, Any] | None) -> str:
    """``nodes[3].config.x`` from the chain of (parent link, key) pairs of a container."""
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in reversed(keys)).lstrip(".")


_CONTAINERS = (dict, list)  # what nests; a tuple or another value does not (as json.loads gives)


#: containers a document may hold for :func:`_within` to answer alone (a run start's few
#: dozen); past them the level walk, which is quicker on large documents, decides
_SMALL_DOCUMENT = 256


def _within(value: Any, left: int, budget: list[int]) -> bool:
    """True when no non-empty container under ``value`` nests more than ``left`` levels
    below it and fewer than ``budget[0]`` containers were met; False when one does, or
    the budget ran out (the caller then decides another way)."""
    for item in value.values() if isinstance(value, dict) else value:
        if isinstance(item, _CONTAINERS) and item:
            budget[0] -= 1
            if left <= 0 or budget[0] < 0 or not _within(item, left - 1, budget):
                return False
    return True


def _too_deep_at(doc: Mapping[str, Any], cap: int, small: int = _SMALL_DOCUMENT) -> Problem | None:
    """Nesting deeper than ``cap``, with the path of the first container found too deep.

    A document of at most ``small`` containers found within the cap by a plain recursive
    walk (:func:`_within`: a few microseconds for a run start's document, where the
    level walk below costs about four times as much in its setup) is within it; any
    other is walked as follows.

    One level at a time, in C-level loops (``map``/``compress``/``filter``): the common
    case (within the cap) touches every value once and builds no path, and a level with no
    container among its values' types (the strings of 10000 nodes and edges) ends the walk
    without testing each value. Only a document over the cap is walked again, depth first
    with paths, to name where.
    """
    if cap >= 1 and small > 0 and _within(doc, cap - 1, [small]):
        return None
    level: list[Any] = [doc]
    depth = 1
    while level and depth <= cap:
        dicts = list(map(isinstance, level, repeat(dict)))
        values = [
            *chain.from_iterable(map(dict.values, compress(level, dicts))),
            *chain.from_iterable(compress(level, map(not_, dicts))),
        ]
        if not any(issubclass(kind, _CONTAINERS) for kind in set(map(type, values))):
            return None
        level = list(filter(None, compress(values, map(isinstance, values, repeat(_CONTAINERS)))))
        depth += 1
    if not level:
        return None
    stack: list[tuple[Any, int, tuple[Any, Any] | None]] = [(doc, 1, None)]
    while stack:
        value, depth, link = stack.pop()
        if depth > cap:
            return _too_deep(cap, _path_of(link) or None)
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, (dict, list)) and item:
                stack.append((item, depth + 1, (link, key)))
    return None  # pragma: no cover - the level walk found a container below the cap


def check_document_limits(doc: Mapping[str, Any], settings: Settings) -> list[Problem]:
    """Problems of a document beyond the operator's caps (README "Limits"): nesting deeper
    than ``max_document_depth``, a JSON size over ``max_document_bytes``, more than
    ``max_nodes`` nodes, ids longer than ``max_id_length``, names or descriptions longer
    than ``max_name_length``. Checked before anything else, so a hostile document costs
    one pass and is never echoed back whole.
    """
    return _limits(doc, settings)[0]


def document_caps(settings: Settings) -> DocumentCaps:
    """The document caps of ``settings`` (:data:`DocumentCaps`)."""
    return (
        settings.max_document_depth,
        settings.max_document_bytes,
        settings.max_nodes,
        settings.max_id_length,
        settings.max_name_length,
    )


def checked_document_text(doc: Mapping[str, Any], settings: Settings) -> tuple[str, DocumentCaps]:
    """``doc``'s canonical JSON text and the caps of ``settings`` it is within, for
    :func:`canonical_document`'s ``checked``.

    Raises:
        CompileError: ``doc`` is over a cap of ``settings`` (as :func:`check_document_limits`
        words it).
    """
    problems, text = _limits(doc, settings)
    if problems:
        raise CompileError(problems)
    assert text is not None  # within the caps: the text was made
    return text, document_caps(settings)


def _limits(doc: Mapping[str, Any], settings: Settings) -> tuple[list[Problem], str | None]:
    """:func:`check_document_limits`, and the canonical JSON text when the nesting is within
    its cap. The size is the length of that text (compact JSON, characters): exactly the
    size of the document written as JSON, whether it came as text or already parsed (an
    API body, a CLI file), so both meet the same cap. Depth is checked first, so the text
    is never made of a document nested deeper than the cap."""
    deep = _too_deep_at(doc, settings.max_document_depth)
    if deep is not None:
        return [deep], None
    text = canonical_json(doc)
    if len(text) > settings.max_document_bytes:
        return [_too_large(len(text), settings.max_document_bytes)], text
    problems: list[Problem] = []
    nodes, edges = doc.get("nodes"), doc.get("edges")
    if isinstance(nodes, list) and len(nodes) > settings.max_nodes:
        problems.append(
            Problem(
                "too_many_nodes",
                f"{len(nodes)} nodes; the cap max_nodes is {settings.max_nodes}",
                path="nodes",
            )
        )
    # One pass over every node and edge with the caps hoisted: a 5000-node document has
    # 10000 items, so a call and a list per item showed in the compile time.
    caps = (
        ("id", settings.max_id_length, "max_id_length"),
        ("name", settings.max_name_length, "max_name_length"),
        ("description", settings.max_name_length, "max_name_length"),
    )
    for where, items in (("nodes", nodes), ("edges", edges)):
        if not isinstance(items, list) or not _may_exceed(items, caps):
            continue
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            for key, cap, name in caps:
                value = item.get(key)
                if isinstance(value, str) and len(value) > cap:
                    problems.append(_too_long(f"{where}[{index}]", key, len(value), cap, name))
    return problems, text


def _may_exceed(items: list[Any], caps: tuple[tuple[str, int, str], ...]) -> bool:
    """False when no ``key`` of ``caps`` of any dict in ``items`` holds text over its cap: a
    screen in C-level loops (10000 items in a 5000-node chain); True sends the items to
    the exact loop, which also names them."""
    dicts = list(compress(items, map(isinstance, items, repeat(dict))))
    for key, cap, _name in caps:
        try:
            if max(map(len, filter(None, map(dict.get, dicts, repeat(key)))), default=0) > cap:
                return True
        except TypeError:  # a value without a length (a number): the exact loop decides
            return True
    return False


def _too_long(where: str, key: str, length: int, cap: int, name: str) -> Problem:
    # Never the value, not even its start: it may be anything a client sent (README "Size limits").
    return Problem(
        "too_long", f"{where}.{key} is {length} characters; the cap {name} is {cap}", path=f"{where}.{key}"
    )
