"""A run that ended ``failed`` is a failed RQ job: in the queue's ``FailedJobRegistry``
with the run's reason (not a traceback), executed once (RQ does not retry it), while the
run store keeps the run ``failed``."""

from __future__ import annotations

import asyncio
import time

from tests.workers.rq.conftest import chain

RAISES = {"id": "boom", "type": "code", "config": {
    "language": "python", "code": "def main():\n    raise ValueError('the order number is missing')\n"}}


async def _failed_job_ids(redis_url: str, job_id: str, timeout: float = 60.0) -> list[str]:
    """The ids in ``flowloom-default``'s failed registry once ``job_id`` is among them."""
    from redis import Redis
    from rq.registry import FailedJobRegistry

    connection = Redis.from_url(redis_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            ids = FailedJobRegistry("flowloom-default", connection=connection).get_job_ids()
            if job_id in ids or time.monotonic() > deadline:
                return ids
            await asyncio.sleep(0.05)
    finally:
        connection.close()


async def test_a_failed_run_is_a_failed_rq_job_with_its_reason_and_is_not_retried(deployment, api):
    from redis import Redis
    from rq import Queue
    from rq.job import Job, JobStatus
    from rq.results import Result

    deployment.start_worker("w1")
    run_id = (await api.start(chain("fails", [RAISES]))).json()["run_id"]
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=60) == "failed"
    job_id = f"run-{run_id}"
    assert job_id in await _failed_job_ids(deployment.redis_url, job_id), deployment.log("w1")

    connection = Redis.from_url(deployment.redis_url)
    try:
        job = Job.fetch(job_id, connection=connection)
        assert job.get_status() == JobStatus.FAILED
        results = list(job.results())
        assert len(results) == 1, "RQ retried the job of a failed run"
        assert results[0].type == Result.Type.FAILED
        reason = results[0].exc_string
        assert reason.startswith(f"run {run_id} (tenant default) failed at node boom: "), reason
        assert "code_error: Python code raised ValueError: the order number is missing" in reason, reason
        assert "rq/jobs.py" not in reason and "site-packages" not in reason, reason  # not the worker's traceback
        assert Queue("flowloom-default", connection=connection).count == 0  # nothing queued again
    finally:
        connection.close()

    summary = await api.service.get("default", run_id)
    assert summary.status.value == "failed" and summary.error.node_id == "boom"
    log = deployment.log("w1")
    assert f"run {run_id} (tenant default, flowloom-default): failed" in log, log
    assert "rq/jobs.py" not in log and "already failed" not in log, log


async def test_a_succeeding_run_is_still_a_finished_job(deployment, api):
    from redis import Redis
    from rq.job import Job, JobStatus

    deployment.start_worker("w1")
    run_id = (await api.start(chain("fine", []))).json()["run_id"]
    assert await api.wait_status(run_id, {"succeeded", "failed", "cancelled"}, timeout=60) == "succeeded"
    connection = Redis.from_url(deployment.redis_url)
    try:
        deadline = time.monotonic() + 60
        while Job.fetch(f"run-{run_id}", connection=connection).get_status() != JobStatus.FINISHED:
            assert time.monotonic() < deadline, deployment.log("w1")
            await asyncio.sleep(0.05)
    finally:
        connection.close()
