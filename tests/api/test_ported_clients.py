"""A client ported from Dify (or written from memory) sends Dify's routes and field names:
the answers say what does that work here, instead of a bare "Not Found" or "extra inputs
are not permitted"."""

from __future__ import annotations

from .conftest import hello_workflow


async def _saved(api) -> None:
    created = await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())
    assert created.status_code == 201, created.text


async def test_dify_field_names_are_answered_with_flowloom_s(api):
    await _saved(api)
    dify = {"inputs": {"name": "Ada"}, "query": "hi", "user": "abc", "conversation_id": "c1"}
    refused = await api.client.post("/v1/workflows/hello/runs?draft=true", json=dify, headers=api.auth())
    assert refused.status_code == 422
    message = refused.json()["error"]["message"]
    for hint in ("the user's message is `message`", "a conversation is `chat_id`", "its API key's"):
        assert hint in message, message
    by_id = await api.client.post("/v1/runs", json={"workflow_id": "hello", "inputs": {}}, headers=api.auth())
    assert "POST /v1/workflows/{workflow_id}/runs" in by_id.json()["error"]["message"]
    as_string = await api.client.post("/v1/runs", json={"workflow": "hello"}, headers=api.auth())
    assert "a saved workflow runs by its id at POST /v1/workflows/{id}/runs" in as_string.json()["error"]["message"]
    assert "hello" not in as_string.json()["error"]["message"].split("(")[0]  # the value is not echoed


async def test_dify_routes_and_near_misses_are_pointed_at_the_route_that_does_their_work(api):
    chat = await api.client.post("/v1/chat-messages", json={"query": "hi"}, headers=api.auth())
    assert chat.status_code == 404 and chat.json()["error"]["type"] == "not_found"
    assert "/v1/chat/completions" in chat.json()["error"]["message"]
    run = await api.client.post("/v1/workflows/run", json={}, headers=api.auth())
    assert "POST /v1/workflows/{id}/runs" in run.json()["error"]["message"]
    near = await api.client.post("/v1/workflows/hello/run", json={}, headers=api.auth())
    assert near.status_code in (404, 405)
    if near.status_code == 404:
        assert "did you mean /v1/workflows/hello/runs?" in near.json()["error"]["message"]
    other = await api.client.get("/v1/nothing-here", headers=api.auth())
    assert other.status_code == 404 and "/openapi.json" in other.json()["error"]["message"]
