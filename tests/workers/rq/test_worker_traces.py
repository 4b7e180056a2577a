"""Traces of a queued run: the API (in this process) creates the run inside the caller's
trace and queues it; a real ``flowloom worker`` process executes it and exports its spans
to the same OTLP receiver, in the same trace, the run's span a child of the API request's;
the HTTP callee gets a ``traceparent`` of that trace too."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.api.test_traces import (
    CALLER_SPAN,
    CALLER_TRACE,
    HEADER_SECRET,
    QUERY_SECRET,
    TRACEPARENT,
    callee,
    check_run_tree,
    one,
    run_tree_done,
    traced_workflow,
    tracing_env,
)
from tests.support.knowledge_files import knowledge_models
from tests.support.openai_server import TEST_API_KEY, TEST_KEY_ENV, text_reply
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.workers.rq.conftest import chain, open_api

__all__ = ["callee"]  # the fixture, shared


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from otlp_receiver()


async def test_a_queued_run_continues_the_trace_of_the_request_that_queued_it(
        deployment, receiver, callee, openai_server, monkeypatch):
    openai_server.responder = lambda body: text_reply("ok", usage=(12, 3))
    models = knowledge_models(deployment.tmp / "models.toml", openai_server.base_url, TEST_KEY_ENV,
                              embedding=False, rerank=False)
    deployment.env.update(FLOWLOOM_MODELS=str(models), **{TEST_KEY_ENV: TEST_API_KEY},
                          **tracing_env(receiver, "flowloom-worker-test"))
    for name, value in tracing_env(receiver, "flowloom-api-test").items():
        monkeypatch.setenv(name, value)
    deployment.start_worker("wt")
    deployment.wait_for_workers("wt")
    async for api in open_api(deployment, models=models):
        answer = await api.start(traced_workflow(callee.url), {"items": ["a", "b"]},
                                 **{"X-Flowloom-Execution": "queued", "traceparent": TRACEPARENT})
        assert answer.status_code == 202, answer.text
        run_id = answer.json()["run_id"]
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=90) == "succeeded"
        spans = receiver.wait_for(run_tree_done(run_id, 2), timeout=90)
        key = api.key
    run = check_run_tree(spans, run_id, callee, [QUERY_SECRET, HEADER_SECRET, TEST_API_KEY, key])
    assert run.trace_id == CALLER_TRACE and run.service == "flowloom-worker-test"
    request = next(s for s in spans if s.span_id == run.parent_id)
    assert request.service == "flowloom-api-test" and request.parent_id == CALLER_SPAN
    worker_spans = [s for s in spans if s.service == "flowloom-worker-test"]
    assert worker_spans and {s.trace_id for s in worker_spans} == {CALLER_TRACE}


async def test_a_failed_queued_run_has_its_reason_on_its_spans_and_its_log_records_name_them(
        deployment, receiver, monkeypatch):
    deployment.env.update(FLOWLOOM_LOG_FORMAT="json", **tracing_env(receiver, "flowloom-worker-test"))
    for name, value in tracing_env(receiver, "flowloom-api-test").items():
        monkeypatch.setenv(name, value)
    deployment.start_worker("wf")
    deployment.wait_for_workers("wf")
    doc = chain("falls", [{"id": "call", "type": "http_request",
                           "config": {"url": f"http://127.0.0.1:{_closed_port()}/gone", "timeout": 5}}])
    async for api in open_api(deployment):
        answer = await api.start(doc, **{"X-Flowloom-Execution": "queued"})
        assert answer.status_code == 202, answer.text
        run_id = answer.json()["run_id"]
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=90) == "failed"
    spans = receiver.wait_for(lambda found: any(s.name == "workflow falls" for s in found), timeout=90)
    run, node = one(spans, "workflow falls"), one(spans, "node call")
    assert run.status_code == node.status_code == 2  # STATUS_CODE_ERROR
    assert run.attributes["flowloom.run.status"] == node.attributes["flowloom.node.status"] == "failed"
    assert run.attributes["flowloom.error.reason"] == node.attributes["flowloom.error.reason"] == "http_error"
    assert node.parent_id == run.span_id
    # the worker's JSON log records written for the run name its trace and the node's span
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while True:
        records = [json.loads(line) for line in deployment.log("wf").splitlines() if line.startswith("{")]
        mine = [r for r in records if r.get("run_id") == run_id and r.get("node_id") == "call"]
        if mine:
            break
        assert time.monotonic() < deadline, deployment.log("wf")[-3000:]
        await asyncio.sleep(0.1)
    assert {(r["trace_id"], r["span_id"]) for r in mine} == {(node.trace_id, node.span_id)}
