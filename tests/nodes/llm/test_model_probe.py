"""Capability probing against scripted servers that imitate real servers' quirks: a
capable hosted model, a small llama.cpp model (tools ignored under ``auto``, no usage in
streams, a 4096 context told by ``/props``, no JSON mode), a vLLM without tools, and an
Ollama telling its ``num_ctx``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodes.llm.model_overrides import ModelOverride
from nodes.llm.model_probe import ProbeFailed, ProbeTarget, probe_model
from nodes.llm.model_registry import Capabilities
from tests.support.openai_server import TEST_API_KEY, Reply, ScriptedOpenAIServer, http_error
from tests.support.probe_servers import server_like


async def probe(server: ScriptedOpenAIServer, **target: Any) -> Any:
    return await probe_model(ProbeTarget(base_url=server.base_url, model="probe-me", name="local", **target),
                             timeout=30)


async def test_probe_capable_server_reports_everything_working():
    with ScriptedOpenAIServer(server_like(free_tools=True, forced_tools=True)) as server:
        report = await probe(server, api_key=TEST_API_KEY)
        assert all(r.headers.get("authorization") == f"Bearer {TEST_API_KEY}" for r in server.requests)
        chat = server.bodies
    assert report.free_tool_call.ok and report.forced_tool_call.ok
    assert report.json_mode.ok and report.json_schema.ok and report.stream_usage.ok
    assert report.tools == "native"
    assert report.context_length is None and report.context_source is None
    assert all(b["max_tokens"] <= 64 for b in chat)  # probes are cheap
    assert TEST_API_KEY not in report.model_dump_json()


async def test_probe_small_llama_cpp_model_ignoring_tools_under_auto():
    with ScriptedOpenAIServer(server_like(free_tools=False, forced_tools=True, json_mode="refused",
                                          stream_usage=False)) as server:
        server.json_routes["/props"] = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
        report = await probe(server)
        assert "authorization" not in server.requests[0].headers  # no key: none sent
    assert report.free_tool_call.ok is False and "answered in text" in report.free_tool_call.detail
    assert report.forced_tool_call.ok is True
    assert report.tools == "forced"
    assert report.json_mode.ok is False and "HTTP 400" in report.json_mode.detail
    assert report.json_schema.ok is False
    assert report.stream_usage.ok is False
    assert (report.context_length, report.context_source) == (4096, "llama.cpp /props")
    override = report.override()
    assert override == ModelOverride.model_validate({
        "max_context": 4096,
        "capabilities": {"tools": "forced", "tool_choice": True, "structured_output": False, "json_mode": False,
                         "stream_usage": False}})
    caps = report.capabilities(Capabilities(vision=True))
    assert (caps.tools, caps.stream_usage, caps.vision) == ("forced", False, True)
    assert not caps.free_tool_calls and caps.forced_tool_calls


async def test_probe_vllm_without_tools_reports_none_and_its_max_model_len():
    with ScriptedOpenAIServer(server_like(free_tools=False, forced_tools=False, tools_accepted=False,
                                          json_mode="prose")) as server:
        server.json_routes["/v1/models"] = {"object": "list", "data": [
            {"id": "other", "max_model_len": 999}, {"id": "probe-me", "max_model_len": 32768}]}
        report = await probe(server)
    assert report.free_tool_call.ok is False and report.forced_tool_call.ok is False
    assert report.tools == "none"
    assert report.override().capabilities.tools == "none"
    assert report.json_mode.ok is False and "not a JSON object" in report.json_mode.detail
    assert report.stream_usage.ok is True
    assert (report.context_length, report.context_source) == (32768, "vLLM /v1/models")


async def test_probe_ollama_reads_num_ctx_from_api_show():
    with ScriptedOpenAIServer(server_like(free_tools=True, forced_tools=True)) as server:
        server.json_routes["/api/show"] = {"parameters": "stop \"<|eot_id|>\"\nnum_ctx 8192",
                                           "model_info": {"llama.context_length": 131072}}
        report = await probe(server)
        shown = [r for r in server.requests if r.path == "/api/show"]
    assert (report.context_length, report.context_source) == (8192, "Ollama /api/show")
    assert shown and shown[0].body == {"model": "probe-me"}


async def test_probe_inconclusive_check_is_left_out_of_the_override():
    def respond(body: dict[str, Any]) -> Reply:
        if body.get("stream"):
            return http_error(503, "model loading")
        return server_like(free_tools=True, forced_tools=True)(body)

    with ScriptedOpenAIServer(respond) as server:
        report = await probe(server)
    assert report.stream_usage.ok is None and "could not tell" in report.stream_usage.detail
    assert report.override().capabilities.stream_usage is None  # the registry keeps its value
    assert report.capabilities(Capabilities(stream_usage=False)).stream_usage is False


async def test_probe_refused_key_fails_naming_the_url_not_the_key():
    with ScriptedOpenAIServer(lambda body: http_error(401, "invalid api key")) as server:
        with pytest.raises(ProbeFailed) as caught:
            await probe(server, api_key=TEST_API_KEY)
        url = server.base_url
    message = str(caught.value)
    assert url in message and "HTTP 401" in message and TEST_API_KEY not in message
    assert TEST_API_KEY not in repr(ProbeTarget(base_url=url, model="m", api_key=TEST_API_KEY))


async def test_probe_unreachable_endpoint_fails_with_a_message():
    server = ScriptedOpenAIServer().start()
    url = server.base_url
    server.stop()
    with pytest.raises(ProbeFailed, match="cannot reach"):
        await probe_model(ProbeTarget(base_url=url, model="m"), timeout=5)


def test_probe_report_is_json_for_the_api():
    report_fields = {"model", "base_url", "free_tool_call", "forced_tool_call", "json_mode", "json_schema",
                     "stream_usage", "context_length", "context_source"}
    from nodes.llm.model_probe import ProbeReport

    assert set(ProbeReport.model_json_schema()["properties"]) == report_fields
    assert json.loads(ModelOverride().model_dump_json()) == {"max_context": None, "max_output_tokens": None,
                                                             "capabilities": {k: None for k in (
                                                                 "tools", "tool_choice", "structured_output",
                                                                 "json_mode", "stream_usage", "vision",
                                                                 "reasoning")}}
