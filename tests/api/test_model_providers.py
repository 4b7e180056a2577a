"""``/v1/model-providers`` on SQLite and PostgreSQL: CRUD of a tenant's providers and
models, the endpoint's model list, defaults, runs that call a tenant model (by name and
as ``default``) against the scripted server, tenant isolation (404, never 403), the
address guard on base URLs, and a key that appears in no answer, no log line, no export
and no stored row in plaintext."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import sqlalchemy as sa

from engine.settings import Settings
from tests.support.chat_flow import chat_flow
from tests.support.openai_server import Finish, Reply, Text, http_error, text_reply, tool_args_split_reply

from .conftest import open_api

PROVIDER_KEY = "sk-tenant-own-7d3f9a2c5e1b8h4k"
OTHER_KEY = "sk-tenant-rotated-0a9b8c7d6e5f4g3h"
PREFIX = "/v1/model-providers"
#: a chat workflow whose model is the tenant's own ``team-chat`` (a model of its provider)
OWN_MODEL_FLOW = chat_flow("own_model", model="team-chat")


class Recorder:
    """Every answer body of the test, so the key can be looked for in all of them."""

    def __init__(self, api: Any) -> None:
        self.api, self.bodies = api, []

    async def call(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
        response = await self.api.client.request(method, path, headers=self.api.auth(key), **kwargs)
        self.bodies.append(response.text)
        return response


async def _provider(rec: Recorder, base_url: str, **extra: Any) -> dict[str, Any]:
    body = {"id": "my-vllm", "name": "Team vLLM", "preset": "vllm", "base_url": base_url, "api_key": PROVIDER_KEY,
            **extra}
    created = await rec.call("POST", PREFIX, json=body)
    assert created.status_code == 201, created.text
    return created.json()


async def test_provider_crud_and_models_round_trip(api, openai_server):
    rec = Recorder(api)
    created = await _provider(rec, openai_server.base_url)
    assert created["api_key_set"] is True and created["api_key_masked"] == "sk-…8h4k"
    assert created["base_url"] == openai_server.base_url and created["preset"] == "vllm"

    model = await rec.call("POST", f"{PREFIX}/my-vllm/models", json={
        "name": "team/qwen:7b", "model": "Qwen/Qwen2.5-7B-Instruct", "max_context": 32768,
        "capabilities": {"tools": "forced"}, "pricing": {"input_per_1k": 0.001, "output_per_1k": 0.002}})
    assert model.status_code == 201, model.text
    assert model.json()["capabilities"]["tools"] == "forced" and model.json()["max_output_tokens"] == 4096
    taken = await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "team/qwen:7b"})
    assert taken.status_code == 409, taken.text
    reserved = await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "default"})
    assert reserved.status_code == 422 and "reserved" in reserved.json()["error"]["message"]
    bad = await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "x", "max_context": 100,
                                                                     "max_output_tokens": 200})
    assert bad.status_code == 422 and "max_output_tokens" in bad.json()["error"]["message"], bad.text

    changed = await rec.call("PATCH", f"{PREFIX}/my-vllm/models/team/qwen:7b",
                             json={"capabilities": {"json_mode": True}, "pricing": {"input_per_1k": 0.5}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["capabilities"]["tools"] == "forced" and changed.json()["capabilities"]["json_mode"] is True
    assert changed.json()["pricing"]["input_per_1k"] == 0.5

    renamed = await rec.call("PATCH", f"{PREFIX}/my-vllm", json={"name": "Renamed"})
    assert renamed.json()["name"] == "Renamed" and renamed.json()["api_key_set"] is True
    listed = (await rec.call("GET", PREFIX)).json()
    assert [p["id"] for p in listed["providers"]] == ["my-vllm"]
    assert [m["name"] for m in listed["providers"][0]["models"]] == ["team/qwen:7b"]

    cleared = await rec.call("PATCH", f"{PREFIX}/my-vllm", json={"api_key": ""})
    assert cleared.json()["api_key_set"] is False and cleared.json()["api_key_masked"] is None
    assert (await rec.call("DELETE", f"{PREFIX}/my-vllm/models/team/qwen:7b")).status_code == 204
    assert (await rec.call("DELETE", f"{PREFIX}/my-vllm")).status_code == 204
    assert (await rec.call("GET", f"{PREFIX}/my-vllm")).status_code == 404
    assert all(PROVIDER_KEY not in body for body in rec.bodies)


async def test_presets_fill_the_base_url_and_ids(api):
    rec = Recorder(api)
    presets = (await rec.call("GET", f"{PREFIX}/presets")).json()["presets"]
    assert {p["id"] for p in presets} >= {"openai", "azure_openai", "deepseek", "dashscope", "ollama", "vllm",
                                          "lmstudio", "llamacpp"}
    first = await rec.call("POST", PREFIX, json={"preset": "ollama"})
    second = await rec.call("POST", PREFIX, json={"preset": "ollama"})
    assert (first.json()["id"], second.json()["id"]) == ("ollama", "ollama-2")
    assert first.json()["base_url"] == "http://127.0.0.1:11434/v1" and first.json()["api_key_set"] is False
    azure = await rec.call("POST", PREFIX, json={"preset": "azure_openai", "api_key": PROVIDER_KEY})
    assert azure.status_code == 422 and "{resource}" in azure.json()["error"]["message"], azure.text


async def test_a_refused_body_does_not_echo_the_key(api):
    for body in ({"preset": "bogus", "api_key": PROVIDER_KEY}, {"api_key": PROVIDER_KEY, "extra": 1},
                 {"base_url": "http://10.1.2.3/v1", "api_key": PROVIDER_KEY}, {"api_key": [PROVIDER_KEY]}):
        refused = await api.client.post(PREFIX, json=body, headers=api.auth())
        assert refused.status_code == 422 and PROVIDER_KEY not in refused.text, refused.text
    created = await api.client.post(PREFIX, json={"preset": "ollama"}, headers=api.auth())
    patched = await api.client.patch(f"{PREFIX}/{created.json()['id']}", json={"api_key": PROVIDER_KEY, "nope": 1},
                                     headers=api.auth())
    assert patched.status_code == 422 and PROVIDER_KEY not in patched.text, patched.text


async def test_a_private_base_url_is_refused_unless_the_operator_allows_it(api):
    refused = await api.client.post(PREFIX, json={"preset": "openai_compatible", "base_url": "http://10.20.30.40/v1"},
                                    headers=api.auth())
    assert refused.status_code == 422, refused.text
    assert "FLOWLOOM_HTTP_ALLOW" in refused.json()["error"]["message"] and "private" in refused.json()["error"]["message"]
    not_http = await api.client.post(PREFIX, json={"base_url": "file:///etc/passwd"}, headers=api.auth())
    assert not_http.status_code == 422


async def test_upstream_models_are_listed_with_the_key(api, openai_server):
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    openai_server.json_routes["/v1/models"] = {"object": "list", "data": [
        {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "owned_by": "vllm"},
        {"id": "bge-m3", "object": "model", "owned_by": "vllm"}]}
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "qwen", "model": "Qwen/Qwen2.5-7B-Instruct"})
    listed = await rec.call("GET", f"{PREFIX}/my-vllm/upstream-models")
    assert listed.status_code == 200, listed.text
    assert listed.json()["models"] == [{"id": "Qwen/Qwen2.5-7B-Instruct", "owned_by": "vllm", "added": True},
                                       {"id": "bge-m3", "owned_by": "vllm", "added": False}]
    sent = [r for r in openai_server.requests if r.path == "/v1/models"][-1]
    assert sent.headers["authorization"] == f"Bearer {PROVIDER_KEY}"

    del openai_server.json_routes["/v1/models"]
    failing = await rec.call("GET", f"{PREFIX}/my-vllm/upstream-models")
    assert failing.status_code == 502 and "404" in failing.json()["error"]["message"], failing.text
    assert all(PROVIDER_KEY not in body for body in rec.bodies)


async def test_runs_call_the_tenant_model_by_name_and_as_default(api, openai_server):
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "team-chat", "model": "upstream-chat-id",
                                                            "max_context": 8192})
    openai_server.script(text_reply("from the team model", usage=(7, 3)),
                         text_reply("as the default", usage=(7, 3)))
    run = await rec.call("POST", "/v1/runs", json={"workflow": OWN_MODEL_FLOW, "message": "hi"})
    assert run.status_code == 200 and run.json()["status"] == "succeeded", run.text
    assert run.json()["answer"] == "from the team model"
    sent = openai_server.requests[-1]
    assert sent.body["model"] == "upstream-chat-id" and sent.headers["authorization"] == f"Bearer {PROVIDER_KEY}"

    chosen = await rec.call("PUT", f"{PREFIX}/defaults", json={"chat": "team-chat"})
    assert chosen.status_code == 200 and chosen.json()["chat"] == "team-chat", chosen.text
    run = await rec.call("POST", "/v1/runs", json={"workflow": chat_flow("by_default"), "message": "hi"})
    assert run.json()["status"] == "succeeded" and run.json()["answer"] == "as the default", run.text
    assert openai_server.requests[-1].body["model"] == "upstream-chat-id"

    wrong_type = await rec.call("PUT", f"{PREFIX}/defaults", json={"embedding": "team-chat"})
    assert wrong_type.status_code == 422 and "chat model" in wrong_type.json()["error"]["message"], wrong_type.text
    kinds = (await rec.call("GET", "/v1/node-kinds")).json()
    assert "team-chat" in kinds["models"]


async def test_another_tenant_cannot_see_or_use_the_provider(api, openai_server):
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "team-chat"})
    other = api.other_key
    assert (await rec.call("GET", PREFIX, other)).json()["providers"] == []
    for method, path, body in [("GET", f"{PREFIX}/my-vllm", None), ("PATCH", f"{PREFIX}/my-vllm", {"name": "x"}),
                               ("DELETE", f"{PREFIX}/my-vllm", None),
                               ("GET", f"{PREFIX}/my-vllm/upstream-models", None),
                               ("POST", f"{PREFIX}/my-vllm/models", {"name": "mine"}),
                               ("PATCH", f"{PREFIX}/my-vllm/models/team-chat", {"max_context": 4096}),
                               ("DELETE", f"{PREFIX}/my-vllm/models/team-chat", None)]:
        answer = await rec.call(method, path, other, json=body) if body else await rec.call(method, path, other)
        assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
    refused = await rec.call("PUT", f"{PREFIX}/defaults", other, json={"chat": "team-chat"})
    assert refused.status_code == 422, refused.text
    run = await rec.call("POST", "/v1/runs", other, json={"workflow": OWN_MODEL_FLOW, "message": "hi"})
    assert run.status_code == 422 and "team-chat" in run.text, run.text
    assert openai_server.requests == [], "tenant B's run never reached tenant A's endpoint"
    # the same id is free for tenant B, and its provider is its own
    mine = await rec.call("POST", PREFIX, other, json={"id": "my-vllm", "preset": "ollama"})
    assert mine.status_code == 201 and mine.json()["api_key_set"] is False
    assert (await rec.call("GET", f"{PREFIX}/my-vllm")).json()["api_key_set"] is True


async def test_an_app_scoped_key_reads_but_does_not_change(api, openai_server):
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    made = await api.client.post("/v1/workflows", json=chat_flow("app1"), headers=api.auth())
    assert made.status_code == 201, made.text
    _record, scoped = await api.keys.create_key("default", name="app", app_id="app1")
    assert (await rec.call("GET", PREFIX, scoped)).status_code == 200
    denied = await rec.call("POST", PREFIX, scoped, json={"preset": "ollama"})
    assert denied.status_code == 403, denied.text


async def test_the_key_is_in_no_answer_log_export_or_stored_row(api, openai_server, caplog):
    caplog.set_level(logging.DEBUG)
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    await rec.call("PATCH", f"{PREFIX}/my-vllm", json={"api_key": OTHER_KEY})
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "team-chat"})
    saved = await rec.call("POST", "/v1/workflows", json=OWN_MODEL_FLOW)
    assert saved.status_code == 201, saved.text
    await rec.call("GET", "/v1/workflows/own_model/export")
    await rec.call("GET", "/v1/workflows/own_model")
    openai_server.script(text_reply("ok", usage=(3, 1)))
    run = await rec.call("POST", "/v1/runs", json={"workflow": OWN_MODEL_FLOW, "message": "hi"})
    assert run.json()["status"] == "succeeded", run.text
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {OTHER_KEY}", "the new key is used"
    run_id = run.json()["run_id"]
    for path in (PREFIX, f"{PREFIX}/my-vllm", f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events", "/v1/node-kinds"):
        await rec.call("GET", path)
    rows = await _stored_rows(api)
    texts = [*rec.bodies, caplog.text, *rows]
    for secret in (PROVIDER_KEY, OTHER_KEY):
        leaks = [t[max(0, t.find(secret) - 80): t.find(secret) + 40] for t in texts if secret in t]
        assert not leaks, f"{secret!r} leaked: {leaks[:2]}"
    assert any("gAAAA" in row for row in rows), "the key is stored as a Fernet token"


async def _stored_rows(api: Any) -> list[str]:
    """Every row of the providers' tables, as text."""
    store = api.service.stores.runs
    texts = []
    async with store._tx() as conn:
        for table in ("model_providers", "provider_models", "tenant_model_defaults"):
            texts += [repr(tuple(row)) for row in (await conn.execute(sa.text(f"SELECT * FROM {table}"))).all()]
    return texts


