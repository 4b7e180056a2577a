"""``/v1/model-capabilities/{name}`` on SQLite and PostgreSQL: a model's limits and
capabilities as the tenant's runs see them, a tenant admin's override reaching the
tenant's runs (and not another tenant's), and the refusals (404, 403, 422)."""

from __future__ import annotations

from typing import Any

from tests.support.chat_flow import chat_flow
from tests.support.openai_server import text_reply

PREFIX = "/v1/model-capabilities"


def _classify_flow() -> dict[str, Any]:
    return {"id": "triage", "name": "Triage", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "cl", "type": "classify_question", "config": {
            "model": "default", "memory": False,
            "categories": [{"id": "billing", "name": "Billing"}, {"id": "other", "name": "Something else"}]}}],
        "edges": [{"id": "e1", "source": "start", "target": "cl"}]}


async def test_tenant_override_reaches_its_runs_only(api, models_file, openai_server):
    read = await api.client.get(f"{PREFIX}/default", headers=api.auth())
    assert read.status_code == 200, read.text
    before = read.json()
    assert before["override"] == {} and before["max_context"] == before["registry"]["max_context"] == 8192
    assert before["capabilities"]["tools"] == "native"

    changed = await api.client.put(f"{PREFIX}/default", headers=api.auth(), json={
        "max_context": 2048, "max_output_tokens": 300, "capabilities": {"tools": "none", "stream_usage": False}})
    assert changed.status_code == 200, changed.text
    after = changed.json()
    assert (after["max_context"], after["max_output_tokens"]) == (2048, 300)
    assert after["capabilities"]["tools"] == "none" and after["capabilities"]["stream_usage"] is False
    assert after["override"] == {"max_context": 2048, "max_output_tokens": 300,
                                 "capabilities": {"tools": "none", "stream_usage": False}}
    assert after["registry"]["max_context"] == 8192

    # the tenant's runs: the chat node's cap is the overridden one, no stream_options sent;
    # the classifier takes the JSON prompt protocol (no tools) with its own small cap
    openai_server.script(text_reply("hello", usage=None), text_reply('{"category": "billing"}', usage=None))
    run = await api.client.post("/v1/runs", headers=api.auth(),
                                json={"workflow": chat_flow("chatty"), "message": "hi"})
    assert run.status_code == 200 and run.json()["status"] == "succeeded", run.text
    run = await api.client.post("/v1/runs", headers=api.auth(), json={"workflow": _classify_flow(), "message": "bill"})
    assert run.status_code == 200 and run.json()["status"] == "succeeded", run.text
    chat_body, classify_body = openai_server.bodies[-2:]
    assert chat_body["max_tokens"] == 300 and "stream_options" not in chat_body
    assert "tools" not in classify_body and classify_body["max_tokens"] == 50

    # another tenant keeps the operator's values, in what it reads and in its runs
    other = await api.client.get(f"{PREFIX}/default", headers=api.auth(api.other_key))
    assert other.json()["max_context"] == 8192 and other.json()["override"] == {}
    openai_server.script(text_reply("hi b"))
    run = await api.client.post("/v1/runs", headers=api.auth(api.other_key),
                                json={"workflow": chat_flow("chatty"), "message": "hi"})
    assert run.status_code == 200 and run.json()["status"] == "succeeded", run.text
    assert openai_server.bodies[-1]["max_tokens"] == 512 and "stream_options" in openai_server.bodies[-1]

    dropped = await api.client.delete(f"{PREFIX}/default", headers=api.auth())
    assert dropped.status_code == 204, dropped.text
    again = await api.client.get(f"{PREFIX}/default", headers=api.auth())
    assert again.json()["max_context"] == 8192 and again.json()["override"] == {}
    assert (await api.client.delete(f"{PREFIX}/default", headers=api.auth())).status_code == 404


async def test_refusals(api, models_file):
    unknown = await api.client.get(f"{PREFIX}/no-such-model", headers=api.auth())
    assert unknown.status_code == 404 and "no-such-model" in unknown.json()["error"]["message"]
    invalid = await api.client.put(f"{PREFIX}/default", headers=api.auth(), json={"max_output_tokens": 9000})
    assert invalid.status_code == 422 and "max_output_tokens" in invalid.json()["error"]["message"], invalid.text
    bad_value = await api.client.put(f"{PREFIX}/default", headers=api.auth(), json={"capabilities": {"tools": "x"}})
    assert bad_value.status_code == 422, bad_value.text
    _record, plain = await api.keys.create_key("default", name="builder")
    read = await api.client.get(f"{PREFIX}/default", headers=api.auth(plain))
    assert read.status_code == 200
    refused = await api.client.put(f"{PREFIX}/default", headers=api.auth(plain), json={"max_context": 4096})
    assert refused.status_code == 403, refused.text
    assert (await api.client.get(f"{PREFIX}/default")).status_code == 401


def test_an_override_that_no_longer_applies_is_left_out_with_a_warning(caplog):
    from api.model_overrides import apply_overrides
    from nodes.llm.model_registry import load_registry

    base = load_registry(env={})
    with caplog.at_level("WARNING", logger="flowloom.models"):
        applied = apply_overrides(base, {"default": {"max_output_tokens": 200000},  # not below the context
                                         "gone": {"max_context": 1000},
                                         "gpt-4o": {"capabilities": {"tools": "forced"}}})
    assert applied.get("default").max_output_tokens == base.get("default").max_output_tokens
    assert applied.get("gpt-4o").capabilities.tools == "forced" and base.get("gpt-4o").capabilities.tools == "native"
    assert applied.fingerprint != base.fingerprint
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'default' left out" in messages and "'gone' left out" in messages
    assert apply_overrides(base, {}) is base
