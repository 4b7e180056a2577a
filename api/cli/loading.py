"""Reading a workflow file for ``validate``, ``run`` and ``rerun``: its JSON document, or
the problem that prevents reading it; and the datasets of this deployment it searches.

A module of its own so that ``flowloom validate`` reads a workflow without importing
the run commands (:mod:`api.cli.running`: asyncio, the run service's drivers).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .common import is_stdin, read_source, settings, source_label

__all__ = ["load_workflow", "tenant_datasets"]


def load_workflow(path: Path) -> tuple[dict[str, Any] | None, list[Any]]:
    """The workflow document in ``path`` (``-``: stdin), or the problem that prevents reading it.

    A Dify DSL or a FastGPT export is not a workflow: it is reported as
    ``foreign_format``, naming what it is and the ``flowloom import`` command that
    converts it (people try ``run`` on their export first).
    """
    from engine.errors import Problem

    label = source_label(path)
    try:
        data = read_source(path)
    except OSError as exc:
        return None, [Problem("invalid_document", f"cannot read {label}: {exc.strerror or exc}")]
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except RecursionError:  # the parser recurses per level; far past any cap it runs out of stack
        return None, [
            Problem(
                "document_too_deep",
                f"{label} nests objects or arrays too deeply to be read "
                "(the cap is FLOWLOOM_MAX_DOCUMENT_DEPTH levels)",
            )
        ]
    except ValueError as exc:  # JSON or UTF-8 decoding; a Dify DSL is YAML
        foreign = _foreign_format(path, data)
        return None, [foreign or Problem("invalid_document", f"cannot read {label} as JSON: {exc}")]
    if not isinstance(doc, dict):
        return None, [Problem("invalid_document", "a workflow must be a JSON object")]
    if not _looks_native(doc):
        foreign = _foreign_format(path, data)
        if foreign is not None:
            return None, [foreign]
    return doc, []


def _looks_native(doc: dict[str, Any]) -> bool:
    """Cheap test that spares ordinary workflows the importer's import time."""
    nodes = doc.get("nodes")
    return "id" in doc and isinstance(nodes, list) and all(isinstance(n, dict) and "id" in n for n in nodes)


def _foreign_format(path: Path, data: bytes) -> Any:
    """A ``foreign_format`` problem when ``data`` is a Dify DSL or a FastGPT workflow, else None."""
    from engine.errors import Problem
    from nodes.importers import ImportFailed, detect_format, parse_source, unwrap_download

    try:
        fmt = detect_format(unwrap_download(parse_source(data)))
    except ImportFailed:
        return None
    if fmt not in ("dify", "fastgpt"):
        return None
    what = {"dify": "a Dify DSL (app export)", "fastgpt": "a FastGPT workflow export"}[fmt]
    if is_stdin(path):
        command = "flowloom import - -o flow.json"
    else:
        # never the source's own name (a FastGPT export is .json too): importing onto it would
        # overwrite the export
        target = path.stem + (".flowloom.json" if path.suffix.lower() == ".json" else ".json")
        command = f"flowloom import {shlex.quote(str(path))} -o {shlex.quote(target)}"
    return Problem(
        "foreign_format",
        f"{source_label(path)} is {what}, not a Flowloom workflow; convert it first with: {command}",
    )


def tenant_datasets(nodes: list[Any]) -> dict[str, Any] | None:
    """The default tenant's datasets by id (the tenant ``flowloom run`` uses) when ``nodes``
    search any, read from the configured knowledge store; None (not checked) when they
    search none or the store cannot be read: a check never fails on it."""
    import asyncio

    from engine.shapes import searched_datasets

    if not searched_datasets(nodes):
        return None

    async def read() -> dict[str, Any]:
        from api.composition import open_service

        async with open_service(settings(), workflow_files=True) as service:
            return {d.id: d for d in await service.knowledge.list_datasets("default")}

    try:
        return asyncio.run(read())
    except Exception:  # an unreachable or unmigrated store: the run would say so
        return None
