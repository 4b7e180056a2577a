"""``GET /metrics`` (Prometheus) after a mixed load, on SQLite and PostgreSQL: the counters
match the run store (runs by workflow and status, paused runs, model calls and tokens),
event-stream followers are counted while connected, and the metrics can be turned off or
served on a port of their own."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engine.settings import Settings
from tests.api.conftest import hello_workflow, http_chain, open_api, order_workflow
from tests.api.test_run_usage import looped_calls
from tests.support.openai_server import text_reply


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: ``(name, sorted labels) -> value``."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(scrape: dict[Any, float], name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (0 when the series does not exist yet)."""
    return scrape.get((name, tuple(sorted(labels.items()))), 0.0)


def total(scrape: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include ``labels``."""
    return sum(v for (n, have), v in scrape.items() if n == name and set(labels.items()) <= set(have))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failing_workflow() -> dict[str, Any]:
    """start -> an HTTP request to a closed local port (fails) -> end."""
    url = f"http://127.0.0.1:{_closed_port()}/nothing"
    return {"id": "unreachable", "name": "Unreachable", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "call", "type": "http_request", "config": {"url": url, "timeout": 5}},
        {"id": "end", "type": "end", "config": {"outputs": []}}],
        "edges": [{"id": "e1", "source": "start", "target": "call"}, {"id": "e2", "source": "call", "target": "end"}]}


async def scrape(api: Any) -> dict[Any, float]:
    answer = await api.client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return samples(answer.text)


async def test_the_counters_match_the_run_store_after_a_mixed_load(api, models_file, openai_server):
    openai_server.responder = lambda body: text_reply("ok", usage=(12, 3))
    before = await scrape(api)
    assert value(before, "flowloom_runs_executing") == 0

    async def run(doc: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        answer = await api.client.post("/v1/runs", json={"workflow": doc, "inputs": inputs}, headers=api.auth())
        assert answer.status_code == 200, answer.text
        return answer.json()

    for name in ("Ada", "Bo", "Cy"):
        await run(hello_workflow(), {"name": name})
    await run(looped_calls(), {"items": ["a", "b", "c"]})
    for _ in range(2):
        assert (await run(failing_workflow(), {}))["status"] == "failed"
    paused = [await run(order_workflow(), {"item": "tea"}) for _ in range(2)]
    assert {p["status"] for p in paused} == {"paused"}
    stopped = await api.client.post(f"/v1/runs/{paused[0]['run_id']}/stop", headers=api.auth())
    assert stopped.status_code == 200, stopped.text

    after = await scrape(api)
    listed = (await api.client.get("/v1/runs", params={"limit": 100}, headers=api.auth())).json()["runs"]
    assert len(listed) == 8
    started = Counter(r["workflow_id"] for r in listed)
    ended = Counter((r["workflow_id"], r["status"]) for r in listed if r["status"] in {"succeeded", "failed",
                                                                                        "cancelled"})
    for workflow, count in started.items():
        assert value(after, "flowloom_runs_started_total", workflow=workflow) == count, workflow
    for (workflow, status), count in ended.items():
        assert value(after, "flowloom_runs_finished_total", workflow=workflow, status=status) == count
    assert total(after, "flowloom_runs_finished_total") == sum(ended.values()) == 7
    assert value(after, "flowloom_runs_paused_total", workflow="order_confirm") == 2
    assert value(after, "flowloom_runs", status="paused") == 1
    assert value(after, "flowloom_runs", status="running") == 0

    calls = total(after, "flowloom_model_calls_total", outcome="ok")
    assert calls == len(openai_server.bodies) == 5
    assert total(after, "flowloom_model_tokens_total", direction="input") == sum(r["tokens_in"] for r in listed) == 60
    assert total(after, "flowloom_model_tokens_total", direction="output") == sum(r["tokens_out"] for r in listed)
    assert value(after, "flowloom_node_duration_seconds_count", kind="http_request", status="failed") == 2
    assert total(after, "flowloom_node_duration_seconds_count", kind="template") >= 3
    assert value(after, "flowloom_checkpoint_duration_seconds_count") > 0
    assert value(after, "flowloom_runs_executing") == 0
    assert not [key for key in after if "tenant" in dict(key[1])], "no tenant is a label"


async def test_a_running_run_and_the_followers_of_its_events_are_counted_while_they_last(api, target):
    started = await api.client.post("/v1/runs", json={"workflow": http_chain(target.url, 1, path="/slow"),
                                                      "response_mode": "async"}, headers=api.auth())
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    http = await api.http()

    async def until(expected: dict[str, float]) -> None:
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            scraped = samples((await http.get("/metrics")).text)
            seen = {name: value(scraped, name, **({"status": "running"} if name == "flowloom_runs" else {}))
                    for name in expected}
            if seen == expected:
                return
            assert time.monotonic() < deadline, f"{seen} never became {expected}"
            await asyncio.sleep(0.05)

    assert await asyncio.to_thread(target.server.slow_started.wait, 20)
    async with http.stream("GET", f"/v1/runs/{run_id}/events", headers=api.auth()) as stream:
        assert stream.status_code == 200
        # the first frame, read without closing the iterator (leaving an ``async for`` would close the stream)
        frames = stream.aiter_text()
        assert "run_started" in await frames.__anext__()
        await until({"flowloom_sse_subscribers": 1, "flowloom_runs_executing": 1, "flowloom_runs": 1})
        stopped = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth())
        assert stopped.status_code == 200, stopped.text
        async for _chunk in frames:
            pass  # to the stream's end (the run was stopped)
    await until({"flowloom_sse_subscribers": 0, "flowloom_runs_executing": 0, "flowloom_runs": 0})
    scraped = samples((await http.get("/metrics")).text)
    assert value(scraped, "flowloom_runs_finished_total", workflow="http_chain", status="cancelled") == 1


async def test_metrics_can_be_turned_off_or_served_on_their_own_port(tmp_path, database_url):
    off = Settings(home=tmp_path / "off", database_url=database_url, metrics=False)
    async with open_api(off) as api:
        answer = await api.client.get("/metrics")
        assert answer.status_code == 404 and "FLOWLOOM_METRICS" in answer.text

    port = _closed_port()
    apart = Settings(home=tmp_path / "apart", database_url=database_url, metrics_port=port)
    async with open_api(apart) as api:
        assert (await api.client.get("/metrics")).status_code == 404
        ran = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                                    headers=api.auth())
        assert ran.json()["status"] == "succeeded", ran.text
        async with httpx.AsyncClient() as client:
            scraped = samples((await client.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text)
        assert value(scraped, "flowloom_runs_started_total", workflow="hello") == 1
    # the port is given back when the app stops (SO_REUSEADDR: the scrape's connection may
    # be in TIME_WAIT; a socket still listening there would fail the bind all the same)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
