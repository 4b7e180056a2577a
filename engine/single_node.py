"""Running one node of a workflow on its own ("run this step"): what it reads, the
state it runs over, and the plan that holds only it.

A builder who edits one node wants to see what it does with given values, without
running (and paying for) what comes before it. A single-node run is an ordinary run of
the workflow - stored, listed, traced, its usage counted - whose plan holds the one
node, and whose state holds the values it reads:

1. :func:`read_references` lists what the node reads from outside itself, as the
   compiler sees its structured references and templates, keyed ``scope.field``:
   ``start.query``, ``inputs.city``, ``sys.query``, ``vars.count``, ``iter.item`` (a
   node in an iteration's body reads its container's ``item``). A path after the field
   is the node's business (``http.json.items[0]`` reads ``http.json``). A container
   (iteration, loop) reads what its body nodes read from outside the body too.
2. :func:`seed_single_node` puts the given values where a reference finds them: a node
   output in a node run of that node marked ``data["given"]`` (succeeded, never
   executed), an input in ``inputs``, a system or run variable in ``sys`` / ``vars``.
   Every reference without a value and without a default is refused at once
   (:class:`MissingNodeInputs` names each), before anything is stored.
3. :func:`single_node_plan` is the plan of that one node (no edges, its own body kept),
   so the scheduler runs it exactly as in a full run: the same executor, attempts,
   retries, timeouts, sandbox, model calls and usage. ``state.sys["single_node"]``
   names the node, so a process that continues the run after a crash (or a queue
   worker) rebuilds the same plan (:meth:`engine.service.RunService._plan_of`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping
from typing import Any

import jinja2

from schemas.run import NodeRun, RunState
from schemas.types import SYS_VARIABLES, NodeRunStatus, RunStatus, VarType
from schemas.values import walk_refs
from schemas.workflow import NodeBase

from .compiler import CompiledPlan, NodePlan
from .errors import FlowloomError
from .plain_errors import did_you_mean
from .references import template_names, template_selectors
from .run_records import id_part

__all__ = [
    "MissingNodeInputs",
    "NodeRunRefused",
    "RUN_KIND",
    "ReadRef",
    "find_node",
    "read_references",
    "seed_single_node",
    "single_node_plan",
    "values_from_run",
]

#: ``state.sys["run_kind"]`` of a single-node run (lists and the history show it)
RUN_KIND = "single_node"
#: system variables every run has a value for, so a node reading them needs none given
_AUTOMATIC_SYS = frozenset({"run_id", "chat_id", "workflow_id", "now", "user_id", "history"})


class NodeRunRefused(FlowloomError):
    """The node cannot be run on its own: unknown in the workflow. The message names it."""


class MissingNodeInputs(FlowloomError):
    """References the node reads that were given no value (and have no default).

    ``missing``: the reference keys (``start.query``); the message names each and says
    how to give it."""

    def __init__(self, node_id: str, missing: list[str]) -> None:
        self.node_id, self.missing = node_id, missing
        super().__init__(
            f"node {node_id!r} reads {', '.join(repr(m) for m in missing)}: give "
            f"{'a value' if len(missing) == 1 else 'values'} for "
            f"{'it' if len(missing) == 1 else 'them'} (or run the workflow once so its last run has them)"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ReadRef:
    """One reference a node reads: ``key`` (``start.query``), its scope (``node``,
    ``inputs``, ``sys``, ``vars``), the node it reads (node scope), the field (None: the
    whole node), the declared type when known, and whether it has a default (then a
    value need not be given)."""

    key: str
    scope: str
    node: str | None
    field: str | None
    type: VarType | None
    optional: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON form (API answers, the canvas's form)."""
        return {
            "key": self.key,
            "scope": self.scope,
            "node": self.node,
            "field": self.field,
            "type": self.type.value if self.type is not None else None,
            "optional": self.optional,
        }


