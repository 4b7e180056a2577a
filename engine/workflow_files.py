"""Workflow files: find a workflow document by id in a list of directories, compile it.

The command line's :class:`~engine.ports.WorkflowSource`: where ``flowloom run`` finds a
workflow used as a tool (a tool call's or agent's ``workflow_tools``). The server finds
them in the tenant's saved workflows instead, so a file on its disk is never what a
tenant's tool runs. Lookup rules:

- A workflow id is ``[A-Za-z0-9_-]+`` (the same rule as node ids); anything else - path
  separators, ``..``, an empty id - is refused before touching the file system.
- The store searches its directories in order for ``<id>.json``; the first file found
  wins. Directories come from ``Settings.workflow_path`` (``FLOWLOOM_WORKFLOW_PATH``,
  ``os.pathsep``-separated, e.g. ``/srv/flows:/opt/shared``), default: ``workflows/`` then
  ``examples/`` under the current directory. Missing directories are skipped.
- The document's own ``id`` must equal the id asked for (a renamed copy is refused).
- A missing, unreadable or mismatched file is :class:`~engine.ports.WorkflowNotFound`
  (the message says where it looked), the same error a saved workflow that is not
  there raises.
- Files have no versions and no tenants: every tenant reads the same files (the command
  line has one, ``default``), and a tool that pins a ``version`` is refused, since
  which file content was that version cannot be known.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ports import WorkflowNotFound
from .settings import Settings

if TYPE_CHECKING:
    from .catalog import NodeCatalog
    from .compiler import CompiledPlan
    from .ports import ModelCatalog

__all__ = ["WorkflowFiles"]

_ID = re.compile(r"^[A-Za-z0-9_\-]+$")


class WorkflowFiles:
    """Workflow documents by id from a list of directories (module docstring)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        self.paths = [Path(p) for p in paths]

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkflowFiles:
        """A store over ``settings.workflow_path``, else ``./workflows`` and ``./examples``."""
        return cls(settings.workflow_path or [Path.cwd() / "workflows", Path.cwd() / "examples"])

    def find(self, workflow_id: str) -> Path:
        """The file of ``workflow_id``.

        Raises:
            WorkflowNotFound: bad id, or no ``<id>.json`` in any directory.
        """
        if not isinstance(workflow_id, str) or not _ID.match(workflow_id):
            raise WorkflowNotFound(f"invalid workflow id {workflow_id!r}: use letters, digits, '_' and '-'")
        for directory in self.paths:
            candidate = directory / f"{workflow_id}.json"
            if candidate.is_file():
                return candidate
        where = ", ".join(str(p) for p in self.paths) or "(no directories)"
        raise WorkflowNotFound(
            f"workflow {workflow_id!r} not found: no {workflow_id}.json in {where} "
            "(set FLOWLOOM_WORKFLOW_PATH to add directories)"
        )

    async def load(self, tenant_id: str, workflow_id: str, version: int | None = None) -> dict[str, Any]:
        """The document of ``workflow_id`` (the :class:`~engine.ports.WorkflowSource` port;
        ``tenant_id`` is not used: files are shared by every tenant).

        Raises:
            WorkflowNotFound: see :meth:`read`; also for a pinned ``version``.
        """
        if version is not None:
            raise WorkflowNotFound(
                f"workflow {workflow_id!r}: version {version} is pinned, but workflow files have no "
                "versions (remove the version, or run it in the server, where published versions are kept)"
            )
        return self.read(workflow_id)

    def read(self, workflow_id: str) -> dict[str, Any]:
        """The document of ``workflow_id`` as a dict.

        Raises:
            WorkflowNotFound: not found, unreadable, not a JSON object, or its ``id`` differs.
        """
        path = self.find(workflow_id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WorkflowNotFound(f"workflow {workflow_id!r}: cannot read {path}: {exc}") from None
        if not isinstance(doc, dict):
            raise WorkflowNotFound(f"workflow {workflow_id!r}: {path} is not a JSON object")
        if doc.get("id") != workflow_id:
            raise WorkflowNotFound(f"workflow {workflow_id!r}: {path} holds workflow id {doc.get('id')!r}")
        return doc

    def compile(
        self, workflow_id: str, *, catalog: NodeCatalog, models: ModelCatalog | None = None
    ) -> CompiledPlan:
        """Load and compile ``workflow_id`` (compiled plans are cached by content).

        Raises:
            WorkflowNotFound: see :meth:`read`.
            CompileError: the document has problems.
        """
        from .compiler import compile_workflow

        return compile_workflow(self.read(workflow_id), catalog=catalog, models=models)

    def ids(self) -> list[str]:
        """Ids of every workflow file in the store (first directory wins), sorted."""
        seen: dict[str, None] = {}
        for directory in self.paths:
            if directory.is_dir():
                for path in directory.glob("*.json"):
                    if _ID.match(path.stem):
                        seen.setdefault(path.stem, None)
        return sorted(seen)
