"""What a worker prints: one prefix and one timestamp format on every line (RQ's and
ours), the run's own outcome next to RQ's "Job OK", and a quiet stop on SIGINT."""

from __future__ import annotations

import asyncio
import re
import signal

from tests.workers.rq.conftest import chain
from tests.workers.rq.test_stop import stop, wait_for_entry

LINE = re.compile(r"^flowloom-worker \d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+ ")


async def test_worker_logs_the_run_status_and_stops_quietly_on_sigint(deployment, api):
    sleeper = chain("sleeper", [{"id": "nap", "type": "code", "config": {
        "language": "python", "code": "import time\ndef main():\n    time.sleep(30)\n    return {}", "timeout": 60}}])
    worker = deployment.start_worker("w1")
    run_id = (await api.start(sleeper)).json()["run_id"]
    await wait_for_entry(deployment.redis_url, run_id, "node_started")
    await stop(api, run_id)  # the run polled the command channel: its subscription is open
    await wait_for_entry(deployment.redis_url, run_id, "run_cancelled")
    for _ in range(200):  # the job returns (and logs) just after the run's last event
        if f"run {run_id} (tenant" in deployment.log("w1"):
            break
        await asyncio.sleep(0.05)

    worker.send_signal(signal.SIGINT)
    # the quiet stop closes the run service (its stores' threads) first: seconds, but on a
    # loaded 2-core machine it passed 30 s; the test is about what is logged, not speed
    assert worker.wait(90) == 0
    log = deployment.log("w1")
    assert re.search(rf"WARNING run {run_id} \(tenant default, flowloom-default\): cancelled", log), log
    assert "Traceback" not in log and "asyncio.run() shutdown" not in log, log
    lines = [line for line in log.splitlines() if line.strip()]
    assert lines and all(LINE.match(line) for line in lines), log
