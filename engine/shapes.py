"""What each node of a workflow document offers downstream, for editors: its output
handles and its outputs with their types (:func:`node_shapes`).

An editor needs these while the document is still being written, so nothing here
requires the whole document to compile: every node whose own fields are valid gets its
shape, whatever is wrong elsewhere (a dangling edge, a bad reference, another node's
invalid config). A node whose fields are invalid has no shape; the compiler's problems
say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import ValidationError

from schemas.workflow import Workflow

from .catalog import NodeCatalog

__all__ = ["NodeShape", "node_shapes"]


@dataclass(frozen=True, slots=True)
class NodeShape:
    """``handles``: the node's output handles in order (``error`` included under the
    error-branch strategy); ``outputs``: output name -> type name (``string``, ``number``,
    ``object``...); None when they follow from a part of the document that is invalid."""

    handles: list[str]
    outputs: dict[str, str] | None


def _shell(doc: Mapping[str, Any]) -> Workflow:
    """The document's top level (inputs and variables drive some nodes' outputs); an
    invalid top level falls back to an empty workflow, so node shapes still come out."""
    try:
        return Workflow.model_validate({**doc, "nodes": [], "edges": []})
    except (ValidationError, TypeError):
        return Workflow(id="draft")


def node_shapes(doc: Mapping[str, Any], *, catalog: NodeCatalog) -> dict[str, NodeShape]:
    """Node id -> :class:`NodeShape` for every node of ``doc`` (a workflow document as a
    mapping) that is an object of a known kind whose fields validate; others are left out.

    Raises nothing for bad input: what cannot be shaped is simply absent.
    """
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list):
        return {}
    shell = _shell(doc)
    shapes: dict[str, NodeShape] = {}
    for raw in raw_nodes:
        if not isinstance(raw, dict) or raw.get("type") not in catalog or not isinstance(raw.get("id"), str):
            continue
        try:
            node = catalog.node_model(raw["type"]).model_validate(raw)
        except ValidationError:
            continue
        try:
            outputs: dict[str, str] | None = {name: str(t) for name, t in node.outputs(shell).items()}
        except Exception:  # noqa: BLE001 - an output list that needs a valid part of the document
            outputs = None
        shapes[node.id] = NodeShape(handles=node.handles(), outputs=outputs)
    return shapes
