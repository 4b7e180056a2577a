"""query_extension through the real engine: history as context, dedupe, cap, malformed replies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodes.llm.query_extension import dedupe_queries
from schemas.types import RunStatus
from tests.support.openai_server import fenced_json_reply, http_error, malformed_frame_reply, text_reply
from tests.support.workflows import build, chain_edges, node

Q = "How much is it?"


def qe_doc(**config: Any) -> dict[str, Any]:
    return build([node("qe", "query_extension", {"model": "plain-model", **config})], chain_edges("start", "qe"),
                 inputs=[{"name": "query", "type": "string"}])


def queries(state) -> list[str]:
    return state.node_runs["qe"].outputs["queries"]


def record(state) -> dict[str, Any]:
    return state.node_runs["qe"].data["query_extension"]


async def test_history_is_context_and_the_request_is_explicit(openai_server, llm_run):
    openai_server.script(text_reply('["Pro plan price", "Pro plan monthly cost"]'))
    history = [{"role": "user", "content": "Tell me about the Pro plan"}, {"role": "assistant", "content": "It has X."},
               {"role": "user", "content": "Is it for teams?"}, {"role": "assistant", "content": "Yes."}]
    state, _ = await llm_run(qe_doc(history=1), {"query": Q}, history=history)
    assert state.status is RunStatus.succeeded, state.error
    body = openai_server.bodies[0]
    system = body["messages"][0]["content"]
    assert "<history>\nuser: Is it for teams?\nassistant: Yes.\n</history>" in system
    assert "Tell me about the Pro plan" not in system  # only the last turn (history=1)
    assert "up to 9 different search queries" in system and "JSON array of strings" in system
    assert body["messages"][-1] == {"role": "user", "content": Q}
    assert (body["temperature"], body["max_tokens"]) == (0.1, 512)
    assert queries(state) == [Q, "Pro plan price", "Pro plan monthly cost"]


async def test_queries_are_deduplicated_normalised_question_first_and_capped(openai_server, llm_run):
    reply = ["how much is it", "Pro price", " pro PRICE! ", "", "“Pro price”", "Pro cost", "Pro fee", "Pro charge"]
    openai_server.script(fenced_json_reply(reply))
    state, _ = await llm_run(qe_doc(count=4), {"query": Q})
    assert queries(state) == [Q, "Pro price", "Pro cost", "Pro fee"]
    assert record(state)["from_model"] == 3
    assert "up to 3 different" in openai_server.bodies[0]["messages"][0]["content"]


async def test_default_count_is_ten(openai_server, llm_run):
    openai_server.script(text_reply(json.dumps([f"query {i}" for i in range(20)])))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    assert len(queries(state)) == 10 and queries(state)[0] == Q


async def test_object_with_queries_and_prose_brackets_are_read(openai_server, llm_run):
    openai_server.script(text_reply('Following the guide (see [1]), here:\n{"queries": ["a", 2, "b"]} [done]'))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    assert queries(state) == [Q, "a", "b"]
    assert record(state)["dropped_items"] == 1


@pytest.mark.parametrize(("reply", "reason"), [
    ("Here are some queries: pricing, cost", "no_json"),
    ('["pricing", "cost"', "unclosed"),
    ('["pricing", cost]', "invalid_json"),
    ("", "empty"),
    ('{"answer": "42"}', "not_accepted"),
])
async def test_malformed_replies_fall_back_to_the_question(openai_server, llm_run, reply, reason):
    openai_server.script(text_reply(reply))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    assert state.status is RunStatus.succeeded
    assert queries(state) == [Q]
    rec = record(state)
    assert rec["reason"] == reason and rec["raw"] == reply and rec["detail"]


async def test_count_one_needs_no_model_call(openai_server, llm_run):
    state, _ = await llm_run(qe_doc(count=1), {"query": Q})
    assert queries(state) == [Q] and openai_server.bodies == []
    assert state.node_runs["qe"].usage is None


async def test_question_can_be_a_reference(openai_server, llm_run):
    openai_server.script(text_reply('["x"]'))
    doc = build([node("qe", "query_extension", {"model": "plain-model", "question": {"ref": "inputs.q"}})],
                chain_edges("start", "qe"), inputs=[{"name": "q", "type": "string"}])
    state, _ = await llm_run(doc, {"q": "  spaced question  "})
    assert queries(state) == ["spaced question", "x"]


async def test_provider_failures_fail_the_node_naming_it(openai_server, llm_run):
    openai_server.script(http_error(400, "nope"))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    assert state.status is RunStatus.failed and state.error.node_id == "qe" and "'qe'" in state.error.message


async def test_a_broken_stream_after_tokens_is_an_error_not_a_fallback(openai_server, llm_run):
    openai_server.script(malformed_frame_reply('["a'))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    assert state.status is RunStatus.failed and state.error.node_id == "qe"


async def test_usage_is_recorded(openai_server, llm_run):
    openai_server.script(text_reply('["a"]', usage=(33, 4)))
    state, _ = await llm_run(qe_doc(), {"query": Q})
    usage = state.node_runs["qe"].usage
    assert (usage.tokens_in, usage.tokens_out, usage.calls, usage.token_source) == (33, 4, 1, "provider")
    assert state.node_runs["qe"].outputs["usage"] == usage.model_dump()


def test_dedupe_rules():
    assert dedupe_queries("Q?", ["q", "Q!", " ", "A", "a.", "B"], 3) == ["Q?", "A", "B"]
    assert dedupe_queries("?", ["?", "!"], 5) == ["?", "!"]  # punctuation-only queries dedupe by their text