def find_node(plan: CompiledPlan, node_id: str) -> tuple[CompiledPlan, NodePlan, str | None]:
    """``(scope plan, node plan, container id)`` of ``node_id`` at the top level or in a
    body at any depth (container None at the top level).

    Raises:
        NodeRunRefused: no such node (with a close name when one was misspelt).
    """
    found = _search(plan, node_id, None)
    if found is None:
        ids = [n.id for n in plan.workflow.nodes]
        raise NodeRunRefused(
            f"no node {node_id!r} in workflow {plan.workflow.id!r}{did_you_mean(node_id, ids)}"
        )
    return found


def _search(
    plan: CompiledPlan, node_id: str, container: str | None
) -> tuple[CompiledPlan, NodePlan, str | None] | None:
    node_plan = plan.nodes.get(node_id)
    if node_plan is not None and not node_plan.members:
        return plan, node_plan, container
    for nid, inner in plan.nodes.items():
        if inner.body is not None:
            # a loop region's pseudo-node is no node of the document: its members keep the enclosing container
            found = _search(inner.body, node_id, container if inner.members else nid)
            if found is not None:
                return found
    return None


def _raw_refs(node: NodeBase, node_ids: set[str]) -> Iterator[tuple[str, str | None]]:
    """``(head, field)`` of every reference in ``node``'s config: ``inputs``/``sys``/``vars``
    or a node id as head; field None for a node read whole."""
    for found in walk_refs(node.config, "config"):
        sel = found.ref.selector
        yield (sel.node or "", sel.field) if sel.scope == "node" else (sel.scope, sel.field)
    cfg = node.config
    locals_ = cfg.template_locals()
    for field_path, source in cfg.templates():
        try:
            selectors = list(template_selectors(source))
            names = template_names(source)
        except jinja2.TemplateSyntaxError:
            continue  # the compiler refused it already
        for local, ref in cfg.template_local_refs(field_path).items():
            if local in names:  # a local standing for a reference the node resolves itself
                scope, _, name = ref.partition(".")
                yield scope, name or None
        heads = set()
        for head, field in selectors:
            head = head[6:] if head.startswith("nodes.") else head
            if head in locals_:
                continue
            heads.add(head)
            if head in ("inputs", "sys", "vars") or head in node_ids:
                yield head, field
        for name in names - locals_ - heads:  # a node read whole: {{ n1 }}
            if name in node_ids:
                yield name, None


def read_references(plan: CompiledPlan, node_id: str) -> list[ReadRef]:
    """What ``node_id`` reads from outside itself (module docstring, rule 1), in the order
    of its config, each once.

    Raises:
        NodeRunRefused: no such node.
    """
    _scope, node_plan, _container = find_node(plan, node_id)
    wf = plan.workflow
    by_id = {n.id: n for n in wf.nodes}
    inside = _body_members(node_plan)
    readers = [node_plan.node] + [by_id[m] for m in inside if m in by_id]
    own = {node_id, *inside}
    declared_inputs = {v.name: v for v in wf.inputs}
    declared_vars = {v.name: v for v in wf.variables}
    refs: dict[str, ReadRef] = {}
    for reader in readers:
        for head, field in _raw_refs(reader, set(by_id)):
            if head in own:
                continue
            key = f"{head}.{field}" if field is not None else head
            if key in refs or (head not in ("inputs", "sys", "vars") and head not in by_id):
                continue
            if head == "inputs":
                var = declared_inputs.get(field or "")
                refs[key] = ReadRef(
                    key,
                    "inputs",
                    None,
                    field,
                    var.type if var else None,
                    var is not None and var.default is not None,
                )
            elif head == "sys":
                refs[key] = ReadRef(
                    key, "sys", None, field, SYS_VARIABLES.get(field or ""), (field or "") in _AUTOMATIC_SYS
                )
            elif head == "vars":
                var = declared_vars.get(field or "")
                refs[key] = ReadRef(key, "vars", None, field, var.type if var else None, var is not None)
            else:
                types = by_id[head].outputs(wf)
                refs[key] = ReadRef(
                    key, "node", head, field, types.get(field) if field else VarType.object, False
                )
    return list(refs.values())


