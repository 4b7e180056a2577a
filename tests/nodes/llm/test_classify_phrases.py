"""classify_question: replies that name a category inside a short phrase, ambiguous replies,
and a fallback that is visible (event, node run record) - through the real engine and the
scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodes.llm.classify import MAX_PHRASE_WORDS, TOOL_NAME, read_answer
from schemas.events import event_adapter
from schemas.nodes_llm import Category
from schemas.types import NodeRunStatus, RunStatus
from tests.support.openai_server import text_reply, tool_args_split_reply
from tests.support.workflows import build, edge, node

CATEGORIES = [
    {"id": "billing", "name": "Billing"},
    {"id": "refund", "name": "Refund request"},
    {"id": "tech_support", "name": "Technical support"},
    {"id": "other", "name": "Something else"},
]
CATS = [Category(**c) for c in CATEGORIES]


def classify_doc(model: str = "plain-model") -> dict[str, Any]:
    nodes = [node("cl", "classify_question", {"model": model, "categories": CATEGORIES, "memory": False})]
    edges = [edge("start", "cl")]
    for c in CATEGORIES:
        nodes.append(node(f"on_{c['id']}", "template", {"template": c["id"]}))
        edges.append(edge("cl", f"on_{c['id']}", c["id"]))
    return build(nodes, edges, inputs=[{"name": "query", "type": "string"}])


def taken(state) -> list[str]:
    return [c["id"] for c in CATEGORIES if state.node_runs[f"on_{c['id']}"].status is NodeRunStatus.succeeded]


WRAPPED = [
    ("Category: refund.", "refund"),
    ("category: Refund", "refund"),
    ("The category is: Billing", "billing"),
    ("Answer - billing!", "billing"),
    ('"refund"', "refund"),
    ("'Refund request'.", "refund"),
    ("**Technical support**", "tech_support"),
    ("tech_support.", "tech_support"),
    ("tech-support", "tech_support"),
    ("Category: Technical Support", "tech_support"),
    ("REFUND REQUEST!!", "refund"),
    ("It is about billing, I think.", "billing"),
    ("Label: `other`", "other"),
    ("Something else.", "other"),
]


@pytest.mark.parametrize(("reply", "expected"), WRAPPED)
async def test_a_category_named_inside_a_short_phrase_is_matched(openai_server, llm_run, reply, expected):
    openai_server.script(text_reply(reply))
    state, events = await llm_run(classify_doc(), {"query": "q"})
    assert state.status is RunStatus.succeeded, state.error
    assert taken(state) == [expected]
    assert state.node_runs["cl"].data["classify"]["fallback_reason"] is None
    assert not [e for e in events if e.type == "node_warning"]


@pytest.mark.parametrize(("arguments", "expected"), [
    ('{"category": "Refund."}', "refund"),
    ('{"category": "Category: billing"}', "billing"),
    ('{"category": "TECH_SUPPORT"}', "tech_support"),
])
async def test_the_same_reading_applies_to_tool_arguments_and_json(openai_server, llm_run, arguments, expected):
    openai_server.script(tool_args_split_reply(TOOL_NAME, arguments))
    state, _ = await llm_run(classify_doc("tools-model"), {"query": "q"})
    assert taken(state) == [expected]
    openai_server.script(text_reply(f"Sure: {arguments}"))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    assert taken(state) == [expected]


FALLBACKS = [
    ("billing or refund", "ambiguous_reply", ["billing", "refund"]),
    ("Category: billing, refund", "ambiguous_reply", ["billing", "refund"]),
    ('{"category": "refund / technical support"}', "ambiguous_reply", ["refund", "tech_support"]),
    ("Billing? Or maybe Something else.", "ambiguous_reply", ["billing", "other"]),
    ("not billing", "no_match", ["billing"]),
    ("Maybe refund", "no_match", ["refund"]),
    ("billing-dispute", "no_match", []),  # a hyphenated word is not the word "billing"
    ("bill", "no_match", []),
    ("I cannot tell.", "no_match", []),
    ("The customer is asking whether their refund request can be expedited because the bank "
     "charged them twice", "no_match", []),  # prose that mentions a category is not an answer
]


@pytest.mark.parametrize(("reply", "reason", "named"), FALLBACKS)
async def test_unclear_replies_fall_back_visibly_with_a_reason(openai_server, llm_run, reply, reason, named):
    openai_server.script(text_reply(reply))
    state, events = await llm_run(classify_doc(), {"query": "q"})
    assert state.status is RunStatus.succeeded and taken(state) == ["other"]  # the last category
    run = state.node_runs["cl"]
    record = run.data["classify"]
    assert record["fallback_reason"] == reason and record["raw"] == reply
    assert all(name in record["detail"] for name in named)
    (warning,) = [e for e in events if e.type == "node_warning"]
    assert (warning.node_id, warning.kind, warning.code) == ("cl", "classify_question", "classify_fallback")
    assert warning.details["reason"] == reason and warning.details["category"] == "other"
    assert "'cl'" in warning.message and reason in warning.message
    assert run.data["warnings"] == [{"code": "classify_fallback", "message": warning.message,
                                     "details": warning.details}]
    assert event_adapter().validate_json(warning.model_dump_json()).type == "node_warning"  # part of the stream


def test_reading_rules_directly():
    assert read_answer(CATS, "Category: refund.").category.id == "refund"
    verdict = read_answer(CATS, "billing, refund")
    assert verdict.category is None and verdict.reason == "ambiguous_reply"
    long_reply = " ".join(["word"] * MAX_PHRASE_WORDS + ["billing"])
    assert read_answer(CATS, long_reply).reason == "no_match"
    assert read_answer(CATS, json.dumps({"category": "refund request"})).category.id == "refund"
    assert read_answer(CATS, "").reason == "empty_reply"
