"""The compiler's reference pass (rule 9 of :mod:`engine.compiler`): every structured
reference and every template name of a node must name something that exists, is
declared, has the expected type and - for another node's outputs - is upstream of the
reader, so it has run before the reader is ready.
"""

from __future__ import annotations

import functools
import operator

import jinja2
import networkx as nx

from schemas.nodes import NodeConfig
from schemas.types import RESERVED_SCOPES, SYS_VARIABLES, VarType
from schemas.values import walk_refs
from schemas.workflow import NodeBase, Workflow

from .errors import Problem
from .plain_errors import did_you_mean
from .references import template_names, template_selectors

__all__ = ["RefChecker"]


def _ancestor_sets(graph: nx.DiGraph, order: list[str]) -> dict[str, int]:
    """Ancestors of every node as bitsets (int), in one pass over the topological order."""
    index = {nid: i for i, nid in enumerate(order)}
    anc: dict[str, int] = {}
    for nid in order:
        bits = 0
        for pred in graph.predecessors(nid):
            bits |= anc[pred] | (1 << index[pred])
        anc[nid] = bits
    return anc


_config_of = operator.attrgetter("config")


def _types_compatible(actual: VarType | None, expected: VarType | None) -> bool:
    if actual is None or expected is None or VarType.any in (actual, expected):
        return True
    if expected is VarType.file:
        return actual in (VarType.file, VarType.object, VarType.string)
    return actual is expected


class _LazyOutputs(dict[str, dict[str, VarType]]):
    """node id -> declared outputs, computed for the nodes that are actually referenced."""

    def __init__(self, wf: Workflow, by_id: dict[str, NodeBase] | None = None) -> None:
        super().__init__()
        self._wf = wf
        self._nodes = by_id if by_id is not None else {n.id: n for n in wf.nodes}

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __missing__(self, node_id: str) -> dict[str, VarType]:
        outs = self[node_id] = self._nodes[node_id].outputs(self._wf)
        return outs

    def ids(self) -> list[str]:
        """Every node id (for "did you mean" suggestions)."""
        return list(self._nodes)

    def node(self, node_id: str) -> NodeBase | None:
        """The validated node, None for an id that is not one."""
        return self._nodes.get(node_id)