def _llama_cpp_like(body: dict[str, Any]) -> Reply:
    """A small llama.cpp model: tools only when forced, no JSON mode, no usage in streams."""
    if body.get("tools"):
        if isinstance(body.get("tool_choice"), dict):
            return tool_args_split_reply("get_weather", '{"city": "Paris"}', usage=None)
        return text_reply("It is sunny in Paris.", usage=None)
    if body.get("response_format"):
        return http_error(400, "response_format is not supported")
    if body.get("stream") or body.get("messages"):
        return Reply([Text("OK"), Finish("stop")])
    return text_reply("OK", usage=None)


async def test_probe_stores_what_the_endpoint_really_does(api, openai_server):
    rec = Recorder(api)
    await _provider(rec, openai_server.base_url)
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "small", "max_context": 131072})
    await rec.call("POST", f"{PREFIX}/my-vllm/models", json={"name": "vectors", "type": "embedding",
                                                            "max_context": 512})
    openai_server.responder = _llama_cpp_like
    openai_server.json_routes["/props"] = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    probed = await rec.call("POST", f"{PREFIX}/my-vllm/models/small/probe")
    assert probed.status_code == 200, probed.text
    model, report = probed.json()["model"], probed.json()["report"]
    assert report["free_tool_call"]["ok"] is False and report["forced_tool_call"]["ok"] is True
    assert model["capabilities"]["tools"] == "forced" and model["capabilities"]["json_mode"] is False
    assert model["capabilities"]["stream_usage"] is False
    assert model["max_context"] == 4096 and model["max_output_tokens"] < 4096
    assert all(r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}" for r in openai_server.requests
               if r.path.endswith("/chat/completions"))
    stored = (await rec.call("GET", f"{PREFIX}/my-vllm")).json()["models"]
    assert next(m for m in stored if m["name"] == "small")["capabilities"]["tools"] == "forced"
    # forced calls go through tool_choice: asking for them turns it on, whatever the probe found
    none = await rec.call("PATCH", f"{PREFIX}/my-vllm/models/small",
                          json={"capabilities": {"tools": "none", "tool_choice": False}})
    assert none.json()["capabilities"]["tool_choice"] is False, none.text
    refused = await rec.call("PATCH", f"{PREFIX}/my-vllm/models/small",
                             json={"capabilities": {"tools": "forced", "tool_choice": False}})
    assert refused.status_code == 422 and "tool_choice" in refused.json()["error"]["message"], refused.text
    assert "capabilities: capabilities" not in refused.json()["error"]["message"]
    forced = await rec.call("PATCH", f"{PREFIX}/my-vllm/models/small", json={"capabilities": {"tools": "forced"}})
    assert forced.status_code == 200 and forced.json()["capabilities"]["tool_choice"] is True, forced.text
    embedding = await rec.call("POST", f"{PREFIX}/my-vllm/models/vectors/probe")
    assert embedding.status_code == 422, embedding.text
    other = await rec.call("POST", f"{PREFIX}/my-vllm/models/small/probe", api.other_key)
    assert other.status_code == 404
    assert all(PROVIDER_KEY not in body for body in rec.bodies)


