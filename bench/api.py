"""API benchmark: Flowloom's HTTP API next to the LangGraph API server and a bare FastAPI route.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/api.py                 # full run (~4-5 min on 2 cores)
    python bench/api.py --quick         # smoke run with a tiny load (~40 s with LangGraph)
    python bench/api.py --quick --skip-peer   # without LangGraph (~10 s; what the smoke test runs)
    python bench/api.py --skip-peer --tracing # + Flowloom with OTLP traces on (bench/_tracing.py)

Servers, each its own process on 127.0.0.1, started and stopped by this script:

- Flowloom: ``python -m api.cli serve`` (uvicorn, as shipped) on a fresh ``FLOWLOOM_HOME``
  (SQLite), with an admin key made by ``python -m api.cli keys create``; two published
  workflows run through ``POST /v1/workflows/{id}/runs``: ``plumbing`` (start -> template ->
  answer) and ``model`` (start -> chat -> answer, the chat node calling the scripted
  OpenAI-compatible server ``tests/support/openai_server.py`` in its own process, zero
  delay, 4 streamed tokens).
- LangGraph: ``langgraph dev --no-browser --no-reload`` serving ``bench/_langgraph/graph.py``
  (three trivial async nodes: start -> template -> answer) from a copy in a temporary
  folder; thread-less runs through ``POST /runs/wait`` (blocking) and ``POST /runs/stream``.
- the floor: a FastAPI app with one ``GET /hello`` route under uvicorn with the same
  uvicorn settings as ``flowloom serve``.

The load generator is this process (``bench/_api_load.py``): a raw HTTP/1.1 client on asyncio
streams (one keep-alive connection per concurrent worker, requests pre-encoded), so it spends
little CPU per request (``client_cpu_ms_per_req`` says how little). Every phase sends a fixed number of requests after
a warm-up; a non-2xx answer fails the bench. Server CPU is the utime + stime of the server
process and its descendants (``/proc/<pid>/stat``) read before and after each phase.

What is measured per server (see bench/README.md for the numbers and how to read them):

- ``blocking_c1`` / ``blocking_c16``: a run per request, answered when it is done, at
  concurrency 1 and 16: runs/s, p50/p99 latency, server CPU per run;
- ``sse`` (Flowloom, LangGraph): ``response_mode: streaming`` / ``/runs/stream`` at concurrency
  1: time to the first SSE event and (Flowloom) to ``run_started``, p50/p99;
- ``async`` (Flowloom): ``response_mode: async`` (202), then ``GET /v1/runs/{id}/events`` on
  the same connection until the stream ends: create-to-done latency;
- ``targets``: Flowloom's server CPU per plumbing run (blocking, concurrency 16) at most
  1/3 of LangGraph's and at most 4x the floor's per request; plumbing p50 at concurrency 1
  under 20 ms; SSE first event p50 under 10 ms. Reported, never asserted.

If ``langgraph dev`` cannot start (not installed, or it needs the network) the bench fails with
its log; ``--skip-peer`` measures without it (LangGraph targets then ``met: false``,
``skipped: true``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _checkout import HERE, ROOT, machine, print_report, provenance, sibling

pgstat: Any = sibling("_pgstat")
tracing: Any = sibling("_tracing")
loadgen: Any = sibling("_api_load")
encode, phase, blocking_sample, sse_sample, async_sample = (loadgen.encode, loadgen.phase, loadgen.blocking_sample,
                                                         loadgen.sse_sample, loadgen.async_sample)
COUNTERS, counters, create_database, drop_database = (pgstat.COUNTERS, pgstat.counters, pgstat.create_database,
                                                      pgstat.drop_database)

SCHEMA = "flowloom-bench-api/1"
TARGETS = {"cpu_ratio_vs_langgraph_max": 1 / 3, "cpu_ratio_vs_floor_max": 4.0, "p50_c1_ms_max": 20.0,
           "sse_first_event_p50_ms_max": 10.0, "postgresql_p50_ratio_max": 1.5, "postgresql_commits_per_run_max": 2}
#: requests per phase: warm-up, blocking c1, blocking c16, sse, async
LOADS = {"full": {"warmup": 30, "c1": 300, "c16": 1600, "sse": 300, "async": 200},
         "quick": {"warmup": 3, "c1": 20, "c16": 64, "sse": 10, "async": 10}}
#: LangGraph's in-memory queue looks for new runs every 0.5 s when idle (langgraph_runtime_inmem
#: ``Runs.next``): a run at concurrency 1 takes about a second, so fewer requests per phase
PEER_LOADS = {"full": {"warmup": 3, "c1": 30, "c16": 320, "sse": 20},
              "quick": {"warmup": 1, "c1": 4, "c16": 32, "sse": 3}}
#: seconds each server is left idle to measure its CPU use without load
IDLE_S = {"full": 3.0, "quick": 0.5}
#: the floor is cheap: more requests per phase for a stable figure
FLOOR_FACTOR = 3
CONCURRENCY = 16
#: the PostgreSQL server of ``--database postgresql`` (a maintenance URL; trust auth on localhost)
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
_TICK = os.sysconf("SC_CLK_TCK")


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ workflows


def plumbing_doc() -> dict[str, Any]:
    """``start -> template -> answer``: no model, no I/O."""
    return {"id": "plumbing", "name": "bench plumbing",
            "inputs": [{"name": "name", "type": "string", "required": False, "default": "Ada"}],
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "greet", "type": "template",
                       "config": {"template": "Hello, {{ who }}!", "variables": [
                           {"name": "who", "value": {"ref": "inputs.name"}, "type": "string"}]}},
                      {"id": "say", "type": "answer", "config": {"text": "{{ greet.output }}"}}],
            "edges": [{"id": "e1", "source": "start", "target": "greet"},
                      {"id": "e2", "source": "greet", "target": "say"}]}


def model_doc() -> dict[str, Any]:
    """``start -> chat -> answer``: one streamed call of model ``bench`` (4 tokens)."""
    return {"id": "model", "name": "bench model",
            "nodes": [{"id": "start", "type": "start"},
                      {"id": "llm", "type": "chat",
                       "config": {"model": "bench", "max_tokens": 4, "history": 0, "user_prompt": "hello"}},
                      {"id": "say", "type": "answer", "config": {"text": "{{ llm.answer }}"}}],
            "edges": [{"id": "e1", "source": "start", "target": "llm"},
                      {"id": "e2", "source": "llm", "target": "say"}]}


# ------------------------------------------------------------------ processes


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system, reaped children included) of process ``root`` and its
    descendants, from ``/proc/<pid>/stat``."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(fields[i]) for i in (11, 12, 13, 14))
    total = 0
    for pid, used in ticks.items():
        node = pid
        while node > 1 and node != root:
            node = parents.get(node, 0)
        if node == root:
            total += used
    return total / _TICK


def free_port() -> int:
    """A port nobody listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A server process of the bench: started in its own session, waited for until
    ``health`` answers 200, stopped (the whole session) at the end."""

    name: str
    argv: list[str]
    port: int
    health: str
    env: dict[str, str]
    cwd: str
    log_path: str
    proc: subprocess.Popen[bytes] | None = None
    #: the argv for another port: a free port can be taken by another process between
    #: :func:`free_port` and the server's bind, and the start is then tried on a new one
    argv_for: Callable[[int], list[str]] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float) -> Server:
        """Start and wait for the health URL; a port taken before the server bound it is
        replaced (up to three times) when ``argv_for`` is set. Raises RuntimeError with
        the log's tail."""
        for _ in range(3):
            try:
                return self._start(timeout_s)
            except RuntimeError:
                if self.argv_for is None or "already in use" not in self.log_tail():
                    raise
                self.port = free_port()
                self.argv = self.argv_for(self.port)
        return self._start(timeout_s)

    def _start(self, timeout_s: float) -> Server:
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + self.health, timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not start within {timeout_s:.0f} s ({' '.join(self.argv)}); "
                           f"its log ends with:\n{self.log_tail()}")

    def log_tail(self, lines: int = 25) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def cpu_s(self) -> float:
        assert self.proc is not None
        return tree_cpu_s(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM to the server's session (the process and what it started), then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        except ProcessLookupError:
            pass


def _env(**extra: str) -> dict[str, str]:
    """Our environment without ``FLOWLOOM_*`` settings nor ``OTEL_*`` ones (tracing is on only
    where ``--tracing`` asks), plus ``extra``; the checkout first on ``PYTHONPATH`` (the
    scripted server is ``tests.support.openai_server``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWLOOM_", "OTEL_"))}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


# ------------------------------------------------------------------ servers


def start_model_server() -> tuple[subprocess.Popen[str], str]:
    """The scripted OpenAI-compatible server in its own process (zero delay; ``max_tokens``
    one-word chunks per reply): ``(process, base URL)``."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server"], cwd=ROOT, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the scripted model server did not start (got {url!r})")
    return proc, url


