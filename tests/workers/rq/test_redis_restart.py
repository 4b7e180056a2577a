"""Redis restarted in the middle of a queued run: the run completes (its progress is in
the database), the live events buffered while Redis was away reach the run's stream once
it is back, a follower misses nothing, and a stop works afterwards (the worker's command
subscription was restored). Redis here keeps an append-only file, as a deployment would."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from redis import Redis

from tests.workers.rq.conftest import Deployment, _prepare_database, chain, make_env, open_api, post
from tests.workers.rq.test_stop import stop, wait_for_entry


class RestartableRedis:
    """``redis-server`` on a free port of 127.0.0.1 with its data in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(self.port),
                                      "--bind", "127.0.0.1", "--dir", str(self.directory), "--appendonly", "yes",
                                      "--save", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                if Redis.from_url(self.url, socket_connect_timeout=0.2).ping():
                    return
            except Exception:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def restartable(tmp_path):
    server = RestartableRedis(tmp_path)
    server.start()
    url = f"sqlite:///{tmp_path / 'flowloom.db'}"
    _prepare_database(url)
    deployment = Deployment(make_env(tmp_path, server.url, url), tmp_path)
    try:
        yield server, deployment
    finally:
        deployment.stop()
        server.stop()


async def test_redis_restarted_mid_run_the_run_completes_nothing_is_lost_and_stop_works_after(restartable, counter):
    server, deployment = restartable
    deployment.start_worker("w1")
    deployment.wait_for_workers("w1")
    doc = chain("outage", [post("a", f"{counter.url}/hit/a"), post("gate", f"{counter.url}/gate/g"),
                           post("c", f"{counter.url}/hit/c")], {"c": "c.json.node"})
    async for api in open_api(deployment):
        run_id = (await api.start(doc)).json()["run_id"]
        follower = asyncio.create_task(api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth))
        await asyncio.to_thread(counter.wait_for, "g")
        server.stop()
        counter.gate.set()  # the run goes on while Redis is away
        assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=20) == "succeeded"
        await asyncio.sleep(1.0)
        server.start()

        entries = await wait_for_entry(server.url, run_id, "run_finished", timeout=20)
        stored = await api.service.stores.events.read("default", run_id)
        streamed = {e["seq"]: e["type"] for e in entries}
        assert all(streamed.get(e["seq"]) == e["type"] for e in stored), "every durable event reached the stream"
        body = (await asyncio.wait_for(follower, 30)).text
        ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
        assert ids == sorted(set(ids)) and {e["seq"] for e in stored} <= set(ids), \
            "the follower got every durable event once, in order, across the outage"
        assert "event: done" in body
        assert counter.names().count("a") == 1 and counter.names().count("c") == 1

        sleeper = chain("sleeper", [{"id": "nap", "type": "code", "config": {
            "language": "python", "code": "import time\ndef main():\n    time.sleep(30)\n    return {}",
            "timeout": 60}}])
        later = (await api.start(sleeper)).json()["run_id"]
        await wait_for_entry(server.url, later, "node_started", timeout=30)
        took, answer = await stop(api, later)
        assert answer["status"] == "cancelled" and took < 2.5, took
    assert "redis unreachable" in deployment.log("w1") and "reachable again" in deployment.log("w1")
