"""``engine.shapes.system_reads``: the ``sys`` variables a document's valid nodes read -
through templates, ``{"ref": ...}`` values and config defaults - so a run form asks for
the user's message only when the workflow reads it."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from engine.shapes import system_reads, valid_nodes
from nodes.catalog import builtin_catalog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def doc(*nodes: dict) -> dict:
    """start -> the given nodes, in a line (edges do not matter to what is read)."""
    body = [{"id": "start", "type": "start"}, *nodes]
    ids = [n["id"] for n in body]
    return {"id": "wf", "inputs": [{"name": "topic", "type": "string"}], "nodes": body,
            "edges": [{"id": f"e{i}", "source": a, "target": b} for i, (a, b) in enumerate(pairwise(ids))]}


def reads(document: dict) -> list[str]:
    return system_reads(document, catalog=builtin_catalog())


def test_a_chat_node_left_at_its_defaults_reads_the_message_and_the_history():
    # user_prompt defaults to "{{ sys.query }}", history to 6 turns of sys.history
    assert reads(doc({"id": "llm", "type": "chat", "config": {"model": "default"}})) == ["history", "query"]


@pytest.mark.parametrize("kind, config", [
    ("classify_question", {"categories": [{"id": "a", "name": "A"}, {"id": "b", "name": "B"}]}),
    ("extract_fields", {"fields": [{"name": "city", "type": "string"}]}),
    ("agent", {}),
])
def test_other_model_nodes_read_the_message_through_their_defaults(kind, config):
    assert "query" in reads(doc({"id": "n", "type": kind, "config": {"model": "default", **config}}))


def test_an_explicit_template_and_a_ref_are_read_whatever_the_spelling():
    document = doc(
        {"id": "t", "type": "template", "config": {"template": "{{ sys.user_id }} asks {{ sys['query'] }}"}},
        {"id": "end", "type": "end", "config": {"outputs": [{"name": "chat", "value": {"ref": "sys.chat_id"}}]}},
    )
    assert reads(document) == ["chat_id", "query", "user_id"]


def test_a_workflow_that_reads_nothing_of_sys_answers_an_empty_list():
    document = doc(
        {"id": "llm", "type": "chat", "config": {"model": "default", "user_prompt": {"ref": "inputs.topic"},
                                                  "history": 0, "system_prompt": "mention sys.query in prose"}},
        {"id": "say", "type": "answer", "config": {"text": "{{ llm.answer }} (not {{ inputs.topic }})"}},
    )
    assert reads(document) == [], "text that only mentions sys.query is not a read; history 0 uses no history"


def test_history_counts_only_when_turns_go_into_the_prompt():
    base = {"model": "default", "user_prompt": "{{ inputs.topic }}"}
    assert reads(doc({"id": "llm", "type": "chat", "config": {**base, "history": 2}})) == ["history"]
    assert reads(doc({"id": "llm", "type": "chat", "config": {**base, "history": 0}})) == []
    # extract_fields shows no history by default (LLMNodeConfig's 0)
    extract = {"model": "default", "text": "{{ inputs.topic }}", "fields": [{"name": "x", "type": "string"}]}
    assert reads(doc({"id": "x", "type": "extract_fields", "config": extract})) == []


def test_a_chat_user_prompt_saying_question_reads_the_message():
    config = {"model": "default", "user_prompt": "Please answer: {{ question }}", "history": 0}
    assert reads(doc({"id": "llm", "type": "chat", "config": config})) == ["query"]


def test_nodes_that_do_not_validate_and_broken_templates_add_nothing():
    document = doc(
        {"id": "bad", "type": "template", "config": {"template": "{{ sys.query }}", "no_such_field": 1}},
        {"id": "broken", "type": "answer", "config": {"text": "{{ sys.user_id "}},
        {"id": "weird", "type": "teleport", "config": {"text": "{{ sys.now }}"}},
        {"id": "typo", "type": "answer", "config": {"text": "{{ sys.querry }} {{ sys }}"}},
    )
    assert [n.id for n in valid_nodes(document, builtin_catalog())] == ["start", "broken", "typo"]
    assert reads(document) == []
    assert reads({"nodes": "not a list"}) == [] and reads({}) == []


def test_the_echo_chat_example_reads_query_and_history():
    echo = json.loads((EXAMPLES / "echo_chat.json").read_text(encoding="utf-8"))
    assert reads(echo) == ["history", "query"]
    hello = json.loads((EXAMPLES / "hello.json").read_text(encoding="utf-8"))
    assert reads(hello) == []
