"""Start-up benchmark: whole-process wall time of the ``flowloom`` command line.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/startup.py            # full run: 15 timed runs per command
    python bench/startup.py --quick    # smoke run: 2 timed runs, one import-time profile

What is measured (see bench/README.md for the numbers and how to read them):

- ``commands``: ``time.perf_counter`` around ``subprocess.run([python, ...])`` (output
  captured, cwd = the checkout) for ``python -c pass`` (the interpreter's own start-up),
  ``python -m api.cli --help``, ``python -m api.cli validate examples/hello.json``,
  ``python -m api.cli validate examples/research_agent.json`` and ``python -m api.cli run
  examples/hello.json --input name=Ada`` (a durable run in a temporary ``FLOWLOOM_HOME``
  whose database the warm-up run created, so it is at the newest migration); one warm-up
  run each, then the commands interleaved round by round; median and best per command,
  the median minus ``python -c pass`` (what Flowloom itself adds), and the CPU time
  (user + system, ``RUSAGE_CHILDREN``) of each process, a second view on a shared machine.
- ``imports``: ``python -X importtime -m api.cli validate examples/research_agent.json``;
  per top-level package, ``cumulative_ms`` = the import time of the package's modules
  entered from outside it (the package with everything it pulled in that was not loaded
  yet) and ``self_ms`` = the time spent in its own modules; the 10 biggest by
  cumulative time (median over the profiled runs), the checkout's own packages included.
- ``imports_run``: the same for ``run examples/hello.json`` (database at the newest migration).
- ``targets``: median wall time under ``TARGETS_S`` per command: ``--help`` 0.3 s,
  ``validate`` 0.35 s, ``run`` 0.6 s.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _checkout import ROOT, machine, print_report, provenance

SCHEMA = "flowloom-bench-startup/2"
COMMANDS: dict[str, list[str]] = {
    "python_pass": ["-c", "pass"],
    "cli_help": ["-m", "api.cli", "--help"],
    "validate_hello": ["-m", "api.cli", "validate", "examples/hello.json"],
    "validate_research_agent": ["-m", "api.cli", "validate", "examples/research_agent.json"],
    "run_hello": ["-m", "api.cli", "run", "examples/hello.json", "--input", "name=Ada"],
}
#: Median wall-time target per command (seconds).
TARGETS_S: dict[str, float] = {"cli_help": 0.3, "validate_hello": 0.35, "validate_research_agent": 0.35,
                               "run_hello": 0.6}
PROFILED = ["-m", "api.cli", "validate", "examples/research_agent.json"]
#: The checkout's own top-level packages (marked in the import table).
OWN_PACKAGES = {"api", "engine", "nodes", "schemas", "workers"}


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


#: ``FLOWLOOM_HOME`` of the measured processes (set by :func:`run`): ``flowloom run``
#: writes its run store there, never into the user's ``~/.flowloom``.
_HOME: dict[str, str] = {}


def _env() -> dict[str, str]:
    """The environment of the measured processes: ours without ``FLOWLOOM_*`` settings
    (no user configuration changes what is imported) and without ``PYTHON*`` overrides,
    with ``FLOWLOOM_HOME`` in a temporary folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_") and not k.startswith("PYTHON")}
    return {**env, **_HOME}


