"""The bundled examples (``examples/*.json``) as saved workflows of a tenant, so a new
canvas has something to open and run.

Each example becomes a workflow with its file's ``id``: a draft and, when it compiles,
one published version. Importing is idempotent and never overwrites: an id the tenant
already has is left as it is (a builder may have edited that draft), so running it
again creates nothing and a changed example file does not replace anyone's work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.catalog import NodeCatalog
from engine.errors import CompileError
from engine.ports import WorkflowExists, WorkflowRepo
from engine.service import RunService

__all__ = ["EXAMPLES_DIR", "ExamplesImported", "import_examples", "needs_model"]

#: the examples of the source tree holding this package
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


@dataclass
class ExamplesImported:
    """What :func:`import_examples` did: ids ``created`` (``published``: those that also
    got version 1), ids ``kept`` (already there, untouched), files ``skipped`` with why."""

    created: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    no_model_key: list[str] = field(default_factory=list)


def needs_model(doc: dict[str, Any], catalog: NodeCatalog) -> bool:
    """True when a node of ``doc`` (nested ones included) is of a kind that calls a model
    (its config has a ``model`` field in ``catalog``)."""
    for node in doc.get("nodes") or []:
        kind = node.get("type") if isinstance(node, dict) else None
        spec = catalog.specs.get(kind) if isinstance(kind, str) else None
        if spec is not None and "model" in spec.config.model_fields:
            return True
    return False


def _read(path: Path) -> dict[str, Any] | str:
    """The document of ``path``, or why it cannot be imported."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{path.name}: not readable JSON ({exc})"
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"].strip():
        return f"{path.name}: not a workflow with an id"
    return doc


async def import_examples(
    repo: WorkflowRepo, service: RunService, tenant_id: str, folder: Path = EXAMPLES_DIR
) -> ExamplesImported:
    """Save every ``folder/*.json`` workflow as a workflow of ``tenant_id`` that does not
    exist yet (draft, plus version 1 when it compiles with ``service``); others are kept.

    Raises:
        StoreError: the database is not available.
    """
    report = ExamplesImported()
    for path in sorted(folder.glob("*.json")):
        doc = _read(path)
        if isinstance(doc, str):
            report.skipped.append(doc)
            continue
        try:
            await repo.create(tenant_id, doc)
        except WorkflowExists:
            report.kept.append(doc["id"])
            continue
        report.created.append(doc["id"])
        if not needs_model(doc, service.catalog):
            report.no_model_key.append(doc["id"])
        try:
            service.compile(doc)
        except CompileError:
            continue  # saved as a draft: the builder sees its problems in the canvas
        await repo.publish(tenant_id, doc["id"], doc, "bundled example")
        report.published.append(doc["id"])
    return report