def _post(url: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


def flowloom_home(tmp: str, model_url: str, database_url: str | None = None,
                  otel_endpoint: str | None = None) -> tuple[dict[str, str], str]:
    """A fresh ``FLOWLOOM_HOME`` (its run store: SQLite in it, or ``database_url``) with an
    admin key: ``(the server's environment, admin key)``; traced to ``otel_endpoint`` when given."""
    suffix = ("" if database_url is None else "-postgresql") + ("" if otel_endpoint is None else "-traced")
    home, models = os.path.join(tmp, "flowloom-home" + suffix), os.path.join(tmp, "models.toml")
    with open(models, "w", encoding="utf-8") as fh:
        fh.write(f'[providers.bench]\nbase_url = "{model_url}/v1"\napi_key_env = "BENCH_LLM_KEY"\n\n'
                 '[models.bench]\nprovider = "bench"\nmodel = "bench-upstream"\nmax_context = 8192\n'
                 'max_output_tokens = 64\n')
    extra = {} if database_url is None else {"FLOWLOOM_DATABASE_URL": database_url}
    if otel_endpoint is not None:
        extra.update(OTEL_EXPORTER_OTLP_ENDPOINT=otel_endpoint, OTEL_SERVICE_NAME="flowloom-bench")
    env = _env(FLOWLOOM_HOME=home, FLOWLOOM_MODELS=models, BENCH_LLM_KEY="sk-bench", **extra)
    made = subprocess.run([sys.executable, "-m", "api.cli", "keys", "create", "--admin", "--name", "bench"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    key = made.stdout.strip()
    if made.returncode != 0 or not key.startswith("fl_"):
        raise RuntimeError(f"flowloom keys create failed: {made.stderr[-1000:]}")
    return env, key


def serve_flowloom(tmp: str, env: dict[str, str], log: str = "flowloom.log") -> Server:
    """``flowloom serve`` on the home of ``env`` (:func:`flowloom_home`), started."""
    def argv(port: int) -> list[str]:
        return [sys.executable, "-m", "api.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--no-examples", "--no-login-url"]

    port = free_port()
    return Server("flowloom serve", argv(port), port, "/health", env, ROOT, os.path.join(tmp, log),
                  argv_for=argv).start(90)


def start_flowloom(tmp: str, model_url: str, database_url: str | None = None,
                   otel_endpoint: str | None = None) -> tuple[Server, str, dict[str, str]]:
    """``flowloom serve`` on a fresh home with the two bench workflows saved and published:
    ``(server, admin key, its environment)``."""
    env, key = flowloom_home(tmp, model_url, database_url, otel_endpoint)
    log = "flowloom" + ("" if database_url is None else "-postgresql") + ("" if otel_endpoint is None else "-traced")
    server = serve_flowloom(tmp, env, log + ".log")
    for doc in (plumbing_doc(), model_doc()):
        _post(f"{server.url}/v1/workflows", key, doc)
        _post(f"{server.url}/v1/workflows/{doc['id']}/publish", key, {"note": "bench"})
    return server, key, env


_FLOOR_APP = '''from fastapi import FastAPI

app = FastAPI()


@app.get("/hello")
async def hello() -> dict[str, str]:
    return {"hello": "world"}
'''
#: the uvicorn settings of ``flowloom serve`` (api/cli/serve.py), so the floor differs only by the app
_UVICORN = "http='httptools', lifespan='on', log_level='info', timeout_graceful_shutdown=10"


def start_floor(tmp: str) -> Server:
    """A FastAPI hello-world route under uvicorn with ``flowloom serve``'s settings."""
    folder = os.path.join(tmp, "floor")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "floor_app.py"), "w", encoding="utf-8") as fh:
        fh.write(_FLOOR_APP)
    def argv(port: int) -> list[str]:
        return [sys.executable, "-c",
                f"import uvicorn; uvicorn.run('floor_app:app', host='127.0.0.1', port={port}, {_UVICORN})"]

    port = free_port()
    return Server("fastapi floor", argv(port), port, "/hello", _env(), folder, os.path.join(tmp, "floor.log"),
                  argv_for=argv).start(60)


def start_langgraph(tmp: str) -> Server:
    """``langgraph dev`` serving bench/_langgraph (copied to ``tmp``). Raises RuntimeError
    when langgraph-cli is missing or the server does not come up (its log included)."""
    import importlib.util

    if importlib.util.find_spec("langgraph_cli") is None or importlib.util.find_spec("langgraph_api") is None:
        raise RuntimeError("langgraph dev is not installed: pip install -e '.[bench]' (langgraph-cli[inmem]); "
                           "or run with --skip-peer")
    folder = os.path.join(tmp, "langgraph")
    shutil.copytree(os.path.join(HERE, "_langgraph"), folder, ignore=shutil.ignore_patterns("__pycache__"))
    # no tracing or analytics calls (the machine may be offline), no log line per run
    env = _env(LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false", LANGGRAPH_CLI_NO_ANALYTICS="1")

    def argv(port: int) -> list[str]:
        return [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                "--port", str(port), "--config", "langgraph.json", "--server-log-level", "WARNING",
                "--n-jobs-per-worker", str(CONCURRENCY)]

    port = free_port()
    return Server("langgraph dev", argv(port), port, "/ok", env, folder, os.path.join(tmp, "langgraph.log"),
                  argv_for=argv).start(120)


# ------------------------------------------------------------------ measures


async def bench_flowloom(server: Server, key: str, workflow: str, load: dict[str, int], verbose: bool
                         ) -> dict[str, Any]:
    """Blocking at c1 and c16, SSE and async phases of one published workflow."""
    auth = {"Authorization": f"Bearer {key}"}
    path = f"/v1/workflows/{workflow}/runs"

    def run(mode: str) -> bytes:
        return encode("POST", path, port=server.port, headers=auth, body={"inputs": {}, "response_mode": mode})

    def events(run_id: str) -> bytes:
        return encode("GET", f"/v1/runs/{run_id}/events", port=server.port, headers=auth)

    what = f"flowloom {workflow}"
    out: dict[str, Any] = {}
    for name, sample, total, conc in (
            ("blocking_c1", blocking_sample(run("blocking"), what), load["c1"], 1),
            ("blocking_c16", blocking_sample(run("blocking"), what), load["c16"], CONCURRENCY),
            ("sse", sse_sample(run("streaming"), what, b"event: run_started"), load["sse"], 1),
            ("async", async_sample(run("async"), events, what), load["async"], 1)):
        _log(verbose, f"{what}: {name} ({total} requests)")
        out[name] = await phase(server, sample, total=total, concurrency=conc, warmup=load["warmup"])
    return out


async def bench_langgraph(server: Server, load: dict[str, int], verbose: bool) -> dict[str, Any]:
    """Thread-less runs of the 3-node graph: ``/runs/wait`` at c1 and c16, ``/runs/stream``."""
    body = {"assistant_id": "plumbing", "input": {"name": "Ada"}}
    wait = encode("POST", "/runs/wait", port=server.port, body=body)
    stream = encode("POST", "/runs/stream", port=server.port, body={**body, "stream_mode": "values"})
    out: dict[str, Any] = {}
    for name, sample, total, conc in (
            ("blocking_c1", blocking_sample(wait, "langgraph /runs/wait"), load["c1"], 1),
            ("blocking_c16", blocking_sample(wait, "langgraph /runs/wait"), load["c16"], CONCURRENCY),
            ("sse", sse_sample(stream, "langgraph /runs/stream", None), load["sse"], 1)):
        _log(verbose, f"langgraph: {name} ({total} requests)")
        out[name] = await phase(server, sample, total=total, concurrency=conc, warmup=load["warmup"])
    return out


async def bench_floor(server: Server, load: dict[str, int], verbose: bool) -> dict[str, Any]:
    """``GET /hello`` at c1 and c16."""
    sample = blocking_sample(encode("GET", "/hello", port=server.port), "fastapi floor")
    out: dict[str, Any] = {}
    for name, total, conc in (("blocking_c1", load["c1"] * FLOOR_FACTOR, 1),
                              ("blocking_c16", load["c16"] * FLOOR_FACTOR, CONCURRENCY)):
        _log(verbose, f"floor: {name} ({total} requests)")
        out[name] = await phase(server, sample, total=total, concurrency=conc, warmup=load["warmup"])
    return out


#: times the commit count is measured (both windows) when autovacuum acted in one of them
COMMIT_ATTEMPTS = 3


def _plumbing_request(server: Server, key: str) -> bytes:
    return encode("POST", "/v1/workflows/plumbing/runs", port=server.port, headers={"Authorization": f"Bearer {key}"},
                  body={"inputs": {}, "response_mode": "blocking"})


async def _served_window(tmp: str, env: dict[str, str], key: str, runs: int) -> tuple[float, float]:
    """A server that starts, serves one warm-up run then ``runs`` blocking plumbing runs at
    concurrency 1, and stops: ``(seconds from its start to its stop, seconds of the runs)``."""
    started = time.perf_counter()
    server = serve_flowloom(tmp, env, "flowloom-commits.log")
    try:
        served = await phase(server, blocking_sample(_plumbing_request(server, key), "flowloom plumbing (postgresql)"),
                             total=runs, concurrency=1, warmup=1)
    finally:
        server.stop()
    return time.perf_counter() - started, served["elapsed_s"]


async def _baseline_window(tmp: str, env: dict[str, str], key: str, seconds: float) -> None:
    """A server that starts, serves the same one warm-up run, stays up ``seconds`` in all and stops."""
    started = time.perf_counter()
    server = serve_flowloom(tmp, env, "flowloom-baseline.log")
    try:
        await phase(server, blocking_sample(_plumbing_request(server, key), "flowloom plumbing (postgresql)"),
                    total=1, concurrency=1, warmup=0)
        await asyncio.sleep(max(0.0, seconds - (time.perf_counter() - started)))
    finally:
        server.stop()


async def _commit_windows(tmp: str, env: dict[str, str], key: str, admin_url: str, database_url: str, runs: int,
                          verbose: bool) -> tuple[dict[str, int], dict[str, int], dict[str, int], float]:
    """The counters' deltas of the served window and of the baseline one, the times
    autovacuum vacuumed or analysed a table of the database in each, and the seconds the
    runs took. Each window holds exactly one read of those times (a constant of commits:
    they cancel out)."""
    before = await counters(admin_url, database_url)
    actions0 = await pgstat.autovacuum_actions(admin_url, database_url)
    _log(verbose, f"flowloom postgresql: 1 + {runs} blocking plumbing runs for the commit count")
    served_s, runs_s = await _served_window(tmp, env, key, runs)
    served = await counters(admin_url, database_url)
    actions1 = await pgstat.autovacuum_actions(admin_url, database_url)
    _log(verbose, f"flowloom postgresql: baseline (up {served_s:.1f} s, 1 run)")
    await _baseline_window(tmp, env, key, served_s)
    idle = await counters(admin_url, database_url)
    actions2 = await pgstat.autovacuum_actions(admin_url, database_url)
    return ({k: served[k] - before[k] for k in COUNTERS}, {k: idle[k] - served[k] for k in COUNTERS},
            {"measured": actions1 - actions0, "baseline": actions2 - actions1}, runs_s)


async def count_commits(tmp: str, env: dict[str, str], key: str, admin_url: str, database_url: str, runs: int,
                        verbose: bool) -> dict[str, Any]:
    """Commits and rows per blocking plumbing run on PostgreSQL, from ``pg_stat_database``:
    a server that starts, serves one warm-up run and ``runs`` blocking plumbing runs at
    concurrency 1 and stops, minus a server that starts, serves the same warm-up run, stays
    up as long and stops (the baseline: start-up, health probes, the periodic scans,
    shutdown, and what a server's first run reads once - the API key, the published
    version, the tenant's models and limits - and remembers); both on the database the
    PostgreSQL phases used. What remains beside the runs' own commits is the reads that
    a server serving runs makes again once a second (the key's, the tenant's models', the
    limits', each remembered 1 s: bench/README.md), 3 per second of ``runs_elapsed_s``
    after the first.

    PostgreSQL's autovacuum commits in the database too (``bench/_pgstat.py``): the database
    is vacuumed and analysed first, and both windows are measured again (up to
    :data:`COMMIT_ATTEMPTS` times in all) when autovacuum vacuumed or analysed a table in
    one of them; ``autovacuum`` says how often it did in the windows kept (0 and 0 unless
    every attempt saw it). A visit of a worker with nothing to do (2 commits, about once a
    minute) is not seen: it can move the figure by 2 / ``runs`` either way."""
    await pgstat.vacuum(admin_url, database_url)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        measured, baseline, actions, runs_s = await _commit_windows(tmp, env, key, admin_url, database_url, runs, verbose)
        if not any(actions.values()):
            break
        _log(verbose, f"flowloom postgresql: autovacuum acted during count {attempt} ({actions}): measuring again")
        await pgstat.vacuum(admin_url, database_url)
    per_run = {k: round((measured[k] - baseline[k]) / runs, 2) for k in COUNTERS}
    return {"runs": runs, "warmup_runs": 1, "runs_elapsed_s": runs_s, "baseline": baseline, "measured": measured, "per_run": per_run,
            "autovacuum": {**actions, "attempts": attempt}, "commits_per_run": per_run["xact_commit"],
            "rows_fetched_per_run": per_run["tup_fetched"], "rows_returned_per_run": per_run["tup_returned"]}


async def measure_postgresql(tmp: str, args: argparse.Namespace, model_url: str, load: dict[str, int]
                             ) -> dict[str, Any]:
    """The plumbing phases on a server whose run store is a fresh PostgreSQL database, then
    the commit count (:func:`count_commits`); the database is dropped at the end."""
    database_url = await create_database(args.postgres_url)
    try:
        server, key, env = start_flowloom(tmp, model_url, database_url)
        try:
            section = {"idle_cpu_ms_per_s": await idle_cpu(server, IDLE_S["quick" if args.quick else "full"]),
                       **await bench_flowloom(server, key, "plumbing", load, args.verbose)}
        finally:
            server.stop()
        section["commits"] = await count_commits(tmp, env, key, args.postgres_url, database_url, load["c1"],
                                                 args.verbose)
        return section
    finally:
        await drop_database(args.postgres_url, database_url)


def cpu_per_run_ms(section: dict[str, Any]) -> float:
    """Server CPU ms per request of the saturated phase (blocking, concurrency 16): at
    concurrency 1 a server's idle work (timers, polling) is spread over fewer requests."""
    return section["blocking_c16"]["server_cpu_ms_per_req"]


async def idle_cpu(server: Server, seconds: float) -> float:
    """The server's CPU use without requests, in ms per second."""
    cpu0 = server.cpu_s()
    await asyncio.sleep(seconds)
    return round((server.cpu_s() - cpu0) / seconds * 1000, 3)


def _target(value: float | None, limit: float, ok: Callable[[float, float], bool], text: str,
            skipped: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"value": value, "target": text, "met": value is not None and ok(value, limit)}
    if skipped:
        out["skipped"] = True
    return out


def targets_of(results: dict[str, Any]) -> dict[str, Any]:
    """The targets (module docstring) from the results; the PostgreSQL ones only when it was measured."""
    plumbing = results["flowloom_plumbing"]
    fl_cpu = plumbing["cpu_ms_per_run"]
    lg = results.get("langgraph_plumbing")
    lg_cpu = lg["cpu_ms_per_run"] if lg else None
    floor_cpu = results["fastapi_floor"]["cpu_ms_per_run"]
    lg_max, floor_max = TARGETS["cpu_ratio_vs_langgraph_max"], TARGETS["cpu_ratio_vs_floor_max"]

    def below(v: float, t: float) -> bool:
        return v <= t

    out = {
        "cpu_ratio_vs_langgraph": _target(round(fl_cpu / lg_cpu, 3) if lg_cpu else None, lg_max, below,
                                          "<= 1/3", skipped=lg is None),
        "cpu_ratio_vs_floor": _target(round(fl_cpu / floor_cpu, 3), floor_max, below, f"<= {floor_max}"),
        "p50_c1_ms": _target(plumbing["blocking_c1"]["latency_p50_ms"], TARGETS["p50_c1_ms_max"],
                             lambda v, t: v < t, f"< {TARGETS['p50_c1_ms_max']}"),
        "sse_first_event_p50_ms": _target(plumbing["sse"]["first_event_p50_ms"],
                                          TARGETS["sse_first_event_p50_ms_max"], lambda v, t: v < t,
                                          f"< {TARGETS['sse_first_event_p50_ms_max']}"),
    }
    postgresql = results.get("flowloom_plumbing_postgresql")
    if postgresql is not None:
        sqlite_p50, pg_p50 = plumbing["blocking_c1"]["latency_p50_ms"], postgresql["blocking_c1"]["latency_p50_ms"]
        ratio_max, commits_max = TARGETS["postgresql_p50_ratio_max"], TARGETS["postgresql_commits_per_run_max"]
        out["postgresql_p50_c1_ratio"] = _target(round(pg_p50 / sqlite_p50, 3), ratio_max, below,
                                                 f"<= {ratio_max} (PostgreSQL p50 / SQLite p50, blocking c1)")
        out["postgresql_commits_per_run"] = _target(postgresql["commits"]["commits_per_run"], commits_max, below,
                                                    f"<= {commits_max}")
    return out


async def measure(tmp: str, args: argparse.Namespace, size: str, notes: dict[str, Any]) -> dict[str, Any]:
    """Start, measure and stop each server in turn (one at a time: none competes for the
    CPU with the one measured, except the scripted model server during the model phases,
    and the OTLP sink during the traced ones); ``notes["otlp"]``: what the sink received."""
    load, idle_s, results = LOADS[size], IDLE_S[size], {}
    floor = start_floor(tmp)
    try:
        results["fastapi_floor"] = {"idle_cpu_ms_per_s": await idle_cpu(floor, idle_s),
                                    **await bench_floor(floor, load, args.verbose)}
    finally:
        floor.stop()
    model_proc, model_url = start_model_server()
    try:
        flowloom, key, _env_of = start_flowloom(tmp, model_url)
        try:
            idle = await idle_cpu(flowloom, idle_s)
            results["flowloom_plumbing"] = {"idle_cpu_ms_per_s": idle,
                                            **await bench_flowloom(flowloom, key, "plumbing", load, args.verbose)}
            model_cpu0 = tree_cpu_s(model_proc.pid)
            results["flowloom_model"] = await bench_flowloom(flowloom, key, "model", load, args.verbose)
            runs = sum(load[k] + load["warmup"] for k in ("c1", "c16", "sse", "async"))
            results["flowloom_model"]["model_server_cpu_ms_per_run"] = round(
                (tree_cpu_s(model_proc.pid) - model_cpu0) / runs * 1000, 3)
        finally:
            flowloom.stop()
        if args.tracing:
            traced, notes["otlp"] = await tracing.measure(sys.modules[__name__], tmp, model_url, load, idle_s,
                                                          args.verbose)
            results.update(traced)
        if args.database == "postgresql":
            results["flowloom_plumbing_postgresql"] = await measure_postgresql(tmp, args, model_url, load)
    finally:
        model_proc.kill()
        model_proc.wait(10)
    if not args.skip_peer:
        langgraph = start_langgraph(tmp)
        try:
            results["langgraph_plumbing"] = {"idle_cpu_ms_per_s": await idle_cpu(langgraph, idle_s),
                                             **await bench_langgraph(langgraph, PEER_LOADS[size], args.verbose)}
        finally:
            langgraph.stop()
    for section in results.values():
        section["cpu_ms_per_run"] = cpu_per_run_ms(section)
    return results


def _versions() -> dict[str, Any]:
    return machine(("fastapi", "starlette", "uvicorn", "uvloop", "httptools", "pydantic", "sqlalchemy", "aiosqlite",
                    "langgraph", "langgraph-api", "langgraph-cli", "langgraph-runtime-inmem"))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measure and return the JSON report (a dict)."""
    size = "quick" if args.quick else "full"
    started = time.perf_counter()
    info = _versions()
    found = provenance(("api", "engine", "nodes", "schemas", "workers"))
    notes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flowloom-bench-api-") as tmp:
        results = await measure(tmp, args, size, notes)
    targets = targets_of(results)
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": info,
        "flowloom": {"root": ROOT, "commit": found["commit"], "dirty": found["dirty"]},
        "peer": {"name": "langgraph dev (langgraph-cli[inmem])", "skipped": bool(args.skip_peer)},
        "method": {
            "database": args.database,
            "postgresql": "flowloom_plumbing_postgresql: the plumbing phases on a server whose run store "
                          "(FLOWLOOM_DATABASE_URL) is a fresh database on --postgres-url; commits: "
                          "pg_stat_database of that database (read from another one once no backend is left) "
                          "over a server that starts, serves 1 warm-up run and c1 blocking plumbing runs and "
                          "stops, minus a server that starts, serves the 1 warm-up run, stays up as long and "
                          "stops; the database vacuumed and analysed first, and both measured again when "
                          "autovacuum acted in either (commits.autovacuum); what remains beside the runs' own "
                          "2 commits is the reads of the key, the tenant's models and its limits made again "
                          "once a second of serving (each remembered 1 s); server CPU excludes PostgreSQL's "
                          "backends" if args.database == "postgresql" else None,
            "load": LOADS[size], "langgraph_load": PEER_LOADS[size], "idle_s": IDLE_S[size],
            "concurrency": [1, CONCURRENCY], "floor_requests_factor": FLOOR_FACTOR,
            "load_generator": "this process: raw HTTP/1.1 on asyncio streams, one keep-alive connection per "
                              "worker, pre-encoded requests; client_cpu_ms_per_req is its CPU per request",
            "servers": "one at a time on 127.0.0.1, each its own process; flowloom: python -m api.cli serve "
                       "(SQLite, fresh home); langgraph: langgraph dev --no-browser --no-reload "
                       "--server-log-level WARNING --n-jobs-per-worker 16; floor: FastAPI GET /hello under "
                       "uvicorn with flowloom serve's settings",
            "server_cpu": "utime+stime (+ reaped children) of the server process tree from /proc/<pid>/stat, "
                          "before/after each phase, divided by its requests; cpu_ms_per_run: the blocking "
                          "concurrency-16 phase (saturated: idle work of a server weighs least); "
                          "idle_cpu_ms_per_s: the server left alone before its phases",
            "latency": "perf_counter from writing the request to the end of the answer (sse: to the first "
                       "complete event, run_event: to the chunk with event run_started); p50/p99 nearest rank",
            "flowloom_requests": "POST /v1/workflows/{id}/runs of the published version; async: 202 then "
                                 "GET /v1/runs/{id}/events to the end of the stream",
            "langgraph_requests": "POST /runs/wait and /runs/stream (stream_mode values), thread-less, "
                                  "assistant_id plumbing",
        },
        "results": results,
        "tracing": tracing.summary(results, notes["otlp"]) if args.tracing else None,
        "targets": targets,
        "all_targets_met": all(t["met"] for t in targets.values()),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the report as one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny load (smoke test)")
    parser.add_argument("--skip-peer", action="store_true", help="do not start langgraph dev (its targets: not met)")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: also measure the plumbing runs on a PostgreSQL run store, and count "
                             "its commits per run (default: SQLite only)")
    parser.add_argument("--postgres-url", default=os.environ.get("FLOWLOOM_BENCH_POSTGRES_URL", DEFAULT_POSTGRES),
                        help="maintenance URL of the PostgreSQL server (a database is created and dropped there; "
                             f"default {DEFAULT_POSTGRES} or FLOWLOOM_BENCH_POSTGRES_URL)")
    parser.add_argument("--tracing", action="store_true",
                        help="also measure Flowloom with OpenTelemetry traces exported to a local OTLP sink "
                             "(results.*_traced; the report's tracing section: off and on side by side)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    try:
        return print_report(lambda: asyncio.run(main_async(args)))
    except RuntimeError as exc:  # a server that did not start or answered wrongly: no JSON line
        print(f"bench/api.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
