"""A model node's trace keeps what was actually sent: the rendered messages, capped in
size, with the deployment's secrets and key-shaped text masked - kept before the call, so
a failed call shows them too. Through the real engine against the scripted OpenAI server."""

from __future__ import annotations

from nodes.llm.sent_messages import MAX_MESSAGE_CHARS, MAX_TOTAL_CHARS, deployment_secrets, sent_record
from schemas.types import RunStatus
from tests.support.openai_server import http_error, text_reply
from tests.support.workflows import build, chain_edges, node


def doc() -> dict:
    return build([node("chat", "chat", {"model": "plain-model", "system_prompt": "You serve {{ inputs.shop }}.",
                                        "user_prompt": "{{ inputs.query }}"}),
                  node("end", "end", {"outputs": [{"name": "a", "value": {"ref": "chat.answer"}}]})],
                 chain_edges("start", "chat", "end"),
                 inputs=[{"name": "query", "type": "string"}, {"name": "shop", "type": "string"}])


async def test_the_rendered_messages_are_kept_with_secrets_masked(openai_server, llm_run, monkeypatch):
    monkeypatch.setenv("FLOWLOOM_SECRET_SHOP_TOKEN", "tok-4411-very-private")
    openai_server.script(text_reply("Fine."))
    state, _ = await llm_run(doc(), {"query": "use tok-4411-very-private and sk-abcdef123456 please",
                                     "shop": "ACME"})
    assert state.status is RunStatus.succeeded, state.error
    sent = state.node_runs["chat"].data["sent"]
    assert sent == {"messages": [
        {"role": "system", "content": "You are a terse assistant.\n\n===---===---===\n\nYou serve ACME."},
        {"role": "user", "content": "use [secret] and [secret] please"}], "omitted": 0}
    assert "tok-4411" in openai_server.bodies[0]["messages"][-1]["content"], "the model itself got the text"


async def test_a_failed_call_keeps_what_was_sent(openai_server, llm_run):
    openai_server.script(http_error(400, "bad request"))
    state, _ = await llm_run(doc(), {"query": "hello", "shop": "ACME"})
    assert state.status is RunStatus.failed
    assert state.node_runs["chat"].data["sent"]["messages"][-1] == {"role": "user", "content": "hello"}


def test_long_messages_are_capped_newest_kept():
    many = [{"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 10)} for _ in range(10)]
    record = sent_record(many, [])
    assert record["messages"][0]["truncated"] == MAX_MESSAGE_CHARS + 10
    assert sum(len(m["content"]) for m in record["messages"]) <= MAX_TOTAL_CHARS
    assert record["omitted"] == 10 - len(record["messages"]) > 0
    image = sent_record([{"role": "user", "content": [{"type": "text", "text": "see"},
                                                      {"type": "image_url", "image_url": {"url": "data:..."}}]}], [])
    assert image["messages"][0]["content"] == "see\n[image]"
    assert deployment_secrets({"FLOWLOOM_SECRET_A": "abc", "FLOWLOOM_SECRET_B": "longer-one", "OTHER": "zzzz"}) \
        == ["longer-one"], "short values and other variables are not secrets to mask"
