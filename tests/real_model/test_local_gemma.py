"""Flowloom against a real local model: Gemma 3 270M on llama-cpp-python's server
(``conftest.py`` starts the stack), every flow through ``/v1/chat/completions`` with the
official ``openai`` SDK against a real ``flowloom serve``.

A 270M model is weak: it may pick a wrong category or fail a run. What is checked is the
engine, on every flow: each request Flowloom sent carried a ``max_tokens`` and no
reply went over it; the usage Flowloom reports is the server's count when the server
gave one and is marked estimated when it did not; no answer is a format example or a
placeholder of Flowloom's own prompts; every run ends in a named state (a failure has a
reason and a message, never a traceback). Durations, tokens and outcomes of each flow
are collected (``FLOWLOOM_TEST_REAL_MODEL_REPORT``) for bench/README.md.
"""

from __future__ import annotations

import json
import platform
import time
from typing import Any

import openai
import pytest

from nodes.agent.protocol import EXAMPLE_ANSWER, EXAMPLE_CALL
from tests.real_model.conftest import LocalStack
from tests.real_model.recorder import Call

pytestmark = pytest.mark.real_model

#: what an answer must never be or contain: Flowloom's own prompt examples and placeholders
PLACEHOLDERS = ("<your final answer>", "<answer>", "<id>", EXAMPLE_ANSWER, json.dumps(EXAMPLE_CALL["params"]))
ENDED = {"succeeded", "failed", "cancelled", "paused"}
#: seconds one turn may take on a loaded 2-core machine (the model generates ~10-30 tokens/s)
TURN_S = 900.0

