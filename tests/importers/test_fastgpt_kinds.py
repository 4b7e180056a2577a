"""FastGPT node kinds outside the corpus: query extension (cfr), content extraction,
classification, if-else with ELSE IF, text editor, variable update on global variables,
user select, form input, HTTP request with error capture and a smart JSON body, batch
loops, plugin input/output. Each workflow is imported, checked, compiled and run."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engine.settings import Settings
from nodes.llm.classify import TOOL_NAME as CLASSIFY_TOOL
from tests.support.catalog import compile_workflow, import_workflow
from tests.support.openai_server import Finish, Reply, ToolDelta, Usage, text_reply

from . import fastgpt_docs as fg
from .helpers import answers, run, statuses

SETTINGS = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)
MAP = {"gpt-4o-mini": "tools-model"}


def by_id(result) -> dict[str, Any]:
    return {n["id"]: n for n in result.workflow["nodes"]}


def tool_reply(name: str, args: dict[str, Any]) -> Reply:
    return Reply([ToolDelta(0, "c1", name, json.dumps(args, ensure_ascii=False)), Finish("tool_calls"), Usage(9, 9)])


def succeeded(state) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


# ---------------------------------------------------------------- LLM kinds


def test_llm_kinds_convert(scripted_registry):
    result = import_workflow(fg.llm_kinds(), models=scripted_registry, model_map=MAP)
    assert not result.errors
    nodes = by_id(result)
    assert nodes["qe"]["type"] == "query_extension"
    assert nodes["qe"]["config"] == {"model": "tools-model", "history": 4, "question": {"ref": "sys.query"},
                                     "instructions": "Topic: {{ inputs.topic }}"}
    ex = nodes["ex"]["config"]
    assert nodes["ex"]["type"] == "extract_fields" and ex["text"] == {"ref": "sys.query"}
    assert ex["instructions"] == "Extract from: {{ qe.queries | json }}"
    assert ex["fields"] == [
        {"name": "name", "description": "person name", "required": True},
        {"name": "field", "type": "number", "description": "年龄: age"},  # renamed: not an identifier
        {"name": "mood", "enum": ["happy", "sad"]},
    ]
    cq = nodes["cq"]
    assert cq["type"] == "classify_question"
    assert cq["config"]["categories"] == [{"id": "adult", "name": "Adult"}, {"id": "child", "name": "Child"}]
    assert cq["config"]["question"] == {"ref": "ex.name"} and cq["config"]["history"] == 2
    assert nodes["a1"]["config"]["text"] == ("{{ ex.name }} is {{ ex.field | json }} ({{ cq.category_name }}), "
                                             "queries {{ qe.queries | json }}")
    assert nodes["a2"]["config"]["text"] == "{{ ex.fields | json }}"
    handles = {(e["source"], e["sourceHandle"], e["target"]) for e in result.workflow["edges"]}
    assert ("cq", "adult", "a1") in handles and ("cq", "child", "a2") in handles
    assert result.workflow["inputs"] == [{"name": "topic", "default": "people", "description": "Topic"}]


async def test_llm_kinds_run(openai_server, scripted_registry, tmp_path):
    result = import_workflow(fg.llm_kinds(), models=scripted_registry, model_map=MAP)
    openai_server.script(
        text_reply('["who is Ada", "Ada age"]'),
        text_reply(json.dumps({"name": "Ada", "field": 36, "mood": "happy"})),  # structured output
        tool_reply(CLASSIFY_TOOL, {"category": "adult"}),
    )
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, query="Ada is 36")
    succeeded(state)
    assert statuses(state) == {"start": "succeeded", "qe": "succeeded", "ex": "succeeded", "cq": "succeeded",
                               "a1": "succeeded", "a2": "skipped"}
    assert answers(events) == 'Ada is 36 (Adult), queries ["Ada is 36", "who is Ada", "Ada age"]'


# ---------------------------------------------------------------- branches and variables


def test_branches_convert():
    result = import_workflow(fg.branches())
    assert not result.errors
    wf, nodes = result.workflow, by_id(result)
    assert wf["inputs"] == [{"name": "city", "required": True, "description": "City"},
                            {"name": "count", "type": "number", "default": 1, "description": "Count"}]
    # both globals are updated by a variable update: run variables set from the inputs after start
    assert [v["name"] for v in wf["variables"]] == ["city", "count"]
    assert nodes["start-globals"]["config"]["updates"] == [
        {"variable": "city", "value": {"ref": "inputs.city"}}, {"variable": "count", "value": {"ref": "inputs.count"}}]
    cases = nodes["if"]["config"]["cases"]
    assert [c["id"] for c in cases] == ["IF", "ELSE_IF_1"]
    assert cases[0]["conditions"] == [
        {"left": {"ref": "vars.city"}, "operator": "contains", "right": "York"},
        {"left": {"ref": "vars.count"}, "operator": "lt", "right": 10, "type": "number"}]
    assert cases[1]["logic"] == "or" and cases[1]["conditions"][1] == {"left": {"ref": "sys.query"},
                                                                       "operator": "empty"}
    template = nodes["te"]["config"]
    assert template["template"] == ("Hi {{ who }} from {{ vars.city }} {{ vars.count | json }}: {{ '{' }}{ not a "
                                    "var }} {{ '{' }}% raw %} {{ '{' }}#c#} {{ '{' }}{unknown}} {{ sys.now }}")
    assert template["variables"] == [{"name": "who", "value": {"ref": "sys.query"}}, {"name": "var", "value": "literal"}]
    assert nodes["vu"]["config"]["updates"] == [{"variable": "count", "value": 5},
                                                {"variable": "city", "value": {"ref": "te.output"}}]
    assert nodes["us"]["config"] == {"description": "Continue, {{ vars.city }}?",
                                     "options": [{"id": "yes", "label": "Yes please"}, {"id": "no", "label": "No"}]}
    assert nodes["form"]["config"]["fields"] == [
        {"name": "email", "label": "Email"},
        {"name": "plan", "label": "Plan", "required": False, "default": "free", "enum": ["free", "pro"]},
        {"name": "seats", "label": "Seats", "type": "number", "required": False, "default": 1}]
    assert nodes["thanks"]["config"]["text"] == "Thanks {{ form.email }} ({{ us.label }})"
    handles = {(e["source"], e["sourceHandle"], e["target"]) for e in wf["edges"]}
    assert {("if", "IF", "te"), ("if", "ELSE_IF_1", "us"), ("if", "else", "other"), ("us", "yes", "form"),
            ("us", "no", "other"), ("start", "out", "start-globals"), ("start-globals", "out", "if")} <= handles


@pytest.mark.parametrize("city, count, query, path", [
    ("New York", 3, "hi", ["te", "vu", "done"]),
    ("Paris", 3, "hi", ["other"]),
])
async def test_branches_run(city, count, query, path):
    result = import_workflow(fg.branches())
    state, events = await run(result, {"city": city, "count": count}, query=query)
    succeeded(state)
    ran = [nid for nid, s in statuses(state).items() if s == "succeeded" and nid not in ("start", "start-globals",
                                                                                         "if")]
    assert ran == path
    if "done" in path:
        text = state.node_runs["te"].outputs["output"]
        assert text.startswith(f"Hi {query} from {city} {count}: " + "{{ not a var }} {% raw %} {#c#} {{unknown}} 20")
        assert answers(events) == f"count=5 city={text}"


async def test_branches_pause_at_the_user_select():
    result = import_workflow(fg.branches())
    state, _ = await run(result, {"city": "Rome", "count": 500}, query="hi")
    assert state.status == "paused"
    assert statuses(state)["us"] == "waiting"


# ---------------------------------------------------------------- HTTP + batch loop


class _Api(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    fail = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode()
        type(self).seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        status, payload = (500, {"message": "boom"}) if type(self).fail else (200, {"data": {"items": [1, 2, 3]}})
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def api() -> Iterator[str]:
    _Api.seen, _Api.fail = [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()
        server.server_close()


def test_http_and_loop_convert():
    result = import_workflow(fg.http_catch())
    nodes = by_id(result)
    http = nodes["http"]
    assert http["error_strategy"] == "error_branch"
    cfg = http["config"]
    assert cfg["method"] == "POST" and cfg["url"] == "http://127.0.0.1:9/api/{{ sys.query }}"
    assert cfg["headers"] == {"X-Count": "{{ inputs.count | json }}"} and cfg["query"] == {"lang": "en"}
    assert cfg["body"] == {"type": "raw", "content_type": "application/json", "raw": (
        '{\n  "name": "{{ ((sys.query) | json)[1:-1] }}",\n  "count": {{ inputs.count | json }},\n'
        '  "q": "{{ ((sys.query) | json)[1:-1] }}",\n  "tags": {{ mk.tags if mk.tags is string else mk.tags | json }}\n}')}
    assert cfg["timeout"] == 5 and cfg["raise_for_status"] is True
    loop = nodes["loop"]
    assert loop["type"] == "iteration" and loop["config"] == {"items": {"ref": 'http["data.items"]'},
                                                              "collect": {"ref": "inner.value"}}
    inner = nodes["inner"]
    assert inner["parent"] == "loop"
    assert inner["config"]["inputs"] == [{"name": "item", "value": {"ref": "loop.item"}},
                                         {"name": "index", "value": {"ref": "loop.index"}}]
    assert nodes["mk"]["config"] == {"language": "python", "code": "def main(n=2):\n    return {'tags': ['a', 'b'][:n]}\n",
                                     "outputs": [{"name": "tags", "type": "array"}], "semantics": "fastgpt"}
    assert nodes["err"]["config"]["text"] == "failed: {{ http.error.message }}"
    edges = {(e["source"], e["sourceHandle"], e["target"]) for e in result.workflow["edges"]}
    assert ("http", "error", "err") in edges and ("http", "out", "loop") in edges
    assert not any(e["source"] in ("ls", "le") or e["target"] in ("ls", "le") for e in result.workflow["edges"])


async def test_http_and_loop_run(api):
    result = import_workflow(fg.http_catch(api))
    state, events = await run(result, {"count": 2}, settings=SETTINGS, query='say "hi"')
    succeeded(state)
    assert state.node_runs["loop"].outputs["results"] == [10, 21, 32]
    assert statuses(state)["err"] == "skipped"
    sent = _Api.seen[0]
    assert sent["path"] == "/api/say%20%22hi%22?lang=en"
    assert json.loads(sent["body"]) == {"name": 'say "hi"', "count": 2, "q": 'say "hi"', "tags": ["a", "b"]}
    assert sent["headers"]["X-Count"] == "2"
    assert answers(events) == '[10, 21, 32] from {"data": {"items": [1, 2, 3]}}'


async def test_http_error_takes_the_catch_branch(api):
    _Api.fail = True
    result = import_workflow(fg.http_catch(api))
    state, events = await run(result, {"count": 1}, settings=SETTINGS, query="x")
    succeeded(state)
    assert statuses(state)["http"] == "failed" and statuses(state)["loop"] == "skipped"
    assert answers(events).startswith("failed: HTTP 500")


# ---------------------------------------------------------------- plugins


async def test_plugin_input_and_output():
    result = import_workflow(fg.plugin())
    assert not result.errors
    nodes = by_id(result)
    assert nodes["pin"]["type"] == "start" and nodes["pout"]["type"] == "end"
    assert result.workflow["inputs"] == [{"name": "topic", "required": True, "description": "the topic"},
                                         {"name": "n", "type": "number", "default": 2, "description": "n"}]
    state, _ = await run(result, {"topic": "tea"})
    succeeded(state)
    assert state.outputs == {"text": "tea x2", "count": 2}


# ---------------------------------------------------------------- tool call with a plugin tool


async def test_a_plugin_tool_is_a_placeholder_the_model_gets_an_error_from(openai_server, scripted_registry,
                                                                           tmp_path):
    result = import_workflow(fg.plugin_tool(), models=scripted_registry, model_map=MAP, allow_partial=True)
    assert [(i.code, i.node_id) for i in result.errors] == [("unsupported_node", "plug")]
    assert any(i.code == "behaviour_difference" and "stop" in i.message for i in result.report)
    nodes = by_id(result)
    assert nodes["tc"]["config"]["tools"] == [{"node": "plug", "name": "plug", "description": "weather plugin",
                                              "parameters": [{"name": "city", "description": "the city",
                                                              "required": True}]}]
    assert nodes["tc"]["config"]["stop_tool"] == {} and "stop" not in nodes
    assert nodes["plug"]["type"] == "unsupported" and nodes["plug"]["parent"] == "tc"
    openai_server.script(tool_reply("plug", {"city": "Oslo"}),
                         Reply([ToolDelta(0, "c2", "stop", "{}"), Finish("tool_calls"), Usage(5, 1)]))
    state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, query="Weather in Oslo?")
    succeeded(state)
    assert state.node_runs["tc"].outputs["stop_reason"] == "stop_tool"
    observation = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "pluginModule" in observation and "not converted" in observation


# ---------------------------------------------------------------- compile everywhere


@pytest.mark.parametrize("build", [fg.llm_kinds, fg.branches, fg.http_catch, fg.plugin, fg.plugin_tool])
def test_round_trip(build, scripted_registry):
    first = import_workflow(build(), models=scripted_registry, model_map=MAP, allow_partial=True)
    compile_workflow(first.workflow, models=scripted_registry, use_cache=False)
    again = import_workflow(json.dumps(first.workflow), models=scripted_registry)
    assert again.workflow == first.workflow
