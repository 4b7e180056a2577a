"""The token budget of model requests: ``estimate_tokens`` (a local count where the
server reports none), ``fit_messages`` (history trimmed to the model's input budget,
whole turns from the oldest) and ``sum_usage``."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.llm.call import LLMBadRequest, estimate_tokens, fit_messages, sum_usage
from nodes.llm.model_registry import ModelRegistry
from schemas.run import Usage


def test_estimate_tokens_counts_ascii_by_four_and_other_characters_by_one():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("你好世界") == 4
    assert estimate_tokens({"role": "user", "content": "abcd"}) == 4 + 1
    assert estimate_tokens([{"role": "user", "content": "abcd"}]) == 4 + 1 + 3
    image = {"role": "user", "content": [{"type": "text", "text": "abcd"}, {"type": "image_url", "image_url": {}}]}
    assert estimate_tokens(image) == 4 + 1 + 85
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "find", "arguments": '{"q":1}'}}]}
    assert estimate_tokens(call) == 4 + 3 + 1 + 2


def _conversation() -> list[dict[str, Any]]:
    pad = "x" * 400  # ~100 tokens
    return [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "u1 " + pad},
        {"role": "assistant", "content": "a1 " + pad},
        {"role": "user", "content": "u2 " + pad},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "result " + pad},
        {"role": "assistant", "content": "a2 " + pad},
        {"role": "user", "content": "u3 latest question"},
    ]


def test_fit_messages_keeps_everything_that_fits():
    messages = _conversation()

    assert fit_messages(messages, max_input_tokens=10_000) == messages


def test_fit_messages_drops_whole_turns_from_the_oldest():
    messages = _conversation()
    budget = estimate_tokens(messages) - 1  # the first turn must go

    fitted = fit_messages(messages, max_input_tokens=budget)

    assert [m.get("content", "")[:2] if m.get("content") else m["role"] for m in fitted] == [
        "Yo", "u2", "assistant", "re", "a2", "u3"]
    assert estimate_tokens(fitted) <= budget
    # a tool result never loses the assistant message that called it
    called = {c["id"] for m in fitted for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in called for m in fitted if m["role"] == "tool")


def test_fit_messages_keeps_the_system_prompt_and_the_newest_turn_only():
    messages = _conversation()
    minimal = [messages[0], messages[-1]]

    fitted = fit_messages(messages, max_input_tokens=estimate_tokens(minimal))

    assert fitted == minimal


def test_fit_messages_keeps_the_history_contiguous():
    messages = [
        {"role": "user", "content": "old short"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "y" * 2000},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "now"},
    ]

    fitted = fit_messages(messages, max_input_tokens=100)

    assert fitted == [messages[-1]]  # the small old turn is not kept past the dropped big one


def test_fit_messages_raises_when_system_and_last_turn_do_not_fit():
    messages = [{"role": "system", "content": "s" * 4000}, {"role": "user", "content": "question"}]

    with pytest.raises(LLMBadRequest) as info:
        fit_messages(messages, max_input_tokens=500, node_id="chat1")

    err = info.value
    assert err.reason == "context_length_exceeded" and err.node_id == "chat1"
    assert "500" in str(err) and "max_context - max_output_tokens" in str(err)


def test_fit_messages_budget_is_the_models_input_budget(scripted_registry: ModelRegistry):
    spec = scripted_registry.get("plain-model")
    history = []
    for i in range(60):
        history += [{"role": "user", "content": f"question {i} " + "w" * 300},
                    {"role": "assistant", "content": f"answer {i} " + "w" * 300}]
    messages = [{"role": "system", "content": spec.default_system_prompt}] + history + [
        {"role": "user", "content": "last"}]

    fitted = fit_messages(messages, max_input_tokens=spec.max_input_tokens)

    assert spec.max_input_tokens == 4096 - 512
    assert estimate_tokens(fitted) <= spec.max_input_tokens < estimate_tokens(messages)
    assert fitted[0]["role"] == "system" and fitted[-1]["content"] == "last"
    assert fitted[1]["role"] == "user"  # starts on a turn boundary


def test_sum_usage_marks_estimates_and_joins_models():
    a = Usage(model="m1", tokens_in=10, tokens_out=5, cost=0.5, latency_ms=10, calls=1)
    b = Usage(model="m2", tokens_in=1, tokens_out=2, token_source="estimated", cost=0.25, latency_ms=5, calls=1)

    total = sum_usage([a, None, b])

    assert (total.tokens_in, total.tokens_out, total.calls) == (11, 7, 2)
    assert total.cost == pytest.approx(0.75) and total.latency_ms == pytest.approx(15)
    assert total.token_source == "estimated" and total.model == "m1, m2"
    assert sum_usage([]).calls == 0
