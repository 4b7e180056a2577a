"""Validate warns, on SQLite and PostgreSQL, about a chat node whose model needs an API
key this deployment has not set: the workflow stays valid and publishable (the key may be
set before it runs), and the warning goes once the key is set; a model on a local endpoint
that needs no key gets no warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chat_flow import chat_flow

CLOUD_KEY_ENV = "FLOWLOOM_TEST_CLOUD_KEY"


@pytest.fixture
def models_file(tmp_path, monkeypatch) -> Path:
    """A registry with a cloud model whose key is in CLOUD_KEY_ENV and a model on a
    loopback endpoint without a key (the ``api`` fixture picks this file up)."""
    monkeypatch.delenv(CLOUD_KEY_ENV, raising=False)
    path = tmp_path / "models.toml"
    path.write_text(f'''
[providers.cloud]
base_url = "https://llm.example.com/v1"
api_key_env = "{CLOUD_KEY_ENV}"

[providers.local]
base_url = "http://127.0.0.1:11434/v1"

[models.cloud-model]
provider = "cloud"
max_context = 8192
max_output_tokens = 512

[models.local-model]
provider = "local"
max_context = 8192
max_output_tokens = 512
''', encoding="utf-8")
    return path


async def test_a_model_whose_key_is_not_set_warns_without_blocking(api, models_file, monkeypatch):
    flow = chat_flow("chatty", model="cloud-model")
    checked = (await api.client.post("/v1/workflows/validate", json=flow, headers=api.auth())).json()
    assert checked["valid"] is True
    [warning] = checked["problems"]
    assert (warning["code"], warning["severity"], warning["node_id"], warning["path"]) == (
        "missing_api_key", "warning", "reply", "config.model")
    assert "'cloud-model'" in warning["message"] and CLOUD_KEY_ENV in warning["message"]
    assert (await api.client.post("/v1/workflows", json=flow, headers=api.auth())).status_code == 201
    published = await api.client.post("/v1/workflows/chatty/publish", json={}, headers=api.auth())
    assert published.status_code == 201, published.text
    monkeypatch.setenv(CLOUD_KEY_ENV, "sk-value-never-shown")
    keyed = (await api.client.post("/v1/workflows/chatty/validate", headers=api.auth())).json()
    assert (keyed["valid"], keyed["problems"]) == (True, [])


async def test_a_local_model_without_a_key_does_not_warn(api, models_file):
    flow = chat_flow("chatty", model="local-model")
    checked = (await api.client.post("/v1/workflows/validate", json=flow, headers=api.auth())).json()
    assert (checked["valid"], checked["problems"]) == (True, [])


async def test_a_run_needing_a_key_this_deployment_lacks_is_refused_before_anything_runs(api, models_file):
    """Validation only warns (the key may be set before anyone runs it); a run started
    without it would fail at the chat node after the nodes before it ran, so every door
    refuses it up front, naming the node, field and variable, and stores no run."""
    flow = chat_flow("chatty", model="cloud-model")
    refused = await api.client.post("/v1/runs", json={"workflow": flow, "inputs": {"query": "hi"}},
                                    headers=api.auth())
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["type"] == "missing_api_key" and CLOUD_KEY_ENV in error["message"]
    assert "of the server and its workers: restart them" in error["message"], "whose environment, and when it is read"
    [problem] = error["problems"]
    assert (problem["code"], problem["severity"], problem["node_id"], problem["path"]) == (
        "missing_api_key", "error", "reply", "config.model")
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []

    assert (await api.client.post("/v1/workflows", json=flow, headers=api.auth())).status_code == 201
    assert (await api.client.post("/v1/workflows/chatty/publish", json={}, headers=api.auth())).status_code == 201
    completion = await api.client.post("/v1/chat/completions", headers=api.auth(), json={
        "model": "chatty", "messages": [{"role": "user", "content": "hi"}]})
    assert completion.status_code == 503, completion.text
    assert CLOUD_KEY_ENV in completion.json()["error"]["message"]
    assert completion.headers.get("x-should-retry") == "false"
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []


async def test_a_refused_run_names_an_unknown_dataset_beside_the_missing_key(api, models_file):
    """The launch refuses with every problem the deployment and the tenant must fix, as
    ``flowloom run`` lists them: a missing key answers 503 and also names a searched
    dataset the tenant lacks, so fixing the key does not lead to a second refusal."""
    flow = chat_flow("chatty", model="cloud-model")
    flow["nodes"].insert(1, {"id": "search", "type": "knowledge_retrieval", "config": {"datasets": ["ghost"]}})
    flow["edges"] = [{"id": "e0", "source": "start", "target": "search"},
                     {"id": "e1", "source": "search", "target": "reply"},
                     {"id": "e2", "source": "reply", "target": "say"}]
    refused = await api.client.post("/v1/runs", json={"workflow": flow, "inputs": {"query": "hi"}},
                                    headers=api.auth())
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["type"] == "missing_api_key"
    assert CLOUD_KEY_ENV in error["message"] and "'ghost'" in error["message"]
    assert [(p["code"], p["node_id"]) for p in error["problems"]] == [
        ("missing_api_key", "reply"), ("unknown_dataset", "search")]
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []
