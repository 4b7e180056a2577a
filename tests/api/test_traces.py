"""OpenTelemetry traces, exported with OTLP/HTTP to a real receiver (the protobuf requests
the SDK's exporter sends, decoded): a run through the API is a span of the caller's trace,
its nodes nest under it (an iteration's body under the iteration), its model call follows
the GenAI conventions, its HTTP request is traced and sends ``traceparent`` to the callee,
and no secret reaches an attribute. With no ``OTEL_*`` variable nothing is set up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.settings import Settings
from engine.telemetry import telemetry
from tests.api.conftest import open_api, order_workflow
from tests.support.openai_server import http_error, text_reply
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

#: the caller's trace context: the run must be a span of this trace, under this span
CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
#: secrets a workflow sends to its HTTP callee: never in a span
QUERY_SECRET, HEADER_SECRET = "q-secret-5f1e2d", "h-secret-9a8b7c"


@dataclass
class Callee:
    """A local HTTP server that records the ``traceparent`` (and path) of each request."""

    url: str
    seen: list[dict[str, str]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, "traceparent": self.headers.get("traceparent", "")})  # type: ignore[attr-defined]
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def callee() -> Iterator[Callee]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Callee(f"http://127.0.0.1:{server.server_address[1]}", server.seen)  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from otlp_receiver()


def tracing_env(receiver: OtlpReceiver, service: str = "flowloom-test") -> dict[str, str]:
    """The standard variables pointing a process at ``receiver`` (spans exported every 50 ms)."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "50"}


def traced_workflow(callee_url: str) -> dict[str, Any]:
    """start -> ask (a model call) -> each (an iteration: one HTTP request per item, with a
    secret in the query and one in a header) -> end."""
    return {"id": "traced", "name": "Traced", "inputs": [{"name": "items", "type": "array"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "ask", "type": "chat", "config": {"model": "default", "user_prompt": "hello"}},
                      {"id": "each", "type": "iteration",
                       "config": {"items": {"ref": "inputs.items"}, "collect": {"ref": "call.status_code"}}},
                      {"id": "call", "type": "http_request", "parent": "each",
                       "config": {"url": callee_url + "/hook/{{ each.item }}", "query": {"api_key": QUERY_SECRET},
                                  "headers": {"Authorization": f"Bearer {HEADER_SECRET}"}, "timeout": 30}},
                      {"id": "end", "type": "end",
                       "config": {"outputs": [{"name": "codes", "value": {"ref": "each.results"}}]}}],
            "edges": [{"id": "e1", "source": "start", "target": "ask"},
                      {"id": "e2", "source": "ask", "target": "each"},
                      {"id": "e3", "source": "each", "target": "end"}]}


def by_name(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = by_name(spans, name)
    assert len(found) == 1, (name, sorted(s.name for s in spans))
    return found[0]


def with_parent(spans: list[ReceivedSpan], name: str) -> bool:
    """Whether the span ``name`` and its parent (the API request's span, ended after the
    run: exported later) both arrived."""
    found = by_name(spans, name)
    return bool(found) and any(s.span_id == found[0].parent_id for s in spans)


def run_tree_done(run_id: str, items: int):
    """A wait condition: the run's span, its parent and its HTTP requests' spans arrived."""
    def done(spans: list[ReceivedSpan]) -> bool:
        runs = [s for s in spans if s.attributes.get("flowloom.run.id") == run_id and s.name.startswith("workflow")]
        return bool(runs) and with_parent(spans, runs[0].name) and \
            len([s for s in spans if s.name == "node call"]) >= items and \
            len([s for s in spans if s.name == "GET"]) >= items
    return done


def check_run_tree(spans: list[ReceivedSpan], run_id: str, callee: Callee, secrets: list[str]) -> ReceivedSpan:
    """The shape every traced run of :func:`traced_workflow` (two items) has; returns its run span."""
    run = one(spans, "workflow traced")
    assert run.attributes["flowloom.run.id"] == run_id and run.attributes["flowloom.run.status"] == "succeeded"
    assert run.attributes["flowloom.workflow.id"] == "traced" and run.attributes["flowloom.tenant.id"] == "default"
    trace_id = run.trace_id
    nodes = {s.attributes["flowloom.node.id"]: s for s in spans if s.name.startswith("node ") and
             s.name != "node call"}
    for nid in ("start", "ask", "each", "end"):
        assert nodes[nid].parent_id == run.span_id and nodes[nid].trace_id == trace_id, nid
        assert nodes[nid].attributes["flowloom.node.status"] == "succeeded"
    assert nodes["ask"].attributes["flowloom.node.kind"] == "chat"
    # the iteration's body nodes are children of the iteration's span, one per item
    calls = by_name(spans, "node call")
    assert len(calls) == 2 and {c.parent_id for c in calls} == {nodes["each"].span_id}
    assert sorted(c.attributes["flowloom.loop.iteration"] for c in calls) == [0, 1]
    assert {c.attributes["flowloom.loop.id"] for c in calls} == {"each"}
    # the model call: GenAI conventions, under its node
    chat = one(spans, "chat default")
    assert chat.parent_id == nodes["ask"].span_id and chat.kind == 3  # SPAN_KIND_CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "default"
    assert chat.attributes["gen_ai.provider.name"] == chat.attributes["gen_ai.system"]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12 and chat.attributes["gen_ai.usage.output_tokens"] == 3
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert not chat.events, "no prompt or completion without content capture"
    # the HTTP requests: traced under their node, traceparent sent, URL without its query
    gets = by_name(spans, "GET")
    assert {g.parent_id for g in gets} == {c.span_id for c in calls}
    hooks = [seen for seen in callee.seen if seen["path"].startswith("/hook/")]
    assert len(hooks) == 2
    for seen in hooks:
        version, trace, parent, _flags = seen["traceparent"].split("-")
        assert trace == trace_id and parent in {g.span_id for g in gets}, seen
    for get in gets:
        url = get.attributes.get("url.full") or get.attributes.get("http.url")
        assert url and url.startswith(callee.url + "/hook/") and "?" not in url, url
    # no secret in any attribute or event of the trace
    for span in spans:
        text = json.dumps([span.attributes, span.events, span.status_message], default=str)
        for secret in secrets:
            assert secret not in text, (span.name, secret)
    return run


async def test_a_run_through_the_api_is_a_span_of_the_callers_trace(tmp_path, monkeypatch, receiver, callee,
                                                                    models_file, openai_server):
    for name, value in tracing_env(receiver).items():
        monkeypatch.setenv(name, value)
    openai_server.responder = lambda body: text_reply("ok", usage=(12, 3))
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'runs.db'}",
                        http_allow=["127.0.0.1"], models=models_file)
    async with open_api(settings) as api:
        assert api.app.state.tracing is not None
        answer = await api.client.post("/v1/runs", json={"workflow": traced_workflow(callee.url),
                                                         "inputs": {"items": ["a", "b"]}},
                                       headers={**api.auth(), "traceparent": TRACEPARENT})
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
        run_id = answer.json()["run_id"]
        spans = receiver.wait_for(run_tree_done(run_id, 2))
        key = api.key
    run = check_run_tree(spans, run_id, callee, [QUERY_SECRET, HEADER_SECRET, "sk-scripted-test", key])
    assert run.trace_id == CALLER_TRACE
    # the API's request span is the run's parent, and the caller's span is the request's
    request = next(s for s in spans if s.span_id == run.parent_id)
    assert request.parent_id == CALLER_SPAN and request.attributes.get("http.route") == "/v1/runs"
    assert {s.service for s in spans} == {"flowloom-test"}
    assert telemetry().__class__.__name__ == "Telemetry", "the app put back the telemetry it replaced"


async def test_prompts_and_completions_are_span_events_only_when_content_capture_is_on(
        tmp_path, monkeypatch, receiver, models_file, openai_server):
    for name, value in {**tracing_env(receiver), "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}.items():
        monkeypatch.setenv(name, value)
    openai_server.responder = lambda body: text_reply("the answer", usage=(5, 2))
    doc = {"id": "asked", "name": "Asked", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "ask", "type": "chat", "config": {"model": "default", "user_prompt": "what is up"}},
        {"id": "end", "type": "end", "config": {"outputs": []}}],
        "edges": [{"id": "e1", "source": "start", "target": "ask"}, {"id": "e2", "source": "ask", "target": "end"}]}
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'runs.db'}", models=models_file)
    async with open_api(settings) as api:
        answer = await api.client.post("/v1/runs", json={"workflow": doc}, headers=api.auth())
        assert answer.json()["status"] == "succeeded", answer.text
        spans = receiver.wait_for(lambda found: with_parent(found, "workflow asked"))
    chat = one(spans, "chat default")
    events = dict(chat.events)
    assert "what is up" in events["gen_ai.content.prompt"]["gen_ai.prompt"]
    assert "the answer" in events["gen_ai.content.completion"]["gen_ai.completion"]
    # no caller: the API's request span starts the trace, the run is its child
    run = one(spans, "workflow asked")
    request = next(s for s in spans if s.span_id == run.parent_id)
    assert request.parent_id == "" and request.trace_id == run.trace_id


