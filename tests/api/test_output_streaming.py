"""The SSE stream of a workflow that ends in End nodes, on SQLite and PostgreSQL: the text
of LLM calls inside an iteration never streams into the answer (items run together);
the End outputs arrive in ``run_finished``, and only an LLM an End output binds directly
streams, as in Dify."""

from __future__ import annotations

from typing import Any

from tests.support.openai_server import text_reply

from .conftest import parse_sse


def summarize_each() -> dict[str, Any]:
    return {"id": "summarize_each", "name": "Summarize each",
            "inputs": [{"name": "items", "type": "array"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "each", "type": "iteration",
                       "config": {"items": {"ref": "inputs.items"}, "collect": {"ref": "line.answer"}}},
                      {"id": "line", "type": "chat", "parent": "each",
                       "config": {"model": "default", "user_prompt": "{{ each.item }}"}},
                      {"id": "title", "type": "chat", "config": {"model": "default", "user_prompt": "title"}},
                      {"id": "end", "type": "end",
                       "config": {"outputs": [{"name": "lines", "value": {"ref": "each.results"}},
                                              {"name": "title", "value": {"ref": "title.answer"}}]}}],
            "edges": [{"id": "e1", "source": "start", "target": "each"},
                      {"id": "e2", "source": "each", "target": "title"},
                      {"id": "e3", "source": "title", "target": "end"}]}


async def test_an_end_workflow_streams_only_what_an_end_output_binds(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply(f"<{body['messages'][-1]['content']}>", chunk_size=2)

    response = await api.client.post("/v1/runs", json={"workflow": summarize_each(), "inputs": {"items": ["a", "b"]},
                                                       "response_mode": "streaming"}, headers=api.auth())

    assert response.status_code == 200, response.text
    messages = [m for m in parse_sse(response.text) if "comment" not in m]
    deltas = [m["data"] for m in messages if m["event"] == "node_delta" and m["data"]["channel"] == "answer"]
    assert {d["node_id"] for d in deltas} == {"title"}, deltas
    finished = next(m["data"] for m in messages if m["event"] == "run_finished")
    assert finished["outputs"] == {"lines": ["<a>", "<b>"], "title": "<title>"}
    assert finished["answer"] == "<title>" == "".join(d["text"] for d in deltas)
    assert messages[-1]["event"] == "done" and messages[-1]["data"]["status"] == "succeeded"
    run = (await api.client.get(f"/v1/runs/{finished['run_id']}", headers=api.auth())).json()
    assert run["outputs"] == finished["outputs"] and run["answer"] == "<title>"