class RefChecker:
    """Rule 9, for one workflow (outputs computed once)."""

    def __init__(
        self,
        wf: Workflow,
        graph: nx.DiGraph,
        order: list[str] | None,
        problems: list[Problem],
        invalid: set[str],
        scope: dict[str, str | None],
        by_id: dict[str, NodeBase] | None = None,
    ):
        self.wf = wf
        self.invalid = invalid
        self.scope = scope
        self.problems = problems
        self.outputs = _LazyOutputs(wf, by_id)  # by_id: {n.id: n for n in wf.nodes}, when made already
        self.inputs = {v.name: v.type for v in wf.inputs}
        self.variables = {v.name: v.type for v in wf.variables}
        self.conversation = {v.name: v.type for v in wf.conversation_variables}
        self.env = {v.name: v.type.var_type() for v in wf.environment}
        if len(self.env) != len(wf.environment):  # one name, one value: which one a run reads must be clear
            seen: set[str] = set()
            for i, var in enumerate(wf.environment):
                if var.name in seen:
                    problems.append(
                        Problem(
                            "duplicate_env",
                            f"environment variable {var.name!r} is declared more "
                            "than once; rename or remove one",
                            path=f"environment[{i}]",
                        )
                    )
                seen.add(var.name)
        self.order = order
        self.graph = graph
        self._anc: dict[str, int] | None = None
        self.index: dict[str, int] = {}  # node id -> position in ``order``, made with ``anc``

    @property
    def anc(self) -> dict[str, int]:
        """Ancestor bitsets, built on first use (many workflows have no node references)."""
        if self._anc is None:
            assert self.order is not None
            self.index = {nid: i for i, nid in enumerate(self.order)}
            self._anc = _ancestor_sets(self.graph, self.order)
        return self._anc

    def reachable_from(self, start: str) -> set[str]:
        """Nodes with a path from ``start`` (``start`` included): a depth-first walk of the
        successors (twice as fast as testing every node's predecessors in order)."""
        reach, todo, succ = {start}, [start], dict(self.graph.adjacency())  # plain dicts: no view per step
        while todo:
            for nid in succ[todo.pop()]:
                if nid not in reach:
                    reach.add(nid)
                    todo.append(nid)
        return reach

    def _inside(self, node_id: str, container: str) -> bool:
        parent = self.scope.get(node_id)
        while parent is not None:
            if parent == container:
                return True
            parent = self.scope.get(parent)
        return False

    def access(self, reader: str, node_ref: str, body: bool = False) -> str | tuple[str, str]:
        """The one rule of what ``reader`` may read of node ``node_ref`` (the compiler
        checks references with it; :mod:`engine.ref_scope` offers exactly what it allows):

        1. A container's body (and the container's own body fields, ``body``) reads the
           container's per-item/round values (:meth:`NodeConfig.body_outputs`: an
           iteration's ``item``/``index``, a loop's variables), never its results: those
           exist only once the container has finished.
        2. A container's body fields read the outputs of the nodes of its own body (they
           run first, in the same item/round scope; a nested container's body nodes run
           in that container's scopes, so only the nested container itself is read).
        3. Any other node is read when it is upstream (it always ran first); a node
           never reads its own outputs.

        Returns ``"body"`` (rule 1: :meth:`NodeConfig.body_outputs`), ``"outputs"``
        (rules 2-3: :meth:`NodeBase.outputs`), or the ``(code, message)`` of the problem
        when ``node_ref`` may not be read at all.
        """
        if (body and node_ref == reader) or self._inside(reader, node_ref):
            return "body"
        if body and self.scope.get(node_ref) == reader:
            return "outputs"
        if node_ref == reader:
            return ("not_ancestor", "a node cannot reference its own outputs")
        if self.order is not None and not (self.anc[reader] >> self.index[node_ref]) & 1:  # anc makes index
            return (
                "not_ancestor",
                f"reference to node {node_ref!r}, which is not upstream of {reader!r}: it may "
                "never run first; connect it upstream",
            )
        return "outputs"

    def body_outputs(self, node_id: str) -> dict[str, VarType]:
        """What ``node_id``'s body reads of it while it runs (rule 1 of :meth:`access`)."""
        node = self.outputs.node(node_id)
        return node.config.body_outputs(self.wf) if node is not None else {}

    def _target(
        self, reader: str, path: str, node_ref: str, field: str | None, body: bool = False
    ) -> VarType | None:
        if node_ref in self.invalid:
            return None
        if node_ref not in self.outputs:
            self.problems.append(
                Problem(
                    "unknown_node",
                    f"reference to unknown node {node_ref!r}{did_you_mean(node_ref, self.outputs.ids())}",
                    node_id=reader,
                    path=path,
                )
            )
            return None
        access = self.access(reader, node_ref, body)
        if isinstance(access, tuple):
            self.problems.append(Problem(access[0], access[1], node_id=reader, path=path))
            return None
        outs = self.body_outputs(node_ref) if access == "body" else self.outputs[node_ref]
        if field is not None and field not in outs:
            where = (
                f" while its body runs (its {field!r} exists once it has finished; read it downstream)"
                if access == "body" and field in self.outputs[node_ref]
                else ""
            )
            self.problems.append(
                Problem(
                    "unknown_output",
                    f"node {node_ref!r} has no output {field!r}{where}{did_you_mean(field, outs)} "
                    f"(outputs: {', '.join(sorted(outs)) or 'none'})",
                    node_id=reader,
                    path=path,
                )
            )
            return None
        return outs.get(field) if field is not None else None

    def _scoped(self, reader: str, path: str, scope: str, field: str | None) -> VarType | None:
        table = {
            "inputs": self.inputs,
            "vars": self.variables,
            "sys": SYS_VARIABLES,
            "conversation": self.conversation,
            "env": self.env,
        }[scope]
        code = {
            "inputs": "unknown_input",
            "vars": "unknown_variable",
            "sys": "unknown_sys",
            "conversation": "unknown_conversation_variable",
            "env": "unknown_env",
        }[scope]
        if field is not None and field not in table:
            self.problems.append(
                Problem(
                    code,
                    f"{scope}.{field} is not declared{did_you_mean(field, table)} "
                    f"(declared: {', '.join(sorted(table)) or 'none'})",
                    node_id=reader,
                    path=path,
                )
            )
            return None
        return table.get(field) if field is not None else None

    def check_nodes(self, nodes: list[NodeBase]) -> None:
        """:meth:`check_node` for each of ``nodes`` whose config has something to check
        (decided once per config class, not per node)."""
        plain = {cls: _plain_config(cls) for cls in set(map(type, map(_config_of, nodes)))}
        if all(plain.values()):
            return
        for node in nodes:
            if not plain[type(node.config)]:
                self.check_node(node)

    def check_node(self, node: NodeBase) -> None:
        """Rule 9 for one node: its structured references, the variables it sets, then its templates."""
        if _plain_config(type(node.config)):
            return
        body_fields = node.config.body_fields()
        for found in walk_refs(node.config, "config"):
            sel = found.ref.selector
            if sel.scope == "node":
                in_body = bool(body_fields) and found.path.split(".")[1].split("[")[0] in body_fields
                actual = self._target(node.id, found.path, sel.node or "", sel.field, in_body)
            else:
                actual = self._scoped(node.id, found.path, sel.scope, sel.field)
            if not sel.path and not _types_compatible(actual, found.expected):
                self.problems.append(
                    Problem(
                        "type_mismatch",
                        f"reference {found.ref.ref!r} is {actual.value if actual else '?'} but "
                        f"{found.expected.value if found.expected else '?'} is expected",
                        node_id=node.id,
                        path=found.path,
                    )
                )
        for field_path, scope, name in node.config.variable_targets():
            self._scoped(node.id, f"config.{field_path}", scope, name)
        local_names = node.config.template_locals()
        for field_path, source in node.config.templates():
            path = f"config.{field_path}"
            try:
                names = template_names(source)
                selectors = list(template_selectors(source))
            except jinja2.TemplateSyntaxError as exc:
                self.problems.append(
                    Problem(
                        "template_syntax", f"line {exc.lineno}: {exc.message}", node_id=node.id, path=path
                    )
                )
                continue
            unknown = set()
            for name in sorted(names - local_names - RESERVED_SCOPES):
                if name not in self.outputs and name not in self.invalid:
                    unknown.add(name)
                    self.problems.append(
                        Problem(
                            "unknown_template_name",
                            f"template uses {name!r}, which is not a node id, a bound variable or "
                            f"inputs/sys/vars/conversation/env/nodes{did_you_mean(name, [*self.outputs.ids(), *local_names])}",
                            node_id=node.id,
                            path=path,
                        )
                    )
            for head, field in selectors:
                if head in local_names or head in unknown:
                    continue
                if head in ("inputs", "sys", "vars", "conversation", "env"):
                    self._scoped(node.id, path, head, field)
                elif head.startswith("nodes."):
                    self._target(node.id, path, head[6:], field)
                elif head in self.outputs:
                    self._target(node.id, path, head, field)


@functools.cache
def _plain_config(cls: type[NodeConfig]) -> bool:
    """True for config classes with no fields and no templates: nothing to check."""
    return not cls.model_fields and cls.templates is NodeConfig.templates
