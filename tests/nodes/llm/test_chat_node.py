"""chat node through the real engine against the scripted OpenAI server."""

from __future__ import annotations

from typing import Any

import pytest

from engine import CompileError, NodeContext, NodeResult
from engine.catalog import KindSpec, NodeExecutor
from engine.errors import NodeFailed
from nodes.llm.chat import DEFAULT_QUOTE_TEMPLATES, SYSTEM_SEPARATOR, ChatNode, format_quote, recent_turns
from nodes.llm.model_registry import price
from schemas.nodes import NodeConfig, node_kind
from schemas.types import NodeRunStatus, RunStatus, VarType
from tests.support.catalog import compile_workflow, with_kinds
from tests.support.openai_server import http_error, reasoning_reply, text_reply
from tests.support.workflows import build, chain_edges, node

Q = "How do refunds work?"


def chat_doc(config: dict[str, Any], *, inputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    cfg = {"model": "plain-model", **config}
    return build([node("chat", "chat", cfg), node("end", "end", {"outputs": [
        {"name": "answer", "value": {"ref": "chat.answer"}}]})], chain_edges("start", "chat", "end"),
        inputs=inputs or [{"name": "query", "type": "string"}])


def deltas(events: list[Any], channel: str) -> list[str]:
    return [e.text for e in events if getattr(e, "type", "") == "node_delta" and e.channel == channel]


def history_of(turns: int) -> list[dict[str, str]]:
    out = []
    for i in range(1, turns + 1):
        out += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    return out


# ------------------------------------------------------------------ prompt assembly


async def test_system_prompt_joins_model_default_node_prompt_and_quote(openai_server, llm_run):
    openai_server.script(text_reply("Refunds take 5 days."))
    doc = chat_doc({"system_prompt": "You work for {{ inputs.shop }}.",
                    "quote": ["Refunds take 5 days.", {"q": "Who pays shipping?", "a": "We do."}]},
                   inputs=[{"name": "query", "type": "string"}, {"name": "shop", "type": "string"}])
    state, _ = await llm_run(doc, {"query": Q, "shop": "ACME"})
    assert state.status is RunStatus.succeeded, state.error
    body = openai_server.bodies[0]
    quote = "[1] Refunds take 5 days.\n\n[2] Who pays shipping?\nWe do."
    expected_quote = DEFAULT_QUOTE_TEMPLATES["system"].replace("{{ quote }}", quote)
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM_SEPARATOR.join(
            ["You are a terse assistant.", "You work for ACME.", expected_quote])},
        {"role": "user", "content": Q},
    ]
    assert SYSTEM_SEPARATOR == "\n\n===---===---===\n\n"
    assert state.outputs == {"answer": "Refunds take 5 days."}
    assert state.node_runs["chat"].data["chat"]["quote_role"] == "system"


async def test_empty_parts_are_skipped_and_no_system_message_without_any(openai_server, llm_run):
    openai_server.script(text_reply("a"), text_reply("b"))
    state, _ = await llm_run(chat_doc({"model": "tools-model", "quote": []}), {"query": Q})
    assert state.status is RunStatus.succeeded
    assert openai_server.bodies[0]["messages"] == [{"role": "user", "content": Q}]
    # only the node prompt: no separator
    state, _ = await llm_run(chat_doc({"model": "tools-model", "system_prompt": "Only me.", "quote": "  "}), {"query": Q})
    assert openai_server.bodies[1]["messages"][0] == {"role": "system", "content": "Only me."}


async def test_quote_role_user_puts_quote_in_user_message(openai_server, llm_run):
    openai_server.script(text_reply("ok"))
    state, _ = await llm_run(chat_doc({"quote": "Refunds take 5 days.", "quote_role": "user"}), {"query": Q})
    assert state.status is RunStatus.succeeded
    system, user = openai_server.bodies[0]["messages"]
    assert system == {"role": "system", "content": "You are a terse assistant."}
    assert user["content"] == (DEFAULT_QUOTE_TEMPLATES["user"].replace("{{ quote }}", "Refunds take 5 days.")
                               .replace("{{ question }}", Q))
    assert state.node_runs["chat"].data["chat"]["quote_role"] == "user"


