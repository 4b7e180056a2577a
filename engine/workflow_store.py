"""A small workflow store: find a workflow document by id, compile it, run it as a child run.

Used by nodes that call other workflows (the tool-call node's workflow tools; the planning
agent and the API later). Lookup rules:

- A workflow id is ``[A-Za-z0-9_-]+`` (the same rule as node ids); anything else - path
  separators, ``..``, an empty id - is refused before touching the file system.
- The store searches its directories in order for ``<id>.json``; the first file found
  wins. Directories come from ``Settings.workflow_path`` (``FLOWLOOM_WORKFLOW_PATH``,
  ``os.pathsep``-separated, e.g. ``/srv/flows:/opt/shared``), default: ``workflows/`` then
  ``examples/`` under the current directory. Missing directories are skipped.
- The document's own ``id`` must equal the id asked for (a renamed copy is refused).
- Later, when published workflow versions exist, the API will put a store with the same
  interface in front of this one; callers only use :meth:`WorkflowStore.load` /
  :meth:`WorkflowStore.compile`.

Child runs (:func:`run_child`): the child gets a fresh run state (own run id
``<parent run id>.<suffix>``, own limits and deadline from its document), the parent's
settings, model registry and memory store, and the parent's cancel token (cancelling the
parent cancels the child). Its events are not mixed into the parent's stream. Calls nest:
a workflow already running in the chain of parents, or a chain deeper than
:data:`MAX_DEPTH`, is refused (:class:`WorkflowRecursion`), so a workflow that lists
itself as a tool cannot recurse forever.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import CancelToken, RunDeps
from .errors import DefinitionError
from .settings import Settings

if TYPE_CHECKING:
    from .catalog import NodeCatalog
    from .compiler import CompiledPlan
    from .ports import ModelCatalog

__all__ = [
    "MAX_DEPTH",
    "WorkflowNotFound",
    "WorkflowRecursion",
    "WorkflowStore",
    "run_child",
]

#: Deepest chain of child runs (parent -> child -> grandchild ...).
MAX_DEPTH = 4

_ID = re.compile(r"^[A-Za-z0-9_\-]+$")
_CHAIN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "flowloom_workflow_chain", default=()
)


class WorkflowNotFound(DefinitionError):
    """No workflow with that id in the store (the message lists where it looked)."""


class WorkflowRecursion(DefinitionError):
    """A child run would call a workflow already running in its chain, or nest too deep."""


class WorkflowStore:
    """Workflow documents by id from a list of directories (module docstring)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]):
        self.paths = [Path(p) for p in paths]

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkflowStore:
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

    def load(self, workflow_id: str) -> dict[str, Any]:
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
            WorkflowNotFound: see :meth:`load`.
            CompileError: the document has problems.
        """
        from .compiler import compile_workflow

        return compile_workflow(self.load(workflow_id), catalog=catalog, models=models)

    def ids(self) -> list[str]:
        """Ids of every workflow file in the store (first directory wins), sorted."""
        seen: dict[str, None] = {}
        for directory in self.paths:
            if directory.is_dir():
                for path in directory.glob("*.json"):
                    if _ID.match(path.stem):
                        seen.setdefault(path.stem, None)
        return sorted(seen)


async def run_child(
    plan: CompiledPlan,
    inputs: Mapping[str, Any],
    *,
    parent_deps: RunDeps,
    cancel: CancelToken | None = None,
    run_id: str | None = None,
    caller: str | None = None,
    **sys: Any,
) -> Any:
    """Run ``plan`` as a child run (module docstring); returns its final :class:`RunState`.

    ``caller`` is the id of the workflow making the call (it joins the chain, so a child
    calling its caller back is refused too).

    Raises:
        WorkflowRecursion: the workflow is already running in this chain, or the chain is too deep.
        InvalidInputs: ``inputs`` do not fit the child's declared inputs.
    """
    chain = _CHAIN.get()
    if caller is not None and caller not in chain:
        chain = chain + (caller,)
    workflow_id = plan.workflow.id
    if workflow_id in chain:
        raise WorkflowRecursion(
            f"workflow {workflow_id!r} is already running in this chain "
            f"({' -> '.join(chain + (workflow_id,))}); a workflow cannot call itself"
        )
    if len(chain) >= MAX_DEPTH:
        raise WorkflowRecursion(
            f"child runs nest deeper than {MAX_DEPTH} ({' -> '.join(chain + (workflow_id,))})"
        )
    from .runner import run_workflow

    deps = RunDeps(
        settings=parent_deps.settings,
        models=parent_deps.models,
        memory=parent_deps.memory,
        workflows=parent_deps.workflows,
    )
    token = _CHAIN.set(chain + (workflow_id,))
    try:
        return await run_workflow(plan, dict(inputs), deps=deps, cancel=cancel, run_id=run_id, **sys)
    finally:
        _CHAIN.reset(token)
