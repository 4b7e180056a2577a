"""An imported Dify workflow streams its End outputs as Dify does: in the End node's order,
a line break between two, a start variable at once, an LLM's text token by token (the
LLM against the scripted OpenAI server), only the End node of the branch taken."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.catalog import import_workflow
from tests.support.openai_server import delay, finish, reply, text, usage

from . import dify_docs as dd
from .helpers import DIFY, load, needs_corpus, run


def deltas(events: list[Any]) -> list[tuple[str, str | None, str]]:
    return [(e.node_id, e.output, e.text) for e in events if e.type == "node_delta" and e.channel == "answer"]


def query_then_llm() -> dict[str, Any]:
    """start(query) -> llm -> end(query, text): Dify's own streaming example's shape."""
    return dd.app([
        dd.node("start", "start", variables=[{"variable": "query", "label": "Query", "type": "paragraph",
                                              "required": True}]),
        dd.node("llm", "llm", model=dd.model(), context={"enabled": False},
                prompt_template=[{"role": "system", "text": "Be brief."},
                                 {"role": "user", "text": "{{#start.query#}}"}]),
        dd.node("end", "end", outputs=[{"variable": "query", "value_selector": ["start", "query"]},
                                       {"variable": "text", "value_selector": ["llm", "text"]}]),
    ], [dd.edge("start", "llm"), dd.edge("llm", "end")])


async def test_an_imported_workflow_streams_its_end_outputs_in_order(openai_server, scripted_registry):
    result = import_workflow(query_then_llm(), models=scripted_registry, model_map={"*": "plain-model"})
    openai_server.script(reply(text("Fine, "), delay(0.02), text("thanks."), finish(), usage(10, 5)))

    state, events = await run(result, {"query": "How are you?"}, registry=scripted_registry)

    assert state.status == "succeeded", state.error
    assert deltas(events) == [("end", "query", "How are you?"), ("end", None, "\n"),
                              ("llm", "text", "Fine, "), ("llm", "text", "thanks.")]
    llm_done = next(i for i, e in enumerate(events) if e.type == "node_finished" and e.node_id == "llm")
    first = next(i for i, e in enumerate(events) if e.type == "node_delta")
    assert first < llm_done, "the query goes out before the LLM has finished"
    assert state.outputs == {"query": "How are you?", "text": "Fine, thanks."}
    assert events[-1].answer == "How are you?\nFine, thanks."


@needs_corpus
@pytest.mark.parametrize("query, end, output", [("hello there", "1754154034161", "true"),
                                                ("good bye", "1754217363584", "false")])
async def test_only_the_end_node_of_the_branch_taken_streams(query, end, output):
    state, events = await run(load(DIFY / "conditional_hello_branching_workflow.yml"), {"query": query})

    assert state.status == "succeeded", state.error
    assert deltas(events) == [(end, output, query)]