async def test_a_dataset_embeds_with_the_tenant_embedding_model(tmp_path, openai_server):
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'kb.db'}",
                        http_allow=["127.0.0.1"])
    async with open_api(settings) as api:
        rec = Recorder(api)
        await _provider(rec, openai_server.base_url)
        added = await rec.call("POST", f"{PREFIX}/my-vllm/models", json={
            "name": "team-embed", "model": "bge-small", "type": "embedding", "max_context": 512})
        assert added.status_code == 201, added.text
        chosen = await rec.call("PUT", f"{PREFIX}/defaults", json={"embedding": "team-embed"})
        assert chosen.json()["embedding"] == "team-embed", chosen.text
        made = await rec.call("POST", "/v1/datasets", json={"name": "Team notes", "embedding_model": "team-embed"})
        assert made.status_code == 201, made.text
        dataset = made.json()["id"]
        text = "Rocket nozzles shape the exhaust. Tea is brewed with hot water."
        sent = await rec.call("POST", f"/v1/datasets/{dataset}/documents", json={"name": "notes.txt", "text": text})
        assert sent.status_code == 202, sent.text
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            documents = (await rec.call("GET", f"/v1/datasets/{dataset}/documents")).json()["documents"]
            if all(d["status"] in ("ready", "failed") for d in documents):
                break
            assert time.monotonic() < deadline, documents
            await asyncio.sleep(0.05)
        assert [d["status"] for d in documents] == ["ready"], documents
        found = await rec.call("POST", f"/v1/datasets/{dataset}/search", json={"query": "rocket", "mode": "semantic"})
        assert found.status_code == 200 and found.json()["hits"], found.text
        embedded = [r for r in openai_server.requests if r.path.endswith("/embeddings")]
        assert embedded and all(r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}" for r in embedded)
        assert all(r.body["model"] == "bge-small" for r in embedded)
        refused = await rec.call("POST", "/v1/datasets", api.other_key,
                                 json={"name": "Theirs", "embedding_model": "team-embed"})
        assert refused.status_code == 422, refused.text
        assert all(PROVIDER_KEY not in body for body in rec.bodies)
