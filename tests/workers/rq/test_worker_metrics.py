"""Metrics of queued runs: the API's ``/metrics`` shows the jobs waiting in each RQ queue
and the age of the oldest; a real ``flowloom worker --metrics-port`` serves the runs it
executed, and a taken port is a clear error."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time

import httpx

from tests.api.test_metrics import samples, value
from tests.workers.rq.conftest import FLOWLOOM, ROOT, chain

QUEUE = "flowloom-default"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _until(read, expected: list[tuple[str, dict[str, str], float]], timeout: float = 60.0) -> dict:
    """Scrape with ``read()`` until every ``(name, labels, value)`` of ``expected`` holds;
    returns the last scrape."""
    deadline = time.monotonic() + timeout
    while True:
        scraped = await read()
        seen = [(name, labels, value(scraped, name, **labels)) for name, labels, _ in expected]
        if seen == expected:
            return scraped
        assert time.monotonic() < deadline, f"{seen} never became {expected}"
        await asyncio.sleep(0.1)


async def test_queue_depth_on_the_api_and_a_workers_own_runs_on_its_metrics_port(deployment, api):
    doc = chain("plain", [{"id": "say", "type": "template", "config": {"template": "hi"}}], {"said": "say.output"})
    answers = [await api.start(doc, **{"X-Flowloom-Execution": "queued"}) for _ in range(3)]
    assert {a.status_code for a in answers} == {202}, answers[0].text

    async def from_api() -> dict:
        answer = await api.client.get("/metrics")
        assert answer.status_code == 200, answer.text
        return samples(answer.text)

    waiting = await _until(from_api, [("flowloom_queue_jobs", {"queue": QUEUE}, 3),
                                      ("flowloom_runs", {"status": "pending"}, 3)])
    assert value(waiting, "flowloom_queue_oldest_job_age_seconds", queue=QUEUE) > 0
    assert value(waiting, "flowloom_queue_jobs", queue="flowloom-high") == 0

    port = _free_port()
    deployment.start_worker("w1", "--metrics-port", str(port))
    deployment.wait_for_workers("w1")

    async def from_worker() -> dict:
        async with httpx.AsyncClient() as client:
            try:
                return samples((await client.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text)
            except httpx.HTTPError:
                return {}

    done = await _until(from_worker, [("flowloom_runs_finished_total", {"workflow": "plain", "status": "succeeded"}, 3),
                                      ("flowloom_queue_jobs", {"queue": QUEUE}, 0), ("flowloom_runs_executing", {}, 0)])
    assert value(done, "flowloom_runs_started_total", workflow="plain") == 3
    assert value(done, "flowloom_checkpoint_duration_seconds_count") > 0
    assert value(done, "flowloom_node_duration_seconds_count", kind="template", status="succeeded") == 3
    await _until(from_api, [("flowloom_queue_jobs", {"queue": QUEUE}, 0), ("flowloom_runs", {"status": "pending"}, 0)])

    taken = subprocess.run([*FLOWLOOM, "worker", "--name", "w2", "--burst", "--metrics-port", str(port)],
                           env=deployment.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert taken.returncode == 2, taken.stdout + taken.stderr
    assert f"--metrics-port {port}" in taken.stderr and "Traceback" not in taken.stderr + taken.stdout


async def test_a_worker_with_json_logs_names_the_run_and_node_of_a_record(deployment, api):
    import json

    deployment.env["FLOWLOOM_LOG_FORMAT"] = "json"
    deployment.start_worker("wj")
    deployment.wait_for_workers("wj")
    doc = chain("logged", [{"id": "call", "type": "http_request",
                            "config": {"url": f"http://127.0.0.1:{_free_port()}/gone", "timeout": 5}}])
    answer = await api.start(doc, **{"X-Flowloom-Execution": "queued"})
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=60) == "failed"
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while True:
        records = [json.loads(line) for line in deployment.log("wj").splitlines() if line.startswith("{")]
        mine = [r for r in records if r.get("run_id") == run_id and r.get("node_id") == "call"]
        if mine:
            break
        assert time.monotonic() < deadline, deployment.log("wj")[-3000:]
        await asyncio.sleep(0.1)
    assert mine[0]["tenant_id"] == "default" and mine[0]["level"] == "INFO"
    assert any(r["logger"].startswith("rq.worker") for r in records), "RQ's own records are JSON too"
