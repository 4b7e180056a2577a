"""Every model call counts once in its run's totals, at any depth: inside an iteration,
a loop, an iteration inside an iteration, a loop drawn with back-edges, and in a run
that failed after the calls. Through the run service over the real SQL stores (SQLite
file and PostgreSQL); the LLM nodes talk to the scripted OpenAI server over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from engine.service import RunService, Stores
from engine.settings import Settings
from schemas.types import RunStatus
from tests.support.catalog import TEST_CATALOG
from tests.support.openai_server import text_reply
from tests.support.workflows import build, edge, node
from workers.sql import SqlStore

#: what one scripted call uses (text_reply's default usage) and costs on ``plain-model``
#: (0.0005 / 0.0015 per 1k tokens)
CALL_IN, CALL_OUT = 10, 5
CALL_COST = CALL_IN * 0.0005 / 1000 + CALL_OUT * 0.0015 / 1000


@pytest.fixture
def service(model_service, openai_server) -> Any:
    openai_server.responder = lambda body: text_reply(f"re: {body['messages'][-1]['content']}")
    return model_service


def chat(node_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return node(node_id, "chat", {"model": "plain-model", "user_prompt": prompt}, **fields)


def nested_calls() -> dict[str, Any]:
    """1 call at the top, 3 in an iteration, 2 in a loop, 2 x 2 in an iteration inside an
    iteration, 2 rounds of a back-edge loop: 12 calls."""
    return build(
        [chat("top", "top"),
         node("each", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "ask.answer"},
                                    "concurrency": 2}),
         chat("ask", "{{ each.item }}", parent="each"),
         node("again", "loop", {"variables": [{"name": "n", "type": "number", "value": 0}],
                                "break_when": [{"left": {"ref": "again.rounds"}, "operator": "gte", "right": 2}]}),
         chat("think", "round {{ again.index }}", parent="again"),
         node("outer", "iteration", {"items": [1, 2], "collect": {"ref": "inner.results"}}),
         node("inner", "iteration", {"items": ["a", "b"], "collect": {"ref": "deep.answer"}}, parent="outer"),
         chat("deep", "{{ outer.item }}{{ inner.item }}", parent="inner"),
         node("poll", "variable_update", {"updates": [{"variable": "count", "operation": "add", "value": 1}]}),
         chat("probe_llm", "poll {{ vars.count }}"),
         node("check", "if_else", {"cases": [{"id": "ready", "conditions": [
             {"left": {"ref": "vars.count"}, "operator": "gte", "right": 2}]}]}),
         node("end", "end", {"outputs": [{"name": "items", "value": {"ref": "each.results"}},
                                         {"name": "grid", "value": {"ref": "outer.results"}}]})],
        [edge("start", "top"), edge("top", "each"), edge("each", "again"), edge("again", "outer"),
         edge("outer", "poll"), edge("poll", "probe_llm"), edge("probe_llm", "check"),
         edge("check", "poll", "else", edge_id="back"), edge("check", "end", "ready")],
        inputs=[{"name": "items", "type": "array"}], variables=[{"name": "count", "type": "number", "default": 0}])


async def test_model_calls_at_every_depth_count_once_in_the_run_totals(service, openai_server):
    events = [e async for e in service.start(nested_calls(), {"items": ["x", "y", "z"]})]
    assert events[-1].type == "run_finished", events[-1]
    calls = len(openai_server.bodies)
    assert calls == 12

    summary = await service.get("default", events[0].run_id)
    assert (summary.tokens_in, summary.tokens_out) == (calls * CALL_IN, calls * CALL_OUT)
    assert summary.cost == pytest.approx(calls * CALL_COST)
    state = await service.state("default", events[0].run_id)
    assert state.usage_totals()[:2] == (calls * CALL_IN, calls * CALL_OUT)
    runs = state.node_runs
    assert runs["each"].usage.calls == 3 and runs["each"].usage.tokens_in == 3 * CALL_IN
    assert runs["again"].usage.calls == 2
    assert runs["outer"].usage.calls == 4, "an iteration inside an iteration counts once, in the outer one"
    assert runs["poll~loop"].usage is None, "a back-edge loop's rounds are node runs of the run: counted there"


async def test_model_calls_of_a_failed_iteration_still_count(service, openai_server):
    doc = build([node("each", "iteration", {"items": {"ref": "inputs.items"}, "collect": {"ref": "ask.answer"},
                                           "concurrency": 1}),
                 chat("ask", "{{ each.item }}", parent="each"),
                 node("broken", "probe", {"fail_times": 9}, parent="each")],
                [edge("start", "each"), edge("ask", "broken")], inputs=[{"name": "items", "type": "array"}])
    events = [e async for e in service.start(doc, {"items": ["x", "y"]})]
    assert events[-1].type == "run_failed" and events[-1].error.node_id == "each"
    summary = await service.get("default", events[0].run_id)
    assert summary.status is RunStatus.failed
    assert (summary.tokens_in, summary.tokens_out) == (CALL_IN, CALL_OUT), "the call before the failure was spent"


async def test_model_calls_of_graph_tools_and_workflow_tools_count_in_the_agents_run(database_url, tmp_path,
                                                                                       openai_server,
                                                                                       scripted_registry):
    import json

    from tests.nodes.agent.conftest import answer_reply, calls_reply

    child = build([chat("child_llm", "greet {{ inputs.person }}"),
                   node("out", "end", {"outputs": [{"name": "said", "value": {"ref": "child_llm.answer"}}]})],
                  [edge("start", "child_llm"), edge("child_llm", "out")], id="greeter",
                  inputs=[{"name": "person", "type": "string", "required": True}])
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "greeter.json").write_text(json.dumps(child))
    agent_replies = [calls_reply(("c1", "summarize", {"topic": "tea"}), ("c2", "greeter", {"person": "Ada"})),
                     answer_reply("done")]  # 20 + 10, then 30 + 5 tokens

    def respond(body: dict[str, Any]) -> Any:
        if body["model"] == "upstream-tools":
            return agent_replies.pop(0)
        return text_reply("a line")  # the graph tool's and the child workflow's calls: 10 + 5 each

    openai_server.responder = respond
    doc = build([node("agent", "tool_call", {"model": "tools-model", "user_prompt": "go", "stream": False,
                                             "tools": [{"node": "summarize_llm", "name": "summarize",
                                                        "parameters": [{"name": "topic", "type": "string"}],
                                                        "result": {"ref": "summarize_llm.answer"}}],
                                             "workflow_tools": [{"workflow": "greeter", "risk": "read"}]}),
                 chat("summarize_llm", "summarize {{ agent.args.topic }}", parent="agent"),
                 node("end", "end", {"outputs": [{"name": "answer", "value": {"ref": "agent.answer"}}]})],
                [edge("start", "agent"), edge("agent", "end")])
    store = await SqlStore.open(database_url)
    try:
        service = RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                             settings=Settings(home=tmp_path, workflow_path=[tmp_path / "tools"]),
                             models=scripted_registry)
        events = [e async for e in service.start(doc, {})]
        assert events[-1].type == "run_finished", events[-1]
        assert len(openai_server.bodies) == 4
        summary = await service.get("default", events[0].run_id)
        assert (summary.tokens_in, summary.tokens_out) == (20 + 30 + 2 * CALL_IN, 10 + 5 + 2 * CALL_OUT)
        state = await service.state("default", events[0].run_id)
        agent_run = state.node_runs["agent"]
        assert agent_run.usage.calls == 4
        assert agent_run.outputs["usage"]["tokens_in"] == 50, "the agent's own calls stay apart in its output"
        assert agent_run.outputs["cost"] == pytest.approx(agent_run.usage.cost), "its cost: model + tools"
    finally:
        await store.close()
