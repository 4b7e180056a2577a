"""Queued runs on real worker processes: many runs over two workers, each executed exactly
once; the execution mode chosen per deployment and per run; queues, workers and jobs
visible to RQ."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time

from redis import Redis
from rq import Queue, Worker

from tests.support.chat_flow import chat_flow
from tests.workers.rq.conftest import ROOT, chain, open_api, post

RUNS = 50


async def test_two_workers_process_fifty_queued_runs_each_exactly_once(deployment, api, counter):
    deployment.start_worker("w1")
    deployment.start_worker("w2")
    doc = chain("count", [post("hit", f"{counter.url}/hit/h"),
                          {"id": "say", "type": "template", "config": {"template": "{{ hit.json.node }}"}}],
                {"said": "say.output"})
    deployment.wait_for_workers("w1", "w2")
    answers = await asyncio.gather(*(api.start(doc, {}) for _ in range(RUNS)))
    assert {r.status_code for r in answers} == {202}, answers[0].text
    run_ids = [r.json()["run_id"] for r in answers]
    assert len(set(run_ids)) == RUNS
    for run_id in run_ids:
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=60) == "succeeded"

    keys = counter.keys("h")
    assert len(keys) == RUNS and len(set(keys)) == RUNS, "each run's POST was sent exactly once"
    for run_id in run_ids:
        node_runs = await api.service.node_runs("default", run_id)
        assert [(n.node_id, n.attempts) for n in node_runs] == [("start", 1), ("hit", 1), ("say", 1), ("end", 1)]
        events = await api.service.stores.events.read("default", run_id)
        assert [e["type"] for e in events].count("run_started") == 1
        assert (await api.service.state("default", run_id)).outputs == {"said": "h"}

    connection = Redis.from_url(deployment.redis_url)
    workers = {w.name: w for w in Worker.all(connection=connection)}
    assert set(workers) == {"w1", "w2"}
    done = {name: w.successful_job_count for name, w in workers.items()}
    assert sum(done.values()) == RUNS and all(done.values()), f"both workers took jobs: {done}"
    assert Queue("flowloom-default", connection=connection).count == 0
    info = subprocess.run([sys.executable, "-m", "rq.cli", "info", "--url", deployment.redis_url],
                          capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert "flowloom-default" in info.stdout and "w1" in info.stdout and "w2" in info.stdout, info.stdout + info.stderr
    assert "flowloom-worker" in deployment.log("w1"), "worker log lines carry the fixed prefix"


async def test_a_blocking_plumbing_run_stays_inline_unless_the_caller_asks_for_the_queue(deployment, api):
    doc = chain("plain", [{"id": "say", "type": "template", "config": {"template": "hi"}}], {"said": "say.output"})
    inline = await api.start(doc, mode="blocking")
    assert inline.status_code == 200, inline.text
    assert inline.json()["status"] == "succeeded"
    assert Queue("flowloom-default", connection=Redis.from_url(deployment.redis_url)).count == 0

    queued = asyncio.create_task(api.start(doc, mode="blocking", **{"X-Flowloom-Execution": "queued",
                                                                    "X-Flowloom-Priority": "high"}))
    connection = Redis.from_url(deployment.redis_url)
    for _ in range(100):
        if Queue("flowloom-high", connection=connection).count == 1:
            break
        await asyncio.sleep(0.05)
    assert Queue("flowloom-high", connection=connection).count == 1, "a blocking run asked to queue waits in the queue"
    job = Queue("flowloom-high", connection=connection).jobs[0]
    assert job.args[0] == "default" and len(job.args) == 2 and not job.kwargs, "jobs carry only ids"
    assert job.timeout == 3600 + 60, "the job's timeout follows the run's max_wall_time"
    assert job.retries_left == 2, "RQ's abandoned-job handling is the backstop of the crash detection"
    deployment.start_worker("w1", "--queues", "high")
    answer = await asyncio.wait_for(queued, 30)
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text

    bad = await api.start(doc, **{"X-Flowloom-Execution": "elsewhere"})
    assert bad.status_code == 422 and "inline or queued" in bad.json()["error"]["message"]


def test_worker_without_redis_url_exits_2_with_a_message(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "api.cli", "worker", "--burst"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=30)
    assert proc.returncode == 2 and "FLOWLOOM_REDIS_URL" in proc.stderr and "Traceback" not in proc.stderr


async def test_a_paused_queued_run_is_answered_and_continued_by_a_worker(deployment, api):
    doc = json.loads((ROOT / "examples" / "order_confirm.json").read_text())
    deployment.start_worker("w1")
    run_id = (await api.start(doc, {"item": "tea"})).json()["run_id"]
    assert await api.wait_status(run_id, {"paused", "failed", "succeeded"}) == "paused"
    wrong = await api.client.post(f"/v1/runs/{run_id}/resume", headers=api.auth,
                                  json={"answers": {"no-such-question": "confirm"}})
    assert wrong.status_code == 409, wrong.text
    answered = await api.client.post(f"/v1/runs/{run_id}/resume", headers=api.auth, json={"answer": "confirm"})
    assert answered.status_code == 202, answered.text
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}) == "succeeded"
    state = await api.service.state("default", run_id)
    assert state.outputs["choice"] == "confirm" and state.answer.startswith("Order placed: ")
    assert re.search(f"run-{run_id}-[0-9a-f]{{8}}", deployment.log("w1")), "a second job of the worker continued it"


async def test_an_unreachable_queue_is_a_503_and_the_stored_run_does_not_stay_pending(deployment):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"  # bound, never listening: refused
    try:
        async for api in open_api(deployment, redis_url=dead):
            doc = chain("plain", [{"id": "say", "type": "template", "config": {"template": "hi"}}])
            answer = await api.start(doc)
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["type"] == "queue_unavailable" and answer.headers["Retry-After"] == "5"
            assert "127.0.0.1" not in answer.text
            (run,) = await api.service.list("default")
            assert run.status.value == "cancelled", "a run nothing will execute is ended, not left pending"
    finally:
        sock.close()


async def test_agent_and_tool_call_workflows_are_queued_whatever_the_response_mode(deployment, api):
    from engine.frontdoor import placed_on_queue
    from schemas.launch import Placement

    service = api.service

    def queued(doc, mode, execution=None):
        plan = service.compile(doc)
        return placed_on_queue(service, plan, Placement(execution=execution, detached=mode == "async"))

    for name in ("tool_agent", "research_agent"):
        doc = json.loads((ROOT / "examples" / f"{name}.json").read_text())
        assert queued(doc, "blocking") and queued(doc, "streaming")
        assert not queued(doc, "blocking", "inline")
    hello = json.loads((ROOT / "examples" / "hello.json").read_text())
    assert not queued(hello, "blocking") and not queued(hello, "streaming")
    assert queued(hello, "async")


async def test_a_streaming_request_for_a_queued_run_relays_its_events_from_the_bus(deployment, api, openai_server):
    from tests.support.openai_server import text_reply

    deployment.env.update(FLOWLOOM_LLM_BASE_URL=openai_server.base_url, FLOWLOOM_LLM_API_KEY="test",
                          FLOWLOOM_LLM_MODEL="scripted-upstream")
    openai_server.script(text_reply("Streamed from a worker.", chunk_size=3))
    deployment.start_worker("w1")
    body = {"workflow": chat_flow(), "message": "hi", "response_mode": "streaming"}
    queued = {**api.auth, "X-Flowloom-Execution": "queued"}
    answer = await api.client.post("/v1/runs", headers=queued, json=body)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    frames = [block for block in answer.text.split("\n\n") if block.startswith("event: ")]
    kinds = [block.split("\n")[0][len("event: "):] for block in frames]
    assert kinds[0] == "meta" and kinds[-1] == "done" and '"status":"succeeded"' in frames[-1]
    ids = [int(line[4:]) for block in frames for line in block.split("\n") if line.startswith("id: ")]
    assert ids == list(range(1, len(ids) + 1)), ids
    deltas = [json.loads(block.split("data: ", 1)[1])["text"] for block in frames if block.startswith("event: node_delta")]
    assert "".join(deltas) == "Streamed from a worker."


async def test_a_run_end_reaches_the_stream_only_once_the_database_has_it(deployment):
    import contextlib

    from api.composition import open_service
    from workers.redis_bus import redis_client
    from workers.rq.runtime import WorkerRuntime

    @contextlib.asynccontextmanager
    async def slow_last_checkpoint(settings):
        async with open_service(settings) as service:
            store, write = service.stores.runs, service.stores.runs.checkpoint

            async def checkpoint(state, delta, **kw):
                if state.status.value == "succeeded":
                    await asyncio.sleep(0.3)  # the run's end is emitted; its commit is late
                await write(state, delta, **kw)

            store.checkpoint = checkpoint
            yield service

    runtime = WorkerRuntime(deployment.settings(), slow_last_checkpoint, name="in-process")
    runtime.start()
    doc = chain("ends", [{"id": "say", "type": "template", "config": {"template": "hi"}}], {"said": "say.output"})
    try:
        async with open_service(deployment.settings()) as service:
            run_id = (await service.prepare(doc, {})).run_id
            job = asyncio.create_task(asyncio.to_thread(runtime.run_job, "default", run_id, queue="flowloom-default",
                                                        job_timeout=60))
            key, last, seen = f"flowloom:events:default:{run_id}", "0-0", {}
            deadline = time.monotonic() + 30
            while "run_finished" not in seen:
                # blocks shorter than the client's socket timeout (redis-py's default: 5 s)
                reply = await redis_client(deployment.redis_url).xread({key: last}, block=2_000)
                assert reply or time.monotonic() < deadline, f"run {run_id}: no end within 30 s: {seen}"
                for entry_id, fields in (reply[0][1] if reply else []):
                    last = entry_id
                    seen[fields["type"]] = (await service.get("default", run_id)).status.value
            assert seen["run_finished"] == "succeeded", seen
            # Read as the run starts (its claim may not be checkpointed as running yet): not held back.
            assert seen["run_started"] in ("pending", "running"), "the other events are not held back"
            assert await asyncio.wait_for(job, 10) == "succeeded"
            assert await redis_client(deployment.redis_url).zrange("flowloom:executing", 0, -1) == []
            assert 0 < await redis_client(deployment.redis_url).ttl(key) <= 3600, "the ended run's stream expires"
    finally:
        runtime.stop()


async def test_a_queued_resume_with_an_answer_that_fits_no_option_is_422_and_queues_nothing(deployment, api):
    doc = json.loads((ROOT / "examples" / "order_confirm.json").read_text())
    deployment.start_worker("w1")
    run_id = (await api.start(doc, {"item": "tea"})).json()["run_id"]
    assert await api.wait_status(run_id, {"paused", "failed", "succeeded"}) == "paused"
    refused = await api.client.post(f"/v1/runs/{run_id}/resume", headers=api.auth, json={"answer": "maybe"})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_answer" and "'maybe' is not one of: confirm (Confirm)" in error["message"]
    assert Queue("flowloom-default", connection=Redis.from_url(deployment.redis_url)).count == 0
    summary = await api.service.get("default", run_id)
    assert summary.status.value == "paused" and len(summary.pending_interrupts) == 1, "the answer was not stored"
    answered = await api.client.post(f"/v1/runs/{run_id}/resume", headers=api.auth, json={"answer": "Confirm"})
    assert answered.status_code == 202, answered.text
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}) == "succeeded"
    assert not Redis.from_url(deployment.redis_url).keys("flowloom:answers:*"), "answers travel in the run state"
