"""HTTP outputs by JSONPath, builtin tools (registry, tool_call, code ``tool``), code inputs
and End outputs named by any key, read back with the bracket reference forms.

Everything runs through the real engine: a local HTTP server on 127.0.0.1, the scripted
OpenAI-compatible server, the real code sandbox.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine import RunDeps, run_workflow
from engine.settings import Settings
from nodes.agent.builtin_tools import BUILTIN_TOOLS, ToolArgumentError, run_builtin
from schemas.nodes_agent import BUILTIN_TOOL_NAMES
from schemas.types import parse_selector
from tests.support.catalog import check_workflow, compile_workflow
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage
from tests.support.workflows import build, chain_edges, node

LOCAL = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)
CATALOG = {
    "images": [{"url": "a.png"}, {"url": "b.png"}],
    "items": [{"price": 5, "name": "pen", "价格": 5}, {"price": 20, "name": "book", "价格": 20}],
    "meta": {"id": 1, "owner": {"id": 2}},
    "结果": {"a-b": 7},
    "empty": [],
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps(CATALOG, ensure_ascii=False).encode()
        kind = "text/plain" if self.path == "/plain" else "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


async def run_doc(doc: dict[str, Any], inputs: dict[str, Any] | None = None, registry: Any = None):
    plan = compile_workflow(doc, models=registry, use_cache=False)
    return await run_workflow(plan, inputs or {}, deps=RunDeps(settings=LOCAL, models=registry))


def ok(state: Any) -> None:
    assert state.status == "succeeded", (state.error, {k: v.error for k, v in state.node_runs.items()})


# ------------------------------------------------------------------ HTTP outputs by JSONPath

PATHS = {
    "urls": "$.images[*].url",
    "dear": "$.items[?(@.price > 10)].name",
    "ids": "$..id",
    "first": "data.missing",
    "title": "$.items[0].name",
    "cn": "$.items[?(@.价格 > 10)].name",
    "odd": "$.结果.a-b",
    "two": "$.items[0:2].price",
    "none": "$.empty[*]",
    "both": "$.items[0,1].name",
    "chained": "$.items[?(@.price > 1)][?(@.name == 'book')].price",
}


@pytest.mark.parametrize("route", ["/json", "/plain"])
async def test_http_outputs_yield_what_fastgpt_shows(server, route):
    doc = build(
        [
            node("http", "http_request", {"url": server + route, "outputs": PATHS}),
            node(
                "say",
                "template",
                {"template": "{{ http.urls | join(',') }} {{ http['dear'][0] }} {{ nodes['http']['odd'] }}"},
            ),
        ],
        chain_edges("start", "http", "say"),
    )
    state = await run_doc(doc)
    ok(state)
    out = state.node_runs["http"].outputs
    assert out["urls"] == ["a.png", "b.png"] and out["dear"] == ["book"] and out["ids"] == [1, 2]
    assert out["first"] is None and out["title"] == "pen" and out["cn"] == ["book"] and out["odd"] == 7
    assert out["two"] == [5, 20] and out["none"] is None and out["both"] == ["pen", "book"]
    assert state.node_runs["say"].outputs["output"] == "a.png,b.png book 7"
    assert CATALOG["items"][1] == {"price": 20, "name": "book", "价格": 20}  # the response was not rewritten


@pytest.mark.parametrize(
    "path,why",
    [
        ("$.a[", "does not parse"),
        ("$.items.length", "'.length'"),
        ("$.a[?(@.x || @.y)]", "'||'"),
        ("$.a[(@.length-1)]", "'.length'"),
    ],
)
def test_a_jsonpath_that_cannot_be_evaluated_is_a_validation_problem(path, why):
    doc = build(
        [node("http", "http_request", {"url": "http://example.org", "outputs": {"x": path}})],
        chain_edges("start", "http"),
    )
    problems = [p for p in check_workflow(doc) if p.severity == "error"]
    assert problems and problems[0].node_id == "http", problems
    assert "outputs.x" in problems[0].message and why in problems[0].message


def test_http_output_names_may_not_shadow_builtin_outputs():
    doc = build(
        [node("http", "http_request", {"url": "http://example.org", "outputs": {"json": "$.a"}})],
        chain_edges("start", "http"),
    )
    assert any("built-in output" in p.message for p in check_workflow(doc))


# ------------------------------------------------------------------ builtin tools


def tool_text(name: str, args: dict[str, Any]) -> str:
    return run_builtin(name, args).text


def test_the_schema_list_names_every_builtin_tool():
    assert set(BUILTIN_TOOLS) == BUILTIN_TOOL_NAMES


def test_time_tools():
    year = datetime.now(ZoneInfo("Asia/Shanghai")).strftime("%Y")
    assert tool_text("current_time", {"format": "%Y", "timezone": "Asia/Shanghai"}) == year
    assert tool_text("current_time", {"format": "%z", "timezone": "Asia/Shanghai"}) == "+0800"
    assert tool_text("current_time", {"timezone": "Mars/Base"}) == "Invalid timezone: Mars/Base"
    assert tool_text("weekday", {"year": 2024, "month": 1, "day": 1}) == "January 1, 2024 is Monday."
    assert (
        tool_text(
            "timezone_conversion",
            {
                "current_time": "2024-01-01 12:00:00",
                "current_timezone": "UTC",
                "target_timezone": "Asia/Tokyo",
            },
        )
        == "2024-01-01 21:00:00"
    )
    assert tool_text("timestamp_to_localtime", {"timestamp": 0}) == "1970-01-01 00:00:00"
    assert tool_text("localtime_to_timestamp", {"localtime": "1970-01-02 00:00:00"}) == "86400"
    with pytest.raises(ToolArgumentError, match="'year' must be an integer"):
        tool_text("weekday", {"year": "x", "month": 1, "day": 1})


def test_json_tools():
    content = json.dumps({"a": {"b": "x-y", "n": 1}, "list": [1, 2], "名": "值"})
    assert tool_text("json_parse", {"content": content, "json_filter": "$.a.b"}) == "x-y"
    assert json.loads(tool_text("json_parse", {"content": content, "json_filter": "$.list[*]"})) == [1, 2]
    assert tool_text("json_parse", {"content": content, "json_filter": "$.名", "ensure_ascii": False}) == "值"
    replaced = json.loads(
        tool_text(
            "json_replace",
            {"content": content, "query": "$.a.b", "replace_pattern": "-", "replace_value": "+"},
        )
    )
    assert replaced["a"]["b"] == "x+y"
    renamed = json.loads(
        tool_text(
            "json_replace",
            {"content": content, "query": "$.a.n", "replace_model": "key", "replace_value": "count"},
        )
    )
    assert renamed["a"] == {"b": "x-y", "count": 1}
    value = json.loads(
        tool_text(
            "json_replace",
            {
                "content": content,
                "query": "$.a.n",
                "replace_model": "value",
                "replace_value": "[3]",
                "value_decode": True,
            },
        )
    )
    assert value["a"]["n"] == [3]
    inserted = json.loads(tool_text("json_insert", {"content": content, "query": "$.list", "new_value": "3"}))
    assert inserted["list"] == [1, 2, 3]
    created = json.loads(
        tool_text("json_insert", {"content": "{}", "query": "$.x.y", "new_value": "v", "create_path": True})
    )
    assert created == {"x": {"y": "v"}}
    deleted = json.loads(tool_text("json_delete", {"content": content, "query": "$.a.b"}))
    assert deleted["a"] == {"n": 1}
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        tool_text("json_parse", {"content": "{", "json_filter": "$"})


@pytest.mark.parametrize(
    "expression,result",
    [("(3 + 4) * 2 ** 3", "56"), ("sqrt(16) + pi * 0", "4.0"), ("-7 // 2", "-4"), ("10 % 4", "2")],
)
def test_eval_expression_computes_arithmetic(expression, result):
    assert tool_text("eval_expression", {"expression": expression}) == result


@pytest.mark.parametrize(
    "expression", ["__import__('os')", "open('x')", "(1).__class__", "9 ** 9 ** 9", "'a' * 3"]
)
def test_eval_expression_refuses_anything_but_arithmetic(expression):
    with pytest.raises(ToolArgumentError):
        tool_text("eval_expression", {"expression": expression})


def tool_call_doc(builtin_tools: list[dict[str, Any]]) -> dict[str, Any]:
    return build(
        [
            node(
                "tc",
                "tool_call",
                {
                    "model": "tools-model",
                    "user_prompt": "what time is it?",
                    "builtin_tools": builtin_tools,
                    "stream": False,
                },
            )
        ],
        chain_edges("start", "tc"),
    )


async def test_tool_call_runs_builtin_tools_with_fixed_arguments(openai_server, scripted_registry):
    openai_server.script(
        Reply(
            [
                ToolDelta(0, "c1", "clock", json.dumps({"format": "%z"})),
                ToolDelta(
                    1, "c2", "json_parse", json.dumps({"content": '{"a": [4, 5]}', "json_filter": "$.a[1]"})
                ),
                Finish("tool_calls"),
                Usage(10, 5),
            ]
        ),
        Reply([Text("done"), Finish("stop"), Usage(10, 2)]),
    )
    doc = tool_call_doc(
        [
            {"name": "current_time", "alias": "clock", "arguments": {"timezone": "Asia/Tokyo"}},
            {"name": "json_parse"},
        ]
    )
    state = await run_doc(doc, registry=scripted_registry)
    ok(state)
    sent = openai_server.bodies[0]["tools"]
    clock = next(t for t in sent if t["function"]["name"] == "clock")["function"]["parameters"]
    assert "timezone" not in clock["properties"]  # fixed: the model does not fill it
    results = [m["content"] for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"]
    assert "+0900" in results[0] and "\n5\n" in results[1]
    assert state.node_runs["tc"].data["tools"][0]["risk"] == "read"  # no confirmation asked


def test_an_unknown_builtin_tool_is_a_validation_problem():
    problems = check_workflow(tool_call_doc([{"name": "webscraper"}]))
    assert any("'webscraper' is not a builtin tool" in p.message and p.node_id == "tc" for p in problems)


# ------------------------------------------------------------------ code: tool mode, any input key


async def test_code_node_runs_a_builtin_tool():
    doc = build(
        [
            node(
                "wd",
                "code",
                {
                    "tool": "weekday",
                    "inputs": [
                        {"name": "year", "value": 2025},
                        {"name": "month", "value": 12},
                        {"name": "day", "value": 25},
                    ],
                },
            ),
            node("bad", "code", {"tool": "weekday", "inputs": [{"name": "year", "value": 2025}]}),
        ],
        chain_edges("start", "wd", "bad"),
    )
    state = await run_doc(doc)
    assert state.node_runs["wd"].outputs == {
        "text": "December 25, 2025 is Thursday.",
        "json": [],
        "files": [],
        "result": "December 25, 2025 is Thursday.",
    }
    assert (
        state.node_runs["bad"].error.reason == "tool_error"
        and "'month'" in state.node_runs["bad"].error.message
    )


@pytest.mark.parametrize(
    "language,code",
    [
        ("python", "def main(**kw):\n    return {'sum': kw['数据'] + kw['a-b'] + kw['with space']}\n"),
        ("python", "def main(数据, **rest):\n    return {'sum': 数据 + rest['a-b'] + rest['with space']}\n"),
        (
            "javascript",
            "function main(inputs) { return {sum: inputs['数据'] + inputs['a-b'] + inputs['with space']}; }",
        ),
        (
            "javascript",
            "function main({数据, 'a-b': ab, 'with space': ws}) { return {sum: 数据 + ab + ws}; }",
        ),
    ],
)
async def test_code_inputs_named_by_any_key_reach_main(language, code):
    inputs = [{"name": "数据", "value": 1}, {"name": "a-b", "value": 2}, {"name": "with space", "value": 3}]
    doc = build(
        [
            node(
                "c",
                "code",
                {
                    "language": language,
                    "code": code,
                    "inputs": inputs,
                    "outputs": [{"name": "sum", "type": "number"}],
                },
            )
        ],
        chain_edges("start", "c"),
    )
    state = await run_doc(doc)
    ok(state)
    assert state.node_runs["c"].outputs == {"sum": 6}


# ------------------------------------------------------------------ odd output names


ODD = ["1", "结果", "total price", "a.b", "it's", 'say "hi"', "x[0]"]


def test_quoted_keys_parse_in_both_quote_kinds():
    assert parse_selector("""c["it's"].v""").field == "it's"
    assert parse_selector("""c['say "hi"']""").field == 'say "hi"'
    assert parse_selector('nodes["my node"]["a.b"][0]').node == "my node"
    assert str(parse_selector('c["a.b"]')) == 'c["a.b"]'


async def test_outputs_named_by_any_key_are_read_by_refs_templates_and_end():
    items = ", ".join(f"{k!r}: {i}" for i, k in enumerate(ODD))
    code = f"def main():\n    return {{{items}}}\n"
    refs = {
        "1": {"ref": "c.1"},
        "结果": {"ref": "c.结果"},
        "total price": {"ref": "c.total price"},
        "a.b": {"ref": 'c["a.b"]'},
        "it's": {"ref": """nodes["c"]["it's"]"""},
        'say "hi"': {"ref": """c['say "hi"']"""},
        "x[0]": {"ref": "c['x[0]']"},
    }
    doc = build(
        [
            node(
                "c",
                "code",
                {"language": "python", "code": code, "outputs": [{"name": k, "type": "number"} for k in ODD]},
            ),
            node(
                "t",
                "template",
                {"template": "{{ c['1'] }}{{ nodes['c']['结果'] }}{{ c[\"it's\"] }}{{ c['say \"hi\"'] }}"},
            ),
            node("end", "end", {"outputs": [{"name": k, "value": v} for k, v in refs.items()]}),
        ],
        chain_edges("start", "c", "t", "end"),
    )
    state = await run_doc(doc)
    ok(state)
    assert state.outputs == {k: i for i, k in enumerate(ODD)}
    assert state.node_runs["t"].outputs["output"] == "0145"


def test_a_reference_to_a_missing_odd_output_names_it():
    doc = build(
        [
            node(
                "c",
                "code",
                {
                    "language": "python",
                    "code": "def main():\n    return {'结果': 1}\n",
                    "outputs": [{"name": "结果"}],
                },
            ),
            node("end", "end", {"outputs": [{"name": "1", "value": {"ref": "c['total price']"}}]}),
        ],
        chain_edges("start", "c", "end"),
    )
    assert any(p.code == "unknown_output" and "total price" in p.message for p in check_workflow(doc))
