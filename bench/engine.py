"""Engine benchmark: Flowloom vs LangGraph on the same graph shapes with no-op nodes.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/engine.py            # full run (~30 s on 2 cores)
    python bench/engine.py --quick    # smoke run with small sizes (a few seconds)

What is measured (see bench/README.md for the numbers and how to read them):

- ``overhead``: microseconds per node for one run of a 1000-node chain
  (start -> n1 -> ... -> n999) and a 1000-node fan-out/fan-in (start -> 998 parallel
  nodes -> join), timed with ``time.perf_counter`` around ``await run_workflow(...)``
  / ``await graph.ainvoke(...)`` on the same asyncio loop; compile time excluded.
  Flowloom runs twice per round: without an event sink (``RunDeps()``), the headline
  figure, and with a ``list.append`` sink so the cost of events shows. Runs of the two
  engines are interleaved round by round, so background load hits both alike.
- ``compile``: Flowloom ``compile_workflow(doc, catalog=BENCH_CATALOG, use_cache=False)`` from a dict
  (pydantic validation + graph build + all checks) vs LangGraph ``StateGraph`` build
  (``add_node``/``add_edge``) + ``.compile()``, chain shape.
- ``memory``: tracemalloc peak minus the traced size just before one run of the
  fan-out (plan/graph compiled and one warm-up run done before measuring); three
  such runs, median and max reported, the target checked on the max.

Every timed figure is the median of the timed runs after warm-up runs; the best
(minimum) is reported next to it. Key names say which (``..._median``, ``..._best``).
GC stays enabled (a real run pays for it); ``gc.collect()`` runs before each timed run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import functools
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from itertools import pairwise
from typing import Any, TypedDict

from _checkout import ROOT as _ROOT
from _checkout import machine, print_report, provenance, sibling

import engine
from engine import RunDeps, compile_workflow, run_workflow

_noop = sibling("_noop")  # the bench-only noop kind, shared with the other bench
BENCH_CATALOG = _noop.BENCH_CATALOG  # type: ignore[attr-defined]
chain_ids = _noop.chain_ids  # type: ignore[attr-defined]
flowloom_chain = _noop.flowloom_chain  # type: ignore[attr-defined]

from langgraph.graph import END, START, StateGraph  # noqa: E402

SCHEMA = "flowloom-bench/1"

TARGETS = {
    "overhead_ratio_max": 0.1,  # Flowloom per-node overhead <= 0.1 x LangGraph, both shapes
    "compile_ratio_max": 0.1,  # Flowloom compile at the largest size <= 0.1 x LangGraph
    "fanout_memory_mib_max": 5.0,  # Flowloom run-time memory increase on the fan-out < 5 MiB
}


def compile_bench(doc: dict[str, Any], *, use_cache: bool = False) -> Any:
    """Compile a bench workflow against :data:`BENCH_CATALOG` (no model registry check)."""
    return compile_workflow(doc, catalog=BENCH_CATALOG, models=None, use_cache=use_cache)


# ------------------------------------------------------------------- graph shapes


def fanout_ids(n: int) -> tuple[list[str], str]:
    """The n - 2 parallel node ids and the join id (plus ``start``: n nodes)."""
    return [f"p{i}" for i in range(1, n - 1)], "join"


def flowloom_fanout(n: int) -> dict[str, Any]:
    """The n-node fan-out ``start -> n-2 parallel noops -> join`` as a Flowloom workflow document."""
    mids, join = fanout_ids(n)
    nodes = [{"id": "start", "type": "start"}] + [{"id": m, "type": "noop"} for m in mids]
    nodes.append({"id": join, "type": "noop"})
    edges = [{"id": f"a{i}", "source": "start", "target": m} for i, m in enumerate(mids)]
    edges += [{"id": f"b{i}", "source": m, "target": join} for i, m in enumerate(mids)]
    return {"id": f"fanout{n}", "name": "bench fan-out", "nodes": nodes, "edges": edges}


class LGState(TypedDict, total=False):
    """Minimal LangGraph state: one optional key, no reducer."""

    x: int


async def lg_noop(state: LGState) -> dict[str, Any]:
    """LangGraph's no-op node: no state update."""
    return {}