@pytest.mark.slow  # the client's retries wait out their backoff
async def test_a_model_call_that_fails_after_retries_has_its_reason_and_retries_on_its_span(
        tmp_path, monkeypatch, receiver, models_file, openai_server):
    for name, value in tracing_env(receiver).items():
        monkeypatch.setenv(name, value)
    openai_server.responder = lambda body: http_error(503, "overloaded", type="server_error")
    doc = {"id": "fails", "name": "Fails", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "ask", "type": "chat", "config": {"model": "default", "user_prompt": "hi"}},
        {"id": "end", "type": "end", "config": {"outputs": []}}],
        "edges": [{"id": "e1", "source": "start", "target": "ask"}, {"id": "e2", "source": "ask", "target": "end"}]}
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'runs.db'}", models=models_file)
    async with open_api(settings) as api:
        answer = await api.client.post("/v1/runs", json={"workflow": doc}, headers=api.auth())
        assert answer.json()["status"] == "failed", answer.text
        spans = receiver.wait_for(lambda found: any(s.name == "workflow fails" for s in found))
    chat, node, run = one(spans, "chat default"), one(spans, "node ask"), one(spans, "workflow fails")
    reason = node.attributes["flowloom.error.reason"]
    assert chat.status_code == node.status_code == run.status_code == 2  # STATUS_CODE_ERROR
    assert chat.attributes["flowloom.error.reason"] == reason == run.attributes["flowloom.error.reason"]
    retries = [attrs for name, attrs in chat.events if name == "flowloom.retry"]
    assert retries and chat.attributes["flowloom.model.attempts"] == len(retries) + 1
    assert {attrs["flowloom.error.reason"] for attrs in retries} == {reason}
    assert len(openai_server.bodies) == len(retries) + 1


async def test_a_paused_run_resumed_later_stays_in_the_trace_it_was_created_in(tmp_path, monkeypatch, receiver):
    for name, value in tracing_env(receiver).items():
        monkeypatch.setenv(name, value)
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'runs.db'}")
    async with open_api(settings) as api:
        paused = await api.client.post("/v1/runs", json={"workflow": order_workflow(), "inputs": {"item": "tea"}},
                                       headers={**api.auth(), "traceparent": TRACEPARENT})
        assert paused.json()["status"] == "paused", paused.text
        run_id = paused.json()["run_id"]
        resumed = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "confirm"}, headers=api.auth())
        assert resumed.status_code in (200, 202), resumed.text
        deadline = time.monotonic() + 60
        while (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()["status"] != "succeeded":
            assert time.monotonic() < deadline, "the resumed run did not succeed"
            await asyncio.sleep(0.05)
        spans = receiver.wait_for(lambda found: len([s for s in found if s.name == "workflow order_confirm"]) == 2)
    first, second = sorted(by_name(spans, "workflow order_confirm"), key=lambda s: s.attributes["flowloom.run.resumed"])
    assert first.trace_id == second.trace_id == CALLER_TRACE
    assert first.parent_id == second.parent_id, "both executions are children of the request that created the run"
    assert first.attributes["flowloom.run.status"] == "paused" and "flowloom.paused" in dict(first.events)
    assert second.attributes["flowloom.run.status"] == "succeeded" and second.attributes["flowloom.run.resumed"]
    asked = [s for s in spans if s.name.startswith("node ") and "flowloom.interrupt" in dict(s.events)]
    assert asked and asked[0].attributes["flowloom.node.status"] == "waiting" and asked[0].parent_id == first.span_id


@pytest.mark.slow
def test_with_no_otel_variable_no_sdk_is_set_up_and_nothing_is_exported(tmp_path, receiver):
    """A process without ``OTEL_*`` variables runs a workflow through the API with no
    OpenTelemetry SDK loaded and no provider installed (a subprocess: a clean import state)."""
    script = f"""
import asyncio, sys
from engine.settings import Settings
from engine.telemetry import telemetry
from tests.api.conftest import open_api, hello_workflow

async def main():
    settings = Settings(home={str(tmp_path / 'home')!r}, database_url={f'sqlite:///{tmp_path / "runs.db"}'!r})
    async with open_api(settings) as api:
        answer = await api.client.post("/v1/runs", json={{"workflow": hello_workflow(), "inputs": {{"name": "Ada"}}}},
                                       headers=api.auth())
        assert answer.json()["status"] == "succeeded", answer.text
        print("tracing", api.app.state.tracing, type(telemetry()).__name__)
    from opentelemetry import trace
    print("sdk", sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
asyncio.run(main())
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FLOWLOOM_"))}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], env={**env, "PYTHONPATH": str(root)}, cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tracing None PrometheusTelemetry" in done.stdout, done.stdout
    assert "sdk []" in done.stdout, done.stdout
    assert receiver.requests == 0
