"""The tool_call node in workflows, against the scripted OpenAI-compatible server.

Graph tools (body sub-graphs reading ``<node>.args``), HTTP tools from OpenAPI-style
operations through the guarded client (a local server on 127.0.0.1), workflow tools
from the store, the stop tool, the JSON protocol, and the config/compile checks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import RunDeps, run_workflow
from engine.errors import CompileError
from engine.settings import Settings, get_settings
from nodes.agent.loop import get_tool_result
from schemas.types import NodeRunStatus, RunStatus
from tests.nodes.agent.conftest import answer_reply, calls_reply
from tests.nodes.http_test_server import LocalServer
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.openai_server import Finish, Reply, Text, Usage
from tests.support.workflows import build, edge, node


@pytest.fixture
def agent_run(scripted_registry):
    async def go(doc: dict[str, Any], inputs: dict[str, Any] | None = None, **deps: Any):
        events: list[Any] = []
        plan = compile_workflow(doc, models=scripted_registry, use_cache=False)
        state = await run_workflow(plan, inputs or {}, deps=RunDeps(on_event=events.append, models=scripted_registry,
                                                                    **deps))
        return state, events
    return go


@pytest.fixture
def http_server():
    server = LocalServer().start()
    try:
        yield server
    finally:
        server.stop()


ALLOW_LOCAL = Settings(http_allow=["127.0.0.1"])


def agent(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return node("agent", "tool_call", {"model": "tools-model", "user_prompt": "{{ inputs.task }}", "stream": False,
                                       **config}, **fields)


def workflow(config: dict[str, Any], body: list[dict[str, Any]] = (), body_edges: list[dict[str, Any]] = (),
             **top: Any) -> dict[str, Any]:
    nodes_ = [agent(config), *body, node("say", "answer", {"text": "{{ agent.answer }}"}),
              node("end", "end", {"outputs": [{"name": "cost", "value": {"ref": "agent.cost"}},
                                              {"name": "stop", "value": {"ref": "agent.stop_reason"}}]})]
    edges = [edge("start", "agent"), edge("agent", "say"), edge("say", "end"), *body_edges]
    return build(nodes_, edges, inputs=[{"name": "task", "type": "string", "default": "do it"}], **top)


CONVERT = {"node": "to_f", "name": "to_fahrenheit", "description": "Celsius to Fahrenheit",
           "parameters": [{"name": "celsius", "type": "number", "required": True}],
           "result": {"ref": "to_f.output"}}
TO_F = node("to_f", "template", {"template": "{{ (agent.args.celsius * 9 / 5 + 32) | round(1) }}"}, parent="agent")


# ------------------------------------------------------------------ graph tools


async def test_graph_tool_runs_its_sub_graph_with_the_call_arguments(openai_server, agent_run):
    openai_server.script(calls_reply(("c1", "to_fahrenheit", {"celsius": 20}), ("c2", "to_fahrenheit", {"celsius": -40})),
                         answer_reply("20 C is 68 F; -40 C is -40 F."))
    state, events = await agent_run(workflow({"tools": [CONVERT]}, [TO_F]))
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "20 C is 68 F; -40 C is -40 F." and state.outputs["stop"] == "answer"
    first = openai_server.bodies[0]
    (tool,) = first["tools"]
    assert tool["function"]["name"] == "to_fahrenheit"
    assert tool["function"]["parameters"] == {"type": "object", "properties": {"celsius": {"type": "number"}},
                                              "required": ["celsius"], "additionalProperties": False}
    results = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"]
    assert [r["content"].splitlines()[1] for r in results] == ["68.0", "-40.0"]
    run = state.node_runs["agent"]
    tool_runs = run.data["tool_runs"]
    assert set(tool_runs) == {"c1", "c2"}
    assert tool_runs["c1"]["node_runs"][0]["node_id"] == "to_f" and tool_runs["c1"]["node_runs"][0]["loop_id"] == "agent"
    assert tool_runs["c2"]["node_runs"][0]["iteration"] == 1
    assert run.outputs["rounds"] == 2 and [m["role"] for m in run.outputs["messages"]] == ["assistant", "tool", "tool"]
    assert run.outputs["cost"] == pytest.approx(run.outputs["usage"]["cost"])
    body_events = [e for e in events if e.type == "node_started" and e.node_id == "to_f"]
    assert [(e.loop_id, e.iteration) for e in body_events] == [("agent", 0), ("agent", 1)]


async def test_default_result_is_the_last_nodes_outputs_and_failures_are_fed_back(openai_server, agent_run):
    body = [node("lookup", "template", {"template": "id={{ agent.args.id }}"}, parent="agent"),
            node("shape", "template", {"template": "{{ lookup.output | upper }}"}, parent="agent"),
            node("broken", "template", {"template": "{{ agent.args.missing.deeper }}"}, parent="agent")]
    tools = [{"node": "lookup", "name": "lookup", "parameters": [{"name": "id", "type": "string"}]},
             {"node": "broken", "name": "broken"}]
    openai_server.script(calls_reply(("c1", "lookup", {"id": "a7"}), ("c2", "broken", {})), answer_reply("ok"))
    state, _ = await agent_run(workflow({"tools": tools}, body, [edge("lookup", "shape")]))
    assert state.status is RunStatus.succeeded, state.error
    results = {m["tool_call_id"]: m["content"] for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"}
    assert json.loads(results["c1"].splitlines()[1]) == {"output": "ID=A7"}
    assert "tool_error" in results["c2"] and "the tool failed at node 'broken'" in results["c2"]
    assert state.node_runs["agent"].data["tool_runs"]["c2"]["error"]
    # each call ran only its own sub-graph: lookup's call did not run broken, and vice versa
    ran = {cid: {r["node_id"]: r["status"] for r in rec["node_runs"]}
           for cid, rec in state.node_runs["agent"].data["tool_runs"].items()}
    assert ran["c1"]["lookup"] == "succeeded" and ran["c1"]["broken"] == "skipped"
    assert ran["c2"]["broken"] == "failed" and ran["c2"]["lookup"] == "skipped"


async def test_a_template_result_is_rendered_in_the_calls_scope(openai_server, agent_run):
    tool = {**CONVERT, "result": "{{ agent.args.celsius }} C = {{ to_f.output }} F (call {{ agent.call_id }})"}
    openai_server.script(calls_reply(("c1", "to_fahrenheit", {"celsius": 10})), answer_reply("50 F"))
    state, _ = await agent_run(workflow({"tools": [tool]}, [TO_F]))
    assert state.status is RunStatus.succeeded, state.error
    result = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert result.splitlines()[1] == "10 C = 50.0 F (call c1)"


async def test_llm_costs_inside_a_tool_are_the_tools_cost(openai_server, agent_run):
    body = [node("ask", "chat", {"model": "tools-model", "user_prompt": "{{ agent.args.q }}", "stream": False,
                                 "history": 0}, parent="agent")]
    tools = [{"node": "ask", "name": "ask_expert", "parameters": [{"name": "q", "type": "string", "required": True}],
              "result": {"ref": "ask.answer"}}]
    openai_server.script(calls_reply(("c1", "ask_expert", {"q": "why?"}), usage=(100, 10)),
                         answer_reply("because", usage=(100, 100)),
                         answer_reply("The expert says: because.", usage=(100, 10)))
    state, _ = await agent_run(workflow({"tools": tools}, body))
    assert state.status is RunStatus.succeeded, state.error
    out = state.node_runs["agent"].outputs
    model_cost = (100 * 0.001 + 10 * 0.002) / 1000 * 2
    tool_cost = (100 * 0.001 + 100 * 0.002) / 1000
    assert out["usage"]["cost"] == pytest.approx(model_cost)
    assert out["cost"] == pytest.approx(model_cost + tool_cost)
    assert state.node_runs["agent"].data["agent"]["trace"][0]["tools"][0]["cost"] == pytest.approx(tool_cost)


async def test_stop_tool_ends_the_loop(openai_server, agent_run):
    openai_server.script(calls_reply(("c1", "to_fahrenheit", {"celsius": 0}), ("c2", "finish", {}), text="32 F."))
    state, _ = await agent_run(workflow({"tools": [CONVERT], "stop_tool": {"name": "finish"}}, [TO_F]))
    assert state.status is RunStatus.succeeded, state.error
    assert state.outputs["stop"] == "stop_tool" and state.answer == "32 F." and len(openai_server.bodies) == 1


async def test_json_protocol_through_the_node(openai_server, agent_run):
    openai_server.script(
        Reply([Text('I will convert it. {"type": "tool_calls", "calls": [{"tool": "to_fahrenheit", '
                    '"params": {"celsius": 100}}]}'), Finish("stop"), Usage(50, 20)]),
        Reply([Text('{"type": "answer", "text": "212 F"}'), Finish("stop"), Usage(60, 8)]),
    )
    state, _ = await agent_run(workflow({"tools": [CONVERT], "model": "plain-model"}, [TO_F]))
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "212 F"
    system = openai_server.bodies[0]["messages"][0]["content"]
    assert system.startswith("You are a terse assistant.") and "to_fahrenheit" in system
    assert "212.0" in openai_server.bodies[1]["messages"][-1]["content"]


async def test_not_converged_fails_the_node_with_its_reason(openai_server, agent_run):
    openai_server.script(*[Reply([Text("no json here"), Finish("stop")]) for _ in range(3)])
    state, _ = await agent_run(workflow({"tools": [CONVERT], "model": "plain-model"}, [TO_F]))
    assert state.status is RunStatus.failed
    assert state.error.reason == "not_converged" and state.error.node_id == "agent"
    run = state.node_runs["agent"]
    assert run.status is NodeRunStatus.failed and len(run.data["agent"]["trace"]) == 3  # the trace survives


# ------------------------------------------------------------------ HTTP tools


ECHO_OP = {
    "operationId": "update_item", "summary": "Update an item", "method": "put",
    "base_url": "{{ inputs.api }}", "path": "/echo/items/{item_id}",
    "parameters": [{"name": "item_id", "in": "path", "schema": {"type": "string"}},
                   {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                   {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}],
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]}}}},
    "headers": {"Authorization": "Bearer {{ inputs.token }}"},
}


def http_workflow(config: dict[str, Any]) -> dict[str, Any]:
    doc = workflow({"allow_write_tools": True, **config})  # the risk gate has its own tests: test_risk_gate.py
    doc["inputs"] += [{"name": "api", "type": "string"}, {"name": "token", "type": "string", "default": "t0k"}]
    return doc


async def test_http_tool_builds_the_request_from_the_operation(openai_server, agent_run, http_server):
    openai_server.script(calls_reply(("c1", "update_item", {"item_id": "../a b/{{ inputs.token }}", "verbose": True,
                                                            "X-Trace": "t-1", "body": {"qty": 3}})),
                         answer_reply("updated"))
    state, _ = await agent_run(http_workflow({"http_tools": [ECHO_OP]}), {"api": http_server.url("")},
                               settings=ALLOW_LOCAL)
    assert state.status is RunStatus.succeeded, state.error
    tool = openai_server.bodies[0]["tools"][0]["function"]
    assert tool["name"] == "update_item" and tool["description"] == "Update an item"
    assert tool["parameters"]["required"] == ["item_id", "body"]
    result = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    echoed = json.loads(result.splitlines()[1])
    assert echoed["status_code"] == 200
    seen = echoed["json"]
    assert seen["method"] == "PUT"
    assert seen["path"] == "/echo/items/..%2Fa%20b%2F%7B%7B%20inputs.token%20%7D%7D"  # encoded, never rendered
    assert seen["query"] == {"verbose": ["true"]}
    assert seen["headers"]["x-trace"] == "t-1" and seen["headers"]["authorization"] == "Bearer t0k"
    assert json.loads(seen["body"]) == {"qty": 3} and seen["headers"]["content-type"] == "application/json"
    record = state.node_runs["agent"].data["agent"]["trace"][0]["tools"][0]["data"]
    assert record["status_code"] == 200 and record["url"].startswith("http://127.0.0.1:")
    assert state.node_runs["agent"].data["tools"][0]["risk"] == "write"


async def test_openapi_document_and_http_errors(openai_server, agent_run, http_server):
    spec = {"servers": [{"url": "{{ inputs.api }}"}],
            "paths": {"/status/{code}": {"get": {"operationId": "status", "summary": "Get a status",
                                                  "parameters": [{"name": "code", "in": "path", "required": True,
                                                                  "schema": {"type": "integer"}}]}}}}
    openai_server.script(calls_reply(("c1", "status", {"code": 404})), answer_reply("not found"))
    state, _ = await agent_run(http_workflow({"openapi": spec}), {"api": http_server.url("")}, settings=ALLOW_LOCAL)
    assert state.status is RunStatus.succeeded, state.error
    result = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "BEGIN tool_error" in result and '"status_code": 404' in result and "status 404 body" in result
    assert state.node_runs["agent"].data["tools"][0]["risk"] == "read"


async def test_ssrf_guard_applies_to_http_tools(openai_server, agent_run, http_server):
    openai_server.script(calls_reply(("c1", "update_item", {"item_id": "x", "body": {"qty": 1}})),
                         answer_reply("could not reach it"))
    state, _ = await agent_run(http_workflow({"http_tools": [ECHO_OP]}), {"api": http_server.url("")})
    assert state.status is RunStatus.succeeded, state.error  # a refused target is an error result, not fatal
    result = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "BlockedAddress" in result and "FLOWLOOM_HTTP_ALLOW" in result
    assert http_server.seen == []


# ------------------------------------------------------------------ workflow tools


CHILD = {
    "id": "greeter", "name": "Greeter", "description": "Greets a person by name.",
    "inputs": [{"name": "person", "type": "string", "required": True, "description": "who to greet"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "hello", "type": "answer", "config": {"text": "Hello, {{ inputs.person }}!"}}],
    "edges": [{"id": "e1", "source": "start", "target": "hello"}],
}


async def test_workflow_tool_runs_a_child_workflow(openai_server, agent_run, tmp_path, monkeypatch):
    (tmp_path / "greeter.json").write_text(json.dumps(CHILD))
    monkeypatch.setenv("FLOWLOOM_WORKFLOW_PATH", str(tmp_path))
    get_settings.cache_clear()
    openai_server.script(calls_reply(("c1", "greeter", {"person": "Ada"}), ("c2", "greeter", {})),
                         answer_reply("I greeted Ada."))
    state, _ = await agent_run(workflow({"workflow_tools": [{"workflow": "greeter", "risk": "read"}]}))
    assert state.status is RunStatus.succeeded, state.error
    tool = openai_server.bodies[0]["tools"][0]["function"]
    assert tool["description"] == "Greets a person by name."
    assert tool["parameters"]["properties"] == {"person": {"type": "string", "description": "who to greet"}}
    results = [m["content"] for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"]
    assert results[0].splitlines()[1] == "Hello, Ada!"
    assert "missing required property" in results[1]
    runs = state.node_runs["agent"].data["workflow_runs"]
    assert runs["c1"]["status"] == "succeeded" and runs["c1"]["run_id"].startswith(state.run_id)


async def test_a_workflow_calling_itself_is_refused(openai_server, agent_run, tmp_path, monkeypatch):
    selfish = workflow({"workflow_tools": [{"workflow": "selfish", "risk": "read"}]}, id="selfish")
    (tmp_path / "selfish.json").write_text(json.dumps(selfish))
    monkeypatch.setenv("FLOWLOOM_WORKFLOW_PATH", str(tmp_path))
    get_settings.cache_clear()
    openai_server.script(calls_reply(("c1", "selfish", {"task": "again"})), answer_reply("stopped"))
    state, _ = await agent_run(selfish)
    assert state.status is RunStatus.succeeded, state.error
    result = [m["content"] for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]
    assert "cannot call itself" in result


async def test_unknown_workflow_tool_fails_the_node_clearly(openai_server, agent_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLOOM_WORKFLOW_PATH", str(tmp_path))
    get_settings.cache_clear()
    state, _ = await agent_run(workflow({"workflow_tools": [{"workflow": "nowhere"}]}))
    assert state.status is RunStatus.failed and "workflow 'nowhere' not found" in state.error.message
    assert openai_server.bodies == []


# ------------------------------------------------------------------ config and compile checks


def test_body_nodes_and_args_references_compile(scripted_registry):
    plan = compile_workflow(workflow({"tools": [CONVERT]}, [TO_F]), models=scripted_registry, use_cache=False)
    assert plan.nodes["agent"].body is not None and "to_f" in plan.nodes["agent"].body.nodes
    assert "to_f" not in plan.nodes


def test_config_problems_are_reported(scripted_registry):
    dup = workflow({"tools": [CONVERT, {**CONVERT, "node": "other"}]}, [TO_F])
    codes = {(p.code, p.path) for p in check_workflow(dup, models=scripted_registry)}
    assert any(code == "invalid_config" for code, _ in codes)
    bad_path = workflow({"http_tools": [{**ECHO_OP, "path": "/x/{nope}"}]})
    assert any("not declared" in p.message for p in check_workflow(bad_path, models=scripted_registry))
    asks = workflow({"tools": [{"node": "pick", "name": "pick"}]},
                    [node("pick", "user_select", {"description": "?", "options": [{"id": "a", "label": "A"}]},
                          parent="agent")])
    assert "interrupt_in_loop" in {p.code for p in check_workflow(asks, models=scripted_registry)}
    bad_ref = workflow({"tools": [{**CONVERT, "result": {"ref": "to_f.nothing"}}]}, [TO_F])
    with pytest.raises(CompileError) as info:
        compile_workflow(bad_ref, models=scripted_registry, use_cache=False)
    assert "unknown_output" in str(info.value)


async def test_a_tool_must_start_at_a_body_root(openai_server, agent_run):
    body = [node("a", "template", {"template": "a"}, parent="agent"), node("b", "template", {"template": "b"},
                                                                          parent="agent")]
    state, _ = await agent_run(workflow({"tools": [{"node": "b", "name": "b"}]}, body, [edge("a", "b")]))
    assert state.status is RunStatus.failed and "body root" in state.error.message


async def test_full_results_are_fetchable_from_the_node_run(openai_server, agent_run):
    body = [node("big", "template", {"template": "{% for i in range(3000) %}row {{ i }}\n{% endfor %}"},
                 parent="agent")]
    openai_server.script(calls_reply(("c1", "big", {})), answer_reply("many rows"))
    state, _ = await agent_run(workflow({"tools": [{"node": "big", "name": "big", "result": {"ref": "big.output"}}],
                                         "max_result_chars": 200}, body))
    assert state.status is RunStatus.succeeded, state.error
    full = get_tool_result(state.node_runs["agent"], "c1")
    assert full.count("row ") == 3000
    sent = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "row 2999" not in sent and "first 200 of" in sent
