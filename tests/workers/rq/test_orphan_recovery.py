"""Queued orphans recover themselves: a worker SIGKILLed mid-run leaves a run that the next
worker to start queues again - at the front, ahead of the runs that were waiting - with no
operator command, and RQ's registries keep no ghost of the dead execution; a run whose
process died outside any worker is queued by the API server for the workers."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess

import pytest
from redis import Redis
from rq import Queue, Worker
from rq.job import Job
from rq.registry import StartedJobRegistry

from tests.workers.rq.conftest import FLOWLOOM, ROOT, chain, open_api, post
from workers.rq.queues import queue_names


def gated(counter) -> dict:
    """start -> a (counted) -> gate (held until the counter's gate opens) -> c (counted) -> end."""
    return chain("gated", [post("a", f"{counter.url}/hit/a"), post("gate", f"{counter.url}/gate/g"),
                           post("c", f"{counter.url}/hit/c")])


async def _collect(events) -> list[dict]:
    return [event async for event in events if event["type"] != "node_delta"]


def started_jobs(redis: Redis) -> list[str]:
    return [job_id for name in queue_names() for job_id in StartedJobRegistry(name, connection=redis).get_job_ids(
        cleanup=False)]


@pytest.mark.slow
async def test_a_killed_workers_run_goes_to_the_front_of_the_queue_and_leaves_no_ghost_job(deployment, counter):
    redis = Redis.from_url(deployment.redis_url)
    deployment.start_worker("w1")
    deployment.wait_for_workers("w1")
    async for api in open_api(deployment, recovery_concurrency=0):  # only the workers recover here
        orphan = (await api.start(gated(counter))).json()["run_id"]
        await asyncio.to_thread(counter.wait_for, "g")  # a finished (checkpointed); the gate is running on w1
        watcher = asyncio.ensure_future(_collect(api.service.watch("default", orphan)))
        waiting = [(await api.start(chain(f"later{i}", [post(f"r{i}", f"{counter.url}/hit/r{i}")]))).json()["run_id"]
                   for i in (2, 3)]  # queued behind the busy worker
        deployment.workers["w1"].send_signal(signal.SIGKILL)
        await asyncio.to_thread(deployment.workers["w1"].wait, 10)
        assert started_jobs(redis) == [f"run-{orphan}"], "the dead execution is still registered (the ghost)"
        assert Queue("flowloom-default", connection=redis).count == 2
        counter.gate.set()

        deployment.start_worker("w2")  # no `flowloom recover`: the worker finds the orphan itself
        for run_id in [orphan, *waiting]:
            assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=40) == "succeeded"

        finished = [(await api.service.get("default", run_id)).finished_at for run_id in [orphan, *waiting]]
        assert finished == sorted(finished), "the recovered run went ahead of the runs waiting in the queue"
        names = counter.names()
        assert names.index("c") < names.index("r2") < names.index("r3"), names
        assert names.count("a") == 1 and names.count("c") == 1, "finished nodes never run again"
        gate_keys = counter.keys("g")
        assert len(gate_keys) == 2 and gate_keys[0] == gate_keys[1], "the running node ran again, same key"
        events = await api.service.stores.events.read("default", orphan)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert [e["type"] for e in events].count("run_finished") == 1
        # a client following the run across the crash gets the recovered execution's events, no gap, no repeat
        followed = await asyncio.wait_for(watcher, 10)
        assert [e["seq"] for e in followed] == list(range(1, len(followed) + 1)) and followed[-1]["type"] == \
            "run_finished", [(e["seq"], e["type"]) for e in followed]

        # what `rq info` shows: no ghost executing job, no dead worker, nothing queued twice
        assert started_jobs(redis) == []
        assert {w.name for w in Worker.all(connection=redis)} == {"w2"}
        assert Job.fetch(f"run-{orphan}", connection=redis).get_status() == "failed"
        assert all(Queue(name, connection=redis).count == 0 for name in queue_names())
        log = deployment.log("w2")
        assert f"run {orphan}: its worker is gone" in log and "at the front of flowloom-default" in log, log
    redis.close()


@pytest.mark.slow
async def test_the_api_server_queues_a_run_whose_process_died_for_the_workers(deployment, counter, tmp_path):
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(gated(counter)))
    cli = subprocess.Popen([*FLOWLOOM, "run", str(path), "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, env=deployment.env, cwd=ROOT)
    assert cli.stdout is not None
    run_id = json.loads(await asyncio.to_thread(cli.stdout.readline))["run_id"]  # executed in the CLI process
    await asyncio.to_thread(counter.wait_for, "g")
    cli.send_signal(signal.SIGKILL)
    await asyncio.to_thread(cli.wait, 10)
    counter.gate.set()
    redis = Redis.from_url(deployment.redis_url)
    async for api in open_api(deployment):  # its recovery looks on start: the run goes to the queue
        queued = Queue("flowloom-default", connection=redis)
        deadline = asyncio.get_running_loop().time() + 20
        while not queued.job_ids:
            assert asyncio.get_running_loop().time() < deadline, "the orphan was never queued"
            await asyncio.sleep(0.05)
        (job_id,) = queued.job_ids
        assert job_id.startswith(f"run-{run_id}-")
        owner = (await api.service.get("default", run_id)).owner
        assert owner is not None and owner.id == f"queued:{job_id}", "claimed for that job: nobody queues it twice"
        deployment.start_worker("w1")
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=40) == "succeeded"
        assert counter.names().count("a") == 1 and counter.names().count("c") == 1
        assert len(set(counter.keys("g"))) == 1 and len(counter.keys("g")) == 2
        assert Job.fetch(job_id, connection=redis).return_value() == "succeeded"
    redis.close()
