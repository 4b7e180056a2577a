"""What a weak or capped model really said reaches the OpenAI-compatible answer, through
the real ``openai`` SDK against the app served over HTTP, the scripted OpenAI server
behind it: a reply that only repeats the JSON-protocol format example is refused and
corrected, never the answer (blocking and streamed); a reply cut at its cap answers
``finish_reason`` ``length``, a filtered one ``content_filter``; usage the server did not
report is an estimate clamped to the request's ``max_tokens`` and marked estimated."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from nodes.agent.protocol import EXAMPLE_ANSWER
from tests.support.chat_flow import chat_flow
from tests.support.openai_server import Reply, text_reply

from .conftest import SCRIPTED_KEY_ENV

AGENT_FLOW: dict[str, Any] = {
    "id": "helper", "name": "Helper", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "agent", "type": "agent", "config": {"model": "default"}},
              {"id": "say", "type": "answer", "config": {"text": "{{ agent.answer }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "agent"}, {"id": "e2", "source": "agent", "target": "say"}],
}


@pytest.fixture
def models_file(tmp_path, openai_server, monkeypatch):
    """Model ``default`` on the scripted server, without native tool calling (the JSON protocol)."""
    monkeypatch.setenv(SCRIPTED_KEY_ENV, "sk-scripted-test")
    path = tmp_path / "models.toml"
    path.write_text(f'''
[providers.scripted]
base_url = "{openai_server.base_url}"
api_key_env = "{SCRIPTED_KEY_ENV}"

[models.default]
provider = "scripted"
model = "scripted-upstream"
max_context = 8192
max_output_tokens = 512
capabilities = {{ tool_calling = false, tool_choice = false }}
''', encoding="utf-8")
    return path


async def _publish(api, doc: dict[str, Any]) -> None:
    created = await api.client.post("/v1/workflows", json=doc, headers=api.auth())
    assert created.status_code == 201, created.text
    published = await api.client.post(f"/v1/workflows/{doc['id']}/publish", json={"note": "v1"}, headers=api.auth())
    assert published.status_code == 201, published.text


async def _sdk(api) -> openai.AsyncOpenAI:
    await api.http()
    return openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=api.key, max_retries=0, timeout=30)


def _answer(text: str) -> Reply:
    return text_reply(json.dumps({"type": "answer", "text": text}), usage=(30, 8))


async def test_an_echoed_format_hint_is_refused_and_corrected_blocking_and_streamed(api, models_file,
                                                                                   openai_server):
    await _publish(api, AGENT_FLOW)
    client = await _sdk(api)
    openai_server.script(_answer("<your final answer>"), _answer(EXAMPLE_ANSWER), _answer("Paris is sunny."),
                         _answer(EXAMPLE_ANSWER), _answer("Oslo is cold."))
    done = await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "Paris?"}])
    assert done.choices[0].message.content == "Paris is sunny."
    hints = [b["messages"][-1]["content"] for b in openai_server.bodies[1:3]]
    assert all("repeats the format example" in h for h in hints), hints
    assert "<your final answer>" not in json.dumps(openai_server.bodies[0]), "the hint has no placeholders"

    stream = await client.chat.completions.create(model="helper", stream=True,
                                                  messages=[{"role": "user", "content": "Oslo?"}])
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Oslo is cold."
    assert "repeats the format example" in openai_server.bodies[4]["messages"][-1]["content"]


async def test_a_reply_cut_at_its_cap_says_length_with_usage_clamped_and_marked_estimated(api, models_file,
                                                                                         openai_server):
    await _publish(api, chat_flow(max_tokens=40))
    client = await _sdk(api)
    long_text = "word " * 150  # about 190 estimated tokens, far over the node's cap of 40
    openai_server.script(text_reply(long_text, usage=None, finish_reason="length"),
                         text_reply("short and unreported", usage=None),
                         text_reply("[removed]", usage=(9, 2), finish_reason="content_filter"))
    done = await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "Talk"}])
    assert openai_server.bodies[0]["max_tokens"] == 40
    assert done.choices[0].finish_reason == "length"
    assert done.usage.completion_tokens == 40, "the server stopped at the cap: the cap is the count"
    assert done.usage.model_extra["estimated"] is True
    run = (await api.client.get(f"/v1/runs/{done.model_extra['flowloom']['run_id']}", headers=api.auth())).json()
    assert run["usage_estimated"] is True and run["tokens_out"] == 40
    usage = next(r["usage"] for r in run["node_runs"] if r["node_id"] == "reply")
    assert (usage["tokens_out"], usage["estimated"]) == (40, True)

    stream = await client.chat.completions.create(model="chatbot", stream=True,
                                                  messages=[{"role": "user", "content": "Short"}])
    chunks = [c async for c in stream]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert 0 < chunks[-1].usage.completion_tokens <= 40 and chunks[-1].usage.model_extra["estimated"] is True

    stream = await client.chat.completions.create(model="chatbot", stream=True,
                                                  messages=[{"role": "user", "content": "Filtered"}])
    chunks = [c async for c in stream]
    assert chunks[-1].choices[0].finish_reason == "content_filter"
    assert chunks[-1].usage.model_extra["estimated"] is False and chunks[-1].usage.completion_tokens == 2


async def test_a_list_of_runs_marks_the_runs_whose_usage_was_estimated(api, models_file, openai_server):
    await _publish(api, chat_flow(max_tokens=40))
    client = await _sdk(api)
    openai_server.script(text_reply("counted by the server", usage=(12, 3)), text_reply("never counted", usage=None))
    counted = await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "A"}])
    guessed = await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "B"}])
    listed = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    flags = {run["run_id"]: run["usage_estimated"] for run in listed}
    assert flags == {counted.model_extra["flowloom"]["run_id"]: False,
                     guessed.model_extra["flowloom"]["run_id"]: True}
    estimated = next(run for run in listed if run["usage_estimated"])
    assert 0 < estimated["tokens_out"] <= 40
