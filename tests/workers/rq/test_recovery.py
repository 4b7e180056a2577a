"""Durability of queued runs: a worker SIGKILLed mid-run is noticed, the run is enqueued
again and another worker continues it from its last checkpoint (finished nodes are never
executed again); a stopped run never runs again. On PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import time

import pytest
from redis import Redis
from rq.job import Job

from tests.workers.rq.conftest import chain, open_api, post


def five_nodes(counter) -> dict:
    """start -> a (POST, counted) -> gate (POST, held) -> c (POST) -> end: node 3 is the gate."""
    return chain("durable", [post("a", f"{counter.url}/hit/a"), post("gate", f"{counter.url}/gate/g"),
                             post("c", f"{counter.url}/hit/c")],
                 {"a": "a.json.node", "g": "gate.json.node", "c": "c.json.node"})


def cold_stop(deployment, name: str, timeout: float = 30.0) -> int:
    """After a warm stop was requested: the exit code of a second (cold) SIGINT.

    RQ ignores a second signal that arrives within a second of the moment its handler ran
    for the first, and on a loaded machine that handler can run well after the signal was
    sent: so wait for the worker to log the warm request, then signal again until it exits.
    """
    proc = deployment.workers[name]
    deadline = time.monotonic() + timeout
    while "warm shut down requested" not in deployment.log(name):
        assert time.monotonic() < deadline, deployment.log(name)
        time.sleep(0.05)
    while True:
        time.sleep(1.2)
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            assert time.monotonic() < deadline, deployment.log(name)


@pytest.fixture
def worker_log(caplog):
    """What this process's ``flowloom.worker`` logger (the API's orphan follower) logs, held
    directly: another test of the process may have made the flowloom loggers not propagate."""
    logger = logging.getLogger("flowloom.worker")
    logger.addHandler(caplog.handler)
    yield caplog
    logger.removeHandler(caplog.handler)


async def test_worker_killed_during_node_three_the_other_worker_completes_the_run_once(any_deployment, counter, worker_log):
    deployment = any_deployment
    deployment.start_worker("w1")
    deployment.start_worker("w2")
    deployment.wait_for_workers("w1", "w2")
    async for api in open_api(deployment):
        started = await api.start(five_nodes(counter))
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        await asyncio.to_thread(counter.wait_for, "g")  # a finished (checkpointed), the gate is running
        owner = (await api.service.get("default", run_id)).owner
        victim = next(name for name, proc in deployment.workers.items() if proc.pid == owner.pid)
        deployment.workers[victim].send_signal(signal.SIGKILL)
        deployment.workers[victim].wait(10)
        counter.gate.set()
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=30) == "succeeded"

        survivor = next(name for name in deployment.workers if name != victim)
        # the survivor's recovery loop and the API's follower both look for orphans every
        # second; whichever looks first enqueues the run again (once: the lease decides)
        requeued = f"run {run_id}: its worker is gone"
        assert requeued in deployment.log(survivor) or requeued in worker_log.text, deployment.log(survivor)
        node_runs = {n.node_id: n for n in await api.service.node_runs("default", run_id)}
        assert {k: (n.status.value, n.attempts) for k, n in node_runs.items()} == {
            "start": ("succeeded", 1), "a": ("succeeded", 1), "gate": ("succeeded", 2), "c": ("succeeded", 1),
            "end": ("succeeded", 1)}  # the gate was running at the kill: it ran twice, and says so
        assert counter.names().count("a") == 1 and counter.names().count("c") == 1, counter.names()
        gate_keys = counter.keys("g")
        assert len(gate_keys) == 2 and gate_keys[0] == gate_keys[1], \
            "only the node that was running runs again, with the same idempotency key"
        state = await api.service.state("default", run_id)
        assert state.outputs == {"a": "a", "g": "g", "c": "c"}
        events = await api.service.stores.events.read("default", run_id)
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(set(seqs)), "one durable event per seq"
        assert [e["node_id"] for e in events if e["type"] == "node_started"].count("a") == 1


async def test_a_stopped_queued_run_never_runs_even_when_a_worker_takes_its_job(deployment, api, counter):
    doc = chain("stopped", [post("a", f"{counter.url}/hit/a")])
    started = await api.start(doc)
    run_id = started.json()["run_id"]
    stopped = await api.client.post(f"/v1/runs/{run_id}/stop", headers=api.auth)
    assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled", stopped.text
    deployment.start_worker("w1", "--burst")
    # a starting worker first settles the orphans it finds (up to SETTLE_S, 20 s), then
    # takes the job: on a loaded 2-core machine start-up plus settling passed 30 s
    code = await asyncio.to_thread(deployment.workers["w1"].wait, 90)
    assert code == 0, deployment.log("w1")
    job = Job.fetch(f"run-{run_id}", connection=Redis.from_url(deployment.redis_url))
    assert job.return_value() == "already cancelled"
    assert counter.names() == [], "a stopped run's nodes never execute"
    assert (await api.service.get("default", run_id)).status.value == "cancelled"


async def test_a_worker_stopped_twice_mid_run_leaves_the_run_to_another_worker(deployment, api, counter):
    deployment.start_worker("w1")
    deployment.wait_for_workers("w1")
    run_id = (await api.start(five_nodes(counter))).json()["run_id"]
    await asyncio.to_thread(counter.wait_for, "g")
    first = deployment.workers["w1"]
    first.send_signal(signal.SIGINT)  # warm: would finish the run first
    assert await asyncio.to_thread(cold_stop, deployment, "w1") == 1
    log = deployment.log("w1")
    assert "another worker continues them" in log and "Traceback" not in log, log
    assert (await api.service.get("default", run_id)).status.value == "running", "not ended by the shutdown"
    deployment.start_worker("w2")
    counter.gate.set()
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=30) == "succeeded"
    assert counter.names().count("a") == 1 and counter.names().count("c") == 1
