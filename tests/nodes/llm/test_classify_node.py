"""classify_question through the real engine: protocols, routing, fallbacks, memory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine import CompileError
from nodes.llm.classify import TOOL_NAME
from nodes.llm.model_registry import Capabilities, ModelRegistry, ModelSpec
from schemas.types import NodeRunStatus, RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (
    fenced_json_reply,
    http_error,
    text_reply,
    tool_args_split_reply,
)
from tests.support.workflows import build, edge, node
from workers.memory import RedisNodeMemory

CATEGORIES = [
    {"id": "billing", "name": "Billing", "description": "invoices, charges, payment methods"},
    {"id": "refund", "name": "Refund request"},
    {"id": "other", "name": "Something else"},
]
IDS = [c["id"] for c in CATEGORIES]


def classify_doc(model: str = "plain-model", categories: list[dict[str, Any]] | None = None, **config: Any) -> dict[str, Any]:
    cats = categories or CATEGORIES
    nodes = [node("cl", "classify_question", {"model": model, "categories": cats, **config})]
    edges = [edge("start", "cl")]
    for c in cats:
        nodes.append(node(f"on_{c['id']}", "template", {"template": c["id"]}))
        edges.append(edge("cl", f"on_{c['id']}", c["id"]))
    return build(nodes, edges, inputs=[{"name": "query", "type": "string"}])


def taken(state) -> list[str]:
    return [c["id"] for c in CATEGORIES if state.node_runs[f"on_{c['id']}"].status is NodeRunStatus.succeeded]


def record(state) -> dict[str, Any]:
    return state.node_runs["cl"].data["classify"]


# ------------------------------------------------------------------------- routing


@pytest.mark.parametrize("category", IDS)
async def test_prompt_protocol_routes_each_category(openai_server, llm_run, category):
    openai_server.script(text_reply(json.dumps({"category": category})))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    assert state.status is RunStatus.succeeded, state.error
    assert taken(state) == [category]
    assert state.node_runs["cl"].handles == [category]
    assert state.node_runs["cl"].outputs["category"] == category
    assert record(state)["fallback_reason"] is None
    skipped = [i for i in IDS if i != category]
    assert all(state.node_runs[f"on_{i}"].status is NodeRunStatus.skipped for i in skipped)


@pytest.mark.parametrize("category", IDS)
async def test_tool_protocol_routes_each_category(openai_server, llm_run, category):
    openai_server.script(tool_args_split_reply(TOOL_NAME, json.dumps({"category": category})))
    state, _ = await llm_run(classify_doc("tools-model"), {"query": "q"})
    assert taken(state) == [category]
    assert record(state)["protocol"] == "tool"


async def test_tool_protocol_request_forces_the_function_with_enum_of_ids(openai_server, llm_run):
    openai_server.script(tool_args_split_reply(TOOL_NAME, '{"category": "refund"}'))
    await llm_run(classify_doc("tools-model", instructions="We sell {{ inputs.query }} things."), {"query": "garden"})
    body = openai_server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    (tool,) = body["tools"]
    assert tool["function"]["name"] == TOOL_NAME
    assert tool["function"]["parameters"]["properties"]["category"]["enum"] == IDS
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50  # the built-in cap: one id to answer
    system = body["messages"][0]["content"]
    assert "- billing | Billing | invoices, charges, payment methods" in system
    assert "We sell garden things." in system
    assert body["messages"][-1] == {"role": "user", "content": "garden"}


async def test_prompt_protocol_request_has_no_tools_and_asks_for_json(openai_server, llm_run):
    openai_server.script(text_reply('{"category": "other"}'))
    await llm_run(classify_doc(temperature=0.3, max_tokens=50), {"query": "hello"})
    body = openai_server.bodies[0]
    assert "tools" not in body and "tool_choice" not in body
    assert '{"category": "<id>"}' in body["messages"][0]["content"]
    assert (body["temperature"], body["max_tokens"]) == (0.3, 50)


# ------------------------------------------------------------- reading the reply


@pytest.mark.parametrize(("reply", "expected"), [
    ('Sure!\n```json\n{"category": "Billing"}\n```\nHope that helps.', "billing"),  # name, any case, fenced
    ("`refund`.", "refund"),  # a bare id with backticks and punctuation
    ('  "REFUND REQUEST"  ', "refund"),  # a bare name, quoted, shouted
    ('Per the policy (see [1]): {"category_id": "billing"}', "billing"),  # prose brackets before the JSON
    ('{"category": "  something-else! "}', "other"),  # name with punctuation and spaces
    ("It is about billing, I think.", "billing"),  # one category named in a short phrase
])
async def test_replies_match_by_id_or_normalised_name(openai_server, llm_run, reply, expected):
    openai_server.script(text_reply(reply))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    assert taken(state) == [expected]
    assert record(state)["fallback_reason"] is None


@pytest.mark.parametrize(("reply", "reason"), [
    ('{"category": "billing-dispute"}', "no_match"),  # contains "billing": substring never matches
    ('{"category": "bill"}', "no_match"),
    ("It is not about billing.", "no_match"),  # names one category but negates it
    ("billing or refund", "ambiguous_reply"),  # two categories named: a guess either way
    ('{"category": "billing"', "malformed_reply"),  # cut short
    ('{"label": "billing"}', "malformed_reply"),  # no category key
    ('{"category": 3}', "malformed_reply"),
    ("", "empty_reply"),
])
async def test_unusable_replies_take_the_fallback_with_a_reason(openai_server, llm_run, reply, reason):
    openai_server.script(text_reply(reply))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    assert state.status is RunStatus.succeeded
    assert taken(state) == ["other"]  # the last category
    rec = record(state)
    assert rec["fallback_reason"] == reason and rec["raw"] == reply and rec["detail"]
    assert state.node_runs["cl"].outputs["category"] == "other"


async def test_a_category_marked_fallback_is_used_instead_of_the_last(openai_server, llm_run):
    cats = [dict(CATEGORIES[0]), dict(CATEGORIES[1], fallback=True), dict(CATEGORIES[2])]
    openai_server.script(text_reply("no idea"))
    state, _ = await llm_run(classify_doc(categories=cats), {"query": "q"})
    assert taken(state) == ["refund"] and record(state)["fallback_reason"] == "no_match"


async def test_forced_tool_call_missing_takes_the_fallback(openai_server, llm_run):
    openai_server.script(text_reply("billing"))
    state, _ = await llm_run(classify_doc("tools-model"), {"query": "q"})
    assert taken(state) == ["other"]
    rec = record(state)
    assert rec["fallback_reason"] == "no_tool_call" and rec["raw"] == "billing"


@pytest.mark.parametrize(("arguments", "reason"), [
    ('{"category": ', "malformed_reply"),
    ('{"category": "vip"}', "no_match"),
    ("[1, 2]", "malformed_reply"),
])
async def test_bad_tool_arguments_take_the_fallback(openai_server, llm_run, arguments, reason):
    openai_server.script(tool_args_split_reply(TOOL_NAME, arguments))
    state, _ = await llm_run(classify_doc("tools-model"), {"query": "q"})
    assert taken(state) == ["other"]
    assert record(state)["fallback_reason"] == reason and record(state)["raw"] == arguments


async def test_tools_without_tool_choice_read_a_text_reply(openai_server, scripted_registry, node_memory):
    from engine import RunDeps, run_workflow

    base = scripted_registry
    loose = ModelSpec(name="loose-tools", provider="scripted", max_context=4096, max_output_tokens=256,
                      capabilities=Capabilities(tool_calling=True, tool_choice=False))
    registry = ModelRegistry(base.providers, [base.get("tools-model"), base.get("plain-model"), loose])
    openai_server.script(fenced_json_reply({"category": "refund"}))
    plan = compile_workflow(classify_doc("loose-tools"), models=registry)
    state = await run_workflow(plan, {"query": "q"}, deps=RunDeps(models=registry, memory=node_memory))
    body = openai_server.bodies[0]
    assert body["tools"] and "tool_choice" not in body
    assert taken(state) == ["refund"] and record(state)["tool_choice_forced"] is False


async def test_provider_errors_fail_the_node_not_the_fallback(openai_server, llm_run):
    openai_server.script(http_error(400, "bad request upstream"))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    assert state.status is RunStatus.failed
    assert state.node_runs["cl"].status is NodeRunStatus.failed
    assert state.error.node_id == "cl" and "'cl'" in state.error.message
    assert not any(f"on_{i}" in state.node_runs for i in IDS)  # no branch ran


async def test_usage_is_recorded(openai_server, llm_run):
    openai_server.script(text_reply('{"category": "billing"}', usage=(40, 6)))
    state, _ = await llm_run(classify_doc(), {"query": "q"})
    usage = state.node_runs["cl"].usage
    assert (usage.model, usage.tokens_in, usage.tokens_out, usage.token_source) == ("plain-model", 40, 6, "provider")
    assert usage.cost == pytest.approx((40 * 0.0005 + 6 * 0.0015) / 1000)


async def test_history_is_shown_as_context(openai_server, llm_run):
    openai_server.script(text_reply('{"category": "refund"}'))
    history = [{"role": "user", "content": "I was charged twice"}, {"role": "assistant", "content": "Sorry!"}]
    await llm_run(classify_doc(history=2), {"query": "give it back"}, history=history)
    system = openai_server.bodies[0]["messages"][0]["content"]
    assert "<history>\nuser: I was charged twice\nassistant: Sorry!\n</history>" in system
    assert len(openai_server.bodies[0]["messages"]) == 2  # history as context, not as turns to answer


# -------------------------------------------------------------------------- memory


async def test_last_classification_is_remembered_per_chat_in_redis(openai_server, llm_run, redis_url, flowloom_redis):
    store = RedisNodeMemory(redis_url)
    try:
        openai_server.script(text_reply('{"category": "billing"}'), text_reply('{"category": "refund"}'),
                             text_reply('{"category": "other"}'))
        first, _ = await llm_run(classify_doc(), {"query": "why was I charged?"}, memory=store, chat_id="chat-1")
        assert record(first)["previous"] is None
        assert "previous question" not in openai_server.bodies[0]["messages"][0]["content"]
        stored = json.loads(flowloom_redis.get("flowloom:node:default:wf:cl:chat-1:classification"))
        assert stored["category"] == "billing" and stored["question"] == "why was I charged?"
        assert 0 < flowloom_redis.ttl("flowloom:node:default:wf:cl:chat-1:classification") <= 7 * 24 * 3600

        second, _ = await llm_run(classify_doc(), {"query": "and can I get it back?"}, memory=store, chat_id="chat-1")
        assert record(second)["previous"] == "billing"
        system = openai_server.bodies[1]["messages"][0]["content"]
        assert "previous question in this conversation was classified as 'Billing' (id billing)" in system
        assert taken(second) == ["refund"]
        assert json.loads(flowloom_redis.get("flowloom:node:default:wf:cl:chat-1:classification"))["category"] == "refund"

        other_chat, _ = await llm_run(classify_doc(), {"query": "hi"}, memory=store, chat_id="chat-2")
        assert record(other_chat)["previous"] is None
    finally:
        await store.close()


async def test_memory_can_be_disabled(openai_server, llm_run, node_memory):
    openai_server.script(text_reply('{"category": "billing"}'))
    await llm_run(classify_doc(memory=False), {"query": "q"}, chat_id="c")
    assert await node_memory.get("node:c:cl:classification") is None


async def test_memory_expires_after_its_ttl(openai_server, llm_run, node_memory):
    openai_server.script(text_reply('{"category": "billing"}'), text_reply('{"category": "billing"}'))
    await llm_run(classify_doc(memory_ttl=0.2), {"query": "q"}, chat_id="c")
    await asyncio.sleep(0.3)
    state, _ = await llm_run(classify_doc(memory_ttl=0.2), {"query": "q"}, chat_id="c")
    assert record(state)["previous"] is None


async def test_a_failing_node_memory_does_not_fail_routing(openai_server, llm_run):
    class Broken:
        async def get(self, key: str, default: Any = None) -> Any:
            raise ConnectionError("store down")

        async def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
            raise ConnectionError("store down")

    openai_server.script(text_reply('{"category": "refund"}'))
    state, _ = await llm_run(classify_doc(), {"query": "q"}, memory=Broken())
    assert taken(state) == ["refund"]
    assert "store down" in record(state)["memory_error"]


async def test_remembered_category_that_no_longer_exists_is_ignored(openai_server, llm_run, node_memory):
    await node_memory.set("node:c:cl:classification", {"category": "retired", "name": "Old"})
    openai_server.script(text_reply('{"category": "other"}'))
    state, _ = await llm_run(classify_doc(), {"query": "q"}, chat_id="c")
    assert record(state)["previous"] is None
    assert "previous question" not in openai_server.bodies[0]["messages"][0]["content"]


# -------------------------------------------------------------------------- config


@pytest.mark.parametrize(("categories", "message"), [
    ([{"id": "a", "name": "A"}, {"id": "a", "name": "B"}], "unique"),
    ([{"id": "a", "name": "A", "fallback": True}, {"id": "b", "name": "B", "fallback": True}], "only one"),
    ([{"id": "a", "name": "Same"}, {"id": "b", "name": "same!"}], "both read as"),
    ([{"id": "a", "name": "A"}], "at least 2"),
])
def test_invalid_categories_are_compile_errors(scripted_registry, categories, message):
    doc = build([node("cl", "classify_question", {"model": "plain-model", "categories": categories})],
                [edge("start", "cl")])
    with pytest.raises(CompileError, match=message):
        compile_workflow(doc, models=scripted_registry, use_cache=False)


def test_edges_must_leave_a_category_handle(scripted_registry):
    doc = classify_doc()
    doc["edges"].append(edge("cl", "on_other", "nope", edge_id="bad"))
    with pytest.raises(CompileError) as info:
        compile_workflow(doc, models=scripted_registry, use_cache=False)
    assert any(p.code == "unknown_handle" and p.edge_id == "bad" for p in info.value.problems)


async def test_mode_tool_on_a_model_without_tools_fails_clearly(openai_server, llm_run):
    state, _ = await llm_run(classify_doc(mode="tool"), {"query": "q"})
    assert state.status is RunStatus.failed
    assert state.error.node_id == "cl" and "no native tool calling" in state.error.message
    assert openai_server.bodies == []


async def test_a_call_to_another_function_counts_as_no_tool_call(openai_server, llm_run):
    openai_server.script(tool_args_split_reply("lookup_order", '{"id": 1}'))
    state, _ = await llm_run(classify_doc("tools-model"), {"query": "q"})
    assert taken(state) == ["other"]
    assert record(state)["fallback_reason"] == "no_tool_call" and "lookup_order" in record(state)["detail"]
