"""The compiler's document and graph passes (rules 1-8 and 10 of :mod:`engine.compiler`):
node and top-level validation, ids, the networkx graph of the edges, the error policy and
model names. Each pass appends :class:`Problem` items and goes on, so the builder sees
every problem at once.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from types import GenericAlias
from typing import TYPE_CHECKING, Annotated, Any, Union

import networkx as nx
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from schemas.nodes import NodeConfig
from schemas.types import RESERVED_SCOPES
from schemas.workflow import ErrorStrategy, NodeBase, Workflow

from .catalog import NodeCatalog
from .errors import Problem
from .loops import REGION_SUFFIX
from .plain_errors import a_or_an, did_you_mean, fields_at, plain_message

if TYPE_CHECKING:  # a protocol, for annotations: the storage ports and run records are not needed to compile
    from .ports import ModelCatalog

__all__ = ["build_graph", "check_error_policy", "check_ids", "check_models", "parse_document"]


def _loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@functools.lru_cache(maxsize=64)
def _nodes_adapter(catalog: NodeCatalog, kinds: tuple[str, ...]) -> TypeAdapter[list[NodeBase]]:
    """A validator for a list of nodes of ``kinds`` of ``catalog``."""
    models = tuple(catalog.node_model(kind) for kind in kinds)
    if not models:  # every node was of an unknown kind (already reported)
        return TypeAdapter(list[NodeBase])
    # types built at run time (Any: a type checker would read list[...] as a type)
    item: Any
    if len(models) == 1:
        item = Annotated[models[0], Tag(kinds[0])]
    else:
        # a union built at run time: only typing.Union takes a tuple of members
        members = tuple(Annotated[m, Tag(k)] for m, k in zip(models, kinds, strict=True))
        item = Annotated[Union[members], Discriminator("type")]  # noqa: UP007 - only Union takes a tuple
    nodes: Any = GenericAlias(list, (item,))
    return TypeAdapter(nodes)


def parse_document(
    doc: dict[str, Any], problems: list[Problem], invalid: set[str], catalog: NodeCatalog
) -> Workflow | None:
    """Rules 1-3: validate the top level and each node on its own, so all errors surface.

    Ids of nodes that fail validation go to ``invalid``: later passes ignore edges and
    references to them instead of reporting the same node again as missing.
    """
    raw_nodes = doc.get("nodes", [])
    if not isinstance(raw_nodes, list):
        problems.append(Problem("invalid_document", "must be a list", path="nodes"))
        raw_nodes = []
    try:
        shell = Workflow.model_validate({**doc, "nodes": []})
    except ValidationError as exc:
        for err in exc.errors():
            loc = _loc(err["loc"])
            edge_id = None
            if err["loc"][:1] == ("edges",) and len(err["loc"]) > 1 and isinstance(err["loc"][1], int):
                raw_edge = (
                    (doc.get("edges") or [None])[err["loc"][1]]
                    if err["loc"][1] < len(doc.get("edges") or [])
                    else None
                )
                edge_id = raw_edge.get("id") if isinstance(raw_edge, dict) else None
            fields = fields_at(Workflow, err["loc"]) if err["type"] == "extra_forbidden" else ()
            problems.append(
                Problem("invalid_document", plain_message(err, fields), edge_id=edge_id, path=loc)
            )
        shell = None
    known, at = _known_kinds(raw_nodes, problems, invalid, catalog)
    # One validation call for all nodes (the per-node Python overhead dominates otherwise);
    # error locations are (index, kind tag, *field path).
    kinds = tuple(sorted(set(map(operator.itemgetter("type"), known))))
    adapter, skip = _nodes_adapter(catalog, kinds), (2 if len(kinds) > 1 else 1)
    try:
        nodes: list[NodeBase] = adapter.validate_python(known)
    except ValidationError as exc:
        bad: set[int] = set()
        for err in exc.errors():
            index, path = int(err["loc"][0]), err["loc"][skip:]  # a list's errors start at the item's index
            node_id = _label(known[index], at[index])
            bad.add(index)
            invalid.add(node_id)
            code = "missing_config" if err["type"] == "missing" else "invalid_config"
            fields = (
                fields_at(catalog.node_model(known[index]["type"]), path)
                if err["type"] == "extra_forbidden"
                else ()
            )
            msg = "required field is missing" if code == "missing_config" else plain_message(err, fields)
            problems.append(Problem(code, msg, node_id=node_id, path=_loc(path)))
        good = [raw for i, raw in enumerate(known) if i not in bad]
        nodes = adapter.validate_python(good)
    _check_empty_required(nodes, problems)
    if shell is None:
        return None
    return shell.model_copy(update={"nodes": nodes})


def _label(raw: dict[str, Any], index: int) -> str:
    """The node id messages name: its ``id``, or ``nodes[index]`` when that is not text."""
    node_id = raw.get("id")
    return node_id if isinstance(node_id, str) else f"nodes[{index}]"


def _known_kinds(
    raw_nodes: list[Any], problems: list[Problem], invalid: set[str], catalog: NodeCatalog
) -> tuple[list[dict[str, Any]], Sequence[int]]:
    """The raw nodes of the catalog's kinds and their indices in ``raw_nodes``; a node that
    is no object is reported (``invalid_document``), one of an unknown kind too
    (``unknown_kind``, its id then ``invalid``)."""
    specs = catalog.specs  # the dict itself: a membership test per node, without a method call
    if all(map(isinstance, raw_nodes, repeat(dict))) and specs.keys() >= set(
        map(dict.get, raw_nodes, repeat("type"))
    ):
        return raw_nodes, range(len(raw_nodes))  # the common case, screened in C-level loops
    known: list[dict[str, Any]] = []
    at: list[int] = []
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            problems.append(Problem("invalid_document", "a node must be an object", path=f"nodes[{index}]"))
            continue
        kind = raw.get("type")
        if kind not in specs:
            names = ", ".join(catalog.kinds())
            node_id = _label(raw, index)
            problems.append(
                Problem(
                    "unknown_kind",
                    f"unknown node kind {kind!r}{did_you_mean(kind, catalog.kinds())} (known: {names})",
                    node_id=node_id,
                    path="type",
                )
            )
            invalid.add(node_id)
            continue
        known.append(raw)
        at.append(index)
    return known, at


@functools.cache
def _required_fields(cls: type[NodeConfig]) -> tuple[tuple[str, str], ...]:
    """(attribute, name in the document) of the config fields of ``cls`` without a default."""
    return tuple(
        (name, field.alias or name) for name, field in cls.model_fields.items() if field.is_required()
    )


def _check_empty_required(nodes: list[NodeBase], problems: list[Problem]) -> None:
    """Rule 3 (``empty_required``): a field without a default is one the node cannot do
    without, yet its schema takes any string, so an answer with no text would pass and
    mislead only at run time. The node stays (its outputs and references are checked)."""
    if not any(map(_required_fields, set(map(type, map(_config_of, nodes))))):
        return  # no config class of these nodes has a required field (decided per class)
    for node in nodes:
        config = node.config
        for attr, name in _required_fields(type(config)):
            value = getattr(config, attr)
            if isinstance(value, str) and not value.strip():
                problems.append(
                    Problem(
                        "empty_required",
                        f"{name} is required and empty",
                        node_id=node.id,
                        path=f"config.{name}",
                    )
                )


def check_ids(wf: Workflow, problems: list[Problem], by_id: dict[str, NodeBase] | None = None) -> None:
    """Rule 4. ``by_id``: ``{n.id: n for n in wf.nodes}`` when the caller has it already."""
    node_ids = by_id if by_id is not None else {n.id: n for n in wf.nodes}
    if (
        len(node_ids) == len(wf.nodes)
        and len(set(map(_id_of, wf.edges))) == len(wf.edges)
        and RESERVED_SCOPES.isdisjoint(node_ids)
        and not any(map(_region_like, node_ids))
    ):
        return  # the common case, screened in C-level loops; the loops below name each problem
    seen: set[str] = set()
    for node in wf.nodes:
        if node.id in seen:
            problems.append(
                Problem("duplicate_node_id", f"node id {node.id!r} is used more than once", node_id=node.id)
            )
        seen.add(node.id)
        if node.id in RESERVED_SCOPES:
            problems.append(
                Problem(
                    "reserved_node_id", f"{node.id!r} is a reference scope; rename the node", node_id=node.id
                )
            )
        elif node.id.endswith(REGION_SUFFIX):
            problems.append(
                Problem(
                    "reserved_node_id",
                    f"ids ending in {REGION_SUFFIX!r} name the engine's loop regions; rename the node",
                    node_id=node.id,
                )
            )
    seen_edges: set[str] = set()
    for edge in wf.edges:
        if edge.id in seen_edges:
            problems.append(
                Problem("duplicate_edge_id", f"edge id {edge.id!r} is used more than once", edge_id=edge.id)
            )
        seen_edges.add(edge.id)


_region_like = operator.methodcaller("endswith", REGION_SUFFIX)
_id_of, _config_of = operator.attrgetter("id"), operator.attrgetter("config")


#: NodeConfig's own ``handles`` (``["out"]``): every node whose config keeps it has ``out``
_OUT_ONLY = NodeConfig.handles


def build_graph(
    wf: Workflow,
    problems: list[Problem],
    invalid: set[str],
    invalid_start: bool,
    scope: dict[str, str | None],
    entry_kinds: frozenset[str],
    by_id: dict[str, NodeBase] | None = None,
) -> tuple[nx.DiGraph, str | None]:
    """Rules 5-7: the graph. One networkx edge per connected node pair; its ``edges``
    attribute lists the workflow edges between them as ``(edge id, source handle)``.
    ``by_id``: ``{n.id: n for n in wf.nodes}`` when the caller has it already.

    Edges of nodes that failed validation, and edges from an unknown handle, stay in
    the graph: ancestry and reachability must not change because of one bad field, or
    every reference across that edge would be reported again (the plan is not built
    when there are errors, so such edges never run).
    """
    if by_id is None:
        by_id = {n.id: n for n in wf.nodes}
    handles_of: dict[str, list[str]] = {}
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    starts = [n.id for n in wf.nodes if n.type in entry_kinds]
    if not starts and not invalid_start:
        kinds = " or ".join(repr(k) for k in sorted(entry_kinds))
        problems.append(Problem("no_start", f"the workflow has no start node; add one node of type {kinds}"))
    elif len(starts) > 1:
        problems.append(Problem("multiple_start", f"only one start node is allowed, found {starts}"))

    def keep(source: str, target: str, edge_id: str, handle: str) -> None:
        pair = pairs.get((source, target))
        if pair is None:
            pairs[(source, target)] = [(edge_id, handle)]
        else:
            pair.append((edge_id, handle))

    for edge in wf.edges:
        source, target = edge.source, edge.target
        if not invalid:  # fast path (5000-edge chains): a valid edge between valid nodes of one scope
            source_node, target_node = by_id.get(source), by_id.get(target)
            if (
                source_node is not None
                and target_node is not None
                and scope[source] == scope[target]
                and target_node.type not in entry_kinds
            ):
                # A config that keeps NodeConfig's handles has "out" (and maybe "error"):
                # decided per class, not by a handles() list per source node.
                known = edge.sourceHandle == "out" and type(source_node.config).handles is _OUT_ONLY
                if not known:
                    handles = handles_of.get(source)
                    if handles is None:
                        handles = handles_of[source] = source_node.handles()
                    known = edge.sourceHandle in handles
                if known:
                    pair = pairs.get((source, target))
                    if pair is None:
                        pairs[(source, target)] = [(edge.id, edge.sourceHandle)]
                    else:
                        pair.append((edge.id, edge.sourceHandle))
                    continue
        if source in invalid or target in invalid:
            if (source in by_id or source in invalid) and (target in by_id or target in invalid):
                keep(source, target, edge.id, edge.sourceHandle)  # the node's own problem is reported already
                continue
            # else an end is unknown: reported below, as next to a valid node
        if source not in by_id or target not in by_id:
            bad = [end for end in (source, target) if end not in by_id and end not in invalid]
            named = ", ".join(f"{end!r}{did_you_mean(end, by_id)}" for end in bad)
            problems.append(
                Problem(
                    "dangling_edge",
                    f"edge points to unknown node(s) {named}",
                    edge_id=edge.id,
                    path="source" if source in bad else "target",
                )
            )
            continue
        if scope[source] is not scope[target] and scope[source] != scope[target]:
            problems.append(
                Problem(
                    "edge_crosses_container",
                    f"edge joins {edge.source!r} and {edge.target!r}, which are in different loop "
                    "bodies; connect the loop node itself instead",
                    edge_id=edge.id,
                )
            )
            continue
        handles = handles_of.get(source)
        if handles is None:
            handles = handles_of[source] = by_id[source].handles()
        if edge.sourceHandle not in handles:
            problems.append(
                Problem(
                    "unknown_handle",
                    f"node {edge.source!r} has no output handle {edge.sourceHandle!r}"
                    f"{did_you_mean(edge.sourceHandle, handles)} (handles: {', '.join(handles)})",
                    node_id=edge.source,
                    edge_id=edge.id,
                    path="sourceHandle",
                )
            )
            keep(source, target, edge.id, edge.sourceHandle)
            continue
        if by_id[edge.target].type in entry_kinds:
            problems.append(
                Problem(
                    "edge_into_start",
                    "the start node cannot have incoming edges",
                    node_id=edge.target,
                    edge_id=edge.id,
                )
            )
            continue
        keep(source, target, edge.id, edge.sourceHandle)
    return _digraph(chain(by_id, invalid), pairs), (starts[0] if len(starts) == 1 else None)


def _digraph(nodes: Iterable[str], pairs: dict[tuple[str, str], list[tuple[str, str]]]) -> nx.DiGraph:
    """The networkx DiGraph of ``nodes`` (in that order, first occurrence kept) and one edge
    per key of ``pairs``, whose ``edges`` attribute is the pair's list (the list itself).

    The same graph ``add_nodes_from(nodes)`` then ``add_edges_from((u, v, {"edges": ids})
    ...)`` builds - node order, successor and predecessor order, one attribute dict per
    node and per edge shared by both directions - written in one pass into the adjacency
    dicts networkx documents for its subclasses (``_node``, ``_succ``, ``_pred``; setting
    them resets the graph's cached views). networkx's own calls check and copy each node
    and edge through several dict updates: at 5000 nodes they were half the graph build.
    Every endpoint of ``pairs`` must be in ``nodes``.
    """
    graph: nx.DiGraph[str] = nx.DiGraph()
    attrs: dict[str, dict[str, Any]] = {node: {} for node in nodes}
    succ: dict[str, dict[str, dict[str, Any]]] = {node: {} for node in attrs}
    pred: dict[str, dict[str, dict[str, Any]]] = {node: {} for node in attrs}
    for (source, target), ids in pairs.items():
        succ[source][target] = pred[target][source] = {"edges": ids}
    graph._node = attrs  # type: ignore[attr-defined]  # networkx's storage, not in its stubs
    graph._succ = succ  # type: ignore[attr-defined]  # networkx's storage (also _adj), not in its stubs
    graph._pred = pred  # type: ignore[attr-defined]  # networkx's storage, not in its stubs
    return graph


def check_error_policy(wf: Workflow, problems: list[Problem]) -> None:
    """Rule 10."""
    if ErrorStrategy.default_output not in set(map(_strategy_of, wf.nodes)):
        return  # no node uses the default-output strategy (a C-level screen)
    for node in wf.nodes:
        if node.error_strategy is not ErrorStrategy.default_output:
            continue
        outs = node.outputs(wf)
        for key in sorted(set(node.default_output or {}) - set(outs)):
            problems.append(
                Problem(
                    "invalid_default_output",
                    f"{key!r} is not an output of this node"
                    f"{did_you_mean(key, outs)} (outputs: {', '.join(sorted(outs)) or 'none'})",
                    node_id=node.id,
                    path=f"default_output.{key}",
                )
            )
        if node.default_output is None:
            problems.append(
                Problem(
                    "invalid_default_output",
                    "the default_output strategy needs a default_output object",
                    node_id=node.id,
                    path="default_output",
                )
            )
        if node.default_handle is not None and node.default_handle not in node.handles():
            problems.append(
                Problem(
                    "unknown_default_handle",
                    f"no handle {node.default_handle!r}"
                    f"{did_you_mean(node.default_handle, node.handles())} "
                    f"(handles: {', '.join(node.handles())})",
                    node_id=node.id,
                    path="default_handle",
                )
            )


_strategy_of = operator.attrgetter("error_strategy")


def check_models(wf: Workflow, problems: list[Problem], models: ModelCatalog | None) -> None:
    """Rule 10 (models); skipped without a model catalog."""
    if models is None:
        return
    refs = [(node, path, name) for node in wf.nodes for path, name in node.config.model_refs()]
    if not refs:
        return
    reported = {(p.node_id, p.path) for p in problems}  # a blank model is empty_required already
    for node, path, name in refs:
        kind = node.config.model_kind(path)
        if models.has(name, kind) or (node.id, f"config.{path}") in reported:
            continue
        known = sorted(models.names(kind))
        actual = next((t for t in _MODEL_TYPES if t != kind and models.has(name, t)), None)
        what = (
            f"model {name!r} is {a_or_an(actual)} model, not {a_or_an(kind)} model"
            if actual is not None
            else f"model {name!r} is not in the model registry{did_you_mean(name, known)}"
        )
        problems.append(
            Problem(
                "unknown_model",
                f"{what} (known{'' if kind == 'chat' else f' {kind} models'}: {', '.join(known) or 'none'})",
                node_id=node.id,
                path=f"config.{path}",
            )
        )


#: the model registry's types (a model named where another type is needed says which it is)
_MODEL_TYPES = ("chat", "embedding", "rerank")
