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

__all__ = ["load_workflow", "stored_datasets", "tenant_datasets"]


def load_workflow(path: Path, command: str | None = None) -> tuple[dict[str, Any] | None, list[Any]]:
    """The workflow document in ``path`` (``-``: stdin), or the problem that prevents reading it.

    A Dify DSL or a FastGPT export is not a workflow: it is reported as
    ``foreign_format``, naming what it is and the ``flowloom import`` command that
    converts it (people try ``run`` on their export first). A file that does not exist
    is told the file or saved workflow meant (:func:`_no_such_file`; ``command``: the
    ``flowloom`` command to suggest with a file found, e.g. ``run``).
    """
    from engine.errors import Problem

    label = source_label(path)
    try:
        data = read_source(path)
    except FileNotFoundError:
        return None, [Problem("invalid_document", _no_such_file(path, command))]
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


def _no_such_file(path: Path, command: str | None) -> str:
    """``cannot read hello: no such file`` and what was likely meant: a bare name is often a workflow's id
    (``flowloom run hello``), so the file of that id - ``hello.json`` here, ``<id>.json`` in
    the workflow directories (``FLOWLOOM_WORKFLOW_PATH``, else ``workflows/`` and
    ``examples/``: where a run finds workflow tools), the bundled examples - or, failing
    those, a workflow of that id saved in this deployment's store (where a server runs it)."""
    name = path.name.removesuffix(".json")
    found = _workflow_file(path, name)
    if found is not None:
        shown = shlex.quote(_shown_path(found))
        meant = f"`flowloom {command} {shown}`" if command else shown
        return f"cannot read {path}: no such file; did you mean {meant}?"
    if path.parent == Path(".") and _saved_workflow(name):
        return (
            f"cannot read {path}: no such file; {name!r} is a workflow saved in the store (tenant default), which "
            f"runs in the server: the canvas of `flowloom serve`, or POST /v1/workflows/{name}/runs"
        )
    return f"cannot read {path}: no such file (give the path of a workflow JSON file)"


def _workflow_file(path: Path, name: str) -> Path | None:
    """The existing file ``path`` likely meant (see :func:`_no_such_file`), or None."""
    from api.examples import EXAMPLES_DIR
    from engine.ports import WorkflowNotFound
    from engine.workflow_files import WorkflowFiles

    candidates = [path.with_name(path.name + ".json")] if not path.suffix else []
    if path.parent == Path("."):
        try:
            candidates.append(WorkflowFiles.from_settings(settings()).find(name))
        except WorkflowNotFound:
            pass
        candidates.append(EXAMPLES_DIR / f"{name}.json")
    return next((c for c in candidates if c.is_file()), None)


def _shown_path(found: Path) -> str:
    """``found`` relative to the working directory when it is below it, else absolute."""
    try:
        return str(found.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(found.resolve())


def _saved_workflow(workflow_id: str) -> bool:
    """True when the default tenant of this deployment's store has workflow ``workflow_id``
    (saved by the canvas or by ``flowloom serve``'s examples). Never creates the embedded
    database that does not exist yet, and never fails: a store that cannot be read says no."""
    import asyncio

    current = settings()
    if current.database_url is None and not (current.home / "flowloom.db").is_file():
        return False

    async def read() -> bool:
        from api.composition import open_service
        from engine.ports import WorkflowNotFound
        from workers.sql.workflows import SqlWorkflowStore

        async with open_service(current) as service:
            runs: Any = service.stores.runs  # a SqlStore: every deployment keeps its runs in SQL
            try:
                await SqlWorkflowStore(runs).get("default", workflow_id)
            except WorkflowNotFound:
                return False
            return True

    try:
        return asyncio.run(read())
    except Exception:  # an unreachable or unmigrated store: only a hint is lost
        return False


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
    from engine.shapes import searched_datasets

    if not searched_datasets(nodes):
        return None
    return _read_datasets("default")


def stored_datasets(tenant: str = "default") -> dict[str, Any] | None:
    """``tenant``'s datasets by id when the configured stores exist; None (not checked) when
    one is an embedded SQLite file not made yet, or they cannot be read. What ``flowloom
    import`` checks its dataset mapping against: a conversion must not create a database
    under FLOWLOOM_HOME only to find it empty."""
    from sqlalchemy.engine import make_url

    from api.composition import database_url, knowledge_database_url

    current = settings()
    for url in (database_url(current), knowledge_database_url(current)):
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or ":memory:").is_file():
            return None
    return _read_datasets(tenant)


def _read_datasets(tenant: str) -> dict[str, Any] | None:
    """``tenant``'s datasets by id from the configured knowledge store (None: unreadable)."""
    import asyncio

    async def read() -> dict[str, Any]:
        from api.composition import open_service

        async with open_service(settings(), workflow_files=True) as service:
            return {d.id: d for d in await service.knowledge.list_datasets(tenant)}

    try:
        return asyncio.run(read())
    except Exception:  # an unreachable or unmigrated store: the run would say so
        return None
