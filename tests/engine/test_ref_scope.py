"""The variable picker's scope (engine.ref_scope) is exactly what the compiler accepts.

Generated graphs with branches, iterations, loops, nested bodies and sibling containers:
for every reader field, every candidate reference (each node's outputs and body values,
declared and undeclared variables) is put into that field at once, one per list item, and
the compiler's verdict on each item is compared with the offer, both ways.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from engine.compiler import analyse
from engine.documents import canonical_document
from engine.ref_scope import reference_scope
from schemas.types import Selector
from tests.support.catalog import TEST_CATALOG, check_workflow
from tests.support.workflows import edge, node

#: problems that mean "this reference may not be used here" (types are a separate check)
_SCOPE_CODES = {"unknown_node", "unknown_output", "not_ancestor", "unknown_input", "unknown_variable", "unknown_sys",
                "unknown_conversation_variable", "unknown_env"}


class _Gen:
    """A random workflow: blocks hung off earlier blocks (so some are siblings, never
    upstream of each other), each a plain node, an if-else with two arms, an iteration
    or a loop whose body may hold another container."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.nodes: list[dict[str, Any]] = [node("start", "start")]
        self.edges: list[dict[str, Any]] = []
        self.count = 0

    def _id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _agg(self, parent: str | None) -> str:
        nid = self._id("a")
        fields = {"parent": parent} if parent else {}
        self.nodes.append(node(nid, "variable_aggregator", {"refs": [{"ref": "inputs.q"}]}, **fields))
        return nid

    def _body(self, parent: str, depth: int) -> str:
        """A chain of 1-3 body nodes, maybe with a nested container; returns the last."""
        last = None
        for _ in range(self.rng.randint(1, 3)):
            if depth < 2 and self.rng.random() < 0.3:
                nid = self._container(parent, depth + 1)
            else:
                nid = self._agg(parent)
            if last is not None:
                self.edges.append(edge(last, nid))
            last = nid
        if last is None or not last.startswith("a"):  # the container's result reads a body node's output
            nid = self._agg(parent)
            if last is not None:
                self.edges.append(edge(last, nid))
            last = nid
        return last

    def _container(self, parent: str | None, depth: int) -> str:
        fields = {"parent": parent} if parent else {}
        if self.rng.random() < 0.5:
            nid = self._id("it")
            self.nodes.append(node(nid, "iteration", {"items": {"ref": "inputs.list"}, "collect": None}, **fields))
            last = self._body(nid, depth)
            self.nodes[[n["id"] for n in self.nodes].index(nid)]["config"]["collect"] = {"ref": f"{last}.output"}
        else:
            nid = self._id("lp")
            self.nodes.append(node(nid, "loop", {"variables": [{"name": "n", "type": "number", "value": 0}],
                                                 "update": [], "max_iterations": 3}, **fields))
            last = self._body(nid, depth)
            self.nodes[[n["id"] for n in self.nodes].index(nid)]["config"]["update"] = [
                {"variable": "n", "value": {"ref": f"{last}.output"}}]
        return nid

    def build(self) -> dict[str, Any]:
        exits = ["start"]
        for _ in range(self.rng.randint(3, 6)):
            source = self.rng.choice(exits)
            shape = self.rng.choice(["plain", "branch", "container"])
            if shape == "plain":
                nid = self._agg(None)
                self.edges.append(edge(source, nid))
            elif shape == "branch":
                gate = self._id("if")
                self.nodes.append(node(gate, "if_else", {"cases": [{"id": "yes", "conditions": [
                    {"left": {"ref": "inputs.q"}, "operator": "equals", "right": "y"}]}]}))
                self.edges.append(edge(source, gate))
                left, right, nid = self._agg(None), self._agg(None), self._agg(None)
                self.edges += [edge(gate, left, "yes"), edge(gate, right, "else"), edge(left, nid), edge(right, nid)]
            else:
                nid = self._container(None, 0)
                self.edges.append(edge(source, nid))
            exits.append(nid)
        return {"id": "gen", "inputs": [{"name": "q"}, {"name": "list", "type": "array"}],
                "variables": [{"name": "count", "type": "number", "default": 0}],
                "environment": [{"name": "TOKEN", "type": "secret"}, {"name": "LIMIT", "type": "number", "value": 3}],
                "nodes": self.nodes, "edges": self.edges}


