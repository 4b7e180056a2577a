"""Queued-execution benchmark: runs on ``flowloom worker`` processes next to plain RQ jobs
on the same worker class, in the same run. Prints exactly one JSON line on stdout::

    python bench/workers.py            # full run
    python bench/workers.py --quick    # smoke run (few runs, 1 worker only)
    python bench/workers.py -v         # progress on stderr
    python bench/workers.py --database postgresql   # the run store in a scratch PostgreSQL database

Set-up (all on this machine): a ``redis-server`` on a free port, the run store (a SQLite
file in a temporary directory, or with ``--database postgresql`` a scratch database on the
server of ``FLOWLOOM_TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``,
dropped at the end), the scripted OpenAI-compatible server (``tests/support/openai_server.py``,
zero delay) in a child process, and 1 then 2 ``flowloom worker`` processes
(``python -m api.cli worker``, the RQ ``SimpleWorker`` subclass of ``workers/rq/worker.py``).
Runs are prepared (stored) by this process first, untimed; only the queue part is timed.

Per worker count, for each workload:

- ``plumbing``: ``start -> template -> end`` (3 nodes); ``model``: ``start -> chat -> end``
  with the zero-delay scripted model (one streamed completion per run);
- ``rq_noop``: a plain RQ job of the built-in ``time.time`` (it returns the moment it
  started), on the same queue and the same workers.

Two phases each: **latency** - jobs enqueued one at a time, the next once the previous one
ended; the figure is enqueue (``enqueue_run`` / ``Queue.enqueue`` called) to first event
(the ``run_started`` event's ``ts`` read from the run's Redis stream) or, for RQ, to
start (the job's return value); p50 and p99 in ms. **Throughput** - N jobs enqueued at once;
runs (jobs) per second from the first enqueue to the last end. Targets: plumbing runs/s at
least half of plain RQ jobs/s; plumbing enqueue-to-first-event p50 within 5 ms of RQ's
enqueue-to-start p50 (each per worker count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _checkout import ROOT, machine, print_report, provenance, sibling

wait_for_redis: Any = sibling("_services").wait_for_redis

VERBOSE = False


def log(*args: Any) -> None:
    if VERBOSE:
        print(*args, file=sys.stderr, flush=True)


def _free_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _chain(workflow_id: str, middle: dict[str, Any]) -> dict[str, Any]:
    nodes = [{"id": "start", "type": "start"}, middle,
             {"id": "end", "type": "end", "config": {"outputs": [{"name": "out", "value": {"ref": f"{middle['id']}."
                                                                                                 f"{'output' if middle['type'] == 'template' else 'answer'}"}}]}}]
    return {"id": workflow_id, "name": workflow_id, "nodes": nodes,
            "edges": [{"id": "e1", "source": "start", "target": middle["id"]},
                      {"id": "e2", "source": middle["id"], "target": "end"}]}


PLUMBING = {**_chain("bench-plumbing", {"id": "t", "type": "template", "config": {"template": "hi {{ inputs.n }}"}}),
            "inputs": [{"name": "n", "type": "number"}]}
MODEL = _chain("bench-model", {"id": "m", "type": "chat", "config": {"model": "default", "max_tokens": 8}})


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))], 2)


class Bench:
    """The services of one benchmark run and the timed phases."""

    def __init__(self, tmp: Path, quick: bool, database: str) -> None:
        self.tmp, self.quick, self.database = tmp, quick, database
        self.redis_port = _free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.db_url = f"sqlite:///{tmp / 'flowloom.db'}"
        self.pg_name: str | None = None
        self.procs: list[subprocess.Popen[Any]] = []
        self.workers: list[subprocess.Popen[Any]] = []

    # ------------------------------------------------------------------ services

    def _pg_admin(self, statement: str) -> None:
        import asyncpg
        from sqlalchemy.engine import make_url

        server = make_url(os.environ.get("FLOWLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))

        async def run() -> None:
            conn = await asyncpg.connect(host=server.host or "127.0.0.1", port=server.port or 5432,
                                         user=server.username or "postgres", password=server.password,
                                         database=server.database or "postgres", timeout=10)
            try:
                await conn.execute(statement)
            finally:
                await conn.close()

        asyncio.run(run())
        if self.pg_name and "CREATE" in statement:
            self.db_url = server.set(database=self.pg_name).render_as_string(hide_password=False)

    def start(self) -> None:
        from redis import Redis

        if self.database == "postgresql":
            import uuid

            self.pg_name = f"flowloom_bench_{uuid.uuid4().hex[:10]}"
            self._pg_admin(f'CREATE DATABASE "{self.pg_name}"')

        self.procs.append(subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port",
                                            str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                                            "--appendonly", "no", "--dir", str(self.tmp)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        server = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server"], cwd=ROOT, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(server)
        assert server.stdout is not None
        llm_url = server.stdout.readline().strip()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
        self.env.update(FLOWLOOM_HOME=str(self.tmp / "home"), FLOWLOOM_REDIS_URL=self.redis_url,
                        FLOWLOOM_DATABASE_URL=self.db_url, FLOWLOOM_LLM_BASE_URL=llm_url + "/v1",
                        FLOWLOOM_LLM_API_KEY="bench", FLOWLOOM_LLM_MODEL="bench")
        wait_for_redis(self.redis_url)
        # its reads block for up to 30 s: above redis-py's default 5-s socket timeout
        self.redis = Redis.from_url(self.redis_url, socket_timeout=60)

    def start_workers(self, count: int) -> None:
        from rq import Worker

        for _ in range(count):
            log_file = open(self.tmp / f"worker{len(self.workers)}.log", "wb")
            self.workers.append(subprocess.Popen([sys.executable, "-m", "api.cli", "worker", "--name",
                                                  f"bench{len(self.workers)}", "--queues", "default"],
                                                 env=self.env, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while len(Worker.all(connection=self.redis)) < len(self.workers):
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in [*self.workers, *self.procs]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if proc in self.workers else signal.SIGTERM)
        for proc in [*self.workers, *self.procs]:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.pg_name:
            self._pg_admin(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')

    # ------------------------------------------------------------------ phases

    async def _prepare(self, service: Any, doc: dict[str, Any], count: int) -> list[str]:
        return [(await service.prepare(doc, {"n": i} if doc is PLUMBING else {}, message="hi")).run_id
                for i in range(count)]

    def _first_event_ts(self, run_id: str) -> float:
        key = f"flowloom:events:default:{run_id}"
        reply = self.redis.xread({key: "0-0"}, count=1, block=30_000)
        assert reply, f"no event for run {run_id}"
        return json.loads(reply[0][1][0][1][b"data"])["ts"]

    def _wait_ended(self, run_ids: list[str]) -> float:
        """Until every run's stream has its end; returns the latest end ``ts``."""
        latest = 0.0
        for run_id in run_ids:
            key, last = f"flowloom:events:default:{run_id}", "0-0"
            while True:
                reply = self.redis.xread({key: last}, count=100, block=30_000)
                assert reply, f"run {run_id} did not end"
                ended = False
                for entry_id, fields in reply[0][1]:
                    last = entry_id
                    event = json.loads(fields[b"data"])
                    if event["type"] in ("run_finished", "run_failed", "run_cancelled"):
                        assert event["type"] == "run_finished", event
                        latest, ended = max(latest, event["ts"]), True
                if ended:
                    break
        return latest

    async def runs(self, service: Any, doc: dict[str, Any], samples: int, batch: int) -> dict[str, Any]:
        from workers.rq.queues import enqueue_run

        latencies = []
        for run_id in await self._prepare(service, doc, samples):
            sent = time.time()
            enqueue_run(self.redis, "default", run_id, queue="flowloom-default", max_wall_time=600)
            latencies.append((self._first_event_ts(run_id) - sent) * 1000)
            self._wait_ended([run_id])
        run_ids = await self._prepare(service, doc, batch)
        finished, failed = self._registries()
        before = finished.count + failed.count
        first = time.time()
        for run_id in run_ids:
            enqueue_run(self.redis, "default", run_id, queue="flowloom-default", max_wall_time=600)
        # watched as the RQ side is (a count polled every 20 ms), not by reading every run's
        # events while the workers run: that reading cost this process 0.6-0.8 ms of CPU a
        # run, on the cores the workers share; the events are read once the batch is done
        while finished.count + failed.count < before + batch:
            time.sleep(0.02)
        last = self._wait_ended(run_ids)
        return {"enqueue_to_first_event_ms_p50": _pct(latencies, 0.5),
                "enqueue_to_first_event_ms_p99": _pct(latencies, 0.99),
                "runs_per_s": round(batch / (last - first), 1), "latency_samples": samples, "throughput_runs": batch}

    def _registries(self) -> tuple[Any, Any]:
        """The finished and failed job registries of the runs' queue."""
        from rq import Queue
        from rq.registry import FailedJobRegistry, FinishedJobRegistry

        queue = Queue("flowloom-default", connection=self.redis)
        return FinishedJobRegistry(queue=queue), FailedJobRegistry(queue=queue)

    def rq_noop(self, samples: int, batch: int) -> dict[str, Any]:
        from rq import Queue
        from rq.job import Job
        from rq.registry import FinishedJobRegistry

        queue = Queue("flowloom-default", connection=self.redis)
        latencies = []
        for _ in range(samples):
            sent = time.time()
            job = queue.enqueue("time.time", result_ttl=600)
            while (started := job.return_value(refresh=True)) is None:
                time.sleep(0.002)  # the figure is the job's own start time: polling only ends the wait
            latencies.append((started - sent) * 1000)
        finished = FinishedJobRegistry(queue=queue)
        before = finished.count
        first = time.time()
        jobs = [queue.enqueue("time.time", result_ttl=600) for _ in range(batch)]
        while finished.count < before + batch:
            time.sleep(0.02)
        ends = [job.ended_at.timestamp() for job in Job.fetch_many([j.id for j in jobs], connection=self.redis)
                if job is not None and job.ended_at is not None]
        return {"enqueue_to_start_ms_p50": _pct(latencies, 0.5), "enqueue_to_start_ms_p99": _pct(latencies, 0.99),
                "jobs_per_s": round(batch / (max(ends) - first), 1), "latency_samples": samples,
                "throughput_jobs": batch}


