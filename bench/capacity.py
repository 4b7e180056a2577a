"""Capacity benchmark: a whole deployment on this machine - PostgreSQL, Redis, 2 API
replicas (``flowloom serve``) and 3 workers (``flowloom worker``) - takes N queued runs
through the HTTP API and executes each exactly once. Prints exactly one JSON line::

    python bench/capacity.py                 # 5,000 runs
    python bench/capacity.py --runs 200 -v   # a small run, progress on stderr

Set-up: a scratch PostgreSQL database (``flowloom_capacity_<hex>``, created on the server of
``FLOWLOOM_TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``,
dropped WITH (FORCE) at the end), a private ``redis-server`` on a free port (its keys are
nobody else's: no test's Redis database or prefix is touched), a counting HTTP service
(``tests/support/counting_server.py``) in a child process, then the replicas one after the
other (the first creates the schema and the login key) and the workers.

The workflow is ``start -> a -> t -> end``: ``a`` is an ``http_request`` POST to the
counting service, which records each request's ``Idempotency-Key`` (a hash of the node
run's id: a node executed again sends the same key); ``t`` a template. Each run is
submitted with ``response_mode: async`` (queued: the API enqueues it on RQ and answers 202),
alternating between the two replicas, ``--concurrency`` requests in flight.

Timed: from the first submission to the latest ``finished_at`` of the runs (polled in the
database). Then checked, and reported under ``exactly_once``: every submission accepted,
every accepted run ``succeeded``, one request per run at the counting service with as many
distinct idempotency keys as runs (none repeated), one current node run per node, and each
run's stored events numbered from 1 with none twice or out of order (numbers may be
missing: deltas, as the End's outputs, are never stored), one ``run_started`` first, one
``run_finished`` last and one ``node_finished`` per node.

``runs_per_s_per_core``: runs/s over the machine's cores (everything shares them);
``runs_per_cpu_s``: runs per CPU second the deployment's processes used in the timed part
(replicas, workers, Redis, counting service, and the PostgreSQL backends of the scratch
database; the PostgreSQL server's own background processes are not counted), with the
split by component in ``cpu_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

from _checkout import ROOT, machine, print_report, provenance, sibling

wait_for_redis: Any = sibling("_services").wait_for_redis

SCHEMA = "flowloom-bench-capacity/1"
FLOWLOOM = [sys.executable, "-m", "api.cli"]
VERBOSE = False
TERMINAL = ("succeeded", "failed", "cancelled")
#: a counting service in a child process: its HTTP work stays off this process's GIL
COUNTER_CHILD = """
import json, sys
from tests.support.counting_server import Counter
counter = Counter()
print(counter.url, flush=True)
for line in sys.stdin:
    print(json.dumps(counter.requests), flush=True)
