"""``unknown_dataset``: validation warns, per node and field, when a workflow searches a
dataset id the tenant has none of - a knowledge retrieval node's ``datasets`` and an
agent's dataset tools alike - so a builder learns it before a run pays for the nodes
before the search; only a warning (the dataset may be made before anyone runs it), and
nothing is checked when no dataset ids are given."""

from __future__ import annotations

from engine.settings import Settings
from engine.shapes import deployment_problems, searched_datasets, valid_nodes
from nodes import builtin_catalog
from tests.support.workflows import build, chain_edges, node

FLOW = build([node("kr", "knowledge_retrieval", {"datasets": ["handbook", "faq"]}),
              node("agent", "tool_call", {"model": "default", "dataset_tools": [{"datasets": ["faq", "ghost"]}]})],
             chain_edges("start", "kr", "agent"))


def unknown(datasets):
    problems = deployment_problems(FLOW, catalog=builtin_catalog(), settings=Settings(), datasets=datasets)
    return [(p.severity, p.node_id, p.path) for p in problems if p.code == "unknown_dataset"]


def test_each_searched_id_the_tenant_lacks_is_a_warning_naming_node_and_field():
    assert unknown({"faq"}) == [("warning", "kr", "config.datasets[0]"),
                                ("warning", "agent", "config.dataset_tools[0].datasets[1]")]
    assert unknown({"handbook", "faq", "ghost"}) == []
    assert unknown(None) == [], "no dataset ids given: not checked"
    [problem] = [p for p in deployment_problems(FLOW, catalog=builtin_catalog(), settings=Settings(),
                                                datasets={"faq", "handbook"}) if p.code == "unknown_dataset"]
    assert "'ghost'" in problem.message and "flowloom datasets create NAME --id ghost" in problem.message


def test_searched_datasets_lists_every_id_of_valid_nodes():
    assert searched_datasets(valid_nodes(FLOW, builtin_catalog())) == {"handbook", "faq", "ghost"}
    hello = build([node("t", "template", {"template": "hi"})], chain_edges("start", "t"))
    assert searched_datasets(valid_nodes(hello, builtin_catalog())) == set()


def test_a_semantic_search_of_a_dataset_without_an_embedding_model_is_a_warning_at_its_mode():
    from types import SimpleNamespace

    flow = build([node("kr", "knowledge_retrieval", {"datasets": ["plain", "vec"], "mode": "semantic"}),
                  node("agent", "tool_call", {"model": "default", "dataset_tools": [
                      {"datasets": ["vec"], "mode": "semantic", "name": "a"},
                      {"datasets": ["plain"], "mode": "semantic", "name": "b"},
                      {"datasets": ["plain"], "mode": "full_text", "name": "c"}]})],
                 chain_edges("start", "kr", "agent"))
    datasets = {"plain": SimpleNamespace(embedding_model=None), "vec": SimpleNamespace(embedding_model="emb")}
    problems = deployment_problems(flow, catalog=builtin_catalog(), settings=Settings(), datasets=datasets)
    assert [(p.severity, p.node_id, p.path) for p in problems if p.code == "retrieval_degraded"] == [
        ("warning", "kr", "config.mode"), ("warning", "agent", "config.dataset_tools[1].mode")]
    ids_only = deployment_problems(flow, catalog=builtin_catalog(), settings=Settings(), datasets={"plain", "vec"})
    assert not [p for p in ids_only if p.code == "retrieval_degraded"], "ids alone: the models are not known"