def langgraph_chain(n: int) -> Any:
    """Build and compile the chain as a LangGraph StateGraph."""
    ids = chain_ids(n)
    graph = StateGraph(LGState)
    for nid in ids:
        graph.add_node(nid, lg_noop)
    graph.add_edge(START, ids[0])
    for a, b in pairwise(ids):
        graph.add_edge(a, b)
    graph.add_edge(ids[-1], END)
    return graph.compile()


def langgraph_fanout(n: int) -> Any:
    """Build and compile the fan-out; the join waits for all with ``add_edge([...], join)``."""
    mids, join = fanout_ids(n)
    graph = StateGraph(LGState)
    graph.add_node("start", lg_noop)
    graph.add_edge(START, "start")
    for m in mids:
        graph.add_node(m, lg_noop)
        graph.add_edge("start", m)
    graph.add_node(join, lg_noop)
    graph.add_edge(mids, join)
    graph.add_edge(join, END)
    return graph.compile()


# ------------------------------------------------------------------------ helpers


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b > 0 else None


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one ``await fn()``."""
    gc.collect()
    c0 = time.process_time()
    t0 = time.perf_counter()
    await fn()
    t1 = time.perf_counter()
    return t1 - t0, time.process_time() - c0


def _timed_sync(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


async def _peak_mib(fn: Callable[[], Awaitable[Any]]) -> float:
    """tracemalloc peak above the traced size at the start of ``fn``, in MiB."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        result = await fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return (peak - base) / (1024 * 1024)


# ----------------------------------------------------------------------- measures


async def bench_overhead(shape: str, n: int, warmup: int, repeat: int, verbose: bool) -> dict[str, Any]:
    """µs per node of one run of ``shape`` (chain/fanout) with n nodes: Flowloom (with and without an event
    sink) and LangGraph interleaved round by round; medians and bests."""
    doc = flowloom_chain(n) if shape == "chain" else flowloom_fanout(n)
    plan = compile_bench(doc)
    graph = langgraph_chain(n) if shape == "chain" else langgraph_fanout(n)
    lg_config = {"recursion_limit": n + 10}
    events_per_run: list[int] = []

    async def fl_plain() -> Any:
        state = await run_workflow(plan, {}, deps=RunDeps())
        assert state.status.value == "succeeded", state.error
        assert len(state.node_runs) == n
        return state

    async def fl_events() -> Any:
        events: list[Any] = []
        state = await run_workflow(plan, {}, deps=RunDeps(on_event=events.append))
        assert state.status.value == "succeeded", state.error
        events_per_run.append(len(events))
        return state

    async def lg_run() -> Any:
        return await graph.ainvoke({}, lg_config)

    for _ in range(warmup):
        await fl_plain()
        await fl_events()
        await lg_run()
    plain: list[float] = []
    with_events: list[float] = []
    lg: list[float] = []
    plain_cpu: list[float] = []
    lg_cpu: list[float] = []
    for i in range(repeat):
        wall, cpu = await _timed(fl_plain)
        plain.append(wall / n * 1e6)
        plain_cpu.append(cpu / n * 1e6)
        wall, cpu = await _timed(lg_run)
        lg.append(wall / n * 1e6)
        lg_cpu.append(cpu / n * 1e6)
        with_events.append((await _timed(fl_events))[0] / n * 1e6)
        _log(verbose, f"[{shape} {n}] round {i + 1}: flowloom {plain[-1]:.1f} us/node, "
                      f"with events {with_events[-1]:.1f}, langgraph {lg[-1]:.1f}")
    fl_med, lg_med, ev_med = statistics.median(plain), statistics.median(lg), statistics.median(with_events)
    return {
        "nodes": n,
        "flowloom_us_per_node_median": _r(fl_med),
        "flowloom_us_per_node_best": _r(min(plain)),
        "flowloom_events_us_per_node_median": _r(ev_med),
        "flowloom_events_us_per_node_best": _r(min(with_events)),
        "flowloom_events_per_run": events_per_run[-1] if events_per_run else None,
        "langgraph_us_per_node_median": _r(lg_med),
        "langgraph_us_per_node_best": _r(min(lg)),
        "ratio_median": _ratio(fl_med, lg_med),
        "ratio_best": _ratio(min(plain), min(lg)),
        "ratio_events_median": _ratio(ev_med, lg_med),
        # process CPU time (less sensitive to other work on a shared machine than wall time)
        "flowloom_cpu_us_per_node_median": _r(statistics.median(plain_cpu)),
        "langgraph_cpu_us_per_node_median": _r(statistics.median(lg_cpu)),
        "ratio_cpu_median": _ratio(statistics.median(plain_cpu), statistics.median(lg_cpu)),
        "samples_us_per_node": {"flowloom": [_r(x, 1) for x in plain], "flowloom_events": [_r(x, 1) for x in with_events],
                                "langgraph": [_r(x, 1) for x in lg]},
    }


