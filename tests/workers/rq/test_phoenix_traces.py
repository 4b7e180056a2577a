"""Traces in a real OTLP backend: Arize Phoenix (``phoenix serve``, installed by
``.ci/phoenix-env`` in an environment of its own) receives what the API and a real
``flowloom worker`` export with nothing but the standard ``OTEL_*`` variables, and its
REST API gives back the tree of spans of a run with an LLM node (the scripted model), an
iteration of HTTP requests to a local server that records their ``traceparent``, and a
code node: inline in the API's process, and queued to the worker. Checked: the tree, the
attributes, the GenAI usage, one trace id across the caller, the API, the worker and the
HTTP callee, and no secret anywhere in a span. The queued run's trace is opened in
Phoenix's UI in headless Chromium; its screenshot is the README's
``web/screenshots/phoenix-trace.png`` when ``FLOWLOOM_TEST_README_SHOTS=1``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_traces import (
    CALLER_SPAN,
    CALLER_TRACE,
    HEADER_SECRET,
    QUERY_SECRET,
    TRACEPARENT,
    Callee,
    callee,
)
from tests.support.knowledge_files import knowledge_models
from tests.support.openai_server import TEST_API_KEY, TEST_KEY_ENV, text_reply
from tests.support.phoenix import Phoenix, PhoenixSpan, phoenix_env, phoenix_server
from tests.workers.rq.conftest import Deployment, open_api

__all__ = ["callee"]  # the fixture, shared

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the first test may wait for Phoenix's install

ROOT = Path(__file__).resolve().parents[3]
#: the Phoenix project the spans go to (a resource attribute Phoenix reads)
PROJECT = "flowloom-test"
#: set to 1 to copy the screenshot of Phoenix's UI into the README's images
README_SHOTS_ENV = "FLOWLOOM_TEST_README_SHOTS"
README_SHOT = ROOT / "web" / "screenshots" / "phoenix-trace.png"
#: what the scripted model answers, and counts
USAGE = (12, 3)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One Phoenix for the module (its start takes a while), in a temporary folder."""
    venv = phoenix_env()
    with phoenix_server(venv, tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def otel_env(phoenix: Phoenix, service: str) -> dict[str, str]:
    """The standard variables an operator sets to send traces to Phoenix (spans exported every 50 ms)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        "OTEL_SERVICE_NAME": service,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


def observed_workflow(callee_url: str) -> dict[str, Any]:
    """start -> ask (a model call) -> each (an iteration: one HTTP request per item, a secret
    in its query and one in a header) -> count (Python in the sandbox) -> end."""
    return {
        "id": "observed",
        "name": "Observed",
        "inputs": [{"name": "items", "type": "array"}],
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "ask", "type": "chat", "config": {"model": "default", "user_prompt": "hello"}},
            {
                "id": "each",
                "type": "iteration",
                "config": {"items": {"ref": "inputs.items"}, "collect": {"ref": "call.status_code"}},
            },
            {
                "id": "call",
                "type": "http_request",
                "parent": "each",
                "config": {
                    "url": callee_url + "/hook/{{ each.item }}",
                    "query": {"api_key": QUERY_SECRET},
                    "headers": {"Authorization": f"Bearer {HEADER_SECRET}"},
                    "timeout": 30,
                },
            },
            {
                "id": "count",
                "type": "code",
                "config": {
                    "language": "python",
                    "code": "def main(codes):\n    return {'n': len(codes)}\n",
                    "inputs": [{"name": "codes", "value": {"ref": "each.results"}}],
                    "outputs": [{"name": "n", "type": "number"}],
                },
            },
            {
                "id": "end",
                "type": "end",
                "config": {
                    "outputs": [
                        {"name": "codes", "value": {"ref": "each.results"}},
                        {"name": "n", "value": {"ref": "count.n"}},
                    ]
                },
            },
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "ask"},
            {"id": "e2", "source": "ask", "target": "each"},
            {"id": "e3", "source": "each", "target": "count"},
            {"id": "e4", "source": "count", "target": "end"},
        ],
    }


def named(spans: list[PhoenixSpan], name: str) -> list[PhoenixSpan]:
    return [s for s in spans if s.name == name]


def tree_done(spans: list[PhoenixSpan]) -> bool:
    """Phoenix has the whole tree: the request, the run, every node and HTTP request."""
    names = [s.name for s in spans]
    return (
        {"POST /v1/runs", "workflow observed", "node end", "chat default", "execute_code python"}
        <= set(names)
        and names.count("node call") == 2
        and names.count("GET") == 2
    )


def check_tree(spans: list[PhoenixSpan], run_id: str, callee: Callee, secrets: list[str]) -> PhoenixSpan:
    """The tree of spans Phoenix holds for a run of :func:`observed_workflow` (two items);
    returns the API's request span (the run's parent)."""
    assert {s.trace_id for s in spans} == {spans[0].trace_id}, "one trace"
    by_id = {s.span_id: s for s in spans}
    [run] = named(spans, "workflow observed")
    assert run.kind == "CHAIN" and run.status != "ERROR"
    assert (
        run.attributes["flowloom.run.id"] == run_id and run.attributes["flowloom.run.status"] == "succeeded"
    )
    assert (
        run.attributes["flowloom.workflow.id"] == "observed"
        and run.attributes["flowloom.tenant.id"] == "default"
    )
    request = by_id[run.parent_id]
    assert request.name == "POST /v1/runs" and request.attributes["http.route"] == "/v1/runs"
    nodes = {
        s.attributes["flowloom.node.id"]: s
        for s in spans
        if s.name.startswith("node ") and s.name != "node call"
    }
    assert set(nodes) == {"start", "ask", "each", "count", "end"}
    for nid, node in nodes.items():
        assert node.parent_id == run.span_id and node.attributes["flowloom.node.status"] == "succeeded", nid
    assert (
        nodes["ask"].attributes["flowloom.node.kind"] == "chat"
        and nodes["count"].attributes["flowloom.node.kind"] == "code"
    )
    # the iteration's body: one span per item under the iteration's span
    calls = named(spans, "node call")
    assert {c.parent_id for c in calls} == {nodes["each"].span_id}
    assert sorted(c.attributes["flowloom.loop.iteration"] for c in calls) == [0, 1]
    # the model call: the GenAI conventions, and Phoenix's own view of them (an LLM span with token counts)
    [chat] = named(spans, "chat default")
    assert chat.parent_id == nodes["ask"].span_id and chat.kind == "LLM"
    attrs = chat.attributes
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "default"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == USAGE
    assert attrs["gen_ai.response.finish_reasons"] == ["stop"] and attrs["gen_ai.provider.name"]
    assert (attrs["llm.token_count.prompt"], attrs["llm.token_count.completion"]) == USAGE
    # the sandboxed code: a span of its node
    [code] = named(spans, "execute_code python")
    assert code.parent_id == nodes["count"].span_id and code.attributes["flowloom.code.status"] == "ok"
    # the HTTP requests: client spans under their node, URL without its query; the callee got their traceparent
    gets = named(spans, "GET")
    assert {g.parent_id for g in gets} == {c.span_id for c in calls}
    for get in gets:
        url = get.attributes.get("url.full") or get.attributes.get("http.url")
        assert url and url.startswith(callee.url + "/hook/") and "?" not in url, url
    hooks = [seen for seen in callee.seen if seen["path"].startswith("/hook/")]
    assert len(hooks) == 2
    for seen in hooks:
        _version, trace, parent, _flags = seen["traceparent"].split("-")
        assert trace == run.trace_id and parent in {g.span_id for g in gets}, seen
    # nothing secret in any span Phoenix holds: attributes, events, status
    for span in spans:
        text = json.dumps(span.raw, default=str)
        for secret in secrets:
            assert secret not in text, (span.name, secret)
    return request


#: the runs' lease here: long enough that no stall of a loaded machine reads as a dead worker
LEASE_TTL_S = 60


def _models(deployment: Deployment, openai_server: Any) -> Path:
    openai_server.responder = lambda body: text_reply("ok", usage=USAGE)
    return knowledge_models(
        deployment.tmp / "models.toml", openai_server.base_url, TEST_KEY_ENV, embedding=False, rerank=False
    )


async def test_phoenix_holds_an_inline_run_as_a_tree_of_spans_in_the_callers_trace(
    phoenix, deployment, callee, openai_server, monkeypatch
):
    models = _models(deployment, openai_server)
    for name, value in {**otel_env(phoenix, "flowloom-api-test"), TEST_KEY_ENV: TEST_API_KEY}.items():
        monkeypatch.setenv(name, value)
    async for api in open_api(deployment, models=models):
        answer = await api.start(
            observed_workflow(callee.url),
            {"items": ["a", "b"]},
            mode="blocking",
            **{"X-Flowloom-Execution": "inline", "traceparent": TRACEPARENT},
        )
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
        run_id, key = answer.json()["run_id"], api.key
    spans = phoenix.wait_for(PROJECT, CALLER_TRACE, tree_done)
    request = check_tree(spans, run_id, callee, [QUERY_SECRET, HEADER_SECRET, TEST_API_KEY, key])
    assert request.parent_id == CALLER_SPAN, "the API's request is a child of the caller's span"


async def test_phoenix_holds_a_queued_run_in_the_trace_of_the_request_that_queued_it(
    phoenix, deployment, callee, openai_server, monkeypatch, tmp_path
):
    models = _models(deployment, openai_server)
    # the tree is checked span for span: a lease of the suite's 3 s could run out while a
    # loaded machine stalls the worker (its first code run loads the sandbox), and a run
    # taken over from its checkpoint re-runs the node in flight, adding its spans
    deployment.env.update(
        FLOWLOOM_MODELS=str(models),
        FLOWLOOM_LEASE_TTL=str(LEASE_TTL_S),
        **{TEST_KEY_ENV: TEST_API_KEY},
        **otel_env(phoenix, "flowloom-worker-test"),
    )
    for name, value in otel_env(phoenix, "flowloom-api-test").items():
        monkeypatch.setenv(name, value)
    deployment.start_worker("wp")
    deployment.wait_for_workers("wp")
    async for api in open_api(deployment, models=models, lease_ttl=LEASE_TTL_S):
        answer = await api.start(
            observed_workflow(callee.url), {"items": ["a", "b"]}, **{"X-Flowloom-Execution": "queued"}
        )
        assert answer.status_code == 202, answer.text
        run_id, key = answer.json()["run_id"], api.key
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=120) == "succeeded"
    assert f"run {run_id} (tenant default, flowloom-default): succeeded" in deployment.log("wp"), (
        "the worker ran it"
    )
    trace_id = phoenix.trace_of(PROJECT, "flowloom.run.id", run_id)
    spans = phoenix.wait_for(PROJECT, trace_id, tree_done)
    request = check_tree(spans, run_id, callee, [QUERY_SECRET, HEADER_SECRET, TEST_API_KEY, key])
    assert request.parent_id == "", "no caller: the API's request starts the trace the worker continues"
    _screenshot(phoenix, trace_id, tmp_path / "shots")


def _screenshot(phoenix: Phoenix, trace_id: str, shots: Path) -> None:
    """The trace in Phoenix's UI (web/e2e/phoenix-trace.mjs): its tree shows Flowloom's spans;
    the screenshot goes to the README's images when :data:`README_SHOTS_ENV` asks."""
    expected = [
        "POST /v1/runs",
        "workflow observed",
        "node ask",
        "chat default",
        "node each",
        "node count",
        "execute_code python",
    ]
    env = {
        **os.environ,
        "PHOENIX_URL": phoenix.url,
        "TRACE_ID": trace_id,
        "EXPECT": json.dumps(expected),
        "SELECT": "chat default",
        "E2E_SHOTS": str(shots),
    }
    done = subprocess.run(
        ["node", "e2e/phoenix-trace.mjs"],
        cwd=ROOT / "web",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shown"] == expected, result
    taken = Path(result["shot"])
    assert taken.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and taken.stat().st_size > 20_000
    if os.environ.get(README_SHOTS_ENV) == "1":
        shutil.copyfile(taken, README_SHOT)
