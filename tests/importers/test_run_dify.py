"""The Dify DSL examples of the corpus, imported and run end to end on the real engine
(the chatflow against the scripted OpenAI-compatible server; code in the real sandbox).
Expected outputs are the ones the files' own descriptions state."""

from __future__ import annotations

import pytest

from engine.settings import Settings
from tests.support.openai_server import text_reply

from .helpers import DIFY, answers, load, needs_corpus, run, statuses

pytestmark = needs_corpus

SETTINGS = Settings(http_allow=[], code_sandbox="bwrap", allow_unsandboxed_code=False)


def succeeded(state) -> None:
    assert state.status == "succeeded", (state.error, {k: (v.status, v.error) for k, v in state.node_runs.items()})


async def test_basic_chatflow(openai_server, scripted_registry, tmp_path):
    result = load(DIFY / "basic_chatflow.yml", models=scripted_registry, model_map={"*": "plain-model"})
    assert [(i.code, i.node_id) for i in result.report] == [("behaviour_difference", "llm")]  # the files reference
    openai_server.script(text_reply("Hi! How can I help you today?"))
    state, events = await run(result, registry=scripted_registry, tmp_path=tmp_path, query="Hello")
    succeeded(state)
    assert statuses(state) == {"1755189262236": "succeeded", "llm": "succeeded", "answer": "succeeded"}
    assert state.node_runs["answer"].outputs == {"answer": "Hi! How can I help you today?"}
    assert answers(events) == "Hi! How can I help you today?"  # shown once: by the answer node
    request = openai_server.bodies[0]
    assert request["temperature"] == 0.7
    assert request["messages"][-1] == {"role": "user", "content": "Hello\n\n"}


@pytest.mark.parametrize("query, taken, skipped, outputs", [
    ("hello there", "1754154034161", "1754217363584", {"true": "hello there"}),
    ("good bye", "1754217363584", "1754154034161", {"false": "good bye"}),
])
async def test_conditional_hello_branching(query, taken, skipped, outputs):
    result = load(DIFY / "conditional_hello_branching_workflow.yml")
    state, _ = await run(result, {"query": query})
    succeeded(state)
    assert statuses(state)[taken] == "succeeded" and statuses(state)[skipped] == "skipped"
    assert state.outputs == outputs


@pytest.mark.parametrize("switch1, switch2, group1, group2", [
    (1, 0, "switch 1 on", "switch 2 off"),
    (0, 1, "switch 1 off", "switch 2 on"),
])
async def test_dual_switch_variable_aggregator(switch1, switch2, group1, group2):
    result = load(DIFY / "dual_switch_variable_aggregator_workflow.yml")
    state, _ = await run(result, {"switch1": switch1, "switch2": switch2})
    succeeded(state)
    assert state.outputs == {"group1": group1, "group2": group2}
    on1, off1, on2, off2 = "1754405621378", "1754405636857", "1754405668235", "1754405680809"
    ran = {nid for nid, status in statuses(state).items() if status == "succeeded"}
    assert (on1 in ran) == bool(switch1) and (off1 in ran) != bool(switch1)
    assert (on2 in ran) == bool(switch2) and (off2 in ran) != bool(switch2)


async def test_increment_loop_with_break_condition():
    result = load(DIFY / "increment_loop_with_break_condition_workflow.yml")
    state, _ = await run(result)
    succeeded(state)
    assert state.outputs == {"num": 5}
    loop = state.node_runs["1754827949615"]
    assert loop.outputs["num"] == 5 and loop.outputs["rounds"] == 4
    assert statuses(state) == {"1754827922555": "succeeded", "1754827949615-init": "succeeded",
                               "1754827949615": "succeeded", "1754828005059": "succeeded"}


async def test_iteration_with_flattened_output():
    result = load(DIFY / "iteration_flatten_output_enabled_workflow.yml")
    state, _ = await run(result, settings=SETTINGS)
    succeeded(state)
    assert state.outputs == {"output": [1, 2, 2, 4, 3, 6]}
    assert state.node_runs["iteration_node"].outputs["results"] == [[1, 2], [2, 4], [3, 6]]
    assert statuses(state) == {"start_node": "succeeded", "code_node": "succeeded", "iteration_node": "succeeded",
                               "iteration_node-flatten": "succeeded", "end_node": "succeeded"}
