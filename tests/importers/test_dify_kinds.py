"""Dify node kinds outside the corpus: question classifier, parameter extractor, LLM with
context and memory, HTTP request with retries and a fail branch, default-value error
strategy, assigners on conversation and loop variables, environment variables, loop
with a loop-end, legacy variable-assigner (aggregator), parallel iteration, and the
unsupported kinds (marketplace tools) as placeholders; a knowledge retrieval converts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engine.settings import Settings
from nodes.importers import ImportFailed
from nodes.llm.classify import TOOL_NAME as CLASSIFY_TOOL
from tests.support.catalog import compile_workflow, import_workflow
from tests.support.openai_server import Finish, Reply, ToolDelta, Usage, http_error, text_reply

from . import dify_docs as dd
from .helpers import answers, run, statuses

SETTINGS = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)
MAP = {"gpt-4o-mini": "tools-model", "gpt-4o": "plain-model"}


def by_id(result) -> dict[str, Any]:
    return {n["id"]: n for n in result.workflow["nodes"]}


def classify(category: str) -> Reply:
    return Reply([ToolDelta(0, "c1", CLASSIFY_TOOL, json.dumps({"category": category})), Finish("tool_calls"),
                  Usage(9, 3)])


def succeeded(state) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


class _Orders(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, "headers": dict(self.headers)})
        data = b'{"status": "shipped"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def orders() -> Iterator[str]:
    _Orders.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Orders)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------- support chat


def test_support_chat_converts(scripted_registry):
    result = import_workflow(dd.support_chat(), models=scripted_registry, model_map=MAP)
    assert not result.errors
    wf, nodes = result.workflow, by_id(result)
    assert wf["inputs"] == [{"name": "lang", "default": "en", "description": "Language (one of: en, fr)"}]
    assert wf["environment"] == [
        {"name": "API_BASE", "value": "http://127.0.0.1:9"}, {"name": "API_KEY", "type": "secret"}]
    assert "variables" not in wf, "Dify's conversation variables are kept per chat, not per run"
    assert wf["conversation_variables"] == [{"name": "last_order", "default": ""},
                                            {"name": "asked", "type": "number", "default": 0}]
    assert nodes["cls"]["config"] == {
        "model": "tools-model", "temperature": 0.1, "history": 3, "question": {"ref": "sys.query"},
        "instructions": "Language: {{ inputs.lang }}",
        "categories": [{"id": "1", "name": "Order status"}, {"id": "2", "name": "Other question"}]}
    assert nodes["ext"]["config"]["mode"] == "prompt" and nodes["ext"]["config"]["fields"] == [
        {"name": "order_id", "description": "the order id", "required": True}, {"name": "urgent", "type": "boolean"},
        {"name": "channel", "enum": ["web", "phone"]}]
    api = nodes["api"]
    assert (api["error_strategy"], api["max_retries"], api["retry_interval"]) == ("error_branch", 2, 0.1)
    assert api["config"]["headers"]["Authorization"] == "Bearer {{ env.API_KEY }}"
    assert api["config"]["query"] == {"verbose": "1"} and api["config"]["timeout"] == 7
    assert nodes["bad"]["config"]["text"] == "Sorry: {{ api.error.message }}"
    assert nodes["save"]["config"]["updates"] == [
        {"variable": "conversation.last_order", "value": {"ref": "ext.order_id"}},
        {"variable": "conversation.asked", "operation": "add", "value": 1}]
    llm = nodes["llm"]
    assert llm["error_strategy"] == "default_output" and llm["default_output"] == {"answer": "I cannot answer now."}
    assert llm["config"] == {
        "model": "plain-model", "temperature": 0.5, "max_tokens": 300, "history": 50,
        "system_prompt": "Answer in {{ quote }}. Orders asked: {{ conversation.asked | json }}",
        "quote": {"ref": "inputs.lang"}, "quote_template": ""}  # user prompt: {{ sys.query }}; streams: 'say' reads it
    edges = {(e["source"], e["sourceHandle"], e["target"]) for e in wf["edges"]}
    assert {("cls", "1", "ext"), ("cls", "2", "llm"), ("api", "out", "ok"), ("api", "error", "bad")} <= edges


async def test_support_chat_order_branch(openai_server, scripted_registry, tmp_path, orders):
    result = import_workflow(dd.support_chat(), models=scripted_registry, model_map=MAP)
    openai_server.script(classify("1"), text_reply('{"order_id": "A17", "urgent": true}'))
    result.workflow["environment"][0]["value"] = orders
    state, events = await run(result, {}, secrets={"API_KEY": "k-123"}, registry=scripted_registry,
                              tmp_path=tmp_path, settings=SETTINGS, query="Where is order A17?")
    succeeded(state)
    assert statuses(state) == {"start": "succeeded", "cls": "succeeded", "llm": "skipped", "ext": "succeeded",
                               "say": "skipped", "save": "succeeded", "api": "succeeded", "ok": "succeeded",
                               "bad": "skipped"}
    assert _Orders.seen[0]["path"] == "/orders/A17?verbose=1"
    assert _Orders.seen[0]["headers"]["Authorization"] == "Bearer k-123"
    assert _Orders.seen[0]["headers"]["X-Lang"] == "en"
    assert answers(events) == 'Order A17: {"status": "shipped"} (200)'
    assert state.conversation == {"last_order": "A17", "asked": 1} and state.variables == {}


async def test_support_chat_fail_branch_after_retries(openai_server, scripted_registry, tmp_path):
    result = import_workflow(dd.support_chat(), models=scripted_registry, model_map=MAP)
    openai_server.script(classify("1"), text_reply('{"order_id": "B2"}'))
    # nothing listens on port 9: the request fails, is retried twice, then takes the fail branch
    state, events = await run(result, {}, secrets={"API_KEY": "k"}, registry=scripted_registry, tmp_path=tmp_path,
                              settings=SETTINGS, query="order B2?")
    succeeded(state)
    assert statuses(state)["api"] == "failed" and statuses(state)["ok"] == "skipped"
    assert state.node_runs["api"].attempts == 3
    assert answers(events).startswith("Sorry: ")


async def test_support_chat_other_branch_and_default_value(openai_server, scripted_registry, tmp_path):
    result = import_workflow(dd.support_chat(), models=scripted_registry, model_map=MAP)
    openai_server.script(classify("2"), text_reply("Bonjour !"))
    state, events = await run(result, {"lang": "fr"}, secrets={"API_KEY": "k"}, registry=scripted_registry,
                              tmp_path=tmp_path, query="Hello?")
    succeeded(state)
    assert statuses(state)["llm"] == "succeeded" and statuses(state)["ext"] == "skipped"
    system = openai_server.bodies[1]["messages"][0]["content"]
    assert "Answer in fr. Orders asked: 0" in system
    assert answers(events) == "Bonjour !"
    # the model fails: the default-value strategy answers instead
    openai_server.script(classify("2"), http_error(400, "bad request"))
    state, events = await run(result, {}, secrets={"API_KEY": "k"}, registry=scripted_registry, tmp_path=tmp_path,
                              query="Hello again?")
    succeeded(state)
    assert answers(events) == "I cannot answer now."


# ------------------------------------------------------------------- loops, placeholders


def test_loops_need_allow_partial_for_the_unsupported_kinds(scripted_registry):
    with pytest.raises(ImportFailed) as failed:
        import_workflow(dd.loops_and_unsupported(), models=scripted_registry, model_map=MAP)
    assert [(i.code, i.node_id, i.source_type) for i in failed.value.report if i.severity == "error"] == [
        ("unsupported_node", "tool", "tool")]


def test_loops_convert(scripted_registry):
    result = import_workflow(dd.loops_and_unsupported(), models=scripted_registry, model_map=MAP,
                             allow_partial=True)
    nodes = by_id(result)
    assert nodes["loop-init"]["config"]["updates"] == [{"variable": "loop_loop_total", "value": 0},
                                                       {"variable": "loop_loop_cap", "value": {"ref": "inputs.limit"}}]
    assert nodes["loop"]["config"]["variables"] == [
        {"name": "total", "value": {"ref": "vars.loop_loop_total"}, "type": "number"},
        {"name": "cap", "value": {"ref": "vars.loop_loop_cap"}, "type": "number"}]
    assert nodes["loop"]["config"]["max_iterations"] == 20
    assert nodes["add"]["config"]["updates"] == [{"variable": "loop_loop_total", "operation": "add", "value": 3}]
    assert nodes["check"]["config"]["cases"][0]["conditions"] == [
        {"left": {"ref": "vars.loop_loop_total"}, "operator": "gte", "right": {"ref": "vars.loop_loop_cap"},
         "type": "number"}]
    assert nodes["stop"]["type"] == "loop_break" and nodes["stop"]["parent"] == "loop"
    assert nodes["agg"]["type"] == "variable_aggregator"
    assert nodes["each"]["config"] == {"items": {"ref": "list.xs"}, "collect": {"ref": "say.answer"},
                                       "concurrency": 2, "item_error": "continue"}
    assert "each-flatten" not in nodes  # the items' results are strings: nothing to flatten
    assert nodes["tool"]["config"] == {"original_type": "tool", "reason": "builtin tool google/google_search is not "
                                       "provided by Flowloom (it needs the internet or an account); "
                                       "to bring it back, call the service with an http_request node (or "
                                       "http_tools/openapi of a tool_call node), or give a tool_call node an "
                                       "mcp_servers entry for an MCP server that offers it",
                                       "outputs": {"text": "any"}}
    assert nodes["end"]["config"]["outputs"][2] == {"name": "said", "value": {"ref": "each.results"}}


async def test_loops_run_until_the_placeholder(openai_server, scripted_registry, tmp_path):
    result = import_workflow(dd.loops_and_unsupported(), models=scripted_registry, model_map=MAP,
                             allow_partial=True)
    openai_server.responder = lambda body: text_reply("said " + body["messages"][-1]["content"])
    state, _ = await run(result, {"limit": 10}, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS)
    assert state.status == "failed"
    # the knowledge retrieval converts; this run has no knowledge service, so it fails there
    assert state.error.node_id == "search" and state.error.reason == "knowledge_unavailable"
    loop = state.node_runs["loop"].outputs
    assert loop["total"] == 12 and loop["rounds"] == 4  # 3, 6, 9, 12: the loop-end ran in round 4
    assert state.node_runs["agg"].outputs == {"output": 12}
    assert state.node_runs["each"].outputs["results"] == ["said Item 0: a", "said Item 1: b"]
    assert "tool" not in statuses(state)  # after the failing placeholder: never started


@pytest.mark.parametrize("build", [dd.support_chat, dd.loops_and_unsupported])
def test_round_trip(build, scripted_registry):
    first = import_workflow(build(), models=scripted_registry, model_map=MAP, allow_partial=True)
    compile_workflow(first.workflow, models=scripted_registry, use_cache=False)
    again = import_workflow(json.dumps(first.workflow), models=scripted_registry)
    assert again.workflow == first.workflow
