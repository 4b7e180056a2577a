"""What a node may reference, for the variable picker: the compiler's own rule, offered.

The compiler judges every reference with :meth:`engine.ref_checks.RefChecker.access`;
:func:`reference_scope` asks that same method about every node of the document, so the
picker offers exactly what the compiler accepts - no second copy of the rule in the
canvas to drift from it.

A draft is usually unfinished. Nodes whose fields do not validate yet stay in the graph
(the compiler keeps their edges), and their outputs are read from their config as far
as it goes, so an iteration whose ``collect`` is still empty offers its body ``item``
and ``index`` (the compiler accepts any reference to such a node until it is fixed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.types import SYS_VARIABLES, Selector, VarType
from schemas.workflow import Workflow

from .catalog import NodeCatalog
from .compiler import analyse
from .documents import canonical_document
from .errors import CompileError, Problem
from .ref_checks import RefChecker

__all__ = ["ScopeEntry", "reference_scope"]


@dataclass(frozen=True, slots=True)
class ScopeEntry:
    """One thing a node may read: ``path`` is the reference text (``{"ref": path}`` or
    ``{{ path }}``); ``group`` is ``inputs`` / ``vars`` / ``conversation`` / ``sys`` /
    ``node``; ``node_id`` and ``output`` are set for node outputs; ``type`` is the
    declared type name (None when unknown)."""

    path: str
    group: str
    node_id: str | None = None
    output: str | None = None
    type: str | None = None


def _scoped_entries(wf: Workflow) -> list[ScopeEntry]:
    out = [ScopeEntry(f"inputs.{v.name}", "inputs", type=str(v.type)) for v in wf.inputs]
    out += [ScopeEntry(f"vars.{v.name}", "vars", type=str(v.type)) for v in wf.variables]
    out += [
        ScopeEntry(f"conversation.{v.name}", "conversation", type=str(v.type))
        for v in wf.conversation_variables
    ]
    out += [ScopeEntry(f"env.{v.name}", "env", type=v.type.var_type().value) for v in wf.environment]
    out += [ScopeEntry(f"sys.{name}", "sys", type=str(t)) for name, t in SYS_VARIABLES.items()]
    return out


class _LooseNode:
    """A node whose fields do not validate yet, read as far as its config goes."""

    def __init__(self, raw: Mapping[str, Any], catalog: NodeCatalog, wf: Workflow):
        config_cls = catalog[raw["type"]].config
        given = raw.get("config")
        config = given if isinstance(given, dict) else {}
        self.config = config_cls.model_construct(
            **{k: v for k, v in config.items() if k in config_cls.model_fields}
        )
        self.wf = wf
        self.error_branch = raw.get("error_strategy") == "error_branch"

    def _safe(self, method: str) -> dict[str, VarType]:
        try:
            return dict(getattr(self.config, method)(self.wf))
        except Exception:
            return {}

    def outputs(self) -> dict[str, VarType]:
        outs = self._safe("outputs")
        return {**outs, "error": VarType.object} if self.error_branch else outs

    def body_outputs(self) -> dict[str, VarType]:
        return self._safe("body_outputs")

    def body_fields(self) -> set[str]:
        try:
            return set(self.config.body_fields())
        except Exception:
            return set()


def _tables(
    checker: RefChecker, node_id: str, loose: dict[str, _LooseNode]
) -> tuple[dict[str, VarType], dict[str, VarType]]:
    """(outputs, body outputs) of ``node_id``."""
    if node_id in loose:
        return loose[node_id].outputs(), loose[node_id].body_outputs()
    return checker.outputs[node_id], checker.body_outputs(node_id)


def reference_scope(
    source: Mapping[str, Any] | str | bytes, node_id: str, *, catalog: NodeCatalog, field: str | None = None
) -> list[ScopeEntry]:
    """Everything node ``node_id`` of the workflow document ``source`` may reference in
    its config field ``field`` (a top-level config key; None: an ordinary field):
    inputs, run and conversation variables, system variables, then node outputs in the
    document's node order.

    Raises:
        CompileError: the document is not a JSON object or its top level is invalid
            (the problems say why), or it has no node ``node_id`` (``unknown_node``).
    """
    doc, _ = canonical_document(source)
    found = analyse(doc, catalog)
    if found.wf is None:
        raise CompileError([p for p in found.problems if p.severity == "error"])
    wf = found.wf
    raw_nodes = [n for n in doc.get("nodes", []) if isinstance(n, dict) and isinstance(n.get("id"), str)]
    loose = {
        n["id"]: _LooseNode(n, catalog, wf)
        for n in raw_nodes
        if n["id"] in found.invalid and n.get("type") in catalog
    }
    checker = found.ref_checker()
    valid = {n.id: n for n in wf.nodes}
    if node_id not in valid and node_id not in loose:
        raise CompileError(
            [Problem("unknown_node", f"the workflow has no node {node_id!r}", node_id=node_id)]
        )
    body_fields = loose[node_id].body_fields() if node_id in loose else valid[node_id].config.body_fields()
    body = field is not None and field in body_fields
    entries = _scoped_entries(wf)
    seen: set[str] = set()
    for raw in raw_nodes:
        other = raw["id"]
        if other in seen or (other not in valid and other not in loose):
            continue
        seen.add(other)
        access = checker.access(node_id, other, body)
        if isinstance(access, tuple):
            continue
        outputs, inner = _tables(checker, other, loose)
        for name, kind in (inner if access == "body" else outputs).items():
            path = str(Selector(scope="node", node=other, field=name))
            entries.append(ScopeEntry(path, "node", other, name, str(kind)))
    return entries
