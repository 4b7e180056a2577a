"""Streaming edge cases of the LLM layer, over HTTP against the scripted server:
tool calls that reuse a stream index, the stream idle timeout per model / provider /
node (bounded by the node timeout), and a failed chat node keeping what it produced."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nodes.llm.call import LLMRequest, LLMStalled, call_llm
from nodes.llm.chat import stream_idle_timeout
from nodes.llm.model_registry import (
    DEFAULT_STREAM_IDLE_TIMEOUT,
    Capabilities,
    ModelRegistry,
    ModelSpec,
    Pricing,
    ProviderSpec,
    load_registry,
)
from schemas.types import NodeRunStatus, RunStatus
from tests.support.openai_server import (
    TEST_KEY_ENV,
    Finish,
    Raw,
    Reply,
    ScriptedOpenAIServer,
    ToolDelta,
    Usage,
    disconnect_reply,
    error_after_tokens,
    reasoning,
    reused_index_tool_calls_reply,
    stall,
    stalled_reply,
    text,
    text_reply,
)
from tests.support.workflows import build, edge, node

MSGS = [{"role": "user", "content": "go"}]


async def tool_calls_of(registry: ModelRegistry) -> list[tuple[str, str, Any]]:
    response = await call_llm(LLMRequest("tools-model", MSGS, tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object"}}}]), registry=registry)
    return [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls]


# ----------------------------------------------------------------- tool calls reusing an index

CALLS = [("call_a", "lookup", {"q": "tea"}), ("call_b", "lookup", {"q": "coffee"}), ("call_c", "save", {"n": 3})]


@pytest.mark.parametrize("count", [2, 3])
async def test_complete_calls_that_all_use_index_0_stay_separate(openai_server, scripted_registry, count):
    openai_server.script(reused_index_tool_calls_reply([(i, n, json.dumps(a)) for i, n, a in CALLS[:count]]))
    assert await tool_calls_of(scripted_registry) == CALLS[:count]


async def test_a_new_id_at_a_used_index_starts_a_call_and_fragments_join_the_open_one(openai_server,
                                                                                    scripted_registry):
    openai_server.script(Reply([
        ToolDelta(0, "call_a", "lookup", '{"q": '), ToolDelta(0, arguments='"tea"}'),  # call_a in two pieces
        ToolDelta(0, "call_b", "save", '{"n"'), ToolDelta(0, arguments=": 3}"),  # call_b reuses index 0
        Finish("tool_calls"), Usage(10, 5)]))
    assert await tool_calls_of(scripted_registry) == [("call_a", "lookup", {"q": "tea"}),
                                                       ("call_b", "save", {"n": 3})]


async def test_an_id_repeated_on_every_chunk_of_one_call_is_one_call(openai_server, scripted_registry):
    openai_server.script(Reply([ToolDelta(0, "call_a", "lookup", '{"q"'), ToolDelta(0, "call_a", "lookup", ': "x"}'),
                                Finish("tool_calls"), Usage(10, 5)]))
    assert await tool_calls_of(scripted_registry) == [("call_a", "lookup", {"q": "x"})]


async def test_reused_and_distinct_indexes_mix_in_start_order(openai_server, scripted_registry):
    openai_server.script(Reply([
        ToolDelta(0, "call_a", "lookup", '{"q": "tea"}'), ToolDelta(1, "call_b", "lookup", '{"q": '),
        ToolDelta(0, "call_c", "save", '{"n": 3}'), ToolDelta(1, arguments='"coffee"}'),
        Finish("tool_calls"), Usage(10, 5)]))
    assert await tool_calls_of(scripted_registry) == [("call_a", "lookup", {"q": "tea"}),
                                                       ("call_b", "lookup", {"q": "coffee"}),
                                                       ("call_c", "save", {"n": 3})]


def _frame(delta: dict[str, Any], finish: str | None = None) -> Raw:
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return Raw(f"data: {json.dumps(chunk)}\n\n".encode())


async def test_calls_without_an_index_split_on_a_new_id(openai_server, scripted_registry):
    def call(cid: str | None, args: str, name: str | None = None) -> Raw:
        entry: dict[str, Any] = {"function": {"arguments": args, **({"name": name} if name else {})}}
        if cid:
            entry.update(id=cid, type="function")
        return _frame({"tool_calls": [entry]})

    openai_server.script(Reply([call("call_a", '{"q": ', "lookup"), call(None, '"tea"}'),
                                call("call_b", '{"n": 3}', "save"), _frame({}, "tool_calls")]))
    assert await tool_calls_of(scripted_registry) == [("call_a", "lookup", {"q": "tea"}), ("call_b", "save", {"n": 3})]


# ----------------------------------------------------------------- idle timeout: registry and node


def registry(server: ScriptedOpenAIServer, *, provider: float | None = None, model: float | None = None,
             ) -> ModelRegistry:
    return ModelRegistry(
        [ProviderSpec(name="p", base_url=server.base_url, api_key_env=TEST_KEY_ENV, stream_idle_timeout=provider)],
        [ModelSpec(name="m", provider="p", max_context=4096, max_output_tokens=256, stream_idle_timeout=model,
                   capabilities=Capabilities(), pricing=Pricing(input_per_1k=0.001, output_per_1k=0.002))])


@pytest.mark.parametrize(("provider", "model", "expected"), [
    (None, None, DEFAULT_STREAM_IDLE_TIMEOUT),
    (0.3, None, 0.3),  # the provider's value
    (30.0, 0.3, 0.3),  # the model's wins over its provider's
    (None, 0.4, 0.4),
])
async def test_the_registry_idle_timeout_is_the_models_then_the_providers(openai_server, monkeypatch, provider,
                                                                          model, expected):
    monkeypatch.setenv(TEST_KEY_ENV, "k")
    reg = registry(openai_server, provider=provider, model=model)
    assert reg.stream_idle_timeout(reg.get("m")) == expected
    if expected < 1:
        openai_server.script(stalled_reply("abc"))
        started = time.monotonic()
        with pytest.raises(LLMStalled, match=f"no data for {expected:g}s"):
            await call_llm(LLMRequest("m", MSGS), registry=reg)
        assert time.monotonic() - started < expected + 2
    await reg.aclose()


def test_the_registry_file_sets_idle_timeouts_per_provider_and_model(tmp_path: Path):
    path = tmp_path / "models.toml"
    path.write_text('[providers.p]\nbase_url = "http://127.0.0.1:1/v1"\nstream_idle_timeout = 20\n'
                    '[models.slow]\nprovider = "p"\nmax_context = 4096\nmax_output_tokens = 256\n'
                    'stream_idle_timeout = 240\n'
                    '[models.fast]\nprovider = "p"\nmax_context = 4096\nmax_output_tokens = 256\n')
    reg = load_registry(path)
    assert (reg.stream_idle_timeout(reg.get("slow")), reg.stream_idle_timeout(reg.get("fast"))) == (240, 20)


@pytest.mark.parametrize(("node_value", "node_timeout", "registry_value", "expected"), [
    (None, None, 60.0, 60.0),  # the registry's
    (5.0, None, 60.0, 5.0),  # the node's own
    (None, 2.0, 60.0, 2.0),  # bounded by the node timeout
    (30.0, 10.0, 60.0, 10.0),
    (3.0, 10.0, 60.0, 3.0),
])
def test_a_node_sets_its_idle_timeout_bounded_by_its_timeout(node_value, node_timeout, registry_value, expected):
    spec = SimpleNamespace(name="m")
    models = SimpleNamespace(stream_idle_timeout=lambda s: registry_value)
    ctx = SimpleNamespace(node=SimpleNamespace(config=SimpleNamespace(stream_idle_timeout=node_value),
                                               timeout=node_timeout), deps=SimpleNamespace(models=models))
    assert stream_idle_timeout(ctx, spec) == expected  # type: ignore[arg-type]


def chat_doc(**fields: Any) -> dict[str, Any]:
    config = {"model": "plain-model", "user_prompt": "{{ inputs.q }}", **fields.pop("config", {})}
    return build([node("c", "chat", config, **fields)], [edge("start", "c")], inputs=[{"name": "q"}])


async def test_a_chat_node_idle_timeout_fails_a_stalled_stream_as_stalled(openai_server, llm_run):
    openai_server.script(stalled_reply("Half an ans"))
    started = time.monotonic()
    state, _ = await llm_run(chat_doc(config={"stream_idle_timeout": 0.3}), {"q": "hi"})
    assert state.status is RunStatus.failed and state.error.reason == "stalled"
    assert "no data for 0.3s" in state.error.message and time.monotonic() - started < 5


# ----------------------------------------------------------------- a failed chat node keeps its output


@pytest.mark.parametrize(("script", "reason", "partial"), [
    (lambda: stalled_reply("Half an answer"), "stalled", "Half an answer"),
    (lambda: error_after_tokens("Partial answer"), "provider_error", "Partial answer"),
    (lambda: disconnect_reply("This answer is cut short", after=3), "stream_interrupted", "This answer "),
])
async def test_a_chat_node_failing_mid_stream_keeps_partial_output_usage_and_cost(openai_server, llm_run, script,
                                                                                  reason, partial):
    openai_server.script(script())
    state, events = await llm_run(chat_doc(config={"stream_idle_timeout": 0.3}), {"q": "hi"})
    assert state.status is RunStatus.failed and state.error.reason == reason
    run = state.node_runs["c"]
    assert run.status is NodeRunStatus.failed
    assert run.outputs["answer"] == partial
    assert run.usage is not None and run.usage.tokens_out > 0 and run.usage.cost > 0
    assert run.usage.token_source == "estimated" and run.outputs["usage"]["cost"] == run.usage.cost
    assert run.data["chat"]["partial"]["ended_by"] == reason
    finished = [e for e in events if e.type == "node_finished" and e.node_id == "c"][-1]
    assert finished.outputs["answer"] == partial


async def test_a_chat_node_cut_by_its_timeout_keeps_an_estimated_usage(openai_server, llm_run):
    openai_server.script(Reply([reasoning("thinking..."), text("Half"), stall()], done=False))
    state, _ = await llm_run(chat_doc(timeout=0.5), {"q": "hi"})
    assert state.status is RunStatus.failed and state.error.reason == "node_timeout"
    run = state.node_runs["c"]
    assert (run.outputs["answer"], run.outputs["reasoning"]) == ("Half", "thinking...")
    assert run.usage.token_source == "estimated" and run.usage.tokens_in > 0 and run.usage.cost > 0


async def test_a_chat_node_that_received_nothing_records_no_output(openai_server, llm_run):
    openai_server.script(stalled_reply(""))
    state, _ = await llm_run(chat_doc(config={"stream_idle_timeout": 0.3}), {"q": "hi"})
    run = state.node_runs["c"]
    assert state.status is RunStatus.failed and run.outputs is None and run.usage is None


async def test_a_successful_chat_node_is_unchanged(openai_server, llm_run):
    openai_server.script(text_reply("All of it", usage=(12, 3)))
    state, _ = await llm_run(chat_doc(config={"stream_idle_timeout": 5}), {"q": "hi"})
    run = state.node_runs["c"]
    assert state.status is RunStatus.succeeded and run.outputs["answer"] == "All of it"
    assert (run.usage.tokens_in, run.usage.tokens_out, run.usage.token_source) == (12, 3, "provider")
    assert "partial" not in run.data["chat"]