def run_once(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one ``python <args>`` process, started from the checkout."""
    env = _env()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, timeout=120)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def bench_commands(warmup: int, repeat: int, verbose: bool) -> dict[str, Any]:
    """Median/best wall time of each command, interleaved round by round after warm-ups."""
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    codes: dict[str, int] = {}
    for _ in range(warmup):
        for name, args in COMMANDS.items():
            _, _, codes[name] = run_once(args)
    for rnd in range(repeat):
        for name, args in COMMANDS.items():
            wall, used, code = run_once(args)
            samples[name].append(wall)
            cpu[name].append(used)
            codes[name] = code
        _log(verbose, f"round {rnd + 1}: " + ", ".join(f"{n} {s[-1] * 1e3:.0f} ms" for n, s in samples.items()))
    base = statistics.median(samples["python_pass"])
    out: dict[str, Any] = {}
    for name, values in samples.items():
        med = statistics.median(values)
        out[name] = {
            "argv": ["python", *COMMANDS[name]],
            "exit_code": codes[name],
            "s_median": round(med, 4),
            "s_best": round(min(values), 4),
            "over_python_s_median": round(med - base, 4),
            "cpu_s_median": round(statistics.median(cpu[name]), 4),
            "samples_s": [round(v, 4) for v in values],
        }
    return out


def parse_importtime(text: str) -> list[dict[str, Any]]:
    """Rows ``{module, self_us, cumulative_us, level, parent}`` of ``-X importtime`` output
    (``parent``: the index of the import that triggered it, None at the top)."""
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        try:
            self_us, cum_us, name = line[len("import time:"):].split("|", 2)
            rows.append({"module": name.strip(), "self_us": int(self_us), "cumulative_us": int(cum_us),
                         "level": (len(name) - len(name.lstrip(" ")) - 1) // 2, "parent": None})
        except ValueError:
            continue
    # A module is printed when its import ends, after everything it imported: walking
    # backwards, the parent of a row is the last row seen one level up.
    open_at: dict[int, int] = {}
    for i in range(len(rows) - 1, -1, -1):
        level = rows[i]["level"]
        rows[i]["parent"] = open_at.get(level - 1)
        open_at[level] = i
    return rows


def top_packages(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per top-level package: ``cumulative_ms`` (imports of it entered from outside it,
    with what they pulled in) and ``self_ms`` (its own modules only)."""
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        package = row["module"].split(".")[0]
        entry = out.setdefault(package, {"cumulative_ms": 0.0, "self_ms": 0.0, "modules": 0})
        entry["self_ms"] += row["self_us"] / 1000
        entry["modules"] += 1
        parent = row["parent"]
        if parent is None or rows[parent]["module"].split(".")[0] != package:
            entry["cumulative_ms"] += row["cumulative_us"] / 1000
    return out


def bench_imports(runs: int, verbose: bool, profiled: list[str] = PROFILED) -> dict[str, Any]:
    """The 10 top-level packages with the biggest cumulative import time (median over ``runs``)
    of ``python -X importtime <profiled>``."""
    per_run: list[dict[str, dict[str, float]]] = []
    totals: list[float] = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-X", "importtime", *profiled], cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=120)
        rows = parse_importtime(proc.stderr)
        per_run.append(top_packages(rows))
        totals.append(sum(r["cumulative_us"] for r in rows if r["parent"] is None) / 1000)
    names = set().union(*per_run)
    merged = {}
    for name in names:
        cum = [run.get(name, {}).get("cumulative_ms", 0.0) for run in per_run]
        own = [run.get(name, {}).get("self_ms", 0.0) for run in per_run]
        mods = [run.get(name, {}).get("modules", 0) for run in per_run]
        merged[name] = {"package": name, "cumulative_ms": round(statistics.median(cum), 1),
                        "self_ms": round(statistics.median(own), 1), "modules": int(max(mods)),
                        "own_package": name in OWN_PACKAGES}
    ranked = sorted(merged.values(), key=lambda e: -e["cumulative_ms"])
    _log(verbose, "imports: " + ", ".join(f"{e['package']} {e['cumulative_ms']} ms" for e in ranked[:10]))
    third_party = [e for e in ranked if not e["own_package"] and e["package"] not in sys.stdlib_module_names]
    stdlib = [e for e in ranked if e["package"] in sys.stdlib_module_names]
    return {
        "argv": ["python", "-X", "importtime", *profiled],
        "runs": runs,
        "total_import_ms_median": round(statistics.median(totals), 1),
        "modules_imported": int(sum(e["modules"] for e in ranked)),
        "top10_cumulative": ranked[:10],
        "top10_third_party_cumulative": third_party[:10],
        "stdlib_self_ms": round(sum(e["self_ms"] for e in stdlib), 1),
        "note": "cumulative_ms overlaps between packages (a package's first import includes the packages it "
                "pulls in); self_ms does not",
    }


def _checkout() -> dict[str, Any]:
    """Which Flowloom code was measured: the commit, and whether api/engine/schemas/nodes differ from it."""
    return {"root": ROOT, **provenance(("api", "engine", "schemas", "nodes"))}


def _machine() -> dict[str, Any]:
    return machine()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measure and return the JSON report (a dict)."""
    warmup, repeat, profiles = (1, 2, 1) if args.quick else (1, 15, 5)
    if args.repeat:
        repeat = args.repeat
    machine = _machine()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flowloom-startup-") as home:
        _HOME["FLOWLOOM_HOME"] = home
        try:
            commands = bench_commands(warmup, repeat, args.verbose)
            imports = bench_imports(profiles, args.verbose)
            imports_run = bench_imports(profiles, args.verbose, COMMANDS["run_hello"])
        finally:
            _HOME.clear()
    targets = {name: {"value": section["s_median"], "target": f"< {TARGETS_S[name]}",
                      "met": section["s_median"] < TARGETS_S[name]}
               for name, section in commands.items() if name in TARGETS_S}
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "flowloom": _checkout(),
        "method": {
            "warmup_runs": warmup,
            "timed_runs": repeat,
            "timer": "time.perf_counter around subprocess.run([sys.executable, ...]), output captured, cwd = "
                     "checkout, FLOWLOOM_*/PYTHON* variables removed, FLOWLOOM_HOME a temporary folder (the "
                     "warm-up run creates the run store); commands interleaved round by round; CPU time = "
                     "user + system of the child (RUSAGE_CHILDREN)",
            "stat": "median of timed runs (best = min also reported)",
            "imports": "python -X importtime; per top-level package, median over the profiled runs",
        },
        "commands": commands,
        "imports": imports,
        "imports_run": imports_run,
        "targets": targets,
        "all_targets_met": all(t["met"] for t in targets.values()),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the report as one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 timed runs per command, one import profile")
    parser.add_argument("--repeat", type=int, default=0, help="timed runs per command (default 15, quick 2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    return print_report(lambda: run(args))


if __name__ == "__main__":
    raise SystemExit(main())
