"""What a workflow that ends in End nodes streams, through the run service over the real
SQL stores (SQLite file and PostgreSQL): as in Dify, its End outputs in order, a line
break between two, each as soon as its value is ready - the text of an LLM an End output
binds directly token by token; the text of LLM calls inside an iteration never streams
(items would run together): the iteration's results are sent when it finishes. A
workflow with answer nodes and no End keeps FastGPT's rule (an LLM nothing reads answers
directly)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.openai_server import text_reply
from tests.support.workflows import build, edge, node


@pytest.fixture
def service(model_service, openai_server) -> Any:
    openai_server.responder = lambda body: text_reply(f"<{body['messages'][-1]['content']}>", chunk_size=2)
    return model_service


def chat(node_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return node(node_id, "chat", {"model": "plain-model", "user_prompt": prompt}, **fields)


def deltas(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.node_id, e.text) for e in events if e.type == "node_delta" and e.channel == "answer"]


def ends_in_end() -> dict[str, Any]:
    """An iteration of LLM calls, an LLM read through a template, an LLM an End output binds."""
    return build([node("each", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "line.answer"}}),
                  chat("line", "{{ each.item }}", parent="each"),
                  chat("aside", "aside"),
                  node("shape", "template", {"template": "[{{ aside.answer }}]"}),
                  chat("title", "title"),
                  node("end", "end", {"outputs": [{"name": "lines", "value": {"ref": "each.results"}},
                                                  {"name": "aside", "value": {"ref": "shape.output"}},
                                                  {"name": "title", "value": {"ref": "title.answer"}}]})],
                 [edge("start", "each"), edge("each", "aside"), edge("aside", "shape"), edge("shape", "title"),
                  edge("title", "end")],
                 inputs=[{"name": "items", "type": "array"}])


async def test_end_outputs_stream_in_order_and_an_iterations_llm_text_only_with_its_results(service):
    events = [e async for e in service.start(ends_in_end(), {"items": ["a", "b", "c"]})]

    finished = events[-1]
    assert finished.type == "run_finished", finished
    assert finished.outputs == {"lines": ["<a>", "<b>", "<c>"], "aside": "[<aside>]", "title": "<title>"}
    sent = deltas(events)
    assert sent[:4] == [("end", '["<a>", "<b>", "<c>"]'), ("end", "\n"), ("end", "[<aside>]"), ("end", "\n")]
    assert {node_id for node_id, _t in sent[4:]} == {"title"} and len(sent) > 5, "the title token by token"
    answer = '["<a>", "<b>", "<c>"]\n[<aside>]\n<title>'
    assert "".join(text for _n, text in sent) == answer == finished.answer
    state = await service.state("default", events[0].run_id)
    assert state.outputs == finished.outputs and state.answer == answer


async def test_answer_nodes_stream_the_answer_and_an_unread_llm_answers_directly_without_an_end(service):
    doc = build([node("each", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "line.answer"}}),
                 chat("line", "{{ each.item }}", parent="each"),
                 node("say", "answer", {"text": " done: {{ each.count }}"})],
                [edge("start", "each"), edge("each", "say")], inputs=[{"name": "items", "type": "array"}])
    events = [e async for e in service.start(doc, {"items": ["a", "b"]})]
    assert events[-1].type == "run_finished" and events[-1].answer == "<a><b> done: 2"
    with_end = build([*doc["nodes"][1:], node("end", "end", {"outputs": [{"name": "n", "value": {"ref": "each.count"}}]})],
                     [*doc["edges"], edge("say", "end")], inputs=doc["inputs"])
    events = [e async for e in service.start(with_end, {"items": ["a", "b"]})]
    assert events[-1].type == "run_finished" and events[-1].answer == " done: 2", "the answer node speaks, alone"
    assert {node_id for node_id, _t in deltas(events)} == {"say"}
