"""The answer stream a person sees (engine/answers.py): template order, LLM tokens live
when they are the next segment, nothing sent twice, the run's answer = what was sent.
LLM nodes talk to the scripted OpenAI server over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from engine import RunDeps, run_workflow
from schemas.types import RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (  # noqa: F401  (fixtures)
    delay,
    finish,
    http_error,
    openai_server,
    reply,
    scripted_registry,
    text,
    text_reply,
    usage,
)
from tests.support.workflows import build, chain_edges, edge, node

pytestmark = pytest.mark.asyncio


def slow_reply(answer: str, *, chunk: int = 3, pause: float = 0.03) -> Any:
    """``answer`` in chunks of ``chunk`` characters, ``pause`` seconds apart."""
    steps: list[Any] = []
    for i in range(0, len(answer), chunk):
        steps += [text(answer[i:i + chunk]), delay(pause)]
    return reply(*steps, finish(), usage(10, 5))


def by_prompt(replies: dict[str, Any]):
    """A responder picking the reply by the request's last user message."""
    def respond(body: dict[str, Any]) -> Any:
        return replies[body["messages"][-1]["content"]]
    return respond


def chat(node_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return node(node_id, "chat", {"model": "plain-model", "user_prompt": prompt}, **fields)


async def run(doc: dict[str, Any], registry: Any, inputs: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    plan = compile_workflow(doc, models=registry, use_cache=False)
    state = await run_workflow(plan, inputs or {}, deps=RunDeps(on_event=events.append, models=registry))
    return state, events


def answer_deltas(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == "node_delta" and e.channel == "answer"]


def streamed(events: list[Any]) -> str:
    return "".join(e.text for e in answer_deltas(events))


def check_invariant(state: Any, events: list[Any]) -> None:
    """The run's answer (state and event) is exactly the concatenation of what was sent."""
    assert state.answer == streamed(events)
    if state.status is RunStatus.succeeded:
        assert events[-1].type == "run_finished" and events[-1].answer == state.answer


async def test_two_parallel_llms_in_one_template_stream_in_template_order_once(openai_server, scripted_registry):
    # b finishes long before a: its text waits (buffered) until a's part is complete
    openai_server.responder = by_prompt({"qa": slow_reply("alpha beta gamma", pause=0.04),
                                         "qb": text_reply("BBB fast", chunk_size=2)})
    doc = build([chat("a", "qa"), chat("b", "qb"),
                 node("say", "answer", {"text": "A: {{ a.answer }} | B: {{ b.answer }}."})],
                [edge("start", "a"), edge("start", "b"), edge("a", "say"), edge("b", "say")])
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "A: alpha beta gamma | B: BBB fast." == state.node_runs["say"].outputs["answer"]
    check_invariant(state, events)
    sources = [e.node_id for e in answer_deltas(events)]
    # literal, a's tokens live (several), literal, then b's whole buffered text, then the rest
    assert sources[0] == "say" and sources.count("a") > 2 and sources.count("b") == 1
    assert sources.index("b") > max(i for i, s in enumerate(sources) if s == "a"), "never interleaved"
    # a's tokens were sent while a was still running (live), not when it finished
    a_done = next(i for i, e in enumerate(events) if e.type == "node_finished" and e.node_id == "a")
    first_a = next(i for i, e in enumerate(events) if e.type == "node_delta" and e.node_id == "a")
    assert first_a < a_done


async def test_the_second_llm_streams_live_once_the_first_segment_is_complete(openai_server, scripted_registry):
    openai_server.responder = by_prompt({"qa": text_reply("quick", chunk_size=2),
                                         "qb": slow_reply("slow and steady", pause=0.04)})
    doc = build([chat("a", "qa"), chat("b", "qb"), node("say", "answer", {"text": "{{ a.answer }}/{{ b.answer }}"})],
                [edge("start", "a"), edge("start", "b"), edge("a", "say"), edge("b", "say")])
    state, events = await run(doc, scripted_registry)
    assert state.answer == "quick/slow and steady"
    check_invariant(state, events)
    b_done = next(i for i, e in enumerate(events) if e.type == "node_finished" and e.node_id == "b")
    live_b = [i for i, e in enumerate(events) if e.type == "node_delta" and e.node_id == "b" and i < b_done]
    assert len(live_b) > 2, "b's tokens are sent live once a's part is done"


async def test_llm_then_literal_text_is_sent_after_the_tokens_and_not_again(openai_server, scripted_registry):
    openai_server.script(text_reply("Five days.", chunk_size=2))
    doc = build([chat("a", "q"), node("say", "answer", {"text": "{{ a.answer }}\n-- support"})],
                chain_edges("start", "a", "say"))
    state, events = await run(doc, scripted_registry)
    assert state.answer == "Five days.\n-- support"
    check_invariant(state, events)
    texts = [e.text for e in answer_deltas(events)]
    assert texts[-1] == "\n-- support" and "".join(texts[:-1]) == "Five days." and len(texts) > 3


async def test_two_answer_nodes_follow_the_workflow_order_not_finishing_order(openai_server, scripted_registry):
    openai_server.responder = by_prompt({"qa": slow_reply("first", pause=0.05), "qb": text_reply("second")})
    doc = build([chat("a", "qa"), chat("b", "qb"), node("sa", "answer", {"text": "[{{ a.answer }}]"}),
                 node("sb", "answer", {"text": "[{{ b.answer }}]"})],
                [edge("start", "a"), edge("start", "b"), edge("a", "sa"), edge("b", "sb")])
    state, events = await run(doc, scripted_registry)
    assert state.answer == "[first][second]"
    check_invariant(state, events)


async def test_template_parts_that_cannot_be_split_are_sent_when_the_answer_renders(openai_server, scripted_registry):
    openai_server.script(text_reply("hello world"))
    doc = build([chat("a", "q"), node("say", "answer", {"text": "{{ a.answer }}! {{ a.answer | upper }}"})],
                chain_edges("start", "a", "say"))
    state, events = await run(doc, scripted_registry)
    assert state.answer == "hello world! HELLO WORLD"
    check_invariant(state, events)
    assert answer_deltas(events)[-1].node_id == "say" and answer_deltas(events)[-1].text == "HELLO WORLD"


async def test_answers_inside_an_iteration_are_all_in_the_answer_in_item_order(openai_server, scripted_registry):
    # items run 3 at a time; item 0 is the slowest, yet its text comes first
    openai_server.responder = by_prompt({"x0": slow_reply("zero", pause=0.05), "x1": text_reply("one"),
                                         "x2": text_reply("two")})
    doc = build([node("it", "iteration", {"items": ["x0", "x1", "x2"], "collect": {"ref": "c.answer"},
                                          "concurrency": 3}),
                 node("c", "chat", {"model": "plain-model", "user_prompt": "{{ it.item }}"}, parent="it"),
                 node("say", "answer", {"text": "{{ it.index }}={{ c.answer }};"}, parent="it"),
                 node("end_text", "answer", {"text": " done"})],
                [edge("c", "say"), edge("start", "it"), edge("it", "end_text")])
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "0=zero;1=one;2=two; done"
    check_invariant(state, events)
    item0 = [e for e in answer_deltas(events) if e.node_id == "c" and e.iteration == 0]
    assert len(item0) > 1, "the current item's tokens are live"


async def test_answers_of_every_loop_round_are_kept(scripted_registry):
    doc = build([node("lp", "loop", {"variables": [{"name": "n", "value": 0, "type": "number"}],
                                     "update": [{"variable": "n", "value": {"ref": "bump.n"}}],
                                     "break_when": [{"left": {"ref": "lp.n"}, "operator": "gte", "right": 3}]}),
                 node("bump", "code", {"code": "def main(n):\n    return {'n': n + 1}",
                                       "inputs": [{"name": "n", "value": {"ref": "lp.n"}}],
                                       "outputs": [{"name": "n", "type": "number"}]}, parent="lp"),
                 node("say", "answer", {"text": "round {{ lp.index }} "}, parent="lp")],
                [edge("start", "lp"), edge("bump", "say")])
    doc["nodes"] = [n for n in doc["nodes"] if n["id"] != "bump"]  # a template keeps the test free of sandboxes
    doc["nodes"].append(node("bump", "template", {"template": "{{ lp.n + 1 }}"}, parent="lp"))
    doc["nodes"][1]["config"]["update"] = [{"variable": "n", "value": {"ref": "lp.index"}}]
    doc["nodes"][1]["config"]["break_when"] = [{"left": {"ref": "lp.index"}, "operator": "gte", "right": 3}]
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "round 0 round 1 round 2 "
    check_invariant(state, events)


async def test_back_edge_loop_rounds_stream_their_answers(scripted_registry):
    doc = build([node("poll", "variable_update", {"updates": [{"variable": "count", "operation": "add", "value": 1}]}),
                 node("tick", "answer", {"text": "{{ vars.count }},"}),
                 node("check", "if_else", {"cases": [{"id": "ready", "conditions": [
                     {"left": {"ref": "vars.count"}, "operator": "gte", "right": 3}]}]}),
                 node("done", "answer", {"text": " ready"})],
                [edge("start", "poll"), edge("poll", "tick"), edge("tick", "check"), edge("check", "done", "ready"),
                 edge("check", "poll", "else", edge_id="back")],
                variables=[{"name": "count", "type": "number", "default": 0}])
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer == "1,2,3, ready"
    check_invariant(state, events)


async def test_end_outputs_of_a_workflow_without_answers_are_streamed(openai_server, scripted_registry):
    openai_server.responder = by_prompt({"qa": slow_reply("from a", pause=0.02), "qb": text_reply("from b")})
    doc = build([chat("a", "qa"), chat("b", "qb"),
                 node("end", "end", {"outputs": [{"name": "x", "value": {"ref": "a.answer"}},
                                                 {"name": "y", "value": {"ref": "b.answer"}},
                                                 {"name": "z", "value": 7}]})],
                [edge("start", "a"), edge("start", "b"), edge("a", "end"), edge("b", "end")])
    state, events = await run(doc, scripted_registry)
    assert state.outputs == {"x": "from a", "y": "from b", "z": 7}
    assert state.answer == "from a\nfrom b\n7", "every output, in order, a line break between two"
    check_invariant(state, events)
    assert [(e.node_id, e.output) for e in answer_deltas(events)][-3:] == [("b", "y"), ("end", None), ("end", "z")]


async def test_an_answer_on_a_branch_not_taken_sends_nothing(openai_server, scripted_registry):
    openai_server.script(text_reply("yes branch"))
    doc = build([node("gate", "if_else", {"cases": [{"id": "yes", "conditions": [
                    {"left": {"ref": "inputs.go"}, "operator": "equals", "right": True}]}]}),
                 chat("a", "q"), node("say_yes", "answer", {"text": "Y: {{ a.answer }}"}),
                 node("say_no", "answer", {"text": "N"})],
                [edge("start", "gate"), edge("gate", "a", "yes"), edge("a", "say_yes"), edge("gate", "say_no", "else")],
                inputs=[{"name": "go", "type": "boolean"}])
    state, events = await run(doc, scripted_registry, {"go": False})
    assert state.answer == "N"
    check_invariant(state, events)


async def test_a_failing_branch_keeps_what_was_sent_and_drops_what_was_buffered(openai_server, scripted_registry):
    # b fails after a streamed some tokens; b's part never comes, the run fails, and the
    # answer streamed so far is exactly the text sent
    openai_server.responder = by_prompt({"qa": slow_reply("partial text", pause=0.05),
                                         "qb": http_error(400, "bad request")})
    doc = build([chat("a", "qa"), chat("b", "qb"), node("say", "answer", {"text": "{{ a.answer }}|{{ b.answer }}"})],
                [edge("start", "a"), edge("start", "b"), edge("a", "say"), edge("b", "say")])
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.failed and state.error.node_id == "b"
    check_invariant(state, events)
    assert "|" not in state.answer and "partial text".startswith(state.answer)


async def test_error_branch_answer_follows_a_failed_llm(openai_server, scripted_registry):
    openai_server.script(http_error(400, "bad request"))
    doc = build([chat("a", "q", error_strategy="error_branch"), node("ok", "answer", {"text": "OK {{ a.answer }}"}),
                 node("sorry", "answer", {"text": "Sorry: {{ a.error.message }}"})],
                [edge("start", "a"), edge("a", "ok"), edge("a", "sorry", "error")])
    state, events = await run(doc, scripted_registry)
    assert state.status is RunStatus.succeeded, state.error
    assert state.answer.startswith("Sorry: ") and "OK" not in state.answer
    check_invariant(state, events)



async def test_a_paused_run_resumed_elsewhere_sends_the_rest_once(openai_server, scripted_registry):
    from engine import resume_run
    from schemas.run import RunState

    # a and b run at the same time: answer by prompt, not by arrival order
    replies = {"q1": "Tea is ready.", "q2": "Enjoy."}
    openai_server.responder = lambda body: text_reply(replies[body["messages"][-1]["content"]])
    doc = build([chat("a", "q1"), node("intro", "answer", {"text": "{{ a.answer }} "}),
                 node("ask", "user_select", {"description": "More?", "options": [{"id": "yes", "label": "Yes"},
                                                                             {"id": "no", "label": "No"}]}),
                 node("buffered", "answer", {"text": "[{{ b.answer }}]"}), chat("b", "q2")],
                [edge("start", "a"), edge("a", "intro"), edge("intro", "ask"), edge("start", "b"),
                 edge("ask", "buffered", "yes"), edge("b", "buffered")])
    plan = compile_workflow(doc, models=scripted_registry, use_cache=False)
    first: list[Any] = []
    state = await run_workflow(plan, {}, deps=RunDeps(on_event=first.append, models=scripted_registry))
    assert state.status is RunStatus.paused and state.answer == "Tea is ready. " == streamed(first)
    restored = RunState.model_validate_json(state.model_dump_json())  # another process
    (iid,) = restored.interrupts
    second: list[Any] = []
    final = await resume_run(plan, restored, answers={iid: "yes"},
                             deps=RunDeps(on_event=second.append, models=scripted_registry))
    assert final.status is RunStatus.succeeded, final.error
    assert streamed(second) == "[Enjoy.]", "b's text, buffered before the pause, is sent once after it"
    assert final.answer == streamed(first) + streamed(second) == "Tea is ready. [Enjoy.]"


async def test_text_after_a_form_waits_for_its_answer(scripted_registry):
    from engine import resume_run

    # The answer is reachable without the form too (the other branch), so only the form
    # itself can hold its literal prefix back until the person has answered.
    doc = build([node("ask", "user_select", {"description": "Ok?", "options": [{"id": "ok", "label": "Ok"},
                                                                           {"id": "change", "label": "Change"}]}),
                 node("details", "form_input", {"description": "How many?",
                                                "fields": [{"name": "n", "label": "N", "type": "number"}]}),
                 node("pick", "variable_aggregator", {"type": "number",
                                                      "refs": [{"ref": "details.n"}, {"ref": "inputs.n"}]}),
                 node("placed", "answer", {"text": "Placed: {{ pick.output }}."})],
                [edge("start", "ask"), edge("ask", "pick", "ok"), edge("ask", "details", "change"),
                 edge("details", "pick"), edge("pick", "placed")], inputs=[{"name": "n", "type": "number", "default": 1}])
    plan = compile_workflow(doc, models=scripted_registry, use_cache=False)
    first: list[Any] = []
    state = await run_workflow(plan, {}, deps=RunDeps(on_event=first.append, models=scripted_registry))
    (iid,) = state.interrupts
    second: list[Any] = []
    state = await resume_run(plan, state, answers={iid: "change"},
                             deps=RunDeps(on_event=second.append, models=scripted_registry))
    assert state.status is RunStatus.paused
    assert streamed(second) == "", "nothing after the form is shown before the form is answered"
    (iid,) = state.interrupts
    third: list[Any] = []
    final = await resume_run(plan, state, answers={iid: {"n": 3}},
                             deps=RunDeps(on_event=third.append, models=scripted_registry))
    assert final.status is RunStatus.succeeded and streamed(third) == "Placed: 3." == final.answer


async def test_an_llm_no_template_reads_answers_directly_then_the_answer_follows(openai_server, scripted_registry):
    # FastGPT style: the chat node answers the person itself; the answer node adds text
    openai_server.script(text_reply("Direct reply.", chunk_size=3), text_reply("silent"))
    doc = build([chat("a", "q1"), chat("quiet", "q2", config_stream=False),
                 node("say", "answer", {"text": " (from the bot)"})],
                chain_edges("start", "a", "quiet", "say"))
    doc["nodes"][2]["config"]["stream"] = False
    doc["nodes"][2].pop("config_stream")
    state, events = await run(doc, scripted_registry)
    assert state.answer == "Direct reply. (from the bot)", "a node with streaming off shows nothing"
    check_invariant(state, events)
    assert len([e for e in answer_deltas(events) if e.node_id == "a"]) > 2
