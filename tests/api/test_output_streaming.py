"""The SSE stream of a workflow that ends in End nodes, on SQLite and PostgreSQL: its End
outputs stream as Dify streams them, in order with a line break between two, each part as
soon as its value is ready (an LLM's text token by token, an iteration's results when it
finishes: the text of the LLM calls inside it never streams), each delta naming its
output; ``run_finished`` has the outputs and the same text as its answer."""

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


async def test_an_end_workflow_streams_its_outputs_in_order(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply(f"<{body['messages'][-1]['content']}>", chunk_size=2)

    response = await api.client.post("/v1/runs", json={"workflow": summarize_each(), "inputs": {"items": ["a", "b"]},
                                                       "response_mode": "streaming"}, headers=api.auth())

    assert response.status_code == 200, response.text
    messages = [m for m in parse_sse(response.text) if "comment" not in m]
    deltas = [m["data"] for m in messages if m["event"] == "node_delta" and m["data"]["channel"] == "answer"]
    assert [(d["node_id"], d["output"], d["text"]) for d in deltas[:2]] == [
        ("end", "lines", '["<a>", "<b>"]'), ("end", None, "\n")]
    title = deltas[2:]
    assert len(title) == 4 and {(d["node_id"], d["output"]) for d in title} == {("title", "title")}, title
    finished = next(m["data"] for m in messages if m["event"] == "run_finished")
    assert finished["outputs"] == {"lines": ["<a>", "<b>"], "title": "<title>"}
    assert finished["answer"] == '["<a>", "<b>"]\n<title>' == "".join(d["text"] for d in deltas)
    assert messages[-1]["event"] == "done" and messages[-1]["data"]["status"] == "succeeded"
    run = (await api.client.get(f"/v1/runs/{finished['run_id']}", headers=api.auth())).json()
    assert run["outputs"] == finished["outputs"] and run["answer"] == finished["answer"]