"""


def log(*args: Any) -> None:
    if VERBOSE:
        print(*args, file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def workflow(counter_url: str) -> dict[str, Any]:
    """``start -> a (POST to the counting service) -> t (template) -> end``."""
    nodes = [{"id": "start", "type": "start"},
             {"id": "a", "type": "http_request", "config": {"method": "POST", "url": f"{counter_url}/hit/a",
                                                            "body": {"type": "json", "json": {}}, "timeout": 60}},
             {"id": "t", "type": "template", "config": {"template": "run {{ inputs.n }}: {{ a.status_code }}"}},
             {"id": "end", "type": "end", "config": {"outputs": [{"name": "out", "value": {"ref": "t.output"}}]}}]
    ids = [n["id"] for n in nodes]
    return {"id": "bench-capacity", "name": "bench-capacity", "inputs": [{"name": "n", "type": "number"}],
            "nodes": nodes,
            "edges": [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(pairwise(ids))]}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Deployment:
    """The processes and the scratch database of one benchmark run (module docstring)."""

    def __init__(self, tmp: Path, workers: int, replicas: int) -> None:
        from sqlalchemy.engine import make_url

        self.tmp, self.worker_count, self.replica_count = tmp, workers, replicas
        self.server = make_url(os.environ.get("FLOWLOOM_TEST_POSTGRES_URL",
                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
        self.db_name = f"flowloom_capacity_{uuid.uuid4().hex[:10]}"
        self.db_url = self.server.set(database=self.db_name).render_as_string(hide_password=False)
        self.redis_url = f"redis://127.0.0.1:{_free_port()}/0"
        self.created = False
        self.procs: dict[str, subprocess.Popen[Any]] = {}
        self.bases: list[str] = []
        self.key = ""

    # ------------------------------------------------------------------ database

    async def _connect(self, database: str | None = None) -> Any:
        import asyncpg

        s = self.server
        return await asyncpg.connect(host=s.host or "127.0.0.1", port=s.port or 5432, user=s.username or "postgres",
                                     password=s.password, database=database or s.database or "postgres", timeout=10)

    async def _admin(self, statement: str) -> None:
        conn = await self._connect()
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    async def query(self, sql: str, *args: Any) -> list[Any]:
        """Rows of ``sql`` in the scratch database."""
        conn = await self._connect(self.db_name)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    # ------------------------------------------------------------------ processes

    def _spawn(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        if "stdout" not in kwargs:
            kwargs["stdout"] = open(self.tmp / f"{name}.log", "wb")
            kwargs["stderr"] = subprocess.STDOUT
        proc = subprocess.Popen(argv, cwd=ROOT, **kwargs)
        self.procs[name] = proc
        return proc

    def start(self) -> None:
        import httpx

        asyncio.run(self._admin(f'CREATE DATABASE "{self.db_name}"'))
        self.created = True
        port = int(self.redis_url.rsplit(":", 1)[1].split("/")[0])
        self._spawn("redis", [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
                              "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.tmp)])
        base_env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        counter = self._spawn("counter", [sys.executable, "-c", COUNTER_CHILD], env=base_env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
        assert counter.stdout is not None
        self.counter_url = counter.stdout.readline().strip()
        self.env = {k: v for k, v in base_env.items() if not k.startswith("FLOWLOOM_")}
        self.env.update(FLOWLOOM_HOME=str(self.tmp / "home"), FLOWLOOM_DATABASE_URL=self.db_url,
                        FLOWLOOM_REDIS_URL=self.redis_url, FLOWLOOM_HTTP_ALLOW="127.0.0.1")
        wait_for_redis(self.redis_url)
        for i in range(self.replica_count):  # one after the other: the first creates the schema and the key
            port = _free_port()
            proc = self._spawn(f"serve{i}", [*FLOWLOOM, "serve", "--port", str(port), "--no-examples"], env=self.env)
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"flowloom serve exited at start: {(self.tmp / f'serve{i}.log').read_text()}")
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("flowloom serve did not answer /health within 120 s")
                time.sleep(0.05)
            self.bases.append(base)
            log(f"replica {i} on {base}")
        self.key = (self.tmp / "home" / "canvas-key").read_text().strip()
        for i in range(self.worker_count):
            self._spawn(f"worker{i}", [*FLOWLOOM, "worker", "--name", f"capacity{i}", "--queues", "default"],
                        env=self.env)
        self._wait_workers()

    def _wait_workers(self) -> None:
        from redis import Redis
        from rq import Worker

        redis = Redis.from_url(self.redis_url)
        deadline = time.monotonic() + 120
        while len(Worker.all(connection=redis)) < self.worker_count:
            for name, proc in self.procs.items():
                if name.startswith("worker") and proc.poll() is not None:
                    raise RuntimeError(f"{name} exited at start: {(self.tmp / f'{name}.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not register within 120 s")
            time.sleep(0.05)
        redis.close()
        log(f"{self.worker_count} workers registered")

    def counted(self) -> list[tuple[str, str | None]]:
        """Every request the counting service got: ``(name, Idempotency-Key)``."""
        import json

        proc = self.procs["counter"]
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        return [tuple(pair) for pair in json.loads(proc.stdout.readline())]  # type: ignore[misc]

    async def backend_pids(self) -> list[int]:
        """Pids of the PostgreSQL backends connected to the scratch database (but this query's)."""
        rows = await self.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                                self.db_name)
        return [row["pid"] for row in rows]

    def cpu(self, backends: list[int]) -> dict[str, float]:
        """CPU seconds so far of each component."""
        out = {"api": 0.0, "workers": 0.0, "redis": 0.0, "counter": 0.0, "postgresql": 0.0}
        for name, proc in self.procs.items():
            group = "api" if name.startswith("serve") else "workers" if name.startswith("worker") else name
            out[group] += _cpu_s(proc.pid)
        out["postgresql"] = sum(_cpu_s(pid) for pid in backends)
        return out

    def stop(self) -> None:
        """Stop every process (replicas and workers with SIGINT, their graceful stop) and
        drop the scratch database."""
        for name, proc in self.procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if name.startswith(("serve", "worker")) else signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self.created:
            asyncio.run(self._admin(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)'))


async def submit(dep: Deployment, runs: int, concurrency: int) -> tuple[list[str], list[str], float]:
    """Submit ``runs`` queued runs, alternating replicas: ``(run ids accepted, refusals,
    time.time() of the first submission)``."""
    import httpx

    doc = workflow(dep.counter_url)
    accepted: list[str] = []
    refused: list[str] = []
    todo = iter(range(runs))
    headers = {"Authorization": f"Bearer {dep.key}"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def sender(client: httpx.AsyncClient) -> None:
        for n in todo:
            base = dep.bases[n % len(dep.bases)]
            try:
                reply = await client.post(f"{base}/v1/runs", headers=headers,
                                          json={"workflow": doc, "inputs": {"n": n}, "response_mode": "async"})
            except httpx.HTTPError as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
                continue
            if reply.status_code == 202:
                accepted.append(reply.json()["run_id"])
            else:
                refused.append(f"{reply.status_code}: {reply.text[:200]}")
            if VERBOSE and (len(accepted) + len(refused)) % 500 == 0:
                log(f"submitted {len(accepted) + len(refused)}")

    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        first = time.time()
        await asyncio.gather(*(sender(client) for _ in range(concurrency)))
    return accepted, refused, first


async def wait_ended(dep: Deployment, count: int, stall_s: float) -> float:
    """Poll until ``count`` runs ended; returns their latest ``finished_at``. Raises
    RuntimeError when none ends for ``stall_s`` seconds."""
    done, progress_at = -1, time.monotonic()
    while True:
        rows = await dep.query("SELECT count(*) AS n, max(finished_at) AS last FROM runs WHERE status = ANY($1)",
                               list(TERMINAL))
        ended = rows[0]["n"]
        if ended != done:
            done, progress_at = ended, time.monotonic()
            log(f"ended {ended}/{count}")
        if ended >= count:
            return float(rows[0]["last"])
        if time.monotonic() - progress_at > stall_s:
            raise RuntimeError(f"no run ended for {stall_s} s ({ended}/{count} ended)")
        await asyncio.sleep(0.25)


def _log_holds(log: list[Any], nodes: int) -> bool:
    """Whether a run's stored events (``seq`` order) are whole: numbered from 1 with none
    twice, one ``run_started`` first, one ``run_finished`` last, one ``node_finished`` per node."""
    seqs = [row["seq"] for row in log]
    types = [row["type"] for row in log]
    return (seqs[0] == 1 and len(set(seqs)) == len(seqs) and types[0] == "run_started"
            and types[-1] == "run_finished" and types.count("run_started") == types.count("run_finished") == 1
            and types.count("node_finished") == nodes)


async def check(dep: Deployment, runs: int, accepted: list[str], refused: list[str]) -> dict[str, Any]:
    """The exactly-once figures (module docstring) and whether they all hold."""
    statuses = {row["status"]: row["n"] for row in await dep.query(
        "SELECT status, count(*) AS n FROM runs GROUP BY status")}
    node_runs = await dep.query(
        "SELECT count(*) AS n, count(DISTINCT (run_id, node_id)) AS distinct_nodes, max(attempts) AS max_attempts "
        "FROM node_runs WHERE current")
    logs: dict[str, list[Any]] = {}
    for row in await dep.query("SELECT run_id, seq, type FROM run_events ORDER BY run_id, seq"):
        logs.setdefault(row["run_id"], []).append(row)
    nodes = len(workflow("")["nodes"])
    events = [{"runs": len(logs), "gapped": sum(1 for log in logs.values() if not _log_holds(log, nodes))}]
    requests = [key for name, key in dep.counted() if name == "a"]
    nodes_per_run = len(workflow("")["nodes"])
    out = {"submitted": runs, "accepted": len(accepted), "refused": len(refused), "refusals": refused[:5],
           "runs_by_status": statuses, "side_effect_requests": len(requests),
           "distinct_idempotency_keys": len(set(requests)),
           "node_runs": node_runs[0]["n"], "max_node_attempts": node_runs[0]["max_attempts"],
           "runs_with_events": events[0]["runs"], "runs_with_broken_event_logs": events[0]["gapped"]}
    out["ok"] = (len(accepted) == runs and statuses.get("succeeded", 0) == runs and len(statuses) == 1
                 and len(requests) == runs and len(set(requests)) == runs and None not in requests
                 and node_runs[0]["n"] == node_runs[0]["distinct_nodes"] == runs * nodes_per_run
                 and events[0]["runs"] == runs and events[0]["gapped"] == 0)
    return out


async def measure(dep: Deployment, runs: int, concurrency: int) -> dict[str, Any]:
    """Submit, wait for every accepted run to end, check (the CPU figures cover that span)."""
    backends = await dep.backend_pids()
    cpu_before = dep.cpu(backends)
    accepted, refused, first = await submit(dep, runs, concurrency)
    submitted_at = time.time()
    log(f"{len(accepted)} accepted, {len(refused)} refused in {submitted_at - first:.1f} s")
    last = await wait_ended(dep, len(accepted), stall_s=120)
    backends = sorted(set(backends) | set(await dep.backend_pids()))
    cpu_after = dep.cpu(backends)
    wall = last - first
    cpu = {k: round(cpu_after[k] - cpu_before.get(k, 0.0), 2) for k in cpu_after}
    total_cpu = sum(cpu.values())
    cores = os.cpu_count() or 1
    return {"runs": runs, "concurrency": concurrency, "submit_s": round(submitted_at - first, 2),
            "wall_s": round(wall, 2), "runs_per_s": round(len(accepted) / wall, 1),
            "submissions_per_s": round(len(accepted) / (submitted_at - first), 1),
            "cores": cores, "runs_per_s_per_core": round(len(accepted) / wall / cores, 1),
            "cpu_s": cpu, "cpu_ms_per_run": round(total_cpu * 1000 / max(1, len(accepted)), 2),
            "runs_per_cpu_s": round(len(accepted) / total_cpu, 1) if total_cpu else None,
            "exactly_once": await check(dep, runs, accepted, refused)}


def main() -> int:
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000, help="queued runs to submit (default 5000)")
    parser.add_argument("--workers", type=int, default=3, help="flowloom worker processes (default 3)")
    parser.add_argument("--replicas", type=int, default=2, help="flowloom serve processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="submissions in flight (default 16)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args()
    VERBOSE = args.verbose

    def make() -> dict[str, Any]:
        report: dict[str, Any] = {"schema": SCHEMA, "bench": "capacity",
                                  "provenance": provenance(("workers", "api", "engine")),
                                  "machine": machine(("rq", "redis", "asyncpg", "sqlalchemy")),
                                  "deployment": {"api_replicas": args.replicas, "workers": args.workers,
                                                 "run_store": "postgresql", "queue": "redis + rq"}}
        with tempfile.TemporaryDirectory(prefix="flowloom-bench-capacity-") as tmp:
            dep = Deployment(Path(tmp), args.workers, args.replicas)
            try:
                dep.start()
                report["database"] = dep.db_name
                report["results"] = asyncio.run(measure(dep, args.runs, args.concurrency))
            finally:
                dep.stop()
                report["pids"] = [proc.pid for proc in dep.procs.values()]
        report["exactly_once"] = report["results"]["exactly_once"]["ok"]
        return report

    return print_report(make)


if __name__ == "__main__":
    raise SystemExit(main())