async def test_quote_template_with_question_goes_to_user_even_when_role_is_system(openai_server, llm_run):
    openai_server.script(text_reply("ok"))
    cfg = {"quote": "K", "quote_role": "system", "quote_template": "Facts: {{ quote }}\nQ: {{ question }}"}
    state, _ = await llm_run(chat_doc(cfg), {"query": Q})
    assert state.status is RunStatus.succeeded
    assert openai_server.bodies[0]["messages"] == [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": f"Facts: K\nQ: {Q}"},
    ]


async def test_user_quote_template_without_question_is_put_before_the_question(openai_server, llm_run):
    openai_server.script(text_reply("ok"))
    cfg = {"quote": "K", "quote_role": "user", "quote_template": "Facts: {{ quote }}"}
    await llm_run(chat_doc(cfg), {"query": Q})
    assert openai_server.bodies[0]["messages"][-1] == {"role": "user", "content": f"Facts: K\n\n{Q}"}


async def test_user_prompt_can_be_a_reference(openai_server, llm_run):
    openai_server.script(text_reply("ok"))
    doc = chat_doc({"user_prompt": {"ref": "inputs.q"}}, inputs=[{"name": "q", "type": "string"}])
    state, _ = await llm_run(doc, {"q": "from a ref"})
    assert state.status is RunStatus.succeeded
    assert openai_server.bodies[0]["messages"][-1] == {"role": "user", "content": "from a ref"}
    assert state.node_runs["chat"].inputs["user_prompt"] == "from a ref"


def test_reference_types_and_model_names_are_checked_at_compile_time(scripted_registry):
    doc = chat_doc({"user_prompt": {"ref": "inputs.n"}, "model": "no-such-model"},
                   inputs=[{"name": "n", "type": "number"}])
    with pytest.raises(CompileError) as info:
        compile_workflow(doc, models=scripted_registry, use_cache=False)
    codes = {(p.code, p.path) for p in info.value.problems}
    assert ("type_mismatch", "config.user_prompt") in codes
    assert ("unknown_model", "config.model") in codes
    bad_template = chat_doc({"system_prompt": "{{ nowhere.x }}"})
    with pytest.raises(CompileError, match="nowhere"):
        compile_workflow(bad_template, models=scripted_registry, use_cache=False)


# ------------------------------------------------------------------------- history


async def test_last_n_turns_of_history_are_sent_and_history_output_adds_this_turn(openai_server, llm_run):
    openai_server.script(text_reply("answer 5"))
    past = history_of(4)
    state, _ = await llm_run(chat_doc({"history": 2}), {"query": "question 5"}, history=past)
    assert state.status is RunStatus.succeeded
    sent = openai_server.bodies[0]["messages"]
    assert [m["content"] for m in sent[1:]] == ["question 3", "answer 3", "question 4", "answer 4", "question 5"]
    out = state.node_runs["chat"].outputs["history"]
    assert out == past + [{"role": "user", "content": "question 5"}, {"role": "assistant", "content": "answer 5"}]
    assert state.node_runs["chat"].data["chat"]["history_messages"] == 4


async def test_history_zero_sends_no_history(openai_server, llm_run):
    openai_server.script(text_reply("x"))
    await llm_run(chat_doc({"history": 0}), {"query": Q}, history=history_of(3))
    assert [m["role"] for m in openai_server.bodies[0]["messages"]] == ["system", "user"]


async def test_history_is_fitted_to_the_context_window_oldest_dropped(openai_server, llm_run):
    # plain-model: context 4096, output 512 -> ~3584 input tokens; each message below is ~750 tokens
    past = []
    for i in range(1, 5):
        past += [{"role": "user", "content": f"u{i} " + "x" * 3000}, {"role": "assistant", "content": f"a{i} " + "y" * 3000}]
    openai_server.script(text_reply("fits"))
    state, _ = await llm_run(chat_doc({"history": 10}), {"query": Q}, history=past)
    assert state.status is RunStatus.succeeded, state.error
    sent = openai_server.bodies[0]["messages"]
    heads = [m["content"][:2] for m in sent[1:-1]]
    assert heads == ["u3", "a3", "u4", "a4"]  # whole turns, newest kept, oldest dropped
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": Q}