def bench_compile(sizes: list[int], warmup: int, repeat: int, verbose: bool) -> dict[str, Any]:
    """ms to compile the chain of each size: Flowloom (validation + checks) vs LangGraph build + compile."""
    fl: dict[str, dict[str, float | None]] = {}
    lg: dict[str, dict[str, float | None]] = {}
    for n in sizes:
        doc = flowloom_chain(n)
        for _ in range(warmup):
            compile_bench(doc)
            langgraph_chain(n)
        fl_t: list[float] = []
        lg_t: list[float] = []
        for _ in range(repeat):
            fl_t.append(_timed_sync(functools.partial(compile_bench, doc)) * 1e3)
            lg_t.append(_timed_sync(functools.partial(langgraph_chain, n)) * 1e3)
        fl[str(n)] = {"median": _r(statistics.median(fl_t)), "best": _r(min(fl_t))}
        lg[str(n)] = {"median": _r(statistics.median(lg_t)), "best": _r(min(lg_t))}
        _log(verbose, f"[compile {n}] flowloom {fl[str(n)]['median']} ms, langgraph {lg[str(n)]['median']} ms")
    largest = str(max(sizes))
    return {
        "shape": "chain",
        "sizes": sizes,
        "flowloom_ms_median": {k: v["median"] for k, v in fl.items()},
        "flowloom_ms_best": {k: v["best"] for k, v in fl.items()},
        "langgraph_ms_median": {k: v["median"] for k, v in lg.items()},
        "langgraph_ms_best": {k: v["best"] for k, v in lg.items()},
        "largest": int(largest),
        "ratio_median_at_largest": _ratio(fl[largest]["median"] or 0.0, lg[largest]["median"] or 0.0),
    }


async def bench_memory(n: int, runs: int, verbose: bool) -> dict[str, Any]:
    """tracemalloc peak increase (MiB) of one fan-out run of n nodes, Flowloom vs LangGraph."""
    plan = compile_bench(flowloom_fanout(n))
    graph = langgraph_fanout(n)
    lg_config = {"recursion_limit": n + 10}

    async def fl_plain() -> Any:
        return await run_workflow(plan, {}, deps=RunDeps())

    async def fl_events() -> Any:
        events: list[Any] = []
        state = await run_workflow(plan, {}, deps=RunDeps(on_event=events.append))
        return state, events

    async def lg_run() -> Any:
        return await graph.ainvoke({}, lg_config)

    await fl_plain()
    await fl_events()
    await lg_run()  # warm-up runs
    fl: list[float] = []
    fl_ev: list[float] = []
    lg: list[float] = []
    for _ in range(runs):  # the peak moves a little with when the cyclic GC runs
        fl.append(await _peak_mib(fl_plain))
        fl_ev.append(await _peak_mib(fl_events))
        lg.append(await _peak_mib(lg_run))
    fl_med, lg_med = statistics.median(fl), statistics.median(lg)
    _log(verbose, f"[memory fanout {n}] flowloom {fl}, with events {fl_ev}, langgraph {lg} MiB")
    return {
        "shape": "fanout",
        "nodes": n,
        "runs": runs,
        "flowloom_peak_increase_mib_median": _r(fl_med),
        "flowloom_peak_increase_mib_max": _r(max(fl)),
        "flowloom_events_peak_increase_mib_median": _r(statistics.median(fl_ev)),
        "langgraph_peak_increase_mib_median": _r(lg_med),
        "langgraph_peak_increase_mib_max": _r(max(lg)),
        "ratio_median": _ratio(fl_med, lg_med),
    }