CLASSIFIER: dict[str, Any] = {
    "id": "ticket_router", "name": "Ticket router", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "route", "type": "classify_question", "config": {"model": "default", "categories": [
                  {"id": "billing", "name": "Billing", "description": "invoices, charges, refunds, payment methods"},
                  {"id": "shipping", "name": "Shipping", "description": "deliveries, parcels, tracking, late orders"},
                  {"id": "other", "name": "Other", "description": "anything else", "fallback": True}]}},
              {"id": "say", "type": "answer", "config": {"text": "{{ route.category }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "route"},
              *({"id": f"e-{c}", "source": "route", "sourceHandle": c, "target": "say"}
                for c in ("billing", "shipping", "other"))],
}
EXTRACTOR: dict[str, Any] = {
    "id": "contact_card", "name": "Contact card", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "card", "type": "extract_fields", "config": {"model": "default", "fields": [
                  {"name": "name", "type": "string", "description": "the person's full name", "required": True},
                  {"name": "city", "type": "string", "description": "the city they live in"}]}},
              {"id": "say", "type": "answer", "config": {
                  "text": "{% if card.success %}{{ card.name }} ({{ card.city }}){% else %}no card{% endif %}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "card"}, {"id": "e2", "source": "card", "target": "say"}],
}
CHAT: dict[str, Any] = {
    "id": "small_talk", "name": "Small talk", "inputs": [{"name": "query", "type": "string"}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "reply", "type": "chat", "config": {"model": "default", "max_tokens": 120,
                                                         "system_prompt": "You are a friendly assistant. Answer briefly."}},
              {"id": "say", "type": "answer", "config": {"text": "{{ reply.answer }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "reply"}, {"id": "e2", "source": "reply", "target": "say"}],
}

#: (case id, app, message, inputs besides ``query`` (``base_url``: the stub API's), streamed)
FLOWS = [
    ("support_triage", "support_triage", "My order A-1234 arrived damaged. Please help, my email is ada@example.com.",
     {}, False),
    ("tool_agent", "tool_agent", "What is the weather in Paris, in Fahrenheit?",
     {"question": "What is the weather in Paris, in Fahrenheit?", "base_url": None}, False),
    ("classifier", "ticket_router", "I was charged twice on my last invoice.", {}, False),
    ("extractor", "contact_card", "Hi, I am Grace Hopper and I live in Arlington.", {}, False),
    ("chat_streamed", "small_talk", "Name one colour of the sky.", {}, True),
]


def test_the_probe_reports_what_llama_cpp_python_does(local_stack: LocalStack):
    """What the probe found, for the README: llama-cpp-python answers a call forced by
    ``tool_choice`` with a grammar-constrained call, ignores tools under ``auto`` with a
    chat format like Gemma's, and sends no usage in streams."""
    report = local_stack.probe
    if report is None:
        pytest.skip("this checkout has no `flowloom models probe`")
    local_stack.results.append({"flow": "probe", "report": report})
    assert report["forced_tool_call"]["ok"] is True, report
    assert report["free_tool_call"]["ok"] is not True, report
    assert report["stream_usage"]["ok"] is False, report
    assert report["tools"] == "forced" and report["written_to"], report


def _publish(stack: LocalStack, doc: dict[str, Any]) -> None:
    with stack.http() as http:
        if http.get(f"/v1/workflows/{doc['id']}").status_code == 404:
            created = http.post("/v1/workflows", json=doc)
            assert created.status_code == 201, created.text
        published = http.post(f"/v1/workflows/{doc['id']}/publish", json={"note": "real-model tier"})
        assert published.status_code in (200, 201), published.text


@pytest.fixture(scope="module")
def apps(local_stack: LocalStack) -> LocalStack:
    """The three inline flows published, and the examples the flows use published too."""
    for doc in (CLASSIFIER, EXTRACTOR, CHAT):
        _publish(local_stack, doc)
    with local_stack.http() as http:
        listed = {m["id"] for m in http.get("/v1/models").json()["data"]}
        for example in ("support_triage", "tool_agent"):
            if example not in listed:
                published = http.post(f"/v1/workflows/{example}/publish", json={"note": "real-model tier"})
                assert published.status_code in (200, 201), published.text
    return local_stack


def _turn(stack: LocalStack, app: str, message: str, inputs: dict[str, Any], streamed: bool) -> dict[str, Any]:
    """One turn through the SDK: what came back (content, finish reason, usage, run id) or
    the API error; raises only what the SDK raises for a transport problem."""
    client = openai.OpenAI(base_url=f"{stack.flowloom_url}/v1", api_key=stack.key, max_retries=0, timeout=TURN_S)
    messages = [{"role": "user", "content": message}]
    try:
        if not streamed:
            done = client.chat.completions.create(model=app, messages=messages, extra_body={"inputs": inputs})
            return {"content": done.choices[0].message.content or "", "finish": done.choices[0].finish_reason,
                    "usage": done.usage.model_dump() if done.usage else None, "run_id": done.model_extra["flowloom"]["run_id"]}
        chunks = list(client.chat.completions.create(model=app, messages=messages, stream=True,
                                                     extra_body={"inputs": inputs}))
        last = chunks[-1]
        return {"content": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
                "finish": next((c.choices[0].finish_reason for c in reversed(chunks) if c.choices
                                and c.choices[0].finish_reason), None),
                "usage": last.usage.model_dump() if last.usage else None,
                "run_id": (last.model_extra.get("flowloom") or {}).get("run_id")}
    except openai.APIStatusError as exc:
        return {"error": {"status": exc.status_code, "body": exc.body}}


def _latest_run(stack: LocalStack, app: str) -> dict[str, Any]:
    with stack.http() as http:
        runs = http.get("/v1/runs", params={"workflow_id": app, "limit": 1}).json()["runs"]
        assert runs, f"no run of {app}"
        return http.get(f"/v1/runs/{runs[0]['run_id']}").json()


def _check_calls(calls: list[Call]) -> None:
    """Every request carried a cap, and the server never went over it."""
    assert calls, "the flow sent no model request"
    for call in calls:
        assert call.max_tokens is not None and call.max_tokens > 0, f"a request without max_tokens: {call}"
        if call.usage:
            assert call.usage["completion_tokens"] <= call.max_tokens, call


def _check_usage(turn: dict[str, Any], run: dict[str, Any], calls: list[Call]) -> None:
    """Flowloom's usage is the server's count when every call reported one, else marked
    estimated; an estimate never goes over the caps of the requests made."""
    answered = [c for c in calls if c.status == 200]
    # a call that produced nothing (the server gave up at once) counted no tokens either way
    counted = [c for c in answered if c.usage or c.text or c.tool_calls]
    reported = all(c.usage for c in counted)
    if counted:
        assert run["usage_estimated"] is (not reported), (run["usage_estimated"], answered)
    if counted and reported:
        assert run["tokens_out"] == sum(c.usage["completion_tokens"] for c in answered), (run, answered)
        assert run["tokens_in"] == sum(c.usage["prompt_tokens"] for c in answered), (run, answered)
    assert run["tokens_out"] <= sum(c.max_tokens or 0 for c in answered), (run["tokens_out"], answered)
    for node_run in run["node_runs"]:
        usage = node_run.get("usage")
        if usage and usage["calls"]:
            assert usage["tokens_out"] <= usage["calls"] * max(c.max_tokens or 0 for c in answered), node_run
    usage = turn.get("usage")
    if usage is not None:
        assert usage.get("estimated") is run["usage_estimated"], (usage, run["usage_estimated"])
        assert usage["completion_tokens"] <= sum(c.max_tokens or 0 for c in answered), (usage, answered)


def _check_answer(turn: dict[str, Any], run: dict[str, Any]) -> None:
    """A named end, no traceback, no placeholder as the answer."""
    assert run["status"] in ENDED, run["status"]
    text = json.dumps(turn)
    assert "Traceback" not in text and "Traceback" not in json.dumps(run.get("error")), text
    if "error" in turn:
        error = turn["error"]["body"] or {}
        assert turn["error"]["status"] in (422, 500) and error.get("code") and error.get("message"), turn
        assert run["status"] == "failed" and run["error"]["message"], run
        assert run["error"].get("reason") or run["error"].get("type"), run["error"]
        return
    assert turn["finish"] in ("stop", "length", "content_filter"), turn
    for placeholder in PLACEHOLDERS:
        assert placeholder not in turn["content"], f"a placeholder reached the answer: {turn['content']!r}"
    if run["status"] == "failed":
        assert run["error"]["message"] and (run["error"].get("reason") or run["error"].get("type")), run


@pytest.mark.parametrize(("case", "app", "message", "inputs", "streamed"), FLOWS, ids=[f[0] for f in FLOWS])
def test_a_flow_on_the_local_model_behaves(apps: LocalStack, case: str, app: str, message: str,
                                           inputs: dict[str, Any], streamed: bool):
    inputs = {k: (apps.stub_url if k == "base_url" else v) for k, v in inputs.items()}
    mark = apps.recorder.mark()
    started = time.monotonic()
    turn = _turn(apps, app, message, inputs, streamed)
    seconds = time.monotonic() - started
    run = _latest_run(apps, app)
    calls = apps.recorder.since(mark)
    apps.results.append({
        "flow": case, "app": app, "streamed": streamed, "seconds": round(seconds, 1), "status": run["status"],
        "error": run.get("error") and {k: run["error"].get(k) for k in ("reason", "type", "message", "node_id")},
        "answer": (turn.get("content") or "")[:200], "finish_reason": turn.get("finish"),
        "tokens_in": run["tokens_in"], "tokens_out": run["tokens_out"], "usage_estimated": run["usage_estimated"],
        "model_calls": len(calls), "caps": [c.max_tokens for c in calls],
        "server_completion_tokens": [c.usage and c.usage.get("completion_tokens") for c in calls],
        "server_finish": [c.finish_reason for c in calls], "machine": f"{platform.machine()}, {platform.processor()}",
    })
    _check_calls(calls)
    _check_answer(turn, run)
    _check_usage(turn, run, calls)