EXAMPLES = [{"role": "user", "text": "Capital of {{ inputs.country }}?"}, {"role": "assistant", "text": "Paris"},
            {"role": "user", "text": "Answer as in the quote: {{ quote }}"}]


async def test_examples_stay_after_the_system_prompt_and_the_history_follows_them(openai_server, llm_run):
    openai_server.script(text_reply("Berlin"))
    past = history_of(3)
    doc = chat_doc({"system_prompt": "One word.", "examples": EXAMPLES, "history": 2, "quote": "Q!",
                    "quote_template": ""},
                   inputs=[{"name": "query", "type": "string"}, {"name": "country", "type": "string"}])
    state, _ = await llm_run(doc, {"query": "Capital of Germany?", "country": "France"}, history=past)
    assert state.status is RunStatus.succeeded, state.error
    sent = openai_server.bodies[0]["messages"]
    assert sent == [{"role": "system", "content": "You are a terse assistant.\n\n===---===---===\n\nOne word."},
                    {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"},
                    {"role": "user", "content": "Answer as in the quote: Q!"},
                    *past[2:], {"role": "user", "content": "Capital of Germany?"}]
    chat = state.node_runs["chat"]
    assert chat.outputs["history"] == past + [{"role": "user", "content": "Capital of Germany?"},
                                              {"role": "assistant", "content": "Berlin"}], "examples are not history"
    assert chat.data["chat"]["history_messages"] == 4


async def test_examples_are_never_dropped_to_fit_the_window_the_oldest_history_is(openai_server, llm_run):
    past = []
    for i in range(1, 4):
        past += [{"role": "user", "content": f"u{i} " + "x" * 3000}, {"role": "assistant", "content": f"a{i} " + "y" * 3000}]
    examples = [{"role": "user", "text": "e1 " + "z" * 3000}, {"role": "assistant", "text": "e2"}]
    openai_server.script(text_reply("fits"))
    state, _ = await llm_run(chat_doc({"history": 10, "examples": examples}), {"query": Q}, history=past)
    assert state.status is RunStatus.succeeded, state.error
    heads = [m["content"][:2] for m in openai_server.bodies[0]["messages"][1:]]
    assert heads == ["e1", "e2", "u3", "a3", Q[:2]]


def test_example_templates_are_checked_at_compile_time(scripted_registry):
    doc = chat_doc({"examples": [{"role": "user", "text": "{{ nowhere.x }}"}]})
    with pytest.raises(CompileError) as failed:
        compile_workflow(doc, models=scripted_registry)
    assert any(p.path == "config.examples[0].text" for p in failed.value.problems), failed.value.problems


async def test_a_question_too_long_for_the_window_fails_naming_the_node(openai_server, llm_run):
    state, _ = await llm_run(chat_doc({}), {"query": "z" * 20_000})
    assert state.status is RunStatus.failed
    assert state.error.node_id == "chat" and "context" in state.error.message
    assert openai_server.bodies == []


async def test_invalid_history_source_fails_with_a_clear_message(openai_server, llm_run):
    state, _ = await llm_run(chat_doc({"history": 2}), {"query": Q}, history=[{"role": "robot", "content": 1}])
    assert state.status is RunStatus.failed
    assert state.error.node_id == "chat"
    assert "history_source: item [0]" in state.error.message


async def test_a_misspelt_history_role_suggests_the_role_meant(openai_server, llm_run):
    state, _ = await llm_run(chat_doc({"history": 2}), {"query": Q}, history=[{"role": "usr", "content": "hi"}])
    assert state.status is RunStatus.failed and state.error.message.endswith("; did you mean 'user'?")
    assert openai_server.bodies == []


def test_recent_turns_keeps_replies_with_their_question():
    msgs = [{"role": "assistant", "content": "hi"}, *history_of(2), {"role": "system", "content": "s"}]
    assert recent_turns(msgs, 5) == [m for m in msgs if m["role"] != "system"]
    assert recent_turns(msgs, 1) == history_of(2)[2:]
    assert recent_turns(msgs, 0) == []


# ------------------------------------------------------------------------ sampling


async def test_temperature_and_max_tokens_are_always_explicit(openai_server, llm_run):
    openai_server.script(text_reply("a"), text_reply("b"), text_reply("c"))
    await llm_run(chat_doc({}), {"query": Q})
    await llm_run(chat_doc({"temperature": 0.2, "max_tokens": 100}), {"query": Q})
    await llm_run(chat_doc({"max_tokens": 9000}), {"query": Q})
    b0, b1, b2 = openai_server.bodies
    assert (b0["temperature"], b0["max_tokens"]) == (0.7, 512)  # the model's defaults, sent explicitly
    assert (b1["temperature"], b1["max_tokens"]) == (0.2, 100)
    assert b2["max_tokens"] == 512  # capped by the model's max_output_tokens


# ----------------------------------------------------------------------- streaming


async def test_answer_and_reasoning_stream_as_node_deltas(openai_server, llm_run):
    openai_server.script(reasoning_reply("Let me think. ", "Five days.", chunk_size=3, usage=(15, 40)))
    state, events = await llm_run(chat_doc({}), {"query": Q})
    assert state.status is RunStatus.succeeded
    assert "".join(deltas(events, "reasoning")) == "Let me think. "
    assert "".join(deltas(events, "answer")) == "Five days."
    assert len(deltas(events, "answer")) > 1  # streamed in pieces, not at the end
    out = state.node_runs["chat"].outputs
    assert (out["answer"], out["reasoning"]) == ("Five days.", "Let me think. ")
    assert all(e.node_id == "chat" for e in events if e.type == "node_delta")


@pytest.mark.parametrize(("flags", "answer_deltas", "reasoning_deltas"), [
    ({"stream": False}, False, True),
    ({"stream_reasoning": False}, True, False),
    ({"stream": False, "stream_reasoning": False}, False, False),
])
async def test_streaming_channels_can_be_switched_off(openai_server, llm_run, flags, answer_deltas, reasoning_deltas):
    openai_server.script(reasoning_reply("hmm", "done"))
    state, events = await llm_run(chat_doc(flags), {"query": Q})
    assert state.status is RunStatus.succeeded
    # while the node runs (the End output that reads its answer sends the value once it has it)
    running = events[:next(i for i, e in enumerate(events) if e.type == "node_finished" and e.node_id == "chat")]
    assert bool(deltas(running, "answer")) is answer_deltas
    assert bool(deltas(running, "reasoning")) is reasoning_deltas
    assert state.node_runs["chat"].outputs["answer"] == "done" == "".join(deltas(events, "answer"))


# --------------------------------------------------------------------------- usage


async def test_usage_records_tokens_cost_source_model_and_latency(openai_server, llm_run, scripted_registry):
    openai_server.script(text_reply("ok", usage=(120, 30)))
    state, _ = await llm_run(chat_doc({}), {"query": Q})
    usage = state.node_runs["chat"].usage
    assert (usage.model, usage.tokens_in, usage.tokens_out, usage.token_source, usage.calls) == (
        "plain-model", 120, 30, "provider", 1)
    assert usage.cost == pytest.approx(price(scripted_registry.get("plain-model"), 120, 30))
    assert usage.latency_ms > 0
    assert state.node_runs["chat"].outputs["usage"] == usage.model_dump()


async def test_usage_is_estimated_when_the_provider_sends_none(openai_server, llm_run):
    openai_server.script(text_reply("an answer of some length", usage=None))
    state, _ = await llm_run(chat_doc({}), {"query": Q})
    usage = state.node_runs["chat"].usage
    assert usage.token_source == "estimated" and usage.tokens_in > 0 and usage.tokens_out > 0


async def test_provider_error_fails_the_node_and_names_it(openai_server, llm_run):
    openai_server.script(http_error(400, "model refuses"))
    state, _ = await llm_run(chat_doc({}), {"query": Q})
    assert state.status is RunStatus.failed
    run = state.node_runs["chat"]
    assert run.status is NodeRunStatus.failed
    assert state.error.node_id == "chat" and "'chat'" in state.error.message and "model refuses" in state.error.message


# ---------------------------------------------------------------------- as a tool

@node_kind("chat_tool_probe", "Test: asks a chat node through its tool interface")
class ChatToolProbeConfig(NodeConfig):
    chat_node: str
    questions: list[str]

    def outputs(self, workflow: Any) -> dict[str, VarType]:
        return {"answers": VarType.array}



class ChatToolProbe(NodeExecutor[ChatToolProbeConfig], kind="chat_tool_probe"):
    """What the agent loop does: take the chat node's executor, call it as a tool."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        chat = ctx.plan.nodes[self.config.chat_node].executor
        if not isinstance(chat, ChatNode):
            raise NodeFailed("not a chat node", node_id=ctx.node_id)
        ask = chat.as_tool(ctx)
        return NodeResult({"answers": [await ask(q) for q in self.config.questions]})




PROBE_CATALOG = with_kinds(KindSpec("chat_tool_probe", ChatToolProbeConfig, ChatToolProbe))


async def test_chat_node_answers_as_an_async_tool(openai_server, llm_run):
    openai_server.script(text_reply("four", usage=(10, 1)), text_reply("blue", usage=(12, 1)))
    doc = build([node("probe", "chat_tool_probe", {"chat_node": "helper", "questions": ["2+2?", "sky colour?"]}),
                 node("helper", "chat", {"model": "plain-model", "system_prompt": "Help.", "quote": "K"})],
                chain_edges("start", "probe"))
    state, events = await llm_run(doc, {}, catalog=PROBE_CATALOG)
    assert state.status is RunStatus.succeeded, state.error
    assert state.node_runs["probe"].outputs == {"answers": ["four", "blue"]}
    assert [b["messages"][-1]["content"] for b in openai_server.bodies] == ["2+2?", "sky colour?"]
    assert "Help." in openai_server.bodies[0]["messages"][0]["content"]
    usage = state.node_runs["probe"].usage  # the tool's calls are billed to the calling node
    assert (usage.calls, usage.tokens_in, usage.tokens_out) == (2, 22, 2)
    assert not [e for e in events if e.type == "node_delta"]  # a tool answer is not streamed to the user


def test_format_quote_rules():
    assert format_quote(None) == format_quote([]) == ""
    assert format_quote("plain") == "plain"
    assert format_quote(["a", {"content": "b"}, {"text": "c"}, {"q": "d", "a": "e"}, {"x": 1}, "  "]) == (
        '[1] a\n\n[2] b\n\n[3] c\n\n[4] d\ne\n\n[5] {"x": 1}')
    assert format_quote({"k": "v"}) == '{"k": "v"}'


async def test_prompts_can_place_the_quote_themselves(openai_server, llm_run):
    openai_server.script(text_reply("ok"))
    cfg = {"model": "tools-model", "quote": ["A", "B"], "quote_template": "",
           "system_prompt": "Facts:\n{{ quote }}", "user_prompt": "{{ question }} (facts: {{ quote | length }} chars)"}
    state, _ = await llm_run(chat_doc(cfg), {"query": Q})
    assert state.status is RunStatus.succeeded, state.error
    assert openai_server.bodies[0]["messages"] == [
        {"role": "system", "content": "Facts:\n[1] A\n\n[2] B"},
        {"role": "user", "content": f"{Q} (facts: 12 chars)"},
    ]
    assert state.node_runs["chat"].data["chat"]["quote_role"] is None


async def test_cancelling_the_run_stops_a_streaming_chat(openai_server, scripted_registry, node_memory):
    from engine import CancelToken, RunDeps, run_workflow
    from tests.support.openai_server import stalled_reply

    openai_server.script(stalled_reply("Partial answer"))
    token = CancelToken()

    def on_event(event: Any) -> None:
        if event.type == "node_delta":
            token.cancel("user pressed stop")

    plan = compile_workflow(chat_doc({}), models=scripted_registry)
    state = await run_workflow(plan, {"query": Q}, cancel=token,
                               deps=RunDeps(on_event=on_event, models=scripted_registry, memory=node_memory))
    assert state.status is RunStatus.cancelled
    assert state.node_runs["chat"].status is NodeRunStatus.cancelled
