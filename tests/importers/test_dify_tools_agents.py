"""Dify builtin tools and agent nodes, imported from YAML written here in Dify's export
format (the corpus has none) and run through the real engine: tool nodes of the time,
json_process, maths and regex providers; agent nodes of the function_calling and ReAct
strategies with builtin, workflow and MCP tools (the scripted OpenAI server plays the
model, a real MCP server the tools); the report on tools that cannot come over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.settings import Settings
from nodes.importers import ImportFailed
from tests.support.mcp_server import start_http
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage, text_reply

from . import dify_docs as dd
from .helpers import load, run

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(http_allow=["127.0.0.1"])
MODEL_MAP = {"gpt-4o-mini": "tools-model"}


class _Dumper(yaml.SafeDumper):
    """Writes shared values out in full, as Dify does: the importer refuses YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def save(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "app.yml"
    path.write_text(yaml.dump(doc, Dumper=_Dumper, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def const(value: Any) -> dict[str, Any]:
    return {"type": "constant", "value": value}


def tool_node(nid: str, provider: str, tool: str, params: dict[str, Any]) -> dict[str, Any]:
    return dd.node(
        nid,
        "tool",
        provider_id=provider,
        provider_name=provider,
        provider_type="builtin",
        tool_name=tool,
        tool_label=tool,
        tool_configurations={},
        tool_parameters=params,
        tool_node_version="2",
    )


def ok(state: Any) -> None:
    assert state.status == "succeeded", (
        state.error,
        {k: (v.status, v.error) for k, v in state.node_runs.items()},
    )


# ------------------------------------------------------------------ tool nodes


def tools_flow() -> dict[str, Any]:
    start = dd.node(
        "start",
        "start",
        variables=[
            {"variable": "text", "label": "text", "type": "paragraph", "required": True},
            {"variable": "doc", "label": "doc", "type": "paragraph", "required": True},
        ],
    )
    return dd.app(
        [
            start,
            tool_node(
                "rx",
                "langgenius/regex/regex",
                "regex_extract",
                {"content": {"type": "variable", "value": ["start", "text"]}, "expression": const(r"\d+")},
            ),
            tool_node(
                "calc",
                "maths",
                "eval_expression",
                {"expression": {"type": "mixed", "value": "{{#start.text#}}"}},
            ),
            tool_node(
                "jp",
                "langgenius/json_process/json_process",
                "json_parse",
                {"content": {"type": "variable", "value": ["start", "doc"]}, "json_filter": const("$.user")},
            ),
            tool_node(
                "tz",
                "time",
                "timezone_conversion",
                {
                    "current_time": const("2024-07-01 12:00:00"),
                    "current_timezone": const("Europe/Berlin"),
                    "target_timezone": const("America/New_York"),
                },
            ),
            dd.node(
                "end",
                "end",
                outputs=[
                    {"variable": "numbers", "value_selector": ["rx", "text"]},
                    {"variable": "total", "value_selector": ["calc", "text"]},
                    {"variable": "user", "value_selector": ["jp", "json"]},
                    {"variable": "user_text", "value_selector": ["jp", "text"]},
                    {"variable": "new_york", "value_selector": ["tz", "text"]},
                ],
            ),
        ],
        [
            dd.edge("start", "rx"),
            dd.edge("rx", "calc"),
            dd.edge("calc", "jp"),
            dd.edge("jp", "tz"),
            dd.edge("tz", "end"),
        ],
    )


async def test_dify_tool_nodes_of_the_four_providers_run(tmp_path):
    result = load(save(tmp_path, tools_flow()))
    kinds = {n["id"]: n["config"].get("tool") for n in result.workflow["nodes"] if n["type"] == "code"}
    assert kinds == {
        "rx": "regex_extract",
        "calc": "eval_expression",
        "jp": "json_parse",
        "tz": "timezone_conversion",
    }
    doc = json.dumps({"user": {"name": "Ada", "langs": ["en", "fr"]}})
    state, _ = await run(result, {"text": "12 + 30", "doc": doc}, tmp_path=tmp_path)
    ok(state)
    assert state.outputs["numbers"] == '["12", "30"]'
    assert state.outputs["total"] == "42"
    assert state.outputs["user"] == [{"name": "Ada", "langs": ["en", "fr"]}]  # the parsed object, not text
    assert json.loads(state.outputs["user_text"]) == {"name": "Ada", "langs": ["en", "fr"]}
    assert state.outputs["new_york"] == "2024-07-01 06:00:00"
    assert state.node_runs["jp"].outputs["result"] == {"name": "Ada", "langs": ["en", "fr"]}


async def test_a_bad_argument_fails_the_tool_node_naming_the_tool(tmp_path):
    result = load(save(tmp_path, tools_flow()))
    state, _ = await run(result, {"text": "12 +", "doc": "{}"}, tmp_path=tmp_path)
    assert state.status == "failed"
    assert state.error.node_id == "calc" and state.error.reason == "tool_error"
    assert "builtin tool eval_expression: the expression does not parse" in state.error.message


# ------------------------------------------------------------------ agent nodes


def builtin_item(
    provider: str, tool: str, parameters: dict[str, Any] | None = None, settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An entry of an agent's tool list as Dify exports it."""
    return {
        "enabled": True,
        "type": "builtin",
        "provider_name": provider,
        "provider_show_name": provider,
        "tool_name": tool,
        "tool_label": tool,
        "tool_description": "",
        "settings": settings or {},
        "parameters": parameters or {},
        "extra": {"description": ""},
        "schemas": [],
    }


def agent_flow(
    tools: list[dict[str, Any]],
    *,
    strategy: str = "function_calling",
    plugin: str = "langgenius/agent/agent",
    memory: dict[str, Any] | None = None,
    **extra_params: Any,
) -> dict[str, Any]:
    params = {
        "model": const(
            {
                "provider": "langgenius/openai/openai",
                "model": "gpt-4o-mini",
                "model_type": "llm",
                "mode": "chat",
                "type": "model-selector",
                "completion_params": {},
            }
        ),
        "tools": const(tools),
        "instruction": const("Use the tools; be brief."),
        "query": const("{{#sys.query#}}"),
        "maximum_iterations": const(3),
        **{k: v for k, v in extra_params.items()},
    }
    data: dict[str, Any] = {
        "agent_strategy_provider_name": plugin,
        "agent_strategy_name": strategy,
        "agent_strategy_label": strategy,
        "agent_parameters": params,
        "output_schema": None,
        "plugin_unique_identifier": f"{plugin.rsplit('/', 1)[0]}:0.0.14@0123abcd",
        "tool_node_version": "2",
    }
    if memory is not None:
        data["memory"] = memory
    return dd.app(
        [
            dd.node("start", "start", variables=[]),
            dd.node("ag", "agent", **data),
            dd.node("say", "answer", answer="{{#ag.text#}}"),
        ],
        [dd.edge("start", "ag"), dd.edge("ag", "say")],
        mode="advanced-chat",
    )


def node_of(result: Any, nid: str) -> dict[str, Any]:
    return next(n for n in result.workflow["nodes"] if n["id"] == nid)


async def test_function_calling_agent_runs_its_builtin_tools(tmp_path, openai_server, scripted_registry):
    fixed = {"expression": {"auto": 0, "value": const(r"\d+")}, "content": {"auto": 1, "value": None}}
    tools = [
        builtin_item("langgenius/regex/regex", "regex_extract", parameters=fixed),
        builtin_item("langgenius/maths/maths", "eval_expression"),
    ]
    result = load(
        save(tmp_path, agent_flow(tools, memory={"window": {"enabled": True, "size": 4}})),
        models=scripted_registry,
        model_map=MODEL_MAP,
    )
    cfg = node_of(result, "ag")["config"]
    assert node_of(result, "ag")["type"] == "tool_call"
    assert cfg["builtin_tools"] == [
        {"name": "regex_extract", "arguments": {"expression": r"\d+"}},
        {"name": "eval_expression"},
    ]
    assert (cfg.get("mode", "auto"), cfg["max_rounds"], cfg["history"]) == ("auto", 4, 4)
    openai_server.script(
        Reply(
            [
                ToolDelta(0, "c1", "regex_extract", '{"content": "3 apples and 4 pears"}'),
                Finish("tool_calls"),
                Usage(5, 5),
            ]
        ),
        Reply(
            [
                ToolDelta(0, "c2", "eval_expression", '{"expression": "3 + 4"}'),
                Finish("tool_calls"),
                Usage(5, 5),
            ]
        ),
        Reply([Text("7 fruits."), Finish("stop"), Usage(5, 5)]),
    )
    state, _ = await run(
        result,
        registry=scripted_registry,
        settings=SETTINGS,
        tmp_path=tmp_path,
        query="how many fruits in '3 apples and 4 pears'?",
    )
    ok(state)
    assert state.answer == "7 fruits."
    regex_schema = next(
        t for t in openai_server.bodies[0]["tools"] if t["function"]["name"] == "regex_extract"
    )
    assert list(regex_schema["function"]["parameters"]["properties"]) == [
        "content"
    ]  # the fixed one is hidden
    results = [m["content"] for m in openai_server.bodies[2]["messages"] if m["role"] == "tool"]
    assert '["3", "4"]' in results[0] and "7" in results[1]
    system = openai_server.bodies[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Use the tools; be brief.")


async def test_react_agent_runs_with_the_prompted_tool_protocol(tmp_path, openai_server, scripted_registry):
    tools = [builtin_item("maths", "eval_expression")]
    result = load(
        save(tmp_path, agent_flow(tools, strategy="ReAct")), models=scripted_registry, model_map=MODEL_MAP
    )
    assert node_of(result, "ag")["config"]["mode"] == "json"
    assert any("ReAct" in i.message and "JSON tool protocol" in i.message for i in result.report)
    call = {"type": "tool_calls", "calls": [{"tool": "eval_expression", "params": {"expression": "6 * 7"}}]}
    openai_server.script(
        text_reply(json.dumps(call)), text_reply(json.dumps({"type": "answer", "text": "42."}))
    )
    state, _ = await run(
        result, registry=scripted_registry, settings=SETTINGS, tmp_path=tmp_path, query="six times seven?"
    )
    ok(state)
    assert state.answer == "42."
    assert all("tools" not in body for body in openai_server.bodies)
    assert "42" in json.dumps(openai_server.bodies[1]["messages"][-1])


def test_an_agent_strategy_other_than_function_calling_or_react_is_refused_naming_it(tmp_path):
    doc = agent_flow(
        [builtin_item("maths", "eval_expression")],
        strategy="self_refine",
        plugin="langgenius/self_refine_agent/self_refine",
    )
    result = load(save(tmp_path, doc), model_map={"*": "default"}, allow_partial=True)
    reason = node_of(result, "ag")["config"]["reason"]
    assert "agent strategy self_refine of plugin langgenius/self_refine_agent/self_refine" in reason
    assert "function_calling and ReAct" in reason


async def test_workflow_tool_runs_the_app_imported_under_the_named_id(
    tmp_path, openai_server, scripted_registry
):
    item = {
        "enabled": True,
        "type": "workflow",
        "provider_name": "0f5c2c8e-7d1a-4d65-9c1e-3a1d2b4c5e6f",
        "tool_name": "greeter",
        "tool_label": "Greeter",
        "settings": {},
        "parameters": {},
        "extra": {"description": "Greets someone by name."},
    }
    result = load(save(tmp_path, agent_flow([item])), models=scripted_registry, model_map=MODEL_MAP)
    assert node_of(result, "ag")["config"]["workflow_tools"] == [
        {"workflow": "greeter", "description": "Greets someone by name."}
    ]
    (warning,) = [i for i in result.report if i.code == "missing_setting"]
    assert "import that app too as workflow 'greeter' and publish it" in warning.message
    assert "--id greeter" in warning.message
    assert any("asks a person before each call" in i.message for i in result.report)
    tool_call = node_of(result, "ag")
    tool_call["config"]["workflow_tools"][0]["risk"] = "read"  # what the report says to do, to run unattended

    folder = tmp_path / "workflows"
    folder.mkdir()
    hello = json.loads((ROOT / "examples" / "hello.json").read_text(encoding="utf-8"))
    (folder / "greeter.json").write_text(json.dumps({**hello, "id": "greeter"}), encoding="utf-8")
    openai_server.script(
        Reply([ToolDelta(0, "c1", "greeter", '{"name": "Ada"}'), Finish("tool_calls"), Usage(5, 5)]),
        Reply([Text("Greeted."), Finish("stop"), Usage(5, 5)]),
    )
    settings = Settings(http_allow=["127.0.0.1"], workflow_path=[folder])
    state, _ = await run(
        result, registry=scripted_registry, settings=settings, tmp_path=tmp_path, query="greet Ada"
    )
    ok(state)
    tool_msg = next(m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool")
    assert "Hello, Ada! Welcome to Flowloom." in tool_msg["content"]


# ------------------------------------------------------------------ MCP servers


@pytest.fixture
def http_url():
    proc, url = start_http()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(5)


async def test_mcp_agent_server_url_becomes_an_mcp_server_and_runs(
    tmp_path, http_url, openai_server, scripted_registry
):
    doc = agent_flow([], plugin="hjlarry/mcp_agent/mcp_agent", mcp_server=const(http_url))
    result = load(save(tmp_path, doc), models=scripted_registry, model_map=MODEL_MAP)
    assert node_of(result, "ag")["config"]["mcp_servers"] == [{"name": "ag_mcp", "url": http_url}]
    openai_server.script(
        Reply([ToolDelta(0, "c1", "lookup", '{"city": "Oslo"}'), Finish("tool_calls"), Usage(5, 5)]),
        Reply([Text("Oslo is sunny."), Finish("stop"), Usage(5, 5)]),
    )
    state, _ = await run(
        result, registry=scripted_registry, settings=SETTINGS, tmp_path=tmp_path, query="weather in Oslo?"
    )
    ok(state)
    assert state.answer == "Oslo is sunny."
    tool_msg = next(m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool")
    assert "weather in Oslo: sunny" in tool_msg["content"]


def test_mcp_servers_config_masked_urls_and_credentials_are_warnings_naming_the_setting(tmp_path):
    config = {
        "mcpServers": {
            "maps": {"url": "https://mcp.maps.example.com/******", "headers": {}},
            "search": {
                "url": "https://search.example.com/mcp",
                "headers": {"Authorization": "Bearer sk-live-123"},
            },
            "legacy": {"url": "https://legacy.example.com/sse"},
        }
    }
    doc = agent_flow(
        [], plugin="junjiem/mcp_see_agent/mcp_see_agent", mcp_servers_config=const(json.dumps(config))
    )
    result = load(save(tmp_path, doc), model_map={"*": "default"})
    assert node_of(result, "ag")["config"]["mcp_servers"] == [
        {
            "name": "search",
            "url": "https://search.example.com/mcp",
            "headers": {"Authorization": "{{secret:SEARCH_AUTHORIZATION}}"},
        },
        {"name": "legacy", "url": "https://legacy.example.com/sse"},
    ]
    assert "sk-live-123" not in json.dumps(result.workflow)
    settings = [i.message for i in result.report if i.code == "missing_setting" and i.severity == "warning"]
    assert any(
        "MCP server maps: its URL is masked" in m and '"name": "maps"' in m and "mcp_servers of node ag" in m
        for m in settings
    )
    assert any("header Authorization" in m and "FLOWLOOM_SECRET_SEARCH_AUTHORIZATION" in m for m in settings)
    assert any("legacy" in m and "Streamable HTTP" in m for m in result.report for m in [m.message])


def test_dify_mcp_tool_with_its_url_joins_mcp_servers_with_its_tool(tmp_path):
    item = {
        "enabled": True,
        "type": "mcp",
        "provider_name": "weather",
        "tool_name": "lookup",
        "server_url": "https://weather.example.com/mcp",
        "settings": {},
        "parameters": {},
    }
    masked = {
        **item,
        "provider_name": "maps",
        "tool_name": "route",
        "server_url": "https://maps.example.com/******",
    }
    result = load(save(tmp_path, agent_flow([item, masked])), model_map={"*": "default"})
    assert node_of(result, "ag")["config"]["mcp_servers"] == [
        {"name": "weather", "url": "https://weather.example.com/mcp", "tools": ["lookup"]}
    ]
    assert any(i.code == "missing_setting" and "MCP server maps" in i.message for i in result.report)


# ------------------------------------------------------------------ what cannot come over


def test_network_tools_are_reported_by_name_with_the_way_back(tmp_path):
    tools = [
        builtin_item("tavily", "tavily_search"),
        builtin_item("maths", "eval_expression"),
        builtin_item("langgenius/google/google", "google_search"),
    ]
    doc = agent_flow(tools)
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, doc), model_map={"*": "default"})
    errors = [i for i in err.value.report if i.severity == "error"]
    assert [(i.code, i.node_id) for i in errors] == [("unsupported_tool", "ag"), ("unsupported_tool", "ag")]
    assert "builtin tool tavily/tavily_search is not provided by Flowloom" in errors[0].message
    assert "tool google_search of marketplace plugin langgenius/google/google" in errors[1].message
    assert all("http_request node" in i.message and "MCP server" in i.message for i in errors)

    result = load(save(tmp_path, doc), model_map={"*": "default"}, allow_partial=True)
    assert node_of(result, "ag")["config"]["builtin_tools"] == [{"name": "eval_expression"}]
    assert [i.code for i in result.errors] == ["unsupported_tool", "unsupported_tool"]


def test_a_network_tool_node_is_a_placeholder_whose_reason_offers_the_way_back(tmp_path):
    doc = dd.app(
        [
            dd.node("start", "start", variables=[]),
            tool_node("search", "tavily", "tavily_search", {"query": const("x")}),
            dd.node("end", "end", outputs=[{"variable": "r", "value_selector": ["search", "text"]}]),
        ],
        [dd.edge("start", "search"), dd.edge("search", "end")],
    )
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, doc))
    (issue,) = [i for i in err.value.report if i.severity == "error"]
    assert issue.node_id == "search" and "tavily/tavily_search" in issue.message
    assert "http_request node" in issue.message and "mcp_servers entry" in issue.message
