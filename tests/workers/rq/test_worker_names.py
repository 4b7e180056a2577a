"""Worker names: a worker restarted under the name of one killed with SIGKILL starts (the
dead one's registration is cleaned and its run continued); a name held by a live worker,
of this host or another one with a fresh heartbeat, is refused with one plain line and
exit 2."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from datetime import UTC, datetime, timedelta

from redis import Redis
from rq import Worker
from rq.utils import utcformat

from tests.workers.rq.conftest import FLOWLOOM, ROOT, open_api
from tests.workers.rq.test_recovery import five_nodes


def registered(redis_url: str) -> dict[str, tuple[str | None, int | None, str]]:
    """``name -> (hostname, pid, state)`` of the workers `rq info` lists."""
    connection = Redis.from_url(redis_url)
    try:
        return {w.name: (w.hostname, w.pid, w.get_state()) for w in Worker.all(connection=connection)}
    finally:
        connection.close()


def fake_registration(redis_url: str, name: str, host: str, *, ttl: int | None, heartbeat_age_s: float) -> None:
    """A worker hash as RQ writes it, for a worker of ``host`` (pid 4242) on queue ``default``."""
    connection = Redis.from_url(redis_url)
    key = f"rq:worker:{name}"
    beat = utcformat(datetime.now(UTC) - timedelta(seconds=heartbeat_age_s))
    connection.hset(key, mapping={"birth": beat, "last_heartbeat": beat, "queues": "default", "pid": 4242,
                                  "hostname": host, "state": "busy"})
    connection.sadd("rq:workers", key)
    connection.sadd("rq:workers:default", key)
    if ttl is not None:
        connection.expire(key, ttl)
    connection.close()


def start_refused(deployment, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLOWLOOM, "worker", "--name", name], env=deployment.env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


async def test_a_worker_restarted_under_a_killed_workers_name_starts_and_continues_its_run(deployment, counter):
    deployment.start_worker("nu-worker-2", "--queues", "high,default")
    deployment.wait_for_workers("nu-worker-2")
    async for api in open_api(deployment, recovery_concurrency=0):  # the restarted worker recovers the run
        run_id = (await api.start(five_nodes(counter))).json()["run_id"]
        await asyncio.to_thread(counter.wait_for, "g")  # the gate node runs: the worker is busy
        dead = deployment.workers["nu-worker-2"]
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        assert registered(deployment.redis_url)["nu-worker-2"][1:] == (dead.pid, "busy"), "RQ still lists it"

        again = deployment.start_worker("nu-worker-2", "--queues", "high,default")
        await asyncio.to_thread(_wait_for_pid, deployment, "nu-worker-2", again.pid)
        assert again.poll() is None, deployment.log("nu-worker-2")
        counter.gate.set()
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=30) == "succeeded"
        assert "is gone; cleaning its registration" in deployment.log("nu-worker-2")
        assert counter.names().count("a") == 1 and counter.names().count("c") == 1, counter.names()
        assert [n for n in registered(deployment.redis_url)] == ["nu-worker-2"]


def _wait_for_pid(deployment, name: str, pid: int, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while registered(deployment.redis_url).get(name, (None, None))[1] != pid:
        assert deployment.workers[name].poll() is None, deployment.log(name)
        assert time.monotonic() < deadline, deployment.log(name)
        time.sleep(0.05)


def test_a_name_held_by_a_live_worker_of_this_host_is_refused_in_plain_words(deployment):
    live = deployment.start_worker("nu-worker-2")
    deployment.wait_for_workers("nu-worker-2")
    done = start_refused(deployment, "nu-worker-2")
    assert done.returncode == 2, done.stderr
    host = registered(deployment.redis_url)["nu-worker-2"][0]
    assert f"a worker named nu-worker-2 is already running ({host}, pid {live.pid}); pick another --name" \
        in done.stderr
    assert "Traceback" not in done.stderr and "bug" not in done.stderr, done.stderr
    assert live.poll() is None and registered(deployment.redis_url)["nu-worker-2"][1] == live.pid


def test_a_name_of_another_hosts_worker_with_a_fresh_heartbeat_is_refused(deployment):
    fake_registration(deployment.redis_url, "far-1", "elsewhere.example", ttl=480, heartbeat_age_s=5)
    done = start_refused(deployment, "far-1")
    assert done.returncode == 2, done.stderr
    assert "a worker named far-1 is already running (elsewhere.example, pid 4242); pick another --name" \
        in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_name_of_another_hosts_worker_without_expiry_and_a_stale_heartbeat_is_taken(deployment):
    fake_registration(deployment.redis_url, "far-2", "elsewhere.example", ttl=None, heartbeat_age_s=3600)
    deployment.start_worker("far-2")
    deployment.wait_for_workers("far-2")
    _wait_for_pid(deployment, "far-2", deployment.workers["far-2"].pid)
    assert "is gone; cleaning its registration" in deployment.log("far-2")
