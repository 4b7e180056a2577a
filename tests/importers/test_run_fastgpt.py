"""Imported FastGPT templates run end to end on the real engine, against the scripted
OpenAI-compatible server (and, for the Google-search tool call, an HTTP stub on
127.0.0.1 standing in for the search API). Code nodes run in the real sandbox.

Each test asserts the path taken (node statuses) and the outputs.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from engine.settings import Settings
from nodes.llm.classify import TOOL_NAME as CLASSIFY_TOOL
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage, text_reply

from .helpers import FASTGPT, answers, load, load_json, needs_corpus, run, statuses

pytestmark = needs_corpus

#: explicit: code runs in the bubblewrap sandbox, HTTP only to the local stub
SETTINGS = Settings(http_allow=["127.0.0.1"], code_sandbox="bwrap", allow_unsandboxed_code=False)


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> Reply:
    return Reply([ToolDelta(0, call_id, name, json.dumps(args, ensure_ascii=False)), Finish("tool_calls"),
                  Usage(50, 10)])


def succeeded(state) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


# --------------------------------------------------------------------- translation


async def test_translation_template(openai_server, scripted_registry, tmp_path):
    result = load(FASTGPT / "TranslateRobot_template.json", models=scripted_registry,
                  model_map={"claude-3-5-sonnet-20240620": "tools-model"})
    assert not result.errors
    openai_server.script(text_reply("【思考】直译\n【翻译】...\n定稿:\n```\n敏捷的棕色狐狸\n```\n", chunk_size=6))
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS,
                              query="The quick brown fox")
    succeeded(state)
    assert statuses(state) == {"448745": "succeeded", "gBDvemE4FBhp": "succeeded", "loOvhld2ZTKa": "succeeded",
                               "w0oBbQ3YJHye": "succeeded", "bcqtxqxE2R6o": "succeeded", "foO69L5FOmDQ": "succeeded"}
    request = openai_server.bodies[0]
    assert request["model"] == "upstream-tools"
    chat = next(n for n in result.workflow["nodes"] if n["id"] == "loOvhld2ZTKa")["config"]
    assert chat["temperature"] == 0 and chat["max_tokens"] == 2000  # FastGPT's 0-10 scale / 10; maxToken
    assert request["temperature"] == 0 and request["max_tokens"] == 1024  # capped by the model's output limit
    system, user = request["messages"][0], request["messages"][-1]
    assert system["role"] == "system" and "资深英汉翻译专家" in system["content"]
    assert user == {"role": "user", "content": '原文:\n"""\nThe quick brown fox\n"""'}
    runs = state.node_runs
    # FastGPT semantics: the declared output data2, which main() leaves out, is null (undefined there)
    assert runs["w0oBbQ3YJHye"].outputs == {"result": "敏捷的棕色狐狸", "data2": None}
    final = "****** \n\n最终翻译结果如下: \n\n```\n敏捷的棕色狐狸\n```"
    assert runs["foO69L5FOmDQ"].outputs == {"answer": final}
    # the chat streams its answer (isResponseAnswerText), then the answer node its text
    assert answers(events).endswith(final) and answers(events).startswith("【思考】直译")


# ------------------------------------------------------------------ classify (CQ)


CQ_COMMON = {"workflowStartNodeId": "succeeded", "rvbo634w3AYj": "succeeded"}


@pytest.mark.parametrize("category, label", [("sdfa", "打招呼、问候等问题"), ("agex", "其他问题")])
async def test_cq_template_answers_the_category(openai_server, scripted_registry, tmp_path, category, label):
    result = load(FASTGPT / "CQ_template.json", models=scripted_registry, allow_partial=True,
                  model_map={"gpt-4o-mini": "tools-model"})
    openai_server.script(tool_call("c1", CLASSIFY_TOOL, {"category": category}))
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, query="你好呀")
    succeeded(state)
    assert statuses(state) == {**CQ_COMMON, "7kwgL1dVlwG6": "succeeded", "MNMMMIjjWyMU": "skipped",
                               "7BdojPlukIQw": "skipped"}
    assert state.node_runs["rvbo634w3AYj"].outputs["category"] == category
    assert state.node_runs["7kwgL1dVlwG6"].outputs == {"answer": label}
    assert answers(events) == label
    tools = openai_server.bodies[0]["tools"][0]["function"]
    assert tools["parameters"]["properties"]["category"]["enum"] == ["wqre", "sdfa", "agex"]


async def test_cq_template_knowledge_branch_fails_at_the_placeholder(openai_server, scripted_registry, tmp_path):
    result = load(FASTGPT / "CQ_template.json", models=scripted_registry, allow_partial=True,
                  model_map={"gpt-4o-mini": "tools-model"})
    openai_server.script(tool_call("c1", CLASSIFY_TOOL, {"category": "wqre"}))
    state, _ = await run(result, registry=scripted_registry, tmp_path=tmp_path, query="星际穿越讲了什么?")
    assert state.status == "failed"
    assert state.error.node_id == "MNMMMIjjWyMU" and state.error.reason == "unsupported_node"
    assert "datasetSearchNode" in state.error.message and "no dataset selected" in state.error.message
    assert statuses(state) == {**CQ_COMMON, "MNMMMIjjWyMU": "failed", "7kwgL1dVlwG6": "skipped"}
    assert len(openai_server.bodies) == 1  # the chat after the search never ran


# ------------------------------------------------------- subtitles (loop-back + code + if-else)


def srt(count: int) -> str:
    blocks = [f"{i}\n00:00:{i % 60:02d},000 --> 00:00:{i % 60:02d},500\nline {i}\n" for i in range(1, count + 1)]
    return "\n".join(blocks)


def translated(first: int, last: int) -> Reply:
    body = "<T>".join(f"行 {i}" for i in range(first, last + 1))
    return text_reply(f"【思考】第四轮\n```\n{body}\n```", chunk_size=None)


async def test_subtitle_template_loops_back_once_per_chunk(openai_server, scripted_registry, tmp_path):
    result = load(FASTGPT / "srt-translate_template.json", models=scripted_registry,
                  model_map={"gpt-4o": "tools-model"})
    assert not result.errors
    carries = [i for i in result.report if i.code == "behaviour_difference" and "previous loop round" in i.message]
    assert {i.node_id for i in carries} == {"a2lqxASWi1vb", "ppPP6o7YYSTJ"}
    openai_server.script(translated(1, 40), translated(41, 45))  # 45 subtitles: chunks of 40 and 5
    state, events = await run(result, {"source_lang": "English", "target_lang": "简体中文"},
                              registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS, query=srt(45))
    succeeded(state)
    runs = state.node_runs
    assert runs["quYZgsW32ApA~loop"].outputs == {"rounds": 2}  # one back-edge taken
    assert runs["dFxrGZS3Wmnz"].status == "skipped" and runs["izsNX8FXGD1t"].status == "succeeded"
    assert runs["w4heEpNflz59"].outputs == {"case": "IF"}  # the last round leaves the loop
    first_round = [r for r in state.history if r.node_id == "w4heEpNflz59"]
    assert [r.outputs for r in first_round] == [{"case": "else"}]  # the first round went back
    assert runs["a2lqxASWi1vb"].outputs == {"isEnd": True, "i": 2}
    # round 2 read round 1's values: the chunk index and the running subtitle index
    assert runs["quYZgsW32ApA"].inputs["i"] == 1
    assert runs["ppPP6o7YYSTJ"].inputs["currentIndex"] == 40
    second = runs["ppPP6o7YYSTJ"].outputs["srtContent"].split("\n")
    assert second[:4] == ["41", "00:00:41,000 --> 00:00:41,500", "行 41", "line 41"]
    prompts = [b["messages"][-1]["content"] for b in openai_server.bodies]
    assert "<TRANSLATE_THIS>line 1<T>" in prompts[0] and "<TRANSLATE_THIS>line 41<T>" in prompts[1]
    assert "将文本从English翻译成简体中文" in prompts[0]
    streamed = answers(events)
    assert "行 1\nline 1" in streamed and "行 45\nline 45" in streamed
    assert streamed.endswith("*** 字幕反思翻译完成！***")


async def test_subtitle_template_same_language_short_circuits(openai_server, scripted_registry, tmp_path):
    result = load(FASTGPT / "srt-translate_template.json", models=scripted_registry,
                  model_map={"gpt-4o": "tools-model"})
    state, events = await run(result, {"source_lang": "English", "target_lang": "English"},
                              registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS, query=srt(2))
    succeeded(state)
    assert state.node_runs["qlt9KJbbS9yJ"].outputs == {"case": "else"}
    assert state.node_runs["kbr342XlxSZR"].status == "skipped"
    assert answers(events) == "English 无需再次翻译为 English ~"
    assert openai_server.bodies == []


# --------------------------------------------------------- Google search (tool call)


class _SearchStub(BaseHTTPRequestHandler):
    requests: list[dict[str, list[str]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        type(self).requests.append(query)
        items = [{"title": f"Result {i} for {query.get('q', [''])[0]}", "link": f"https://example.test/{i}",
                  "snippet": f"snippet {i}", "extra": "dropped by the code node"} for i in (1, 2)]
        data = json.dumps({"kind": "customsearch#search", "items": items}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def search_stub() -> Iterator[str]:
    _SearchStub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SearchStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/customsearch/v1"
    finally:
        server.shutdown()
        server.server_close()


async def test_google_search_tool_call(openai_server, scripted_registry, tmp_path, search_stub):
    doc = load_json(FASTGPT / "google_template.json")
    http = next(n for n in doc["workflow"]["nodes"] if n["nodeId"] == "GMELVPxHfpg5")
    url = next(i for i in http["inputs"] if i["key"] == "system_httpReqUrl")
    assert url["value"] == "https://www.googleapis.com/customsearch/v1"
    url["value"] = search_stub  # the only change: the search API is the local stub
    from tests.support.catalog import import_workflow

    result = import_workflow(doc, models=scripted_registry, model_map={"FastAI-plus": "tools-model"})
    assert not result.errors
    nodes = {n["id"]: n for n in result.workflow["nodes"]}
    agent = nodes["NOgbnBzUwDgT"]
    assert agent["type"] == "tool_call"
    assert agent["config"]["tools"] == [{"node": "GMELVPxHfpg5", "name": "GMELVPxHfpg5",
                                         "description": "调用谷歌搜索，查询相关内容",
                                         "parameters": [{"name": "query", "description": "谷歌搜索检索词",
                                                         "required": True}]}]
    assert nodes["GMELVPxHfpg5"]["parent"] == nodes["poIbrrA8aiR0"]["parent"] == "NOgbnBzUwDgT"
    openai_server.script(
        tool_call("call_1", "GMELVPxHfpg5", {"query": "flowloom workflow engine"}),
        Reply([Text("Flowloom is a workflow engine [1]."), Finish("stop"), Usage(200, 12)]),
    )
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, settings=SETTINGS,
                              query="What is flowloom?")
    succeeded(state)
    assert statuses(state) == {"448745": "succeeded", "NOgbnBzUwDgT": "succeeded"}
    out = state.node_runs["NOgbnBzUwDgT"].outputs
    assert out["answer"] == "Flowloom is a workflow engine [1]." and out["stop_reason"] == "answer"
    assert out["rounds"] == 2
    assert _SearchStub.requests == [{"q": ["flowloom workflow engine"], "cx": ["谷歌搜索cxID"], "key": ["谷歌搜索key"],
                                     "c2coff": ["1"], "start": ["1"], "end": ["20"], "dateRestrict": ["m[1]"]}]
    tool_runs = state.node_runs["NOgbnBzUwDgT"].data["tool_runs"]["call_1"]["node_runs"]
    assert [(r["node_id"], r["status"]) for r in tool_runs] == [("GMELVPxHfpg5", "succeeded"),
                                                                ("poIbrrA8aiR0", "succeeded")]
    first = openai_server.bodies[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["GMELVPxHfpg5"]
    observation = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "Result 1 for flowloom workflow engine" in observation and "dropped by the code node" not in observation
    assert answers(events).endswith("Flowloom is a workflow engine [1].")
