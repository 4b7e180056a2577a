"""``chat_id`` of a run without a chat is null in every answer: blocking, async, the
streaming ``meta`` event, the run itself and the run lists (inside the run ``sys.chat_id``
is the run id, an internal convention that never shows)."""

from __future__ import annotations

from .conftest import hello_workflow, read_messages


async def test_run_without_a_chat_has_a_null_chat_id_in_every_response_mode(api):
    body = {"workflow": hello_workflow(), "inputs": {"name": "Ada"}}
    blocking = (await api.client.post("/v1/runs", json={**body, "response_mode": "blocking"}, headers=api.auth())).json()
    assert blocking["status"] == "succeeded" and blocking["chat_id"] is None
    accepted = await api.client.post("/v1/runs", json={**body, "response_mode": "async"}, headers=api.auth())
    assert accepted.status_code == 202 and accepted.json()["chat_id"] is None
    http = await api.http()
    async with http.stream("POST", "/v1/runs", json={**body, "response_mode": "streaming"},
                           headers=api.auth()) as response:
        messages = await read_messages(response)
    assert messages[0]["event"] == "meta" and messages[0]["data"]["chat_id"] is None
    streamed = messages[0]["data"]["run_id"]
    assert (await api.client.get(f"/v1/runs/{streamed}", headers=api.auth())).json()["chat_id"] is None
    listed = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert len(listed) == 3 and all(run["chat_id"] is None for run in listed)


async def test_run_in_a_chat_keeps_its_chat_id(api):
    body = {"workflow": hello_workflow(), "inputs": {"name": "Ada"}, "chat_id": "c-7", "message": "hi"}
    blocking = (await api.client.post("/v1/runs", json=body, headers=api.auth())).json()
    assert blocking["chat_id"] == "c-7"