def _candidates(doc: dict[str, Any]) -> list[str]:
    """Every reference worth probing: each node's outputs and body values, plus misses."""
    found = analyse(canonical_document(doc)[0], TEST_CATALOG)
    assert found.wf is not None
    out = ["inputs.q", "inputs.list", "inputs.nope", "vars.count", "vars.nope", "sys.query", "sys.nope",
           "env.TOKEN", "env.LIMIT", "env.nope"]
    for n in found.wf.nodes:
        names = {*n.outputs(found.wf), *n.config.body_outputs(found.wf), "nope"}
        out += [str(Selector(scope="node", node=n.id, field=name)) for name in sorted(names)]
    return out


def _readers(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(node id, field) of every reader: aggregators' refs, iterations' items and collect
    (a body field), loops' update values (a body field)."""
    out: list[tuple[str, str | None]] = []
    for n in doc["nodes"]:
        if n["type"] == "variable_aggregator":
            out.append((n["id"], None))
        elif n["type"] == "iteration":
            out += [(n["id"], "items"), (n["id"], "collect")]
        elif n["type"] == "loop":
            out.append((n["id"], "update"))
    return out


def _probe(doc: dict[str, Any], reader: str, field: str | None, refs: list[str]) -> tuple[dict[str, Any], str]:
    """``doc`` with every ref of ``refs`` in the reader's field (one list item each) and the
    config path prefix of item ``i``."""
    probe = {**doc, "nodes": [dict(n, config=dict(n["config"])) if "config" in n else n for n in doc["nodes"]]}
    target = next(n for n in probe["nodes"] if n["id"] == reader)
    items = [{"ref": r} for r in refs]
    if field is None:
        target["config"]["refs"] = items
        return probe, "config.refs"
    if field == "update":
        target["config"]["update"] = [{"variable": "n", "value": items}]
        return probe, "config.update[0].value"
    target["config"][field] = items
    return probe, f"config.{field}"


def _accepted(doc: dict[str, Any], reader: str, field: str | None, refs: list[str]) -> set[str]:
    probe, prefix = _probe(doc, reader, field, refs)
    rejected: set[int] = set()
    for p in check_workflow(probe):
        if p.node_id == reader and p.code in _SCOPE_CODES and (p.path or "").startswith(prefix):
            m = re.match(re.escape(prefix) + r"\[(\d+)\]", p.path or "")
            assert m, f"unexpected problem path {p.path}"
            rejected.add(int(m.group(1)))
    return {r for i, r in enumerate(refs) if i not in rejected}


@pytest.mark.parametrize("seed", range(30))
def test_scope_equals_compiler_acceptance_on_generated_graphs(seed):
    doc = _Gen(seed).build()
    assert not [p for p in check_workflow(doc) if p.severity == "error"], "the generated graph compiles"
    candidates = _candidates(doc)
    for reader, field in _readers(doc):
        offered = {e.path for e in reference_scope(doc, reader, catalog=TEST_CATALOG, field=field)}
        accepted = _accepted(doc, reader, field, candidates)
        assert offered & set(candidates) == accepted, (reader, field, offered ^ accepted)
        assert offered <= set(candidates) | {f"sys.{n}" for n in ("run_id", "chat_id", "workflow_id", "now",
                                                                  "user_id", "history")}


def _iteration_flow(collect: Any) -> dict[str, Any]:
    """start -> it (body: ask -> fmt) -> after; a sibling iteration it2 (body: other)."""
    config: dict[str, Any] = {"items": {"ref": "inputs.list"}}
    if collect is not None:
        config["collect"] = collect
    return {"id": "w", "inputs": [{"name": "list", "type": "array"}], "nodes": [
        node("start", "start"), node("it", "iteration", config),
        node("ask", "template", {"template": "{{ it.item }}"}, parent="it"),
        node("fmt", "template", {"template": "x"}, parent="it"),
        node("it2", "iteration", {"items": {"ref": "inputs.list"}, "collect": {"ref": "other.output"}}),
        node("other", "template", {"template": "y"}, parent="it2"),
        node("after", "template", {"template": "{{ it.results }}"})],
        "edges": [edge("start", "it"), edge("ask", "fmt"), edge("start", "it2"), edge("it", "after")]}


@pytest.mark.parametrize("collect", [None, {"ref": "fmt.output"}])
def test_body_node_reads_item_and_index_not_results_nor_sibling_bodies(collect):
    paths = {e.path for e in reference_scope(_iteration_flow(collect), "fmt", catalog=TEST_CATALOG)}
    assert {"it.item", "it.index", "ask.output", "inputs.list"} <= paths, "offered before collect is set too"
    assert not paths & {"it.results", "it.count", "it.statuses", "other.output", "it2.results", "fmt.output"}


def test_iteration_fields_items_sees_upstream_collect_sees_body():
    doc = _iteration_flow({"ref": "fmt.output"})
    items = {e.path for e in reference_scope(doc, "it", catalog=TEST_CATALOG, field="items")}
    collect = {e.path for e in reference_scope(doc, "it", catalog=TEST_CATALOG, field="collect")}
    assert "fmt.output" not in items and "it.item" not in items
    assert {"fmt.output", "ask.output", "it.item", "it.index"} <= collect
    after = {e.path for e in reference_scope(doc, "after", catalog=TEST_CATALOG)}
    assert {"it.results", "it.count"} <= after and not after & {"it.item", "it.index", "fmt.output"}


def test_compiler_rejects_results_inside_body_and_item_downstream():
    doc = _iteration_flow({"ref": "fmt.output"})
    doc["nodes"][3]["config"]["template"] = "{{ it.results }}"
    doc["nodes"][6]["config"]["template"] = "{{ it.item }}"
    problems = {(p.node_id, p.code) for p in check_workflow(doc)}
    assert ("fmt", "unknown_output") in problems and ("after", "unknown_output") in problems


def test_unknown_node_or_bad_document_is_a_compile_error():
    from engine.errors import CompileError
    with pytest.raises(CompileError, match="no node 'ghost'"):
        reference_scope(_iteration_flow(None), "ghost", catalog=TEST_CATALOG)
    with pytest.raises(CompileError):
        reference_scope({"id": "w", "nodes": [], "inputs": "bad"}, "x", catalog=TEST_CATALOG)


def test_a_container_field_reads_its_own_body_not_a_nested_body():
    doc = {"id": "w", "inputs": [{"name": "list", "type": "array"}], "nodes": [
        node("start", "start"),
        node("outer", "iteration", {"items": {"ref": "inputs.list"}, "collect": {"ref": "inner.results"}}),
        node("inner", "iteration", {"items": {"ref": "outer.item"}, "collect": {"ref": "deep.output"}},
             parent="outer"),
        node("deep", "template", {"template": "{{ inner.item }} of {{ outer.index }}"}, parent="inner")],
        "edges": [edge("start", "outer")]}
    assert not [p for p in check_workflow(doc) if p.severity == "error"]
    collect = {e.path for e in reference_scope(doc, "outer", catalog=TEST_CATALOG, field="collect")}
    assert "inner.results" in collect and "deep.output" not in collect
    doc["nodes"][1]["config"]["collect"] = {"ref": "deep.output"}
    assert [p.code for p in check_workflow(doc) if p.node_id == "outer"] == ["not_ancestor"]


def test_environment_variables_are_offered_a_secret_as_a_string():
    doc = _iteration_flow({"ref": "fmt.output"})
    doc["environment"] = [{"name": "TOKEN", "type": "secret"}, {"name": "LIMIT", "type": "number", "value": 3}]
    env = {(e.path, e.type) for e in reference_scope(doc, "fmt", catalog=TEST_CATALOG) if e.group == "env"}
    assert env == {("env.TOKEN", "string"), ("env.LIMIT", "number")}
