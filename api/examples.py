"""The bundled examples (``examples/*.json``) as saved workflows of a tenant, so a new
canvas has something to open and run.

Each example becomes a workflow with its file's ``id``: a draft and, when it compiles,
one published version. Importing is idempotent and never overwrites: an id the tenant
already has is left as it is (a builder may have edited that draft), so running it
again creates nothing and a changed example file does not replace anyone's work.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.catalog import NodeCatalog
from engine.errors import CompileError
from engine.ports import WorkflowExists, WorkflowRepo
from engine.service import RunService
from engine.settings import Settings

__all__ = ["EXAMPLES_DIR", "ExamplesImported", "example_ids", "http_needs", "import_examples", "needs_model"]

#: the examples of the source tree holding this package
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


@dataclass
class ExamplesImported:
    """What :func:`import_examples` did: ids ``created`` (``published``: those that also
    got version 1), ids ``kept`` (already there, untouched), files ``skipped`` with why.
    Of the created ids, ``no_model_key``: those that run here as they are, with no model
    key; ``http_needs``: what the others without a model need to reach the HTTP APIs
    they call (:func:`http_needs`) -> their ids."""

    created: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    no_model_key: list[str] = field(default_factory=list)
    http_needs: dict[str, list[str]] = field(default_factory=dict)


def needs_model(doc: dict[str, Any], catalog: NodeCatalog) -> bool:
    """True when a node of ``doc`` (nested ones included) is of a kind that calls a model
    (its config has a ``model`` field in ``catalog``)."""
    for node in doc.get("nodes") or []:
        kind = node.get("type") if isinstance(node, dict) else None
        spec = catalog.specs.get(kind) if isinstance(kind, str) else None
        if spec is not None and "model" in spec.config.model_fields:
            return True
    return False


def http_needs(doc: dict[str, Any], settings: Settings) -> str | None:
    """What the ``http_request`` nodes of ``doc`` need before a run here reaches their
    targets, in words for a person, or None when they need nothing (or there are none):

    - a URL whose host is a template is aimed by the run: the inputs that host part reads
      must be set to a server's URL, and a local or private server must be allowed in
      ``FLOWLOOM_HTTP_ALLOW`` (the address guard refuses it otherwise);
    - a literal host the address guard refuses (a loopback or private IP, ``localhost``)
      that ``settings.http_allow`` does not allow must be added to it.

    A public host name needs nothing; it is not resolved here (that is the run's guard's).
    """
    from nodes.http.guard import AddressPolicy, blocked_category, literal_ip

    policy = AddressPolicy.from_settings(settings)
    inputs: set[str] = set()
    aimed, refused = False, set[str]()
    for node in doc.get("nodes") or []:
        config = node.get("config") if isinstance(node, dict) and node.get("type") == "http_request" else None
        url = config.get("url") if isinstance(config, dict) else None
        if not isinstance(url, str):
            continue
        origin = url.split("://", 1)[-1].split("/", 1)[0]  # "{{ inputs.base_url }}" of ".../job"
        if "{{" in origin:
            aimed = True
            inputs |= set(re.findall(r"\binputs\.(\w+)", origin))
            continue
        host = origin.rsplit("@", 1)[-1].rsplit(":", 1)[0].strip("[]")
        ip = literal_ip(host)
        blocked = host.lower() == "localhost" or (ip is not None and blocked_category(ip) is not None)
        if blocked and not policy.allows_host(host) and not (ip is not None and policy.allows_address(ip)):
            refused.add(host)
    needs = []
    if aimed:
        target = f"input {', '.join(sorted(inputs))}" if inputs else "its inputs"
        allowed = f" (now {','.join(settings.http_allow)})" if settings.http_allow else ""
        needs.append(
            f"an HTTP server to call: set {target} to its URL (a local or private one must also "
            f"be in FLOWLOOM_HTTP_ALLOW{allowed}, read when the server and its workers start)"
        )
    if refused:
        needs.append(
            f"FLOWLOOM_HTTP_ALLOW={','.join(sorted(refused))} (a local address the HTTP node refuses otherwise)"
        )
    return "; ".join(needs) or None


def _read(path: Path) -> dict[str, Any] | str:
    """The document of ``path``, or why it cannot be imported."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{path.name}: not readable JSON ({exc})"
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"].strip():
        return f"{path.name}: not a workflow with an id"
    return doc


def example_ids(folder: Path = EXAMPLES_DIR) -> list[str]:
    """The workflow ids of the examples in ``folder`` that can be imported, sorted."""
    return sorted(doc["id"] for path in folder.glob("*.json") if isinstance(doc := _read(path), dict))


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
            need = http_needs(doc, service.settings)
            if need is None:
                report.no_model_key.append(doc["id"])
            else:
                report.http_needs.setdefault(need, []).append(doc["id"])
        try:
            service.compile(doc)
        except CompileError:
            continue  # saved as a draft: the builder sees its problems in the canvas
        await repo.publish(tenant_id, doc["id"], doc, "bundled example")
        report.published.append(doc["id"])
    return report
