"""What a workflow that ends in End nodes streams (engine/answers.py rule 6): each End
node's outputs in their order, a line break between two, each part as soon as its value
is ready - an LLM's text token by token - and only the End nodes that run. LLM nodes talk
to the scripted OpenAI server over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from engine import RunDeps, run_workflow
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (  # noqa: F401  (fixtures)
    delay,
    finish,
    openai_server,
    reply,
    scripted_registry,
    text,
    text_reply,
    usage,
)
from tests.support.workflows import build, chain_edges, edge, node

pytestmark = pytest.mark.asyncio


def chunks_reply(*chunks: str, pause: float = 0.02) -> Any:
    """A streamed reply of exactly ``chunks``, ``pause`` seconds apart."""
    steps: list[Any] = []
    for piece in chunks:
        steps += [text(piece), delay(pause)]
    return reply(*steps, finish(), usage(10, 5))


def by_prompt(replies: dict[str, Any]):
    def respond(body: dict[str, Any]) -> Any:
        return replies[body["messages"][-1]["content"]]
    return respond


def chat(node_id: str, prompt: str) -> dict[str, Any]:
    return node(node_id, "chat", {"model": "plain-model", "user_prompt": prompt})


def end(node_id: str, **outputs: Any) -> dict[str, Any]:
    return node(node_id, "end", {"outputs": [{"name": k, "value": v} for k, v in outputs.items()]})


async def run(doc: dict[str, Any], registry: Any, inputs: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    plan = compile_workflow(doc, models=registry, use_cache=False)
    state = await run_workflow(plan, inputs or {}, deps=RunDeps(on_event=events.append, models=registry))
    assert state.status is RunStatus.succeeded, state.error
    deltas = [e for e in events if e.type == "node_delta" and e.channel == "answer"]
    assert state.answer == "".join(e.text for e in deltas) == events[-1].answer
    return state, events


def deltas(events: list[Any]) -> list[tuple[str, str | None, str]]:
    """``(node id, output, text)`` of each answer delta, in order."""
    return [(e.node_id, e.output, e.text) for e in events if e.type == "node_delta" and e.channel == "answer"]


def index_of(events: list[Any], kind: str, node_id: str) -> int:
    return next(i for i, e in enumerate(events) if e.type == kind and getattr(e, "node_id", None) == node_id)


def first_delta(events: list[Any], text: str) -> int:
    return next(i for i, e in enumerate(events) if e.type == "node_delta" and e.text == text)


async def test_an_llm_an_end_output_reads_streams_token_by_token_while_it_runs(openai_server, scripted_registry):
    openai_server.script(chunks_reply("Hel", "lo ", "there"))
    doc = build([chat("llm", "hi"), end("end", reply={"ref": "llm.answer"})], chain_edges("start", "llm", "end"))

    state, events = await run(doc, scripted_registry)

    assert deltas(events) == [("llm", "reply", "Hel"), ("llm", "reply", "lo "), ("llm", "reply", "there")]
    assert first_delta(events, "there") < index_of(events, "node_finished", "llm"), "live, not after the call"
    assert state.outputs == {"reply": "Hello there"}


async def test_two_end_outputs_stream_in_the_end_nodes_order_not_in_finishing_order(openai_server, scripted_registry):
    openai_server.responder = by_prompt({"slow": chunks_reply("a1", "a2", pause=0.05), "fast": text_reply("b!")})
    doc = build([chat("a", "slow"), chat("b", "fast"),
                 end("end", first={"ref": "a.answer"}, second={"ref": "b.answer"})],
                [edge("start", "a"), edge("start", "b"), edge("a", "end"), edge("b", "end")])

    state, events = await run(doc, scripted_registry)

    assert index_of(events, "node_finished", "b") < index_of(events, "node_finished", "a"), "b answers first"
    assert deltas(events) == [("a", "first", "a1"), ("a", "first", "a2"), ("end", None, "\n"), ("b", "second", "b!")]
    assert first_delta(events, "a1") < index_of(events, "node_finished", "a")
    assert state.answer == "a1a2\nb!"


async def test_an_end_output_that_is_not_an_llm_is_sent_when_its_value_is_ready(openai_server, scripted_registry):
    openai_server.script(chunks_reply("L1", "L2"))
    doc = build([node("shape", "template", {"template": "<{{ inputs.q }}>"}), chat("llm", "go"),
                 end("end", shaped={"ref": "shape.output"}, asked={"ref": "inputs.q"}, said={"ref": "llm.answer"},
                     count={"ref": "vars.n"}, data={"ref": "shape.output"})],
                chain_edges("start", "shape", "llm", "end"),
                inputs=[{"name": "q", "type": "string"}], variables=[{"name": "n", "type": "number", "default": 3}])

    state, events = await run(doc, scripted_registry, {"q": "why"})

    assert deltas(events) == [("end", "shaped", "<why>"), ("end", None, "\n"), ("end", "asked", "why"),
                              ("end", None, "\n"), ("llm", "said", "L1"), ("llm", "said", "L2"),
                              ("end", None, "\n"), ("end", "count", "3"), ("end", None, "\n"),
                              ("end", "data", "<why>")]
    assert first_delta(events, "<why>") < index_of(events, "node_started", "llm"), "the template's value at once"
    assert first_delta(events, "3") > index_of(events, "node_started", "end"), "a run variable: with the End"


async def test_objects_print_as_json_and_a_skipped_value_as_its_default(openai_server, scripted_registry):
    doc = build([node("gate", "if_else", {"cases": [{"id": "yes", "conditions": [
                    {"left": {"ref": "inputs.go"}, "operator": "equals", "right": True}]}]}),
                 node("maybe", "template", {"template": "ran"}),
                 node("end", "end", {"outputs": [
                     {"name": "obj", "value": {"ref": "inputs.obj"}},
                     {"name": "maybe", "value": {"ref": "maybe.output"}, "default": "fallback"}]})],
                [edge("start", "gate"), edge("gate", "maybe", "yes"), edge("maybe", "end"), edge("gate", "end", "else")],
                inputs=[{"name": "go", "type": "boolean"}, {"name": "obj", "type": "object"}])

    state, events = await run(doc, scripted_registry, {"go": False, "obj": {"k": [1, "é"]}})

    assert state.outputs == {"obj": {"k": [1, "é"]}, "maybe": "fallback"}
    assert state.answer == '{"k": [1, "é"]}\nfallback'


async def test_only_the_end_node_of_the_branch_taken_streams(openai_server, scripted_registry):
    openai_server.script(chunks_reply("yes ", "reply"))
    doc = build([node("gate", "if_else", {"cases": [{"id": "yes", "conditions": [
                    {"left": {"ref": "inputs.go"}, "operator": "equals", "right": True}]}]}),
                 chat("llm", "q"),
                 end("end_yes", said={"ref": "llm.answer"}, q={"ref": "inputs.go"}),
                 end("end_no", note="not asked", q={"ref": "inputs.go"})],
                [edge("start", "gate"), edge("gate", "llm", "yes"), edge("llm", "end_yes"),
                 edge("gate", "end_no", "else")],
                inputs=[{"name": "go", "type": "boolean"}])

    state, events = await run(doc, scripted_registry, {"go": True})
    assert deltas(events) == [("llm", "said", "yes "), ("llm", "said", "reply"), ("end_yes", None, "\n"),
                              ("end_yes", "q", "true")]

    state, events = await run(doc, scripted_registry, {"go": False})
    assert deltas(events) == [("end_no", "note", "not asked"), ("end_no", None, "\n"), ("end_no", "q", "false")]
    assert state.outputs == {"note": "not asked", "q": False}
