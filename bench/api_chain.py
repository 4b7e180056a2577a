"""A 10,000-node workflow through the HTTP API, next to the engine running it in memory.

Prints exactly one JSON line on stdout (progress, with ``-v``, on stderr)::

    python bench/api_chain.py              # 10,000 nodes, 3 rounds (~1 min on 2 cores)
    python bench/api_chain.py --nodes 2000 --rounds 1   # smoke run

The workflow is a chain ``start -> t1 -> ... -> t9998 -> say``: each template node prints
its predecessor's output (``{{ t41.output }}``, the first one ``{{ inputs.name }}``), the
answer node adds ``!``. Flowloom: ``python -m api.cli serve`` on a fresh SQLite home (as
``bench/api.py`` starts it), one ``POST /v1/runs`` with ``response_mode: blocking`` per
round: the document is parsed, checked and compiled, the run stored, executed, its last
checkpoint (10,000 node runs, 20,000 events) committed and the finished run with every node
run answered (about 4 MB of JSON). Each round checks the answer (``Ada!``), the status and
the number of node runs; a round that does not fail the bench. ``wall_s`` is the time
from writing the request to the end of the answer, ``server_cpu_s`` the server process's
CPU over it (``/proc``). The engine figure: the same document compiled and run in this
process (``compile_workflow`` + ``run_workflow``, no store, no HTTP).

Target: a round under 2 s wall (reported, never asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from itertools import pairwise
from typing import Any

from _checkout import machine, print_report, provenance, sibling

api_bench: Any = sibling("api")

SCHEMA = "flowloom-bench-api-chain/1"
TARGET_S = 2.0


def template_chain(n: int) -> dict[str, Any]:
    """``start -> t1 -> ... -> t{n-2} -> say``: n nodes, each template printing its predecessor."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}]
    previous = "inputs.name"
    for i in range(1, n - 1):
        nodes.append({"id": f"t{i}", "type": "template", "config": {"template": "{{ " + previous + " }}"}})
        previous = f"t{i}.output"
    nodes.append({"id": "say", "type": "answer", "config": {"text": "{{ " + previous + " }}!"}})
    edges = [{"id": f"e{i}", "source": a["id"], "target": b["id"]} for i, (a, b) in enumerate(pairwise(nodes))]
    return {"id": f"chain{n}", "name": "bench chain",
            "inputs": [{"name": "name", "type": "string", "required": False, "default": "Ada"}],
            "nodes": nodes, "edges": edges}


def _check(run: dict[str, Any], n: int) -> None:
    if run.get("status") != "succeeded" or run.get("answer") != "Ada!" or len(run.get("node_runs", ())) != n:
        raise RuntimeError(f"the chain run did not succeed as expected: status {run.get('status')!r}, answer "
                           f"{run.get('answer')!r}, {len(run.get('node_runs', ()))} node runs; error {run.get('error')}")


def through_api(doc: dict[str, Any], n: int, rounds: int, verbose: bool) -> list[dict[str, float]]:
    """``rounds`` blocking runs of ``doc`` through a fresh ``flowloom serve``."""
    out = []
    with tempfile.TemporaryDirectory(prefix="flowloom-bench-chain-") as tmp:
        env, key = api_bench.flowloom_home(tmp, "http://127.0.0.1:9")
        server = api_bench.serve_flowloom(tmp, env)
        try:
            body = json.dumps({"workflow": doc, "inputs": {"name": "Ada"}, "response_mode": "blocking"}).encode()
            for i in range(rounds):
                request = urllib.request.Request(server.url + "/v1/runs", data=body, method="POST", headers={
                    "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
                cpu0, t0 = server.cpu_s(), time.perf_counter()
                with urllib.request.urlopen(request, timeout=600) as resp:
                    answer = resp.read()
                wall, cpu = time.perf_counter() - t0, server.cpu_s() - cpu0
                _check(json.loads(answer), n)
                out.append({"wall_s": round(wall, 3), "server_cpu_s": round(cpu, 3), "answer_bytes": len(answer)})
                api_bench._log(verbose, f"round {i + 1}: {out[-1]}")
        finally:
            server.stop()
    return out


def in_memory(doc: dict[str, Any], n: int) -> dict[str, float]:
    """The same document compiled and run by the engine in this process."""
    from engine import RunDeps, compile_workflow, run_workflow
    from nodes import builtin_catalog

    catalog = builtin_catalog()
    t0, c0 = time.perf_counter(), time.process_time()
    plan = compile_workflow(doc, catalog=catalog, models=None, use_cache=False)
    compiled = time.perf_counter() - t0
    state = asyncio.run(run_workflow(plan, {"name": "Ada"}, deps=RunDeps()))
    if state.status.value != "succeeded" or state.answer != "Ada!" or len(state.node_runs) != n:
        raise RuntimeError(f"the in-memory run did not succeed: {state.status.value}, {state.answer!r}")
    return {"wall_s": round(time.perf_counter() - t0, 3), "compile_s": round(compiled, 3),
            "cpu_s": round(time.process_time() - c0, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes of the chain (at most the server's "
                                                                  "max_nodes, 10000 by default)")
    parser.add_argument("--rounds", type=int, default=3, help="runs through the API (the first compiles cold)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    def make() -> dict[str, object]:
        started = time.time()
        doc = template_chain(args.nodes)
        engine = in_memory(doc, args.nodes)
        api = through_api(doc, args.nodes, args.rounds, args.verbose)
        walls = [r["wall_s"] for r in api]
        median = statistics.median(walls)
        return {"schema": SCHEMA, "machine": machine(("fastapi", "uvicorn", "pydantic", "jinja2", "orjson")),
                "flowloom": provenance(("api", "engine", "nodes", "schemas", "workers")),
                "nodes": args.nodes, "engine_in_memory": engine, "api_rounds": api,
                "api_wall_s_median": median, "api_server_cpu_s_median": statistics.median(r["server_cpu_s"] for r in api),
                "targets": {"api_wall_s": {"value": median, "target": f"< {TARGET_S}", "met": median < TARGET_S}},
                "elapsed_s": round(time.time() - started, 1)}

    return print_report(make)


if __name__ == "__main__":
    sys.exit(main())
