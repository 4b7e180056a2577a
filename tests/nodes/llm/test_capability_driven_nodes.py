"""Nodes follow the model's capabilities and limits, as the scripted server records:

- short-by-design nodes send small built-in caps (classifier 50, query extension about
  300, extraction sized from its schema) unless configured, never the model's maximum;
- the agent and tool-call nodes use native tools only when the model calls them freely,
  the JSON protocol otherwise; classify and extract count forced-only calls as native;
- history is trimmed to the model's real context window, newest turns kept (the
  ``default`` model's window set by ``FLOWLOOM_LLM_CONTEXT``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import RunDeps, run_workflow
from nodes.llm.call import estimate_tokens
from nodes.llm.classify import CLASSIFY_MAX_TOKENS
from nodes.llm.classify import TOOL_NAME as CLASSIFY_TOOL
from nodes.llm.extract import TOOL_NAME as EXTRACT_TOOL
from nodes.llm.extract import extract_max_tokens
from nodes.llm.model_registry import Capabilities, ModelRegistry, ModelSpec, ProviderSpec, load_registry
from schemas.nodes_llm import ExtractField
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import ScriptedOpenAIServer, text_reply, tool_args_split_reply
from tests.support.probe_servers import server_like
from tests.support.workflows import build, chain_edges, edge, node


def registry(server: ScriptedOpenAIServer) -> ModelRegistry:
    """``forced-model``: tool calls only when forced (small llama.cpp models);
    ``free-model``: free calls, no tool_choice (Ollama); ``thinker``: a reasoning model."""
    def spec(name: str, caps: Capabilities, context: int = 8192) -> ModelSpec:
        return ModelSpec(name=name, provider="local", max_context=context, max_output_tokens=1024, capabilities=caps)

    return ModelRegistry([ProviderSpec(name="local", base_url=server.base_url)], [
        spec("forced-model", Capabilities(tools="forced", tool_choice=True)),
        spec("free-model", Capabilities(tools="native", tool_choice=False)),
        spec("thinker", Capabilities(tools="none", tool_choice=False, reasoning=True)),
    ])


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as started:
        yield started


async def run(doc: dict[str, Any], models: ModelRegistry, inputs: dict[str, Any] | None = None, **sys: Any):
    plan = compile_workflow(doc, models=models, use_cache=False)
    try:
        return await run_workflow(plan, inputs or {}, deps=RunDeps(models=models), **sys)
    finally:
        await models.aclose()


CATEGORIES = [{"id": "billing", "name": "Billing"}, {"id": "other", "name": "Something else"}]


def classify_doc(model: str, **config: Any) -> dict[str, Any]:
    nodes = [node("cl", "classify_question", {"model": model, "categories": CATEGORIES, "memory": False, **config})]
    return build(nodes, [edge("start", "cl")], inputs=[{"name": "query", "type": "string"}])


FIELDS = [{"name": "city", "type": "string", "required": True}, {"name": "nights", "type": "number"},
          {"name": "pets", "type": "boolean"}, {"name": "size", "type": "string", "enum": ["small", "large"]}]


def extract_doc(model: str, **config: Any) -> dict[str, Any]:
    return build([node("ex", "extract_fields", {"model": model, "fields": FIELDS, **config})],
                 chain_edges("start", "ex"), inputs=[{"name": "query", "type": "string"}])


def qe_doc(model: str, **config: Any) -> dict[str, Any]:
    return build([node("qe", "query_extension", {"model": model, **config})], chain_edges("start", "qe"),
                 inputs=[{"name": "query", "type": "string"}])


# ------------------------------------------------------------------ built-in output caps


async def test_classifier_sends_its_small_cap_not_the_models_maximum(server):
    server.script(tool_args_split_reply(CLASSIFY_TOOL, '{"category": "billing"}'),
                  tool_args_split_reply(CLASSIFY_TOOL, '{"category": "billing"}'))
    state = await run(classify_doc("forced-model"), registry(server), {"query": "my invoice"})
    assert state.status is RunStatus.succeeded, state.error
    configured = await run(classify_doc("forced-model", max_tokens=200), registry(server), {"query": "q"})
    assert configured.status is RunStatus.succeeded, configured.error
    assert [b["max_tokens"] for b in server.bodies] == [CLASSIFY_MAX_TOKENS, 200]
    assert CLASSIFY_MAX_TOKENS == 50


async def test_query_extension_cap_is_about_300_and_grows_with_the_count(server):
    for _ in range(3):
        server.script(text_reply('["a", "b"]'))
    models = registry(server)
    for config in ({"count": 10}, {"count": 30}, {"count": 10, "max_tokens": 77}):
        state = await run(qe_doc("free-model", **config), models, {"query": "pro plan price"})
        assert state.status is RunStatus.succeeded, state.error
    assert [b["max_tokens"] for b in server.bodies] == [300, 900, 77]


async def test_extraction_cap_is_sized_from_its_schema(server):
    server.script(tool_args_split_reply(EXTRACT_TOOL, '{"city": "Oslo", "nights": 2}'))
    state = await run(extract_doc("forced-model"), registry(server), {"query": "Two nights in Oslo"})
    assert state.status is RunStatus.succeeded, state.error
    cap = extract_max_tokens([ExtractField(**f) for f in FIELDS])
    assert server.bodies[0]["max_tokens"] == cap
    assert 200 < cap < 1024  # a string, a number, a flag and an enum: far below the model's maximum
    assert extract_max_tokens([ExtractField(name="notes", type="array")]) > \
        extract_max_tokens([ExtractField(name="ok", type="boolean")])


async def test_reasoning_model_keeps_its_maximum_for_thinking(server):
    server.script(text_reply('{"category": "billing"}'))
    state = await run(classify_doc("thinker"), registry(server), {"query": "my invoice"})
    assert state.status is RunStatus.succeeded, state.error
    assert server.bodies[0]["max_tokens"] == 1024


# ------------------------------------------------------------------ protocols from capabilities


async def test_forced_only_model_classifies_and_extracts_with_forced_native_calls(server):
    server.responder = server_like(free_tools=False, forced_tools=True, arguments='{"category": "billing"}')
    state = await run(classify_doc("forced-model"), registry(server), {"query": "my invoice"})
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["cl"].outputs["category"] == "billing"
    assert state.node_runs["cl"].data["classify"]["protocol"] == "tool"
    body = server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": CLASSIFY_TOOL}}

    server.responder = server_like(free_tools=False, forced_tools=True, arguments='{"city": "Oslo"}')
    state = await run(extract_doc("forced-model"), registry(server), {"query": "Oslo"})
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["ex"].outputs["city"] == "Oslo"
    assert server.bodies[1]["tool_choice"] == {"type": "function", "function": {"name": EXTRACT_TOOL}}


async def test_free_calls_without_tool_choice_send_the_tool_unforced(server):
    server.responder = server_like(free_tools=True, forced_tools=False, arguments='{"category": "other"}')
    state = await run(classify_doc("free-model"), registry(server), {"query": "hello"})
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["cl"].outputs["category"] == "other"
    assert server.bodies[0]["tools"] and "tool_choice" not in server.bodies[0]


def tool_call_doc(model: str) -> dict[str, Any]:
    agent = node("agent", "tool_call", {"model": model, "user_prompt": "{{ inputs.task }}", "stream": False,
                                        "builtin_tools": [{"name": "eval_expression"}]})
    return build([agent, node("end", "end", {"outputs": [{"name": "answer", "value": {"ref": "agent.answer"}}]})],
                 chain_edges("start", "agent", "end"), inputs=[{"name": "task", "type": "string"}])


def json_protocol(body: dict[str, Any]) -> Any:
    """A model speaking the JSON protocol: one call, then the answer from its result."""
    from tests.support.openai_server import text_reply as reply

    if any("42" in str(m.get("content")) for m in body["messages"] if m["role"] == "user"
           and "FLOWLOOM_DATA" in str(m.get("content"))):
        return reply(json.dumps({"type": "answer", "text": "It is 42."}))
    return reply(json.dumps({"type": "tool_calls", "calls": [{"tool": "eval_expression",
                                                             "params": {"expression": "6 * 7"}}]}))


async def test_tool_call_node_uses_the_json_protocol_when_calls_only_work_forced(server):
    server.responder = json_protocol
    state = await run(tool_call_doc("forced-model"), registry(server), {"task": "what is 6 times 7?"})
    assert state.status is RunStatus.succeeded, state.error
    assert state.outputs["answer"] == "It is 42."
    assert state.node_runs["agent"].data["agent"]["mode"] == "json"
    assert all("tools" not in b for b in server.bodies)


async def test_tool_call_node_uses_native_tools_when_free_calls_work(server):
    server.script(tool_args_split_reply("eval_expression", '{"expression": "6 * 7"}'), text_reply("It is 42."))
    state = await run(tool_call_doc("free-model"), registry(server), {"task": "what is 6 times 7?"})
    assert state.status is RunStatus.succeeded, state.error
    assert state.outputs["answer"] == "It is 42."
    assert state.node_runs["agent"].data["agent"]["mode"] == "native"
    assert server.bodies[0]["tools"][0]["function"]["name"] == "eval_expression"


# ------------------------------------------------------------------ history and the real window


async def test_history_is_trimmed_to_the_default_models_real_context(server):
    models = load_registry(env={"FLOWLOOM_LLM_BASE_URL": server.base_url, "FLOWLOOM_LLM_CONTEXT": "4096"})
    spec = models.get("default")
    assert (spec.max_context, spec.max_output_tokens) == (4096, 1024)
    turns = []
    for i in range(40):  # about 300 tokens a turn: 12,000 in all, far over the window
        turns += [{"role": "user", "content": f"question {i} " + "x" * 600},
                  {"role": "assistant", "content": f"answer {i} " + "y" * 600}]
    server.script(text_reply("ok"))
    doc = build([node("chat", "chat", {"model": "default", "history": 100})], chain_edges("start", "chat"),
                inputs=[{"name": "query", "type": "string"}])
    state = await run(doc, models, {"query": "latest question"}, history=turns)
    assert state.status is RunStatus.succeeded, state.error
    body = server.bodies[0]
    sent = body["messages"]
    assert estimate_tokens(sent) <= 4096 - body["max_tokens"]
    assert sent[-1]["content"] == "latest question"
    kept = [m["content"].split(" ")[0] + " " + m["content"].split(" ")[1] for m in sent[:-1] if m["role"] != "system"]
    assert kept[-2:] == ["question 39", "answer 39"]  # the newest turns kept
    assert "question 0" not in kept and 4 <= len(kept) < 20
    untrimmed = load_registry(env={"FLOWLOOM_LLM_BASE_URL": server.base_url}).get("default")
    assert untrimmed.max_context == 128000  # without the variable the bundled value stands


# ------------------------------------------------------------------ usage in streams


async def test_a_model_without_stream_usage_is_not_asked_for_it_and_is_estimated(server):
    from nodes.llm.call import LLMRequest, call_llm

    models = ModelRegistry([ProviderSpec(name="local", base_url=server.base_url)], [
        ModelSpec(name="quiet", provider="local", max_context=4096, max_output_tokens=256,
                  capabilities=Capabilities(stream_usage=False)),
        ModelSpec(name="counted", provider="local", max_context=4096, max_output_tokens=256)])
    server.script(text_reply("Hello there", usage=None), text_reply("Hello there", usage=(7, 2)))
    try:
        quiet = await call_llm(LLMRequest("quiet", [{"role": "user", "content": "hi"}]), registry=models)
        counted = await call_llm(LLMRequest("counted", [{"role": "user", "content": "hi"}]), registry=models)
    finally:
        await models.aclose()
    assert "stream_options" not in server.bodies[0]
    assert server.bodies[1]["stream_options"] == {"include_usage": True}
    assert quiet.usage.token_source == "estimated" and quiet.usage.tokens_out <= 256
    assert counted.usage.token_source == "provider" and counted.usage.tokens_in == 7
