"""MCP tools in imported files (the corpus has none; the files are written here in the
export formats): a FastGPT MCP tool set attached to a tool call becomes the tool call's
``mcp_servers`` and runs against a real MCP server; an MCP tool whose file lacks the
server's URL (FastGPT without it, Dify always) is refused naming the server and tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from nodes.importers import ImportFailed
from tests.support.mcp_server import start_http
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage

from . import dify_docs as dd
from . import fastgpt_docs as fd
from .helpers import load, run


def save(tmp_path: Path, doc: Any, name: str = "flow.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def fastgpt_with(mcp_node: dict[str, Any]) -> dict[str, Any]:
    """start -> tool call (with ``mcp_node`` attached by selectedTools) -> answer."""
    return fd.wrap([
        fd.start(),
        fd.node("tc", "tools", [fd.inp("model", "gpt-4o-mini"), fd.inp("userChatInput", ["start", "userChatInput"])],
                [fd.out("answerText")]),
        mcp_node,
        fd.node("ans", "answerNode", [fd.inp("text", "{{$tc.answerText$}}")]),
    ], [fd.edge("start", "tc"), {"source": "tc", "target": mcp_node["nodeId"], "sourceHandle": "selectedTools",
                                 "targetHandle": "selectedTools"}, fd.edge("tc", "ans")])


def toolset(url: str) -> dict[str, Any]:
    return fd.node("weather", "toolSet", name="Weather MCP", toolConfig={"mcpToolSet": {
        "toolId": "6650a1", "url": url, "headerSecret": {"Authorization": {"secret": "", "value": ""}},
        "toolList": [{"name": "lookup", "description": "The weather in a city.",
                      "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}]}})


@pytest.fixture
def http_url():
    proc, url = start_http()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(5)


async def test_a_fastgpt_mcp_tool_set_becomes_the_tool_calls_server_and_runs(
        tmp_path, http_url, openai_server, scripted_registry, monkeypatch):
    result = load(save(tmp_path, fastgpt_with(toolset(http_url))), models=scripted_registry,
                  model_map={"gpt-4o-mini": "tools-model"})
    tc = next(n for n in result.workflow["nodes"] if n["id"] == "tc")
    assert tc["type"] == "tool_call" and tc["config"].get("tools", []) == []
    assert tc["config"]["mcp_servers"] == [{"name": "Weather_MCP", "url": http_url, "tools": ["lookup"],
                                            "headers": {"Authorization": "{{secret:WEATHER_MCP_AUTHORIZATION}}"}}]
    assert all(n["id"] != "weather" for n in result.workflow["nodes"])  # config, not a node
    messages = " ".join(i.message for i in result.report)
    assert "FLOWLOOM_SECRET_WEATHER_MCP_AUTHORIZATION" in messages and "asks a person first" in messages

    monkeypatch.setenv("FLOWLOOM_SECRET_WEATHER_MCP_AUTHORIZATION", "Bearer t0k")
    openai_server.script(Reply([ToolDelta(0, "c1", "lookup", '{"city": "Rome"}'), Finish("tool_calls"), Usage(5, 5)]),
                         Reply([Text("Rome is sunny."), Finish("stop"), Usage(5, 5)]))
    state, _events = await run(result, registry=scripted_registry, settings=Settings(http_allow=["127.0.0.1"]),
                               query="weather in Rome?")
    assert state.status == "succeeded", state.error
    assert state.answer == "Rome is sunny."
    tool_msg = next(m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool")
    assert "weather in Rome: sunny" in tool_msg["content"]


def test_fastgpt_mcp_tools_of_one_server_share_one_entry(tmp_path, scripted_registry):
    url = "https://mcp.example.com/mcp"
    one = fd.node("t1", "tool", [fd.inp("system_toolData", {"name": "lookup", "url": url})], name="lookup",
                  toolConfig={"mcpTool": {"toolId": "mcp-6650a1/lookup"}})
    two = fd.node("t2", "tool", [fd.inp("system_toolData", {"name": "forecast", "url": url})], name="forecast",
                  toolConfig={"mcpTool": {"toolId": "mcp-6650a1/forecast"}})
    doc = fastgpt_with(one)
    doc["workflow"]["nodes"].append(two)
    doc["workflow"]["edges"].append({"source": "tc", "target": "t2", "sourceHandle": "selectedTools",
                                     "targetHandle": "selectedTools"})
    result = load(save(tmp_path, doc), models=scripted_registry, model_map={"gpt-4o-mini": "tools-model"})
    tc = next(n for n in result.workflow["nodes"] if n["id"] == "tc")
    assert tc["config"]["mcp_servers"] == [{"name": "lookup", "url": url, "tools": ["lookup", "forecast"]}]


def test_a_fastgpt_mcp_tool_without_its_url_is_refused_naming_it(tmp_path, scripted_registry):
    bare = fd.node("t1", "tool", name="lookup", toolConfig={"mcpTool": {"toolId": "mcp-6650a1/lookup"}})
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, fastgpt_with(bare)), models=scripted_registry, model_map={"gpt-4o-mini": "tools-model"})
    (issue,) = [i for i in err.value.report if i.severity == "error"]
    assert "MCP tool 'lookup'" in issue.message and "URL is not in the file" in issue.message
    assert "mcp-6650a1/lookup" in issue.message


def test_dify_mcp_tools_are_refused_naming_server_and_tool(tmp_path):
    mcp_tool = {"provider_id": "weather-server", "provider_name": "Weather", "provider_type": "mcp",
                "tool_name": "lookup", "enabled": True}
    params = {"model": {"type": "constant", "value": {"provider": "openai", "model": "gpt-4o-mini"}},
              "tools": {"type": "constant", "value": [mcp_tool]},
              "query": {"type": "constant", "value": "{{#sys.query#}}"}}
    agent = dd.app([dd.node("start", "start", variables=[]),
                    dd.node("ag", "agent", agent_strategy_name="function_calling", agent_parameters=params),
                    dd.node("tool", "tool", provider_id="weather-server", provider_type="mcp", provider_name="Weather",
                            tool_name="forecast", tool_parameters={}),
                    dd.node("say", "answer", answer="{{#ag.text#}}")],
                   [dd.edge("start", "ag"), dd.edge("ag", "tool"), dd.edge("tool", "say")], mode="advanced-chat")
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, agent, "app.yml"), model_map={"*": "default"})
    errors = {i.node_id: i.message for i in err.value.report if i.severity == "error"}
    assert "tool lookup of MCP server weather-server" in errors["ag"] and "URL" in errors["ag"]
    assert "tool forecast of MCP server weather-server" in errors["tool"]