def _body_members(node_plan: NodePlan) -> list[str]:
    """Every node inside ``node_plan``'s body, at any depth."""
    out: list[str] = []
    body = node_plan.body
    if body is None:
        return out
    for nid, inner in body.nodes.items():
        if not inner.members:
            out.append(nid)
        out.extend(_body_members(inner))
    return out


def single_node_plan(plan: CompiledPlan, node_id: str) -> CompiledPlan:
    """The plan holding only ``node_id`` (rule 3): its executor and body, no edges, no
    answer stream; the workflow, content hash and catalog of ``plan``.

    Raises:
        NodeRunRefused: no such node.
    """
    _scope, node_plan, _container = find_node(plan, node_id)
    alone = NodePlan(node_plan.node, node_plan.executor, (), (), node_plan.body, ())
    return dataclasses.replace(
        plan,
        nodes={node_id: alone},
        start_id=node_id,
        order=(node_id,),
        roots=(node_id,),
        stream=None,
        warnings=(),
    )


def seed_single_node(plan: CompiledPlan, state: RunState, node_id: str, values: Mapping[str, Any]) -> None:
    """Put ``values`` (reference key -> value) into ``state``, a fresh run of ``plan``
    (rule 2); mark it a single-node run of ``node_id``. Values for keys the node does
    not read are ignored.

    Raises:
        NodeRunRefused: no such node.
        MissingNodeInputs: a reference without a value or a default.
    """
    refs = read_references(plan, node_id)
    missing = [ref.key for ref in refs if ref.key not in values and not ref.optional]
    if missing:
        raise MissingNodeInputs(node_id, missing)
    kinds = {n.id: n.type for n in plan.workflow.nodes}
    now = time.time()
    for ref in refs:
        if ref.key not in values:
            continue
        value = values[ref.key]
        if ref.scope == "inputs":
            state.inputs[ref.field or ""] = value
        elif ref.scope == "sys":
            state.sys[ref.field or ""] = value
        elif ref.scope == "vars":
            state.variables[ref.field or ""] = value
        else:
            node = ref.node or ""
            given = state.node_runs.get(node)
            if given is None:
                given = state.node_runs[node] = NodeRun(
                    id=f"{state.run_id}:{id_part(node)}",
                    node_id=node,
                    kind=kinds.get(node, ""),
                    status=NodeRunStatus.succeeded,
                    outputs={},
                    started_at=now,
                    finished_at=now,
                    data={"given": True},
                )
            if ref.field is None:
                given.outputs = dict(value) if isinstance(value, Mapping) else {"value": value}
            else:
                assert given.outputs is not None
                given.outputs[ref.field] = value
    state.status = RunStatus.pending
    state.sys["run_kind"], state.sys["single_node"] = RUN_KIND, node_id


def values_from_run(plan: CompiledPlan, node_id: str, past: RunState) -> dict[str, Any]:
    """The values ``node_id``'s references had in ``past`` (a run of the same workflow):
    for each reference, the node output, input, system or run variable as that run
    left it. A reference ``past`` cannot answer (its node did not run there) is left out.
    A node inside a body reads its container's item/index of the last round kept."""
    out: dict[str, Any] = {}
    for ref in read_references(plan, node_id):
        if ref.scope == "inputs" and ref.field in past.inputs:
            out[ref.key] = past.inputs[ref.field]
        elif ref.scope == "sys" and ref.field in past.sys and ref.field not in _AUTOMATIC_SYS:
            out[ref.key] = past.sys[ref.field]
        elif ref.scope == "vars" and ref.field in past.variables:
            out[ref.key] = past.variables[ref.field]
        elif ref.scope == "node":
            run = past.node_runs.get(ref.node or "")
            if run is None or run.outputs is None or run.status is not NodeRunStatus.succeeded:
                continue
            if ref.field is None:
                out[ref.key] = run.outputs
            elif ref.field in run.outputs:
                out[ref.key] = run.outputs[ref.field]
    return out
