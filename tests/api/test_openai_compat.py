"""The OpenAI-compatible endpoint with the REAL ``openai`` SDK against the app served
over real HTTP (uvicorn in the test's loop), on SQLite and PostgreSQL, with the
scripted OpenAI server behind a published chat workflow: a completion, a stream whose
chunks make the answer with usage, a conversation kept by ``chat_id``, the history of a
request without one, a paused run answered by the next message, the model list, an
unknown model, a bad key, and a key of another tenant that cannot call this tenant's app.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import text_reply

from .conftest import order_workflow


async def _publish(api, doc: dict[str, Any]) -> None:
    created = await api.client.post("/v1/workflows", json=doc, headers=api.auth())
    assert created.status_code == 201, created.text
    published = await api.client.post(f"/v1/workflows/{doc['id']}/publish", json={"note": "v1"}, headers=api.auth())
    assert published.status_code == 201, published.text


async def _sdk(api, key: str | None = None) -> openai.AsyncOpenAI:
    await api.http()
    return openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=key or api.key, max_retries=0, timeout=20)


def _turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


async def test_a_completion_and_a_stream_of_a_published_app(api, models_file, openai_server):
    await _publish(api, chat_flow(history=10))
    client = await _sdk(api)
    openai_server.script(text_reply("Hello Ada!", usage=(12, 3)), text_reply("Streamed hello to you", usage=(20, 5)))
    done = await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "Hi"}])
    assert done.object == "chat.completion" and done.model == "chatbot"
    assert done.choices[0].message.content == "Hello Ada!" and done.choices[0].finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (12, 3, 15)
    assert done.model_extra["flowloom"]["status"] == "succeeded"

    stream = await client.chat.completions.create(model="chatbot", stream=True,
                                                  messages=[{"role": "user", "content": "Stream it"}],
                                                  stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Streamed hello to you"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1, "deltas, not one block"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (20, 5)
    run_id = chunks[-1].model_extra["flowloom"]["run_id"]
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert run["answer"] == text and run["workflow_version"] == "1"


async def test_a_conversation_by_chat_id_and_the_history_of_a_request_without_one(api, models_file, openai_server):
    await _publish(api, chat_flow(history=10))
    client = await _sdk(api)
    openai_server.script(text_reply("Hello Ada!"), text_reply("Your name is Ada."), text_reply("You said Bo."))
    await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "My name is Ada"}],
                                         extra_body={"chat_id": "oa-1"})
    second = await client.chat.completions.create(
        model="chatbot", extra_body={"chat_id": "oa-1"},
        messages=[{"role": "user", "content": "ignored: the chat is the history"},
                  {"role": "user", "content": "What is my name?"}])
    assert second.choices[0].message.content == "Your name is Ada."
    assert _turns(openai_server.bodies[1]) == [("user", "My name is Ada"), ("assistant", "Hello Ada!"),
                                               ("user", "What is my name?")]
    await client.chat.completions.create(model="chatbot", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "I am Bo"},
        {"role": "assistant", "content": "Hi Bo"}, {"role": "user", "content": "Who am I?"}])
    assert _turns(openai_server.bodies[2]) == [("user", "I am Bo"), ("assistant", "Hi Bo"), ("user", "Who am I?")]
    messages = (await api.client.get("/v1/chats/oa-1/messages", headers=api.auth())).json()["messages"]
    assert [m["text"] for m in messages] == ["My name is Ada", "Hello Ada!", "What is my name?", "Your name is Ada."]


async def test_a_paused_run_asks_its_question_and_the_next_message_answers_it(api):
    await _publish(api, order_workflow())
    client = await _sdk(api)
    asked = await client.chat.completions.create(model="order_confirm", messages=[{"role": "user", "content": "tea"}],
                                                 extra_body={"chat_id": "o-1", "inputs": {"item": "tea"}})
    meta = asked.model_extra["flowloom"]
    assert meta["status"] == "paused" and meta["interrupts"][0]["kind"] == "user_select"
    assert asked.choices[0].message.content.startswith("Order 1 x tea?")
    stream = await client.chat.completions.create(model="order_confirm", stream=True,
                                                  messages=[{"role": "user", "content": "confirm"}],
                                                  extra_body={"chat_id": "o-1", "inputs": {"item": "tea"},
                                                              "detail": True})
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Order placed: 1 x tea."
    events = [c.model_extra["flowloom"]["event"]["type"] for c in chunks
              if c.model_extra and "event" in (c.model_extra.get("flowloom") or {})]
    assert "node_finished" in events and events[-1] == "run_finished"
    assert chunks[-1].model_extra["flowloom"]["run_id"] == meta["run_id"], "the same run continued"


async def test_models_unknown_model_bad_key_and_another_tenant(api):
    await _publish(api, order_workflow())
    draft_only = {**order_workflow(), "id": "unpublished"}
    assert (await api.client.post("/v1/workflows", json=draft_only, headers=api.auth())).status_code == 201
    client = await _sdk(api)
    assert [m.id for m in (await client.models.list()).data] == ["order_confirm"]
    for model in ("nope", "unpublished"):
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}])
        assert missing.value.code == "model_not_found" and missing.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.UnprocessableEntityError) as bad_inputs:
        await client.chat.completions.create(model="order_confirm", messages=[{"role": "user", "content": "x"}])
    assert bad_inputs.value.code == "invalid_inputs" and "Traceback" not in str(bad_inputs.value.body)
    # the SDK shows the message only: it names the input at fault; param is the request's field
    problems = bad_inputs.value.body["problems"]
    assert problems and ": " + "; ".join(problems) in bad_inputs.value.body["message"]
    assert bad_inputs.value.body["message"].endswith('with the openai SDK: extra_body={"inputs": {...}})')
    assert bad_inputs.value.param == "inputs"

    bad = await _sdk(api, "fl_nope_wrong")
    with pytest.raises(openai.AuthenticationError) as refused:
        await bad.chat.completions.create(model="order_confirm", messages=[{"role": "user", "content": "x"}])
    assert refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        await bad.models.list()

    other = await _sdk(api, api.other_key)
    assert (await other.models.list()).data == []
    with pytest.raises(openai.NotFoundError):
        await other.chat.completions.create(model="order_confirm", messages=[{"role": "user", "content": "x"}],
                                            extra_body={"inputs": {"item": "tea"}})
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []


async def test_a_misspelt_message_role_is_refused_with_the_role_meant(api):
    """OpenAI refuses a role it does not know; silently dropping the message would run the
    turn without it (or refuse it for lacking a user message without saying why)."""
    await _publish(api, chat_flow("chatbot"))
    body = {"model": "chatbot", "messages": [{"role": "system", "content": "be brief"},
                                             {"role": "usr", "content": "hi"}]}
    refused = await api.client.post("/v1/chat/completions", json=body, headers=api.auth())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["message"] == ("messages[1].role: unknown role 'usr'; did you mean 'user'? "
                                "(roles: system, developer, user, assistant, tool, function)")
    assert error["param"] == "messages[1].role"
    unknown = await api.client.post("/v1/chat/completions", headers=api.auth(), json={
        "model": "chatbt", "messages": [{"role": "user", "content": "hi"}]})
    assert unknown.status_code == 404 and "did you mean" not in unknown.text, "an app key must not learn ids"
    assert (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"] == []


async def test_an_app_key_runs_its_own_app_without_naming_it(api):
    await _publish(api, order_workflow())
    scoped = (await api.client.post("/v1/keys", json={"name": "app", "app_id": "order_confirm"},
                                    headers=api.auth())).json()["secret"]
    client = await _sdk(api, scoped)
    assert [m.id for m in (await client.models.list()).data] == ["order_confirm"]
    asked = await client.chat.completions.create(model="", messages=[{"role": "user", "content": "tea"}],
                                                 extra_body={"inputs": {"item": "tea"}})
    assert asked.model == "order_confirm" and asked.model_extra["flowloom"]["status"] == "paused"
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "x"}])


async def test_a_failed_run_is_an_error_not_retried_and_after_the_stream_started_an_error_line(
        api, models_file, openai_server):
    from tests.support.openai_server import error_after_tokens

    await _publish(api, chat_flow(history=10))
    await api.http()
    client = openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=api.key, max_retries=2, timeout=20)
    openai_server.script(error_after_tokens("Ada likes", message="upstream model crashed"),
                         error_after_tokens("Bo likes", message="upstream model crashed"))
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "x"}])
    assert failed.value.code == "run_failed" and "Traceback" not in str(failed.value.body)
    assert len(openai_server.bodies) == 1, "x-should-retry: false: the turn is not run again"
    stream = await client.chat.completions.create(model="chatbot", stream=True,
                                                  messages=[{"role": "user", "content": "y"}])
    received: list[str] = []
    with pytest.raises(openai.APIError) as broken:
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "Bo likes" and "failed" in broken.value.message
