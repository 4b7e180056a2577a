"""A run's tokens and cost through the API, on SQLite and PostgreSQL: model calls inside
an iteration and a loop count in ``GET /v1/runs`` and in the tenant's token quota, so a
quota cannot be passed by moving the calls into a loop body."""

from __future__ import annotations

from typing import Any

from tests.support.openai_server import text_reply


def looped_calls() -> dict[str, Any]:
    """3 model calls in an iteration, 2 in a loop: 5 calls."""
    return {"id": "looped", "name": "Looped calls",
            "inputs": [{"name": "items", "type": "array"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "each", "type": "iteration",
                       "config": {"items": {"ref": "inputs.items"}, "collect": {"ref": "ask.answer"}}},
                      {"id": "ask", "type": "chat", "parent": "each",
                       "config": {"model": "default", "user_prompt": "{{ each.item }}"}},
                      {"id": "again", "type": "loop",
                       "config": {"break_when": [{"left": {"ref": "again.rounds"}, "operator": "gte", "right": 2}]}},
                      {"id": "think", "type": "chat", "parent": "again",
                       "config": {"model": "default", "user_prompt": "round {{ again.index }}"}},
                      {"id": "end", "type": "end",
                       "config": {"outputs": [{"name": "answers", "value": {"ref": "each.results"}}]}}],
            "edges": [{"id": "e1", "source": "start", "target": "each"},
                      {"id": "e2", "source": "each", "target": "again"},
                      {"id": "e3", "source": "again", "target": "end"}]}


async def test_calls_inside_loops_count_in_the_runs_tokens_and_the_token_quota(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply("ok", usage=(12, 3))
    limited = await api.client.put("/v1/quotas", json={"tokens_per_day": 60}, headers=api.auth())
    assert limited.status_code == 200, limited.text

    ran = await api.client.post("/v1/runs", json={"workflow": looped_calls(), "inputs": {"items": ["a", "b", "c"]}},
                                headers=api.auth())

    assert ran.status_code == 200 and ran.json()["status"] == "succeeded", ran.text
    assert len(openai_server.bodies) == 5
    listed = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert [(r["tokens_in"], r["tokens_out"]) for r in listed] == [(5 * 12, 5 * 3)]
    detail = (await api.client.get(f"/v1/runs/{ran.json()['run_id']}", headers=api.auth())).json()
    assert (detail["tokens_in"], detail["tokens_out"]) == (60, 15)
    quota = (await api.client.get("/v1/quotas", headers=api.auth())).json()["tenant"]
    assert quota["usage"]["tokens_today"] == 75
    refused = await api.client.post("/v1/runs", json={"workflow": looped_calls(), "inputs": {"items": ["d"]}},
                                    headers=api.auth())
    assert refused.status_code == 429, refused.text
    assert len(openai_server.bodies) == 5, "the refused run called no model"
