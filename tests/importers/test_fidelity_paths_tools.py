"""Imported FastGPT HTTP outputs that are JSONPath expressions, output and input names that
are not identifiers, Dify builtin tools (tool nodes and agent tool lists) - synthetic
files written here, imported from disk and run through the real engine."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from nodes.importers import ImportFailed
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage

from . import dify_docs as dd
from . import fastgpt_docs as fd
from .helpers import load, run

SETTINGS = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)
DOC = {"images": [{"url": "a.png"}, {"url": "b.png"}], "items": [{"price": 5, "name": "pen"},
                                                                {"price": 20, "name": "book"}],
       "data": {"id": 1, "list": [{"id": 2}]}}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps(DOC).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def save(tmp_path: Path, doc: Any, name: str = "flow.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def ok(state: Any) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


# ------------------------------------------------------------------ FastGPT HTTP JSONPath outputs

PATHS = {"o1": "$.images[*].url", "o2": "$.items[?(@.price > 10)].name", "o3": "$..id", "o4": "data.list[0].id",
         "o5": "$.nothing"}


def fastgpt_http(url: str, paths: dict[str, str]) -> dict[str, Any]:
    text = " | ".join("{{$http." + oid + "$}}" for oid in paths)
    return fd.wrap([
        fd.start(),
        fd.node("http", "httpRequest468", [fd.inp("system_httpMethod", "GET"), fd.inp("system_httpReqUrl", url)],
                [fd.out(oid, key, "any", "dynamic") for oid, key in paths.items()]),
        fd.node("say", "answerNode", [fd.inp("text", text, "any")]),
        fd.node("end", "pluginOutput", [fd.inp("图片 urls", ["http", "o1"]), fd.inp("1", ["http", "o4"])]),
    ], [fd.edge("start", "http"), fd.edge("http", "say"), fd.edge("say", "end")])


async def test_fastgpt_jsonpath_outputs_import_and_run(tmp_path, server):
    result = load(save(tmp_path, fastgpt_http(server + "/doc", PATHS)))
    http = next(n for n in result.workflow["nodes"] if n["id"] == "http")
    assert http["config"]["outputs"] == {v: v for v in PATHS.values()}
    state, _ = await run(result, settings=SETTINGS, tmp_path=tmp_path)
    ok(state)
    assert state.answer == '["a.png", "b.png"] | ["book"] | [1, 2] | 2 | null'
    assert state.outputs == {"图片 urls": ["a.png", "b.png"], "1": 2}


@pytest.mark.parametrize("path,why", [("$.items.length", "'.length'"), ("$.a[?(@.x || @.y)]", "'||'"),
                                      ("$.items[", "does not parse")])
def test_fastgpt_jsonpath_the_library_cannot_evaluate_is_refused_at_import(tmp_path, path, why):
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, fastgpt_http("http://127.0.0.1:9/x", {"o1": path})))
    messages = [i.message for i in err.value.report if i.node_id == "http"]
    assert any(path in m and why in m for m in messages), messages


# ------------------------------------------------------------------ names that are not identifiers


async def test_fastgpt_code_inputs_with_any_key(tmp_path):
    code = "function main({数据, 'a-b': ab}) {\n  return {结果: 数据 * 2 + ab, 'x y': 1}\n}"
    doc = fd.wrap([
        fd.start(),
        fd.node("c", "code", [fd.inp("system_addInputParam", None, "dynamic", renderTypeList=["addInputParam"]),
                              fd.inp("数据", ["start", "userChatInput"], "number"), fd.inp("a-b", "3", "number"),
                              fd.inp("codeType", "js"), fd.inp("code", code)],
                [fd.out("r1", "结果", "number", "dynamic"), fd.out("r2", "x y", "number", "dynamic")]),
        fd.node("say", "answerNode", [fd.inp("text", "{{$c.r1$}}/{{$c.r2$}}", "any")]),
    ], [fd.edge("start", "c"), fd.edge("c", "say")])
    result = load(save(tmp_path, doc))
    assert not [i for i in result.report if i.code == "renamed_key"]
    state, _ = await run(result, settings=SETTINGS, tmp_path=tmp_path, query="4")
    ok(state)
    assert state.answer == "11/1"


def dify_end_names() -> dict[str, Any]:
    code = "def main(**kw):\n    return {'结果': kw['数据'] + kw['a-b'], 'out': 1}\n"
    return dd.app([
        dd.node("start", "start", variables=[{"variable": "n", "type": "number", "required": True}]),
        dd.node("c", "code", code_language="python3", code=code,
                variables=[{"variable": "数据", "value_selector": ["start", "n"]},
                           {"variable": "a-b", "value_selector": ["start", "n"]}],
                outputs={"结果": {"type": "number"}, "out": {"type": "number"}}),
        dd.node("end", "end", outputs=[{"variable": "1", "value_selector": ["c", "结果"]},
                                       {"variable": "结果", "value_selector": ["c", "out"]},
                                       {"variable": "total price", "value_selector": ["start", "n"]}]),
    ], [dd.edge("start", "c"), dd.edge("c", "end")])


async def test_dify_end_outputs_and_code_inputs_with_any_name(tmp_path):
    result = load(save(tmp_path, dify_end_names()))
    state, _ = await run(result, {"n": 5}, settings=SETTINGS, tmp_path=tmp_path)
    ok(state)
    assert state.outputs == {"1": 10, "结果": 1, "total price": 5}


# ------------------------------------------------------------------ Dify builtin tools


def tool_node(nid: str, provider: str, tool: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return dd.node(nid, "tool", provider_id=provider, provider_name=provider, provider_type=extra.pop("ptype", "builtin"),
                   tool_name=tool, tool_label=tool, tool_parameters=params, tool_configurations=extra)


def dify_tools() -> dict[str, Any]:
    return dd.app([
        dd.node("start", "start", variables=[{"variable": "doc", "type": "paragraph", "required": True}]),
        tool_node("wd", "time", "weekday", {"year": {"type": "constant", "value": 2024},
                                            "month": {"type": "constant", "value": 1},
                                            "day": {"type": "constant", "value": 1}}),
        tool_node("tz", "langgenius/time/time", "current_time", {}, format="%z", timezone="Asia/Shanghai"),
        tool_node("jp", "json_process", "json_parse", {"content": {"type": "mixed", "value": "{{#start.doc#}}"},
                                                       "json_filter": {"type": "constant", "value": "$.a[*]"}}),
        tool_node("jd", "langgenius/json_process/json_process", "json_delete",
                  {"content": {"type": "variable", "value": ["start", "doc"]},
                   "query": {"type": "constant", "value": "$.b"}}),
        dd.node("say", "answer", answer="{{#wd.text#}} {{#tz.text#}} {{#jp.text#}} {{#jd.text#}}"),
    ], [dd.edge("start", "wd"), dd.edge("wd", "tz"), dd.edge("tz", "jp"), dd.edge("jp", "jd"), dd.edge("jd", "say")],
        mode="advanced-chat")


async def test_dify_builtin_tool_nodes_run(tmp_path):
    result = load(save(tmp_path, dify_tools()))
    tools = {n["id"]: n["config"].get("tool") for n in result.workflow["nodes"] if n["type"] == "code"}
    assert tools == {"wd": "weekday", "tz": "current_time", "jp": "json_parse", "jd": "json_delete"}
    state, _ = await run(result, {"doc": '{"a": [1, 2], "b": 3}'}, settings=SETTINGS, tmp_path=tmp_path)
    ok(state)
    assert state.answer == 'January 1, 2024 is Monday. +0800 [1, 2] {"a": [1, 2]}'


@pytest.mark.parametrize("provider,tool,ptype,said", [
    ("webscraper", "webscraper", "builtin", "builtin tool webscraper/webscraper is not provided"),
    ("langgenius/tavily/tavily", "tavily_search", "plugin", "marketplace plugin langgenius/tavily/tavily"),
    ("someone/time/time", "current_time", "plugin", "marketplace plugin someone/time/time"),
])
def test_tools_flowloom_does_not_provide_stay_placeholders(tmp_path, provider, tool, ptype, said):
    doc = dd.app([dd.node("start", "start", variables=[]), tool_node("t", provider, tool, {}, ptype=ptype),
                  dd.node("say", "answer", answer="{{#t.text#}}")],
                 [dd.edge("start", "t"), dd.edge("t", "say")])
    result = load(save(tmp_path, doc), allow_partial=True)
    placeholder = next(n for n in result.workflow["nodes"] if n["id"] == "t")
    assert placeholder["type"] == "unsupported" and said in placeholder["config"]["reason"]


def dify_agent(tools: list[dict[str, Any]]) -> dict[str, Any]:
    params = {"model": {"type": "constant", "value": {"provider": "openai", "model": "gpt-4o-mini",
                                                      "completion_params": {}}},
              "tools": {"type": "constant", "value": tools},
              "instruction": {"type": "constant", "value": "Be brief."},
              "query": {"type": "constant", "value": "{{#sys.query#}}"},
              "maximum_iterations": {"type": "constant", "value": 3}}
    return dd.app([dd.node("start", "start", variables=[]),
                   dd.node("ag", "agent", agent_strategy_name="function_calling", agent_parameters=params),
                   dd.node("say", "answer", answer="{{#ag.text#}}")],
                  [dd.edge("start", "ag"), dd.edge("ag", "say")], mode="advanced-chat")


async def test_dify_agent_with_builtin_tools_runs_as_a_tool_call(tmp_path, openai_server, scripted_registry):
    tools = [{"provider_name": "time", "tool_name": "current_time", "enabled": True,
              "settings": {"timezone": {"value": "Asia/Tokyo"}}},
             {"provider_name": "langgenius/json_process/json_process", "tool_name": "json_parse", "enabled": True}]
    result = load(save(tmp_path, dify_agent(tools)), models=scripted_registry, model_map={"gpt-4o-mini": "tools-model"})
    ag = next(n for n in result.workflow["nodes"] if n["id"] == "ag")
    assert ag["type"] == "tool_call" and ag["config"]["builtin_tools"] == [
        {"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}, {"name": "json_parse"}]
    openai_server.script(Reply([ToolDelta(0, "c1", "current_time", '{"format": "%z"}'), Finish("tool_calls"),
                                Usage(5, 5)]),
                         Reply([Text("It is +0900 there."), Finish("stop"), Usage(5, 5)]))
    state, _ = await run(result, registry=scripted_registry, settings=SETTINGS, tmp_path=tmp_path, query="time?")
    ok(state)
    assert state.answer == "It is +0900 there."
    assert any(m["role"] == "tool" and "+0900" in m["content"] for m in openai_server.bodies[1]["messages"])


def test_dify_agent_with_a_plugin_tool_names_it(tmp_path):
    tools = [{"provider_name": "langgenius/tavily/tavily", "tool_name": "tavily_search", "enabled": True}]
    with pytest.raises(ImportFailed) as err:
        load(save(tmp_path, dify_agent(tools)), model_map={"*": "default"})
    assert any("tool tavily_search of marketplace plugin langgenius/tavily/tavily" in i.message
               and "http_request" in i.message and "MCP server" in i.message for i in err.value.report)