def _checkout() -> dict[str, Any]:
    """Which Flowloom code was measured: the commit, and whether engine/schemas/nodes differ from it."""
    found = provenance(("engine", "schemas", "nodes"))
    return {"root": _ROOT, "engine_path": os.path.dirname(engine.__file__), "commit": found["commit"],
            "engine_dirty": found["dirty"]}


def _machine() -> dict[str, Any]:
    return machine(("langgraph", "langchain-core", "pydantic", "networkx"))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measure and return the JSON report (a dict)."""
    if args.quick:
        n_overhead, compile_sizes, warmup, repeat = 100, [50, 100, 200], 1, 2
    else:
        n_overhead, compile_sizes, warmup, repeat = 1000, [100, 1000, 5000], 1, 5
    if args.repeat:
        repeat = args.repeat
    machine = _machine()
    started = time.perf_counter()
    overhead = {
        "chain": await bench_overhead("chain", n_overhead, warmup, repeat, args.verbose),
        "fanout": await bench_overhead("fanout", n_overhead, warmup, repeat, args.verbose),
    }
    compile_ = bench_compile(compile_sizes, warmup, repeat, args.verbose)
    memory = await bench_memory(n_overhead, 3 if not args.quick else 1, args.verbose)
    ratio_max, compile_max, mem_max = (TARGETS["overhead_ratio_max"], TARGETS["compile_ratio_max"],
                                       TARGETS["fanout_memory_mib_max"])

    def met(value: float | None, ok: Callable[[float], bool]) -> bool:
        return value is not None and ok(value)

    targets = {
        "chain_overhead_ratio": {"value": overhead["chain"]["ratio_median"], "target": f"<= {ratio_max}",
                                 "met": met(overhead["chain"]["ratio_median"], lambda v: v <= ratio_max)},
        "fanout_overhead_ratio": {"value": overhead["fanout"]["ratio_median"], "target": f"<= {ratio_max}",
                                  "met": met(overhead["fanout"]["ratio_median"], lambda v: v <= ratio_max)},
        "compile_ratio_at_largest": {"value": compile_["ratio_median_at_largest"], "target": f"<= {compile_max}",
                                     "met": met(compile_["ratio_median_at_largest"], lambda v: v <= compile_max)},
        "fanout_memory_mib": {"value": memory["flowloom_peak_increase_mib_max"], "target": f"< {mem_max}",
                              "met": met(memory["flowloom_peak_increase_mib_max"], lambda v: v < mem_max)},
    }
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "flowloom": _checkout(),
        "method": {
            "warmup_runs": warmup,
            "timed_runs": repeat,
            "stat": "median of timed runs (best = min also reported)",
            "timer": "time.perf_counter around await run_workflow / await graph.ainvoke; compile excluded; "
                     "*_cpu_*: time.process_time over the same run",
            "flowloom_deps": "RunDeps() (no event sink); *_events_*: RunDeps(on_event=list.append)",
            "langgraph": "StateGraph(TypedDict, no reducer), async nodes returning {}, fan-in add_edge([...], join)",
            "gc": "enabled; gc.collect() before each timed run",
            "memory": "tracemalloc peak minus traced size before a run, after a warm-up run; median and max "
                      "over the runs; the target uses the max",
        },
        "overhead": overhead,
        "compile": compile_,
        "memory": memory,
        "targets": targets,
        "all_targets_met": all(t["met"] for t in targets.values()),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the report as one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and 2 timed runs (smoke test)")
    parser.add_argument("--repeat", type=int, default=0, help="timed runs per measure (default 5, quick 2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    return print_report(lambda: asyncio.run(main_async(args)))


if __name__ == "__main__":
    raise SystemExit(main())