async def _measure(bench: Bench, quick: bool) -> dict[str, Any]:
    from api.composition import open_service
    from engine.settings import Settings

    settings = Settings(home=bench.tmp / "home", database_url=bench.db_url, redis_url=bench.redis_url)
    samples, batch = (10, 20) if quick else (60, 200)
    out: dict[str, Any] = {}
    async with open_service(settings) as service:
        for count in (1,) if quick else (1, 2):
            bench.start_workers(count - len(bench.workers))
            log(f"{count} worker(s): warm-up")
            await bench.runs(service, PLUMBING, 3, 3)
            await bench.runs(service, MODEL, 3, 3)
            bench.rq_noop(3, 3)
            row: dict[str, Any] = {}
            for _round in range(1):
                log(f"{count} worker(s): plain RQ")
                row["rq_noop"] = await asyncio.to_thread(bench.rq_noop, samples, batch)
                log(f"{count} worker(s): plumbing")
                row["plumbing"] = await bench.runs(service, PLUMBING, samples, batch)
                log(f"{count} worker(s): model")
                row["model"] = await bench.runs(service, MODEL, samples, batch)
            rq, plumbing = row["rq_noop"], row["plumbing"]
            row["targets"] = {
                "plumbing_runs_per_s_vs_half_rq": {"value": plumbing["runs_per_s"],
                                                   "target": round(rq["jobs_per_s"] / 2, 1),
                                                   "met": plumbing["runs_per_s"] >= rq["jobs_per_s"] / 2},
                "first_event_p50_within_5ms_of_rq_start": {
                    "value": round(plumbing["enqueue_to_first_event_ms_p50"] - rq["enqueue_to_start_ms_p50"], 2),
                    "target": 5.0,
                    "met": plumbing["enqueue_to_first_event_ms_p50"] <= rq["enqueue_to_start_ms_p50"] + 5}}
            out[f"workers_{count}"] = row
    return out


def main() -> int:
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 worker, few runs")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite",
                        help="the run store: a SQLite file (default) or a scratch PostgreSQL database")
    args = parser.parse_args()
    VERBOSE = args.verbose

    def make() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="flowloom-bench-workers-") as tmp:
            bench = Bench(Path(tmp), args.quick, args.database)
            try:
                bench.start()
                results = asyncio.run(_measure(bench, args.quick))
            finally:
                bench.stop()
        targets = [t["met"] for row in results.values() for t in row["targets"].values()]
        return {"bench": "workers", "quick": args.quick, "database": args.database, "provenance": provenance(("workers", "api", "engine")),
                "machine": machine(("rq", "redis")), "worker_class": "workers.rq.worker.FlowloomWorker (rq SimpleWorker)",
                "results": results, "all_targets_met": all(targets)}

    return print_report(make)


if __name__ == "__main__":
    raise SystemExit(main())
