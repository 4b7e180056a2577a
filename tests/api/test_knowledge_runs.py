"""Knowledge retrieval through the API: a workflow start -> query extension -> knowledge
retrieval -> chat over a dataset of the app's knowledge service (the SQLite store, the
scripted server's embeddings), run blocking and streaming through ``POST /v1/runs`` and
as a published app through ``/v1/chat/completions`` with the real openai SDK: the answer
cites its sources, and the citations are in the chat node's ``node_finished`` outputs,
in ``GET /v1/runs/{id}`` and on the OpenAI message / last chunk."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from schemas.knowledge import DatasetCreate
from tests.support.databases import sqlite_url
from tests.support.knowledge_files import EMBEDDING_MODEL, knowledge_models
from tests.support.openai_server import text_reply
from tests.support.policy_kb import POLICY, wait_ready
from tests.support.policy_kb import POLICY_FLOW as KB_FLOW
from tests.support.policy_kb import POLICY_QUESTION as QUESTION

from .conftest import SCRIPTED_KEY_ENV, read_messages

ANSWER = "Refunds reach the original card within 14 days [1]."


@pytest.fixture
def database_url(tmp_path) -> str:
    """SQLite only (sqlite-vec holds the vectors; the PostgreSQL paths are the dataset tests')."""
    return sqlite_url(tmp_path)


@pytest.fixture
def models_file(tmp_path, openai_server, monkeypatch):
    """Chat model ``default``, embedding model ``embed`` and a rerank model, all the scripted server."""
    monkeypatch.setenv(SCRIPTED_KEY_ENV, "sk-scripted-test")
    return knowledge_models(tmp_path / "models.toml", openai_server.base_url, SCRIPTED_KEY_ENV)


@pytest.fixture
async def kb(api, models_file):
    """Dataset ``policies`` of tenant ``default`` holding the returns policy, ingested."""
    service = api.app.state.knowledge
    await service.create_dataset("default", DatasetCreate(id="policies", name="Policies", embedding_model=EMBEDDING_MODEL,
                                                          chunking={"chunk_tokens": 40, "overlap_tokens": 0}))
    await service.add_text("default", "policies", "returns.md", POLICY)
    await wait_ready(service, "default", "policies")
    return service


def _cited_returns(citations: list[dict[str, Any]]) -> None:
    assert [c["citation_id"] for c in citations] == ["1"]
    assert citations[0]["source_name"] == "returns.md" and "14 days" in citations[0]["text"]
    assert citations[0]["dataset_id"] == "policies" and citations[0]["chunk_id"]


async def test_blocking_and_streaming_runs_answer_with_citations(api, openai_server, kb):
    openai_server.script(text_reply('["refund card days"]'), text_reply(ANSWER))
    response = await api.client.post("/v1/runs", json={"workflow": KB_FLOW, "inputs": {"query": QUESTION}},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["status"] == "succeeded" and run["answer"] == ANSWER
    _cited_returns(run["citations"])
    kr = next(n for n in run["node_runs"] if n["node_id"] == "kr")
    assert kr["outputs"]["chunks"][0]["citation_id"] == "1" and kr["usage"]["tokens_in"] > 0
    assert (await api.client.get(f"/v1/runs/{run['run_id']}", headers=api.auth())).json()["citations"] == \
        run["citations"]

    openai_server.script(text_reply('["refund card days"]'), text_reply(ANSWER))
    http = await api.http()
    body = {"workflow": KB_FLOW, "inputs": {"query": QUESTION}, "response_mode": "streaming"}
    async with http.stream("POST", "/v1/runs", json=body, headers=api.auth()) as streamed:
        assert streamed.status_code == 200
        messages = await read_messages(streamed)
    finished = [m["data"] for m in messages if m["event"] == "node_finished" and m["data"]["node_id"] == "chat"]
    _cited_returns(finished[0]["outputs"]["citations"])
    run_id = messages[0]["data"]["run_id"]
    _cited_returns((await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()["citations"])


async def test_openai_compatible_answers_carry_citations(api, openai_server, kb):
    created = await api.client.post("/v1/workflows", json=KB_FLOW, headers=api.auth())
    assert created.status_code == 201, created.text
    published = await api.client.post("/v1/workflows/kbqa/publish", json={"note": "v1"}, headers=api.auth())
    assert published.status_code == 201, published.text
    await api.http()
    client = openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=api.key, max_retries=0, timeout=20)
    openai_server.script(text_reply('["refund card days"]'), text_reply(ANSWER),
                         text_reply('["refund card days"]'), text_reply(ANSWER))
    done = await client.chat.completions.create(model="kbqa", messages=[{"role": "user", "content": QUESTION}])
    assert done.choices[0].message.content == ANSWER
    _cited_returns(done.choices[0].message.model_extra["citations"])

    stream = await client.chat.completions.create(model="kbqa", stream=True,
                                                  messages=[{"role": "user", "content": QUESTION}])
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
    assert chunks[-1].choices[0].finish_reason == "stop"
    _cited_returns(chunks[-1].model_extra["citations"])


async def test_import_maps_datasets_and_says_how_to_create_unmapped_ones(api, models_file):
    from tests.importers.helpers import DIFY

    source = (DIFY / "knowledge_chat_retrieval.yml").read_text(encoding="utf-8")
    source_id = "2516f4a8-9329-4845-a914-7965090ee2e2"
    body = {"source": source, "model_map": {"*": "default"}}
    unmapped = (await api.client.post("/v1/workflows/import", json=body, headers=api.auth())).json()
    issue = next(i for i in unmapped["report"] if i["code"] == "unmapped_dataset")
    assert issue["severity"] == "warning" and f'"dataset_map": {{"{source_id}": "ID"}}' in issue["message"]
    assert f"flowloom datasets add {source_id} FILES --wait" in issue["message"]
    mapped = await api.client.post("/v1/workflows/import", json={**body, "dataset_map": {source_id: "policies"}},
                                   headers=api.auth())
    assert mapped.status_code == 200, mapped.text
    answer = mapped.json()
    assert answer["datasets"] == {source_id: "policies"}
    search = next(n for n in answer["workflow"]["nodes"] if n["type"] == "knowledge_retrieval")
    assert search["config"]["datasets"] == ["policies"]


async def test_a_chat_turns_answer_keeps_its_citations_in_the_chats_messages(api, openai_server, kb):
    openai_server.script(text_reply('["refund card days"]'), text_reply(ANSWER))
    body = {"workflow": KB_FLOW, "chat_id": "kb-chat", "message": QUESTION}
    response = await api.client.post("/v1/runs", json=body, headers=api.auth())
    assert response.status_code == 200 and response.json()["status"] == "succeeded", response.text
    messages = (await api.client.get("/v1/chats/kb-chat/messages", headers=api.auth())).json()["messages"]
    assistant = messages[-1]
    assert assistant["role"] == "assistant" and assistant["text"] == ANSWER
    cited = [p["data"] for p in assistant["parts"] if p["type"] == "citation"]
    _cited_returns(cited)
    assert cited == response.json()["citations"]
    assert not [p for p in messages[0]["parts"] if p["type"] == "citation"]  # the question cites nothing


async def test_validation_warns_about_a_searched_dataset_the_tenant_lacks(api, kb):
    flow = {**KB_FLOW, "nodes": [dict(n, config={**n["config"], "datasets": ["policies", "ghost"]})
                                 if n.get("type") == "knowledge_retrieval" else n for n in KB_FLOW["nodes"]]}
    answer = await api.client.post("/v1/workflows/validate", json=flow, headers=api.auth())
    assert answer.status_code == 200, answer.text
    unknown = [p for p in answer.json()["problems"] if p["code"] == "unknown_dataset"]
    assert [(p["path"], p["severity"]) for p in unknown] == [("config.datasets[1]", "warning")]
    assert "'ghost'" in unknown[0]["message"] and answer.json()["valid"] is True
    known = await api.client.post("/v1/workflows/validate", json=KB_FLOW, headers=api.auth())
    assert [p for p in known.json()["problems"] if p["code"] == "unknown_dataset"] == []


async def test_a_run_searching_a_dataset_the_tenant_lacks_is_refused_before_any_model_call(api, openai_server, kb):
    # It would fail at its search, after the query extension's model call was paid for.
    flow = {**KB_FLOW, "id": "ghostly", "nodes": [dict(n, config={**n["config"], "datasets": ["polices"]})
                                                  if n.get("type") == "knowledge_retrieval" else n
                                                  for n in KB_FLOW["nodes"]]}
    refused = await api.client.post("/v1/runs", json={"workflow": flow, "inputs": {"query": QUESTION}},
                                    headers=api.auth())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "unknown_dataset" and "did you mean 'policies'?" in error["message"]
    assert error["problems"][0]["path"] == "config.datasets[0]" and "flowloom datasets create" in error["message"]
    assert (await api.client.post("/v1/workflows", json=flow, headers=api.auth())).status_code == 201
    assert (await api.client.post("/v1/workflows/ghostly/publish", json={"note": "v1"},
                                  headers=api.auth())).status_code == 201
    await api.http()
    client = openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=api.key, max_retries=0, timeout=20)
    with pytest.raises(openai.UnprocessableEntityError) as info:
        await client.chat.completions.create(model="ghostly", messages=[{"role": "user", "content": QUESTION}])
    assert "polices" in str(info.value)
    assert openai_server.requests == [r for r in openai_server.requests if r.path.endswith("/embeddings")]  # no chat call
