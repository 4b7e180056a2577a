"""Shapes real FastGPT and Dify files use that the corpus does not show: the Dify API
download wrapper, legacy ``[start, "sys.query"]`` selectors, ``sys.files`` /
``userFiles`` conditions, ``sys.dialogue_count``, FastGPT's nested ``[[node, output]]``
references, literal ``\\n`` in answers, renamed keys, few-shot prompt turns, and strict
imports listing every problem of a node at once.

Every document is synthetic (written here with the builders of ``fastgpt_docs`` /
``dify_docs``), saved to a temporary file and imported from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.settings import Settings
from nodes.importers import ImportFailed
from tests.support.openai_server import text_reply

from . import dify_docs as dd
from . import fastgpt_docs as fd
from .helpers import answers, load, run, statuses

SETTINGS = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)
MAP = {"gpt-4o-mini": "tools-model"}


def save(tmp_path: Path, doc: Any, name: str = "flow.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def by_id(result: Any) -> dict[str, Any]:
    return {n["id"]: n for n in result.workflow["nodes"]}


def succeeded(state: Any) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


# ------------------------------------------------------------------ Dify shapes


def dify_chat() -> dict[str, Any]:
    """Chatflow: legacy sys selector, a files condition, sys.dialogue_count, a few-shot LLM."""
    llm = dd.node("llm", "llm", model=dd.model(), context={"enabled": False},
                  prompt_template=[{"role": "system", "text": "Answer in one word."},
                                   {"role": "user", "text": "Capital of France?"},
                                   {"role": "assistant", "text": "Paris"},
                                   {"role": "user", "text": "{{#start.sys.query#}}"}])
    return dd.app([
        dd.node("start", "start", variables=[]),
        dd.node("has_files", "if-else", cases=[{"case_id": "true", "logical_operator": "and", "conditions": [
            {"variable_selector": ["sys", "files"], "comparison_operator": "not empty", "value": ""}]}]),
        dd.node("with_files", "answer", answer="files"),
        llm,
        dd.node("say", "answer", answer="{{#llm.text#}} (turn {{#sys.dialogue_count#}}, "
                                        "{{#start.sys.query#}})"),
    ], [dd.edge("start", "has_files"), dd.edge("has_files", "with_files", "true"),
        dd.edge("has_files", "llm", "false"), dd.edge("llm", "say")], mode="advanced-chat")


async def test_dify_chat_shapes_run(tmp_path, openai_server, scripted_registry):
    result = load(save(tmp_path, dify_chat()), models=scripted_registry, model_map=MAP)
    assert not result.errors
    nodes = by_id(result)
    assert nodes["say"]["config"]["text"].count("sys.query") == 1  # [start, "sys.query"] is sys.query
    assert nodes["llm"]["config"]["examples"] == [{"role": "user", "text": "Capital of France?"},
                                                  {"role": "assistant", "text": "Paris"}]
    assert {"name": "sys_files", "type": "array", "default": []}.items() <= \
        next(i for i in result.workflow["inputs"] if i["name"] == "sys_files").items()
    openai_server.script(text_reply("Berlin"))
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS,
                              query="Capital of Germany?")
    succeeded(state)
    assert statuses(state)["with_files"] == "skipped"  # no files sent: the no-files branch runs
    assert answers(events) == "Berlin (turn 1, Capital of Germany?)"
    messages = openai_server.bodies[0]["messages"]
    assert messages == [{"role": "system", "content": "Answer in one word."},
                        {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"},
                        {"role": "user", "content": "Capital of Germany?"}]


def test_dify_api_download_wrapper_imports(tmp_path, scripted_registry):
    dsl = yaml.safe_dump(dify_chat(), allow_unicode=True)
    result = load(save(tmp_path, {"data": dsl}), models=scripted_registry, model_map=MAP)
    assert result.source_format == "dify" and "llm" in by_id(result)


def test_dify_api_download_wrapper_problems_name_it(tmp_path, scripted_registry):
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, {"data": "just: [text"}), models=scripted_registry)
    assert 'Dify API download {"data": "<DSL YAML>"}' in str(failed.value)
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, {"data": "app: {name: x}"}), models=scripted_registry)
    assert "holds no Dify DSL" in str(failed.value)


def test_strict_import_lists_every_problem_of_a_node(tmp_path, scripted_registry):
    doc = dify_chat()
    llm = next(n for n in doc["workflow"]["graph"]["nodes"] if n["id"] == "llm")
    llm["data"]["model"]["name"] = "no-such-model"
    llm["data"]["prompt_template"].append({"role": "user", "text": "{{ x }}", "edition_type": "jinja2"})
    llm["data"]["structured_output_enabled"] = True
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, doc), models=scripted_registry)
    found = [(i.code, i.node_id) for i in failed.value.report if i.severity == "error"]
    assert found == [("unknown_model", "llm"), ("unsupported_feature", "llm"), ("unsupported_feature", "llm")]
    text = str(failed.value)
    assert "no-such-model" in text and "structured output" in text and "Jinja2" in text


async def test_few_shot_turns_with_memory_keep_their_place_and_the_history_follows(tmp_path, openai_server,
                                                                                     scripted_registry):
    """Dify's order: the prompt's messages (examples reading variables too), the memory
    window's turns, then the memory's query."""
    doc = dify_chat()
    llm = next(n for n in doc["workflow"]["graph"]["nodes"] if n["id"] == "llm")
    llm["data"]["prompt_template"][1]["text"] = "Capital of {{#sys.user_id#}}land?"
    llm["data"]["memory"] = {"window": {"enabled": True, "size": 1}, "role_prefix": {"user": "", "assistant": ""},
                             "query_prompt_template": "Now: {{#sys.query#}}"}
    result = load(save(tmp_path, doc), models=scripted_registry, model_map=MAP)
    assert not result.errors
    config = by_id(result)["llm"]["config"]
    assert config["examples"] == [{"role": "user", "text": "Capital of {{ sys.user_id }}land?"},
                                  {"role": "assistant", "text": "Paris"},
                                  {"role": "user", "text": "{{ sys.query }}"}]
    assert (config["user_prompt"], config["history"]) == ("Now: {{ sys.query }}", 1)
    openai_server.script(text_reply("Berlin"))
    past = [{"role": "user", "content": "old q"}, {"role": "assistant", "content": "old a"},
            {"role": "user", "content": "last q"}, {"role": "assistant", "content": "last a"}]
    state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS,
                         query="Capital of Germany?", user_id="France", history=past)
    succeeded(state)
    assert openai_server.bodies[0]["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of Franceland?"}, {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "Capital of Germany?"},
        {"role": "user", "content": "last q"}, {"role": "assistant", "content": "last a"},
        {"role": "user", "content": "Now: Capital of Germany?"}]


def test_renamed_keys_are_reported(tmp_path, scripted_registry):
    doc = dd.app([dd.node("start", "start", variables=[]), dd.node("end", "end", outputs=[])], [dd.edge("start", "end")],
                 env=[{"name": "api-key", "value_type": "string", "value": "k"}],
                 conversation=[{"name": "名字", "value_type": "string", "value": ""}])
    result = load(save(tmp_path, doc), models=scripted_registry)
    renamed = [i.message for i in result.report if i.code == "renamed_key"]
    assert renamed == ["environment variable 'api-key' is 'api_key' (Flowloom names here are ASCII identifiers)",
                       "conversation variable '名字' is 'var' (Flowloom names here are ASCII identifiers)"]


# ------------------------------------------------------------------ FastGPT shapes


def fastgpt_flow() -> dict[str, Any]:
    """A code node making a list, a batch loop over ``[[code, list]]``, a userFiles
    condition, an answer with literal ``\\n``, a plugin-style renamed extract key."""
    code = "function main() { return {items: ['a', 'b']} }"
    return fd.wrap([
        fd.start(),
        fd.node("files", "ifElseNode", [fd.inp("ifElseList", [{"condition": "AND", "list": [
            {"variable": ["start", "userFiles"], "condition": "isNotEmpty"}]}], "any")]),
        fd.node("hasfiles", "answerNode", [fd.inp("text", "files!", "any")]),
        fd.node("make", "code", [fd.inp("codeType", "js"), fd.inp("code", code)],
                [fd.out("items", value_type="arrayString", kind="dynamic")]),
        fd.node("loop", "loop", [fd.inp("loopInputArray", [["make", "items"]], "arrayString")],
                [fd.out("loopArray", value_type="arrayAny")]),
        fd.node("ls", "loopStart", [], [fd.out("loopStartInput", value_type="any")], parentNodeId="loop"),
        fd.node("up", "textEditor", [fd.inp("system_textareaInput", "<{{$ls.loopStartInput$}}>"),
                                     fd.inp("值", ["ls", "loopStartInput"], "any")],
                [fd.out("system_text")], parentNodeId="loop"),
        fd.node("le", "loopEnd", [fd.inp("loopEndInput", ["up", "system_text"])], parentNodeId="loop"),
        fd.node("say", "answerNode", [fd.inp("text", "line 1\\nline 2: {{$loop.loopArray$}}", "any")]),
    ], [fd.edge("start", "files"), fd.edge("files", "hasfiles", "IF"), fd.edge("files", "make", "ELSE"),
        fd.edge("make", "loop"), fd.edge("ls", "up"), fd.edge("up", "le"), fd.edge("loop", "say")])


async def test_fastgpt_shapes_run(tmp_path, scripted_registry):
    result = load(save(tmp_path, fastgpt_flow()), models=scripted_registry)
    assert not result.errors
    nodes = by_id(result)
    assert nodes["loop"]["config"]["items"] == {"ref": "make.items"}  # [[node, output]] is that reference
    assert ("renamed_key", "up") in [(i.code, i.node_id) for i in result.report]
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS)
    succeeded(state)
    assert statuses(state)["hasfiles"] == "skipped"
    assert state.node_runs["say"].outputs["answer"] == 'line 1\nline 2: ["<a>", "<b>"]'


def test_fastgpt_several_list_references(tmp_path, scripted_registry):
    doc = fastgpt_flow()
    loop = next(n for n in doc["workflow"]["nodes"] if n["nodeId"] == "loop")
    loop["inputs"][0]["value"] = [["make", "items"], ["make", "items"]]
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, doc), models=scripted_registry)
    assert "joins several references into one list" in str(failed.value)


@pytest.mark.parametrize("data, reason", [
    ({"provider_type": "builtin", "provider_id": "webscraper", "tool_name": "webscraper"},
     "builtin tool webscraper/webscraper is not provided by Flowloom"),
    ({"provider_type": "builtin", "provider_id": "langgenius/tavily/tavily", "tool_name": "tavily_search"},
     "tool tavily_search of marketplace plugin langgenius/tavily/tavily is not available in Flowloom"),
    ({"provider_type": "api", "provider_id": "abc", "tool_name": "getPets"},
     "custom API tool abc/getPets is not part of the file (its OpenAPI schema is not exported)"),
])
def test_dify_tool_placeholders_say_where_the_tool_comes_from(tmp_path, scripted_registry, data, reason):
    doc = dd.app([dd.node("start", "start", variables=[]), dd.node("t", "tool", tool_parameters={}, **data)],
                 [dd.edge("start", "t")])
    result = load(save(tmp_path, doc), models=scripted_registry, allow_partial=True)
    (issue,) = result.errors  # the reason, then the way back (an HTTP node, an MCP server, the schema)
    assert issue.code == "unsupported_node" and issue.message.startswith(reason)
    assert "http_request node" in issue.message


def test_fastgpt_http_jsonpath_with_wildcards_imports_as_outputs(tmp_path, scripted_registry):
    doc = fd.wrap([
        fd.start(),
        fd.node("http", "httpRequest468", [fd.inp("system_httpMethod", "GET"),
                                           fd.inp("system_httpReqUrl", "https://example.com/images")],
                [fd.out("first", "$.images[0].url", kind="dynamic"), fd.out("all", "$.images[*].url", kind="dynamic")]),
        fd.node("say", "answerNode", [fd.inp("text", "{{$http.first$}} {{$http.all$}}", "any")]),
    ], [fd.edge("start", "http"), fd.edge("http", "say")])
    result = load(save(tmp_path, doc), models=scripted_registry)
    http = next(n for n in result.workflow["nodes"] if n["id"] == "http")
    assert http["config"]["outputs"] == {"$.images[0].url": "$.images[0].url", "$.images[*].url": "$.images[*].url"}
