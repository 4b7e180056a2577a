"""Running one node on its own ("run this step"): what the node reads, the values given
or taken from its last run, the one node executed through the normal path (its model
call and usage recorded), the run stored as a single-node run, and a missing value
refused by name. Through the run service over the real SQL stores (SQLite file and
PostgreSQL); the chat node talks to the scripted OpenAI server over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from engine.single_node import MissingNodeInputs, NodeRunRefused, read_references
from schemas.types import NodeRunStatus, RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import text_reply
from tests.support.workflows import build, edge, node

CALL_IN, CALL_OUT = 10, 5  # text_reply's default usage


@pytest.fixture
def service(model_service, openai_server) -> Any:
    openai_server.responder = lambda body: text_reply(f"re: {body['messages'][-1]['content']}")
    return model_service


def flow() -> dict[str, Any]:
    """start(city) -> shout (template) -> ask (chat reading shout and the city) -> end;
    ``each`` iterates over the input list with a template in its body."""
    return build(
        [node("shout", "template", {"template": "{{ inputs.city | upper }}!"}),
         node("ask", "chat", {"model": "plain-model", "user_prompt": "Weather in {{ shout.output }} ({{ start.city }})?"}),
         node("each", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "line.output"}}),
         node("line", "template", {"template": "{{ each.item }} of {{ shout.output }}"}, parent="each"),
         node("end", "end", {"outputs": [{"name": "answer", "value": {"ref": "ask.answer"}}]})],
        [edge("start", "shout"), edge("shout", "ask"), edge("ask", "each"), edge("each", "end")],
        inputs=[{"name": "city", "type": "string"}, {"name": "items", "type": "array", "default": ["a"]}])


def test_the_references_a_node_reads_are_listed_by_key(scripted_registry):
    plan = compile_workflow(flow(), models=scripted_registry)
    assert [r.key for r in read_references(plan, "ask")] == ["sys.history", "shout.output", "start.city"]
    assert read_references(plan, "ask")[0].optional, "a system variable every run has needs no value"
    assert [r.key for r in read_references(plan, "shout")] == ["inputs.city"]
    # a container reads what its body reads from outside it; a body node reads its container's item
    assert [r.key for r in read_references(plan, "each")] == ["inputs.items", "shout.output"]
    assert [r.key for r in read_references(plan, "line")] == ["each.item", "shout.output"]
    assert read_references(plan, "each")[0].optional, "an input with a default needs no value"


async def test_a_node_runs_alone_with_given_values_and_is_recorded_as_a_single_node_run(service, openai_server):
    state, events = await service.run_node("default", flow(), "ask", {"shout.output": "PARIS!", "start.city": "Paris"})
    events = [e async for e in events]
    assert events[-1].type == "run_finished", events[-1]
    assert len(openai_server.bodies) == 1, "only the one node's model call is made"
    assert openai_server.bodies[0]["messages"][-1]["content"] == "Weather in PARIS! (Paris)?"
    assert {e.node_id for e in events if e.type == "node_started"} == {"ask"}

    done = await service.state("default", state.run_id)
    assert done.status is RunStatus.succeeded
    assert done.sys["run_kind"] == "single_node" and done.sys["single_node"] == "ask"
    ask = done.node_runs["ask"]
    assert ask.status is NodeRunStatus.succeeded and ask.outputs["answer"] == "re: Weather in PARIS! (Paris)?"
    assert ask.usage is not None and ask.usage.calls == 1
    assert done.node_runs["shout"].data == {"given": True}, "a given value is marked, not executed"
    assert "end" not in done.node_runs and "each" not in done.node_runs, "nothing after the node runs"
    summary = await service.get("default", state.run_id)
    assert (summary.tokens_in, summary.tokens_out) == (CALL_IN, CALL_OUT), "its usage counts in the run's totals"
    listed = await service.list("default", workflow_id="wf")
    assert [(r.run_id, r.kind, r.node_id) for r in listed] == [(state.run_id, "single_node", "ask")]


async def test_a_missing_value_is_refused_naming_the_reference_and_nothing_is_stored(service, openai_server):
    with pytest.raises(MissingNodeInputs) as caught:
        await service.run_node("default", flow(), "ask", {"shout.output": "X"})
    assert caught.value.missing == ["start.city"] and "'start.city'" in str(caught.value)
    with pytest.raises(NodeRunRefused, match="did you mean 'ask'"):
        await service.run_node("default", flow(), "aks", {})
    assert await service.list("default") == []
    assert openai_server.bodies == []


async def test_values_left_out_come_from_the_nodes_last_run(service, openai_server):
    full = [e async for e in service.start(flow(), {"city": "Oslo", "items": ["x"]})]
    assert full[-1].type == "run_finished", full[-1]
    last = await service.last_node_run("default", "wf", "ask", flow())
    assert last is not None and last.run_id == full[0].run_id
    assert last.values == {"shout.output": "OSLO!", "start.city": "Oslo"}
    assert last.node_run.outputs["answer"] == "re: Weather in OSLO! (Oslo)?"

    state, events = await service.run_node("default", flow(), "ask", {"start.city": "Bergen"}, from_last=True)
    assert [e async for e in events][-1].type == "run_finished"
    assert openai_server.bodies[-1]["messages"][-1]["content"] == "Weather in OSLO! (Bergen)?"
    # the single-node run is now the node's last run
    assert (await service.last_node_run("default", "wf", "ask", flow())).run_id == state.run_id


async def test_a_failing_node_ends_the_run_failed_with_its_error(service, openai_server):
    doc = build([node("boom", "template", {"template": "{{ shout.output.nope }}"}),
                 node("shout", "template", {"template": "x"})],
                [edge("start", "shout"), edge("shout", "boom")])
    state, events = await service.run_node("default", doc, "boom", {"shout.output": "plain"})
    events = [e async for e in events]
    assert events[-1].type == "run_failed" and events[-1].error.node_id == "boom"
    done = await service.state("default", state.run_id)
    assert done.node_runs["boom"].status is NodeRunStatus.failed


async def test_a_body_node_runs_alone_with_its_containers_item(service, openai_server):
    state, events = await service.run_node("default", flow(), "line", {"each.item": "b", "shout.output": "ROME!"})
    assert [e async for e in events][-1].type == "run_finished"
    done = await service.state("default", state.run_id)
    assert done.node_runs["line"].outputs == {"output": "b of ROME!"}


async def test_a_container_runs_alone_with_its_body(service, openai_server):
    state, events = await service.run_node("default", flow(), "each", {"inputs.items": ["x", "y"], "shout.output": "OK"})
    assert [e async for e in events][-1].type == "run_finished"
    done = await service.state("default", state.run_id)
    assert done.outputs["results"] == ["x of OK", "y of OK"], "a single-node run's outputs are the node's"
    assert [r["index"] for r in done.node_runs["each"].data["items"]] == [0, 1]
