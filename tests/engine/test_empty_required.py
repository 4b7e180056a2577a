"""``empty_required``: a config field without a default that holds an empty or
whitespace-only string is an error of the compiler, for every kind alike (the check reads
the config models, not a list of kinds), so a workflow with an answer that says nothing
or a request to no URL cannot be run or published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import CompileError
from engine.settings import Settings
from engine.shapes import deployment_problems
from nodes import builtin_catalog
from nodes.llm.model_registry import load_registry
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.workflows import build, chain_edges, node

ROOT = Path(__file__).resolve().parents[2]


def problems_of(doc, code="empty_required"):
    return [(p.code, p.node_id, p.path, p.severity, p.message) for p in check_workflow(doc) if p.code == code]


@pytest.mark.parametrize("blank", ["", "   ", "\n\t "])
def test_an_answer_with_empty_text_is_an_error_naming_node_and_field(blank):
    doc = build([node("answer", "answer", {"text": blank})], chain_edges("start", "answer"))
    assert problems_of(doc) == [("empty_required", "answer", "config.text", "error", "text is required and empty")]
    with pytest.raises(CompileError) as failed:
        compile_workflow(doc, use_cache=False)
    assert [str(p) for p in failed.value.problems] == [
        "[empty_required] node 'answer' config.text: text is required and empty"]


@pytest.mark.parametrize(("kind", "config", "field"), [
    ("template", {"template": " "}, "template"),
    ("http_request", {"url": ""}, "url"),
    ("user_select", {"description": "", "options": [{"id": "a", "label": "A"}]}, "description"),
    ("chat", {"model": "  "}, "model"),
])
def test_every_kind_with_a_required_string_gets_the_same_check(kind, config, field):
    doc = build([node("n", kind, config)], chain_edges("start", "n"))
    found = [(p.code, p.path) for p in check_workflow(doc) if p.node_id == "n" and p.severity == "error"]
    # a blank model is not also reported as an unknown model: one field, one problem
    assert found == [("empty_required", f"config.{field}")]


def test_fields_with_a_default_may_be_empty_and_filled_ones_pass():
    doc = build([node("c", "chat", {"model": "default", "system_prompt": "", "user_prompt": "{{ sys.query }}"}),
                 node("t", "template", {"template": "{{ c.answer }}"}), node("a", "answer", {"text": "x"})],
                chain_edges("start", "c", "t", "a"))
    assert [p for p in check_workflow(doc) if p.severity == "error"] == []


def test_the_node_keeps_its_outputs_so_readers_get_no_follow_up_errors():
    doc = build([node("t", "template", {"template": ""}), node("a", "answer", {"text": "{{ t.output }}"})],
                chain_edges("start", "t", "a"))
    assert [(p.code, p.node_id) for p in check_workflow(doc)] == [("empty_required", "t")]


def test_reported_alongside_problems_of_an_invalid_top_level():
    doc = build([node("a", "answer", {"text": ""})], chain_edges("start", "a"), limits="nope")
    assert {p.code for p in check_workflow(doc)} == {"invalid_document", "empty_required"}


def test_the_examples_have_no_empty_required_field_and_no_error():
    catalog = builtin_catalog()
    for path in sorted((ROOT / "examples").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        found = [*check_workflow(doc, models=load_registry(env={})),
                 *deployment_problems(doc, catalog=catalog, settings=Settings())]
        assert [str(p) for p in found if p.severity == "error"] == [], path.name
