"""call_llm over real HTTP: the openai SDK against the scripted server.

Every failure script of ``tests.support.openai_server`` is played here; each test
asserts what was sent (the recorded body), what came back, and how it failed.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx2
import openai
import pytest

from engine.context import CancelToken
from engine.errors import NodeFailed, RunCancelledError
from nodes.llm.call import (
    OPENAI_ERRORS,
    LLMAuthError,
    LLMBadRequest,
    LLMConnectionError,
    LLMError,
    LLMProviderError,
    LLMRateLimited,
    LLMRequest,
    LLMResponse,
    LLMStalled,
    ToolCall,
    call_llm,
    estimate_tokens,
    sum_usage,
    translate_error,
)
from nodes.llm.model_registry import ModelRegistry, price
from tests.support.openai_server import (
    TEST_API_KEY,
    TEST_KEY_ENV,
    Reply,
    ScriptedOpenAIServer,
    delay,
    disconnect,
    disconnect_reply,
    error_after_tokens,
    fenced_json_reply,
    finish,
    http_error,
    malformed_frame_reply,
    malformed_json_reply,
    parallel_tool_calls_reply,
    rate_limited,
    reasoning_reply,
    registry_for,
    reply,
    stalled_reply,
    text,
    text_reply,
    tool_args_split_reply,
    usage,
    utf8_split_reply,
)

USER = [{"role": "user", "content": "Hello there"}]
FAST = {"retry_base_delay": 0.01}


async def ask(registry: ModelRegistry, model: str = "tools-model", messages: list[dict[str, Any]] | None = None,
              **kwargs: Any) -> LLMResponse:
    request_fields = {k: kwargs.pop(k) for k in ("tools", "tool_choice", "temperature", "max_tokens", "response_format")
                      if k in kwargs}
    kwargs.setdefault("retry_base_delay", 0.01)
    return await call_llm(LLMRequest(model, messages or USER, **request_fields), registry=registry, **kwargs)


def assert_no_secret(*things: Any) -> None:
    for thing in things:
        for form in (str(thing), repr(thing)):
            assert TEST_API_KEY not in form
            assert TEST_API_KEY[8:] not in form


# ============================================================================ streaming


async def test_call_streams_text_split_mid_word(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    openai_server.script(text_reply("Hello wonderful world", chunk_size=3, usage=(12, 4)))
    deltas: list[str] = []

    response = await ask(scripted_registry, on_answer=deltas.append, node_id="chat1")

    assert deltas == ["Hel", "lo ", "won", "der", "ful", " wo", "rld"]
    assert response.text == "Hello wonderful world"
    assert response.finish_reason == "stop"
    assert response.tool_calls == [] and response.reasoning == ""
    assert response.attempts == 1
    assert response.usage.model == "tools-model"
    assert (response.usage.tokens_in, response.usage.tokens_out, response.usage.token_source) == (12, 4, "provider")
    assert response.usage.cost == pytest.approx((12 * 0.001 + 4 * 0.002) / 1000)
    assert response.usage.calls == 1 and response.usage.latency_ms > 0


async def test_request_always_sends_temperature_and_max_tokens(openai_server: ScriptedOpenAIServer,
                                                               scripted_registry: ModelRegistry):
    openai_server.script(text_reply("a"), text_reply("b"), text_reply("c"))

    defaults = await ask(scripted_registry)
    await ask(scripted_registry, temperature=0.0, max_tokens=50)
    await ask(scripted_registry, "plain-model", max_tokens=100_000)

    first, second, third = openai_server.bodies
    assert first["model"] == "upstream-tools"  # the upstream id, not the registry name
    assert (first["temperature"], first["max_tokens"]) == (0.3, 1024)  # model defaults, sent explicitly
    assert (second["temperature"], second["max_tokens"]) == (0.0, 50)  # 0 is sent, not dropped
    assert (third["temperature"], third["max_tokens"]) == (0.7, 512)  # clamped to max_output_tokens
    for body in (first, second, third):
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert "tools" not in body and "tool_choice" not in body
    assert first["messages"] == USER
    assert defaults.request == {**first}  # what was sent is what the response records


async def test_request_sends_tools_tool_choice_and_response_format(openai_server: ScriptedOpenAIServer,
                                                                   scripted_registry: ModelRegistry):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    openai_server.script(text_reply("{}"))

    await ask(scripted_registry, tools=tools, tool_choice="required", response_format=schema)

    body = openai_server.bodies[0]
    assert body["tools"] == tools
    assert body["tool_choice"] == "required"
    assert body["response_format"] == schema


async def test_api_key_is_read_from_env_at_call_time_and_sent_only_in_the_header(
        openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch):
    openai_server.script(text_reply("one"), text_reply("two"))

    first = await ask(scripted_registry)
    monkeypatch.setenv(TEST_KEY_ENV, "sk-rotated-key-000000")
    await ask(scripted_registry)

    headers = [r.headers["authorization"] for r in openai_server.requests]
    assert headers == [f"Bearer {TEST_API_KEY}", "Bearer sk-rotated-key-000000"]
    assert TEST_API_KEY not in json.dumps(first.request)
    assert_no_secret(first, first.request, first.usage, scripted_registry)


async def test_text_split_inside_a_utf8_character_arrives_whole(openai_server: ScriptedOpenAIServer,
                                                                scripted_registry: ModelRegistry):
    scripted = utf8_split_reply("héllo 世界 🙂 done")
    frame = scripted.steps[0]
    assert frame.data[: frame.split_at].decode("utf-8", "replace").endswith("\ufffd")  # really cut mid-character
    openai_server.script(scripted)
    deltas: list[str] = []

    response = await ask(scripted_registry, on_answer=deltas.append)

    assert response.text == "héllo 世界 🙂 done"
    assert "".join(deltas) == response.text and "\ufffd" not in response.text


async def test_tool_call_arguments_are_joined_across_many_chunks(openai_server: ScriptedOpenAIServer,
                                                                 scripted_registry: ModelRegistry):
    arguments = json.dumps({"city": "Zürich", "days": [1, 2, 3], "units": "metric"}, ensure_ascii=False)
    openai_server.script(tool_args_split_reply("get_weather", arguments, call_id="call_w", fragment=2))
    answer: list[str] = []

    response = await ask(scripted_registry, on_answer=answer.append,
                         tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])

    assert response.tool_calls == [ToolCall("call_w", "get_weather", arguments)]
    assert json.loads(response.tool_calls[0].arguments)["city"] == "Zürich"
    assert response.finish_reason == "tool_calls"
    assert response.text == "" and answer == []  # argument fragments are not answer text


async def test_two_parallel_tool_calls_interleaved_by_index(openai_server: ScriptedOpenAIServer,
                                                            scripted_registry: ModelRegistry):
    calls = [("call_a", "search", '{"query": "flowloom engine"}'), ("call_b", "fetch", '{"url": "https://x.test/a"}')]
    scripted = parallel_tool_calls_reply(calls, fragment=3)
    indexes = [s.index for s in scripted.steps if hasattr(s, "index")]
    assert indexes[2:6] == [0, 1, 0, 1]  # the script really interleaves
    openai_server.script(scripted)

    response = await ask(scripted_registry)

    assert response.tool_calls == [ToolCall(*c) for c in calls]


async def test_tool_call_without_arguments_or_id_gets_defaults(openai_server: ScriptedOpenAIServer,
                                                               scripted_registry: ModelRegistry):
    from tests.support.openai_server import tool_delta

    openai_server.script(reply(tool_delta(0, name="now"), finish("tool_calls"), usage(5, 1)))

    response = await ask(scripted_registry)

    assert response.tool_calls == [ToolCall("call_0", "now", "{}")]


async def test_reasoning_deltas_go_to_on_reasoning_and_async_callbacks_work(openai_server: ScriptedOpenAIServer,
                                                                            scripted_registry: ModelRegistry):
    openai_server.script(reasoning_reply("First, add the numbers.", "The sum is 42.", chunk_size=6))
    thoughts: list[str] = []
    answer: list[str] = []

    async def on_answer(delta: str) -> None:
        await asyncio.sleep(0)
        answer.append(delta)

    response = await ask(scripted_registry, "plain-model", on_answer=on_answer, on_reasoning=thoughts.append)

    assert "".join(thoughts) == response.reasoning == "First, add the numbers."
    assert "".join(answer) == response.text == "The sum is 42."
    assert len(thoughts) > 1


async def test_missing_usage_is_estimated(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    openai_server.script(text_reply("An answer of some length.", usage=None))

    response = await ask(scripted_registry, "plain-model")

    u = response.usage
    assert u.token_source == "estimated"
    assert u.tokens_in == estimate_tokens(USER)
    assert u.tokens_out == estimate_tokens("An answer of some length.")
    assert u.cost == pytest.approx(price(scripted_registry.get("plain-model"), u.tokens_in, u.tokens_out))


async def test_each_call_is_priced_at_its_own_tier(openai_server: ScriptedOpenAIServer,
                                                   scripted_registry: ModelRegistry):
    openai_server.script(text_reply("small", usage=(800, 100)), text_reply("large", usage=(3000, 100)))

    small = await ask(scripted_registry)
    large = await ask(scripted_registry)
    total = sum_usage([small.usage, large.usage])

    assert small.usage.cost == pytest.approx((800 * 0.001 + 100 * 0.002) / 1000)  # tier <= 1000 input tokens
    assert large.usage.cost == pytest.approx((3000 * 0.002 + 100 * 0.004) / 1000)  # open-ended tier
    assert total.cost == pytest.approx(small.usage.cost + large.usage.cost)
    # pricing the summed tokens once would be wrong:
    assert total.cost != pytest.approx(price(scripted_registry.get("tools-model"), 3800, 200))
    assert (total.tokens_in, total.tokens_out, total.calls, total.model) == (3800, 200, 2, "tools-model")


async def test_user_key_calls_cost_nothing(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    openai_server.script(text_reply("free", usage=(900, 90)))

    response = await ask(scripted_registry, user_key=True)

    assert response.usage.cost == 0.0 and response.usage.tokens_in == 900


async def test_malformed_json_answer_passes_through_verbatim(openai_server: ScriptedOpenAIServer,
                                                             scripted_registry: ModelRegistry):
    openai_server.script(malformed_json_reply(), fenced_json_reply({"name": "Ada"}))

    broken = await ask(scripted_registry)
    fenced = await ask(scripted_registry)

    assert broken.text == '{"name": "Ada", "age": 3'  # parsing is the caller's job
    assert fenced.text.startswith("Sure! Here is the result:\n```json\n{\"name\": \"Ada\"}\n```")


async def test_non_streaming_requests_get_a_folded_reply(openai_server: ScriptedOpenAIServer,
                                                         scripted_registry: ModelRegistry):
    openai_server.script(parallel_tool_calls_reply([("c1", "a", "{}"), ("c2", "b", '{"x": 1}')]))
    client = scripted_registry.client_for(scripted_registry.get("tools-model"))

    completion = await client.chat.completions.create(model="upstream-tools", messages=USER)  # type: ignore[arg-type]

    message = completion.choices[0].message
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("c1", "a", "{}"), ("c2", "b", '{"x": 1}')]
    assert completion.usage is not None and completion.usage.prompt_tokens == 30


# ============================================================================ retries


async def test_rate_limited_then_success_is_retried(openai_server: ScriptedOpenAIServer,
                                                    scripted_registry: ModelRegistry):
    openai_server.script(rate_limited(), rate_limited(), text_reply("finally"))

    response = await ask(scripted_registry)

    assert response.text == "finally"
    assert response.attempts == 3
    assert len(openai_server.bodies) == 3
    assert openai_server.bodies[0] == openai_server.bodies[2]  # the same request, resent


async def test_rate_limited_until_retries_run_out(openai_server: ScriptedOpenAIServer,
                                                  scripted_registry: ModelRegistry):
    openai_server.script(*[rate_limited("Rate limit reached for requests")] * 3)

    with pytest.raises(LLMRateLimited) as info:
        await ask(scripted_registry, node_id="chat1", max_retries=2)

    err = info.value
    assert err.attempts == 3 and len(openai_server.requests) == 3
    assert (err.reason, err.node_id, err.model, err.status_code) == ("rate_limited", "chat1", "tools-model", 429)
    assert "'chat1'" in str(err) and "'tools-model'" in str(err) and "after 3 attempts" in str(err)
    assert "Rate limit reached for requests" in str(err)  # the provider's own words
    assert isinstance(err, NodeFailed) and err.__cause__ is None


async def test_retry_after_header_sets_the_wait(openai_server: ScriptedOpenAIServer,
                                                scripted_registry: ModelRegistry):
    openai_server.script(rate_limited(retry_after=0.3), text_reply("ok"))

    started = time.monotonic()
    await ask(scripted_registry, retry_base_delay=0.0)

    assert time.monotonic() - started >= 0.3


async def test_server_error_before_any_token_is_retried(openai_server: ScriptedOpenAIServer,
                                                        scripted_registry: ModelRegistry):
    openai_server.script(http_error(500, "overloaded", type="server_error"), http_error(503, "unavailable"),
                         text_reply("recovered"))

    response = await ask(scripted_registry)

    assert (response.text, response.attempts) == ("recovered", 3)


async def test_server_error_after_tokens_is_raised_not_retried(openai_server: ScriptedOpenAIServer,
                                                               scripted_registry: ModelRegistry):
    openai_server.script(error_after_tokens("Partial answer", message="upstream model crashed"), text_reply("dup"))
    deltas: list[str] = []

    with pytest.raises(LLMProviderError) as info:
        await ask(scripted_registry, on_answer=deltas.append, node_id="chat1")

    err = info.value
    assert len(openai_server.requests) == 1 and openai_server.pending == 1  # never resent
    assert "".join(deltas) == "Partial answer"  # streamed once, no duplicate
    assert err.reason == "provider_error" and "upstream model crashed" in str(err)
    assert "'chat1'" in str(err) and "'tools-model'" in str(err)
    assert err.usage is not None and err.usage.token_source == "estimated" and err.usage.tokens_out > 0


async def test_mid_stream_disconnect_is_an_error(openai_server: ScriptedOpenAIServer,
                                                 scripted_registry: ModelRegistry):
    openai_server.script(disconnect_reply("This answer is cut short", after=2), text_reply("dup"))
    deltas: list[str] = []

    with pytest.raises(LLMConnectionError) as info:
        await ask(scripted_registry, on_answer=deltas.append, node_id="chat1")

    assert info.value.reason == "stream_interrupted"
    assert "mid-stream after 2 chunk(s)" in str(info.value) and "'chat1'" in str(info.value)
    assert deltas == ["This", " ans"] and len(openai_server.requests) == 1


async def test_disconnect_before_any_token_is_retried(openai_server: ScriptedOpenAIServer,
                                                      scripted_registry: ModelRegistry):
    openai_server.script(Reply([disconnect()], done=False), text_reply("second try"))

    response = await ask(scripted_registry)

    assert (response.text, response.attempts) == ("second try", 2)


async def test_stream_ending_without_finish_reason_is_an_error(openai_server: ScriptedOpenAIServer,
                                                               scripted_registry: ModelRegistry):
    openai_server.script(reply(text("cut"), text(" off")))

    with pytest.raises(LLMConnectionError) as info:
        await ask(scripted_registry, node_id="n")

    assert info.value.reason == "incomplete_stream" and "without a finish_reason" in str(info.value)


async def test_malformed_frame_after_tokens_is_a_provider_error(openai_server: ScriptedOpenAIServer,
                                                                scripted_registry: ModelRegistry):
    openai_server.script(malformed_frame_reply("abcdef"), text_reply("dup"))

    with pytest.raises(LLMProviderError) as info:
        await ask(scripted_registry, node_id="n")

    assert info.value.reason == "malformed_response" and len(openai_server.requests) == 1


async def test_malformed_frame_before_tokens_is_retried(openai_server: ScriptedOpenAIServer,
                                                        scripted_registry: ModelRegistry):
    openai_server.script(malformed_frame_reply(), text_reply("clean"))

    response = await ask(scripted_registry)

    assert (response.text, response.attempts) == ("clean", 2)


async def test_connection_refused_is_retried_then_raised(monkeypatch: pytest.MonkeyPatch):
    server = ScriptedOpenAIServer().start()
    registry = registry_for(server)
    server.stop()  # nothing listens on that port any more
    monkeypatch.setenv(TEST_KEY_ENV, TEST_API_KEY)

    with pytest.raises(LLMConnectionError) as info:
        await ask(registry, max_retries=2, node_id="n")

    assert info.value.attempts == 3 and info.value.reason == "connection_error"
    assert "ConnectError" in str(info.value)  # the transport's cause, not only "Connection error."


# ============================================================================ stalls and cancellation


async def test_stalled_stream_fails_after_the_idle_timeout(openai_server: ScriptedOpenAIServer,
                                                           scripted_registry: ModelRegistry):
    openai_server.script(stalled_reply("some tokens"), text_reply("dup"))

    started = time.monotonic()
    with pytest.raises(LLMStalled) as info:
        await ask(scripted_registry, idle_timeout=0.3, node_id="chat1")
    elapsed = time.monotonic() - started

    assert 0.3 <= elapsed < 3
    assert info.value.reason == "stalled" and "no data for 0.3s" in str(info.value)
    assert "'chat1'" in str(info.value) and "'tools-model'" in str(info.value)
    assert len(openai_server.requests) == 1
    await _wait_for(lambda: openai_server.requests[0].client_closed_at is not None)


async def test_stall_before_the_first_chunk_is_not_retried(openai_server: ScriptedOpenAIServer,
                                                           scripted_registry: ModelRegistry):
    openai_server.script(stalled_reply(), text_reply("dup"))

    with pytest.raises(LLMStalled) as info:
        await ask(scripted_registry, idle_timeout=0.2)

    assert "before the first chunk" in str(info.value)
    # On a loaded machine the client can give up before the server thread has recorded
    # the request: wait for it, then no second one (a retry would have been answered "dup").
    await _wait_for(lambda: len(openai_server.requests) >= 1)
    assert len(openai_server.requests) == 1


async def test_idle_timeout_is_between_chunks_not_total(openai_server: ScriptedOpenAIServer,
                                                        scripted_registry: ModelRegistry):
    steps = []
    for word in ["slow ", "but ", "steady ", "keeps ", "streaming"]:
        steps += [delay(0.15), text(word)]
    openai_server.script(reply(*steps, finish(), usage(5, 5)))

    started = time.monotonic()
    response = await ask(scripted_registry, idle_timeout=0.5)

    assert time.monotonic() - started > 0.5  # longer than the idle timeout in total
    assert response.text == "slow but steady keeps streaming"


async def test_cancel_token_closes_the_http_stream(openai_server: ScriptedOpenAIServer,
                                                   scripted_registry: ModelRegistry):
    openai_server.script(stalled_reply("thinking"))
    token = CancelToken()
    deltas: list[str] = []
    task = asyncio.create_task(ask(scripted_registry, cancel=token, on_answer=deltas.append, node_id="chat1"))
    await _wait_for(lambda: deltas)

    token.cancel("user pressed stop")
    with pytest.raises(RunCancelledError) as info:
        await asyncio.wait_for(task, 2)

    assert info.value.node_id == "chat1" and "user pressed stop" in str(info.value)
    await _wait_for(lambda: openai_server.requests[0].client_closed_at is not None)


async def test_task_cancellation_closes_the_http_stream(openai_server: ScriptedOpenAIServer,
                                                        scripted_registry: ModelRegistry):
    openai_server.script(stalled_reply("thinking"))
    deltas: list[str] = []
    task = asyncio.create_task(ask(scripted_registry, on_answer=deltas.append, cancel=CancelToken()))
    await _wait_for(lambda: deltas)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    await _wait_for(lambda: openai_server.requests[0].client_closed_at is not None)


async def test_fired_token_sends_nothing(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    token = CancelToken()
    token.cancel("stop")

    with pytest.raises(RunCancelledError):
        await ask(scripted_registry, cancel=token, node_id="n")

    assert openai_server.requests == []


async def test_token_firing_after_the_call_does_not_cancel_the_caller(openai_server: ScriptedOpenAIServer,
                                                                      scripted_registry: ModelRegistry):
    openai_server.script(text_reply("done"))
    token = CancelToken()

    await ask(scripted_registry, cancel=token)
    token.cancel("later")
    await asyncio.sleep(0.01)  # would raise CancelledError if the finished call still held the task


async def test_callback_errors_propagate_and_close_the_stream(openai_server: ScriptedOpenAIServer,
                                                              scripted_registry: ModelRegistry):
    openai_server.script(stalled_reply("abcdefgh"))

    def boom(delta: str) -> None:
        raise ValueError("sink is full")

    with pytest.raises(ValueError, match="sink is full"):
        await ask(scripted_registry, on_answer=boom)

    await _wait_for(lambda: openai_server.requests[0].client_closed_at is not None)


async def _wait_for(predicate: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


# ============================================================================ request errors


async def test_auth_error_never_shows_the_key(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    openai_server.script(http_error(401, f"Incorrect API key provided: {TEST_API_KEY}. Find your key at ...",
                                    code="invalid_api_key"))

    with pytest.raises(LLMAuthError) as info:
        await ask(scripted_registry, node_id="chat1")

    err = info.value
    assert (err.reason, err.status_code, err.attempts) == ("auth_failed", 401, 1)
    assert "'chat1'" in str(err) and "'tools-model'" in str(err) and "[redacted]" in str(err)
    assert err.__cause__ is None
    assert_no_secret(err)


async def test_forbidden_is_an_auth_error(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    openai_server.script(http_error(403, "not allowed for this project"))

    with pytest.raises(LLMAuthError) as info:
        await ask(scripted_registry)

    assert info.value.reason == "permission_denied"


async def test_missing_key_env_fails_before_sending(openai_server: ScriptedOpenAIServer,
                                                    scripted_registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TEST_KEY_ENV)

    with pytest.raises(LLMAuthError) as info:
        await ask(scripted_registry, node_id="chat1")

    assert info.value.reason == "missing_api_key"
    assert TEST_KEY_ENV in str(info.value) and "'chat1'" in str(info.value)
    assert openai_server.requests == []


async def test_local_provider_without_key_works(openai_server: ScriptedOpenAIServer):
    openai_server.script(text_reply("local"))

    registry = registry_for(openai_server, api_key_env=None)
    try:
        response = await ask(registry)
    finally:
        await registry.aclose()

    assert response.text == "local"
    assert openai_server.requests[0].headers["authorization"] == "Bearer no-key"


async def test_context_too_long_is_a_bad_request(openai_server: ScriptedOpenAIServer,
                                                 scripted_registry: ModelRegistry):
    openai_server.script(http_error(400, "This model's maximum context length is 8192 tokens.",
                                    code="context_length_exceeded"))

    with pytest.raises(LLMBadRequest) as info:
        await ask(scripted_registry, node_id="n")

    assert info.value.reason == "context_length_exceeded" and len(openai_server.requests) == 1
    assert "maximum context length" in str(info.value)


@pytest.mark.parametrize(("status", "reason"), [(400, "bad_request"), (404, "not_found"), (422, "bad_request"),
                                                (413, "context_length_exceeded"), (402, "bad_request")])
async def test_other_4xx_are_bad_requests_and_not_retried(openai_server: ScriptedOpenAIServer,
                                                          scripted_registry: ModelRegistry, status: int, reason: str):
    openai_server.script(http_error(status, "nope"))

    with pytest.raises(LLMBadRequest) as info:
        await ask(scripted_registry)

    assert (info.value.reason, info.value.status_code) == (reason, status)
    assert len(openai_server.requests) == 1


async def test_unknown_model_lists_known_names(scripted_registry: ModelRegistry):
    with pytest.raises(LLMBadRequest) as info:
        await ask(scripted_registry, "gpt-9", node_id="n")

    assert info.value.reason == "unknown_model"
    assert "plain-model" in str(info.value) and "tools-model" in str(info.value)


@pytest.mark.parametrize("fields", [
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
    {"tool_choice": "none"},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]},
])
async def test_capabilities_the_model_lacks_are_refused_before_sending(
        openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry, fields: dict[str, Any]):
    with pytest.raises(LLMBadRequest) as info:
        await ask(scripted_registry, "plain-model", node_id="n", **fields)

    assert info.value.reason == "unsupported_capability" and "'plain-model'" in str(info.value)
    assert openai_server.requests == []


async def test_json_object_format_is_allowed_without_structured_output(openai_server: ScriptedOpenAIServer,
                                                                       scripted_registry: ModelRegistry):
    openai_server.script(text_reply("{}"))

    await ask(scripted_registry, "plain-model", response_format={"type": "json_object"})

    assert openai_server.bodies[0]["response_format"] == {"type": "json_object"}


# ============================================================================ the error table


def _public_openai_errors() -> list[type[BaseException]]:
    return sorted({obj for name in dir(openai) if not name.startswith("_")
                   for obj in [getattr(openai, name)]
                   if isinstance(obj, type) and issubclass(obj, openai.OpenAIError)}, key=lambda c: c.__name__)


def test_error_table_lists_every_public_openai_exception():
    missing = [cls.__name__ for cls in _public_openai_errors() if cls not in OPENAI_ERRORS]
    assert missing == [], f"add these openai exceptions to nodes.llm.call.OPENAI_ERRORS: {missing}"


@pytest.mark.parametrize("openai_type", _public_openai_errors(), ids=lambda c: c.__name__)
def test_every_mapped_openai_exception_translates_to_its_llm_error(openai_type: type[BaseException]):
    exc = openai_type.__new__(openai_type)
    Exception.__init__(exc, f"boom with key {TEST_API_KEY}")

    error = translate_error(exc, model="m", node_id="n1", secret=TEST_API_KEY)

    expected, reason, _ = OPENAI_ERRORS[openai_type]
    assert type(error) is expected and error.reason == reason
    assert isinstance(error, LLMError) and error.node_id == "n1"
    assert "'n1'" in str(error) and "'m'" in str(error)
    assert_no_secret(error)


@pytest.mark.parametrize(("status", "expected"), [(400, LLMBadRequest), (401, LLMAuthError), (403, LLMAuthError),
                                                  (404, LLMBadRequest), (409, LLMBadRequest), (422, LLMBadRequest),
                                                  (429, LLMRateLimited), (500, LLMProviderError),
                                                  (502, LLMProviderError), (418, LLMBadRequest)])
def test_sdk_status_errors_translate_by_status(status: int, expected: type[LLMError]):
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    response = httpx2.Response(status, request=httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
    exc = client._make_status_error("failed", body={"error": {"message": "failed"}}, response=response)

    error = translate_error(exc, model="m", node_id=None)

    assert type(error) is expected and error.status_code == status
    assert str(error).startswith("LLM call to model 'm' failed")


def test_errors_that_are_not_openai_are_not_translated():
    assert translate_error(ValueError("x"), model="m", node_id=None) is None


def test_retryable_errors_are_exactly_rate_limits_provider_and_connection_errors():
    retryable = {cls for cls in (LLMError, LLMRateLimited, LLMProviderError, LLMConnectionError, LLMStalled,
                                 LLMBadRequest, LLMAuthError) if cls.retryable}
    assert retryable == {LLMRateLimited, LLMProviderError, LLMConnectionError}
