"""``GET/POST /v1/workflows/{id}/nodes/{node_id}/run``: one node of the draft run on its
own, on SQLite and PostgreSQL: what it reads, a run with typed values (its model call
made and counted), the run listed as ``single_node`` with its preview, values taken from
the node's last run, a missing value refused by name, an unknown node 404, another
tenant's workflow 404."""

from __future__ import annotations

from typing import Any

from tests.support.openai_server import text_reply


def flow() -> dict[str, Any]:
    return {"id": "ask-flow", "name": "Ask flow",
            "inputs": [{"name": "city", "type": "string"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "shout", "type": "template", "name": "Shout", "config": {"template": "{{ inputs.city | upper }}!"}},
                      {"id": "ask", "type": "chat", "name": "Ask the model",
                       "config": {"model": "default", "user_prompt": "Weather in {{ shout.output }}?"}},
                      {"id": "end", "type": "end", "config": {"outputs": [{"name": "a", "value": {"ref": "ask.answer"}}]}}],
            "edges": [{"id": "e1", "source": "start", "target": "shout"},
                      {"id": "e2", "source": "shout", "target": "ask"},
                      {"id": "e3", "source": "ask", "target": "end"}]}


async def test_one_node_of_the_draft_runs_alone_and_shows_in_the_history(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply(f"re: {body['messages'][-1]['content']}", usage=(7, 2))
    saved = await api.client.post("/v1/workflows", json=flow(), headers=api.auth())
    assert saved.status_code == 201, saved.text
    url = "/v1/workflows/ask-flow/nodes/ask/run"

    info = (await api.client.get(url, headers=api.auth())).json()
    assert [r["key"] for r in info["reads"] if not r["optional"]] == ["shout.output"] and info["last"] is None

    missing = await api.client.post(url, json={"inputs": {}}, headers=api.auth())
    assert missing.status_code == 422, missing.text
    assert "'shout.output'" in missing.json()["error"]["message"]
    assert missing.json()["error"]["problems"] == ["shout.output: no value given"]

    ran = await api.client.post(url, json={"inputs": {"shout.output": "LIMA!"}}, headers=api.auth())
    assert ran.status_code == 200, ran.text
    body = ran.json()
    assert body["status"] == "succeeded" and body["node_run"]["outputs"]["answer"] == "re: Weather in LIMA!?"
    assert (body["tokens_in"], body["tokens_out"]) == (7, 2) and body["node_run"]["usage"]["calls"] == 1
    assert len(openai_server.bodies) == 1

    listed = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert [(r["run_id"], r["kind"], r["node_id"], r["tokens_in"]) for r in listed] == \
        [(body["run_id"], "single_node", "ask", 7)]
    assert listed[0]["workflow_version"] == "draft" and listed[0]["duration_s"] is not None

    info = (await api.client.get(url, headers=api.auth())).json()
    assert info["last"]["run_id"] == body["run_id"] and info["last"]["values"] == {"shout.output": "LIMA!"}
    assert info["last"]["node_run"]["status"] == "succeeded"

    again = await api.client.post(url, json={"from_last": True}, headers=api.auth())
    assert again.status_code == 200 and again.json()["status"] == "succeeded", again.text
    assert openai_server.bodies[-1]["messages"][-1]["content"] == "Weather in LIMA!?"


async def test_a_full_runs_preview_is_its_first_input_and_unknown_nodes_are_404(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply("sunny")
    await api.client.post("/v1/workflows", json=flow(), headers=api.auth())
    full = await api.client.post("/v1/workflows/ask-flow/runs?draft=true", json={"inputs": {"city": "Quito"}},
                                 headers=api.auth())
    assert full.status_code == 200, full.text
    listed = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert [(r["kind"], r["preview"]) for r in listed] == [("workflow", "Quito")]

    unknown = await api.client.post("/v1/workflows/ask-flow/nodes/aks/run", json={}, headers=api.auth())
    assert unknown.status_code == 404 and "did you mean 'ask'" in unknown.json()["error"]["message"]
    other = await api.client.get("/v1/workflows/ask-flow/nodes/ask/run", headers=api.auth(api.other_key))
    assert other.status_code == 404
    info = (await api.client.get("/v1/workflows/ask-flow/nodes/ask/run", headers=api.auth())).json()
    assert info["last"]["values"] == {"shout.output": "QUITO!"}, "a full run's values prefill the node's form"
