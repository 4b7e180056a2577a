"""Recovery benchmark: how long ``flowloom serve`` takes to finish the runs a crash left,
by itself, next to an operator running ``flowloom recover RUN_ID`` for each.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/recovery.py             # 28 orphans, both paths
    python bench/recovery.py --quick     # smoke run: 3 orphans
    python bench/recovery.py --no-operator

What is measured (see bench/README.md), each path on a fresh ``FLOWLOOM_HOME`` (SQLite):
``flowloom serve`` starts; ``runs`` runs of ``start -> a -> gate -> c -> end`` (HTTP
POSTs to a local counting service; ``gate`` answers only once it is opened) are submitted
with ``response_mode: async``; once every run is inside ``gate`` the server is SIGKILLed
and the gate opened. Then:

- ``automatic``: ``flowloom serve`` starts again, nothing else; ``restart_to_all_ended_s``
  is ``time.perf_counter`` from its ``Popen`` to the moment the run store shows every run
  ended (polled every 0.1 s), ``startup_s`` until ``/health`` answers;
- ``operator``: no server; ``flowloom recover RUN_ID`` is run for each run, one after the
  other (what an operator did before); ``all_ended_s`` is the sum of those processes'
  wall times.

Both report ``succeeded`` (runs that ended succeeded) and ``gate_requests`` (2 per run:
the node that was running at the kill runs again, once, with the same idempotency key).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from _checkout import ROOT, machine, print_report, provenance

from tests.support.counting_server import Counter

SCHEMA = "flowloom-bench-recovery/1"
FLOWLOOM = [sys.executable, "-m", "api.cli"]


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def _flow(url: str) -> dict[str, Any]:
    def post(node_id: str, path: str) -> dict[str, Any]:
        return {"id": node_id, "type": "http_request", "config": {"method": "POST", "url": f"{url}{path}",
                                                                  "body": {"type": "json", "json": {}}, "timeout": 60}}

    nodes = [{"id": "start", "type": "start"}, post("a", "/hit/a"), post("gate", "/gate/g"), post("c", "/hit/c"),
             {"id": "end", "type": "end"}]
    ids = [n["id"] for n in nodes]
    return {"id": "bench_recovery", "name": "bench_recovery", "nodes": nodes,
            "edges": [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(pairwise(ids))]}


def _serve(env: dict[str, str], log: Any) -> tuple[subprocess.Popen[bytes], str, float]:
    """A started ``flowloom serve``: the process, its base URL, seconds until /health answered."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    began = time.perf_counter()
    proc = subprocess.Popen([*FLOWLOOM, "serve", "--port", str(port), "--no-examples"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise RuntimeError("flowloom serve exited at start")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base, time.perf_counter() - began
        except httpx.TransportError:
            time.sleep(0.05)


def _statuses(env: dict[str, str], run_ids: list[str]) -> list[str]:
    from api.composition import database_url
    from engine.settings import Settings
    from workers.sql import SqlStore

    async def read() -> list[str]:
        store = await SqlStore.open(database_url(Settings(home=Path(env["FLOWLOOM_HOME"]))))
        try:
            return [(await store.get_run("default", run_id)).status.value for run_id in run_ids]
        finally:
            await store.close()

    return asyncio.run(read())


def _crash(env: dict[str, str], counter: Counter, runs: int, log: Any) -> list[str]:
    """Serve, submit ``runs`` gated runs, SIGKILL the server once all are inside the gate."""
    import httpx

    proc, base, _ = _serve(env, log)
    key = (Path(env["FLOWLOOM_HOME"]) / "canvas-key").read_text().strip()
    run_ids = []
    for _ in range(runs):
        reply = httpx.post(f"{base}/v1/runs", json={"workflow": _flow(counter.url), "response_mode": "async"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=30)
        reply.raise_for_status()
        run_ids.append(reply.json()["run_id"])
    counter.wait_for("g", runs, timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    counter.gate.set()
    return run_ids


def _path(name: str, runs: int, verbose: bool, concurrency: int) -> dict[str, Any]:
    counter = Counter()
    with tempfile.TemporaryDirectory(prefix="flowloom-bench-recovery-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
        env.update(FLOWLOOM_HOME=str(Path(tmp) / "home"), FLOWLOOM_HTTP_ALLOW="127.0.0.1",
                   FLOWLOOM_RECOVERY_CONCURRENCY=str(concurrency))
        with open(Path(tmp) / "serve.log", "wb") as log:
            run_ids = _crash(env, counter, runs, log)
            _log(verbose, f"{name}: {runs} runs orphaned")
            out: dict[str, Any] = {}
            if name == "automatic":
                began = time.perf_counter()
                proc, _, startup = _serve(env, log)
                out["startup_s"] = round(startup, 3)
                try:
                    while any(s in ("pending", "running") for s in _statuses(env, run_ids)):
                        if time.perf_counter() - began > 600:
                            raise RuntimeError("the orphans did not end within 600 s")
                        time.sleep(0.1)
                    out["restart_to_all_ended_s"] = round(time.perf_counter() - began, 3)
                finally:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(30)
            else:
                began = time.perf_counter()
                for run_id in run_ids:
                    subprocess.run([*FLOWLOOM, "recover", run_id, "--json"], cwd=ROOT, env=env, capture_output=True,
                                   timeout=120)
                out["all_ended_s"] = round(time.perf_counter() - began, 3)
            statuses = _statuses(env, run_ids)
    counter.server.shutdown()
    out.update(runs=runs, succeeded=statuses.count("succeeded"), gate_requests=len(counter.keys("g")))
    _log(verbose, f"{name}: {out}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=28, help="orphaned runs (default 28)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 orphans")
    parser.add_argument("--no-operator", action="store_true", help="skip the `flowloom recover` path")
    parser.add_argument("--concurrency", type=int, default=4, help="FLOWLOOM_RECOVERY_CONCURRENCY (default 4)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs

    def make() -> dict[str, Any]:
        report: dict[str, Any] = {"schema": SCHEMA, "date": _dt.datetime.now(_dt.UTC).isoformat(),
                                  "provenance": provenance(("engine", "api", "workers")),
                                  "machine": machine(("rq", "sqlalchemy")), "recovery_concurrency": args.concurrency}
        report["automatic"] = _path("automatic", runs, args.verbose, args.concurrency)
        if not args.no_operator:
            report["operator"] = _path("operator", runs, args.verbose, args.concurrency)
        return report

    return print_report(make)


if __name__ == "__main__":
    sys.exit(main())
