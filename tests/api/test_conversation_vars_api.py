"""Conversation variables through the API on SQLite and PostgreSQL: three chat turns of
``POST /v1/runs`` count 1, 2, 3; ``GET``/``PUT /v1/chats/{id}/variables`` read and change
what the next turn starts from; another tenant's key finds nothing; and
``/v1/chat/completions`` with a ``chat_id`` keeps the counter the same way."""

from __future__ import annotations

from typing import Any

COUNTER: dict[str, Any] = {
    "id": "counter", "name": "Counter",
    "conversation_variables": [{"name": "count", "type": "number", "default": 0}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "bump", "type": "variable_update",
               "config": {"updates": [{"variable": "conversation.count", "operation": "add", "value": 1}]}},
              {"id": "say", "type": "answer", "config": {"text": "count={{ conversation.count }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "bump"}, {"id": "e2", "source": "bump", "target": "say"}],
}


async def _turn(api, chat_id: str, message: str, key: str | None = None) -> dict[str, Any]:
    response = await api.client.post("/v1/runs", json={"workflow": COUNTER, "inputs": {}, "chat_id": chat_id,
                                                       "message": message}, headers=api.auth(key))
    assert response.status_code == 200, response.text
    return response.json()


async def test_three_turns_count_one_two_three_and_an_edit_changes_the_next(api):
    answers = [(await _turn(api, "c1", f"turn {i}"))["answer"] for i in range(3)]
    assert answers == ["count=1", "count=2", "count=3"]
    held = await api.client.get("/v1/chats/c1/variables", headers=api.auth())
    assert held.status_code == 200 and held.json() == {"variables": {"count": 3}}

    changed = await api.client.put("/v1/chats/c1/variables", json={"variables": {"count": 10}}, headers=api.auth())
    assert changed.status_code == 200 and changed.json() == {"variables": {"count": 10}}
    assert (await _turn(api, "c1", "again"))["answer"] == "count=11"

    await api.client.put("/v1/chats/c1/variables", json={"variables": {"count": "ten"}}, headers=api.auth())
    refused = await api.client.post("/v1/runs", json={"workflow": COUNTER, "chat_id": "c1", "message": "x"},
                                    headers=api.auth())
    assert refused.status_code == 422 and "conversation variable 'count' must be number" in refused.text


async def test_another_tenant_and_unknown_chats_are_404(api):
    await _turn(api, "c1", "hello")
    for key in (api.other_key, None):
        chat = "c1" if key else "nobody"
        got = await api.client.get(f"/v1/chats/{chat}/variables", headers=api.auth(key))
        put = await api.client.put(f"/v1/chats/{chat}/variables", json={"variables": {"count": 5}},
                                   headers=api.auth(key))
        assert (got.status_code, put.status_code) == (404, 404), (got.text, put.text)
    # the other tenant's chat of the same id counts on its own
    assert (await _turn(api, "c1", "hi", key=api.other_key))["answer"] == "count=1"
    assert (await api.client.get("/v1/chats/c1/variables", headers=api.auth())).json() == {"variables": {"count": 1}}


async def test_chat_completions_with_a_chat_id_keep_the_counter(api):
    created = await api.client.post("/v1/workflows", json=COUNTER, headers=api.auth())
    assert created.status_code == 201, created.text
    published = await api.client.post("/v1/workflows/counter/publish", json={"note": "v1"}, headers=api.auth())
    assert published.status_code == 201, published.text
    answers = []
    for i in range(3):
        done = await api.client.post("/v1/chat/completions", headers=api.auth(), json={
            "model": "counter", "chat_id": "oa1", "messages": [{"role": "user", "content": f"turn {i}"}]})
        assert done.status_code == 200, done.text
        answers.append(done.json()["choices"][0]["message"]["content"])
    assert answers == ["count=1", "count=2", "count=3"]
    without = await api.client.post("/v1/chat/completions", headers=api.auth(), json={
        "model": "counter", "messages": [{"role": "user", "content": "alone"}]})
    assert without.json()["choices"][0]["message"]["content"] == "count=1", "no chat: the default each time"
