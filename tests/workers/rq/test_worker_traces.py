"""Traces of a queued run: the API (in this process) creates the run inside the caller's
trace and queues it; a real ``flowloom worker`` process executes it and exports its spans
to the same OTLP receiver, in the same trace, the run's span a child of the API request's;
the HTTP callee gets a ``traceparent`` of that trace too."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.api.test_traces import (CALLER_SPAN, CALLER_TRACE, HEADER_SECRET, QUERY_SECRET, TRACEPARENT,
                                   callee, check_run_tree, run_tree_done, traced_workflow, tracing_env)
from tests.support.knowledge_files import knowledge_models
from tests.support.openai_server import TEST_API_KEY, TEST_KEY_ENV, text_reply
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.workers.rq.conftest import open_api

__all__ = ["callee"]  # the fixture, shared


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
