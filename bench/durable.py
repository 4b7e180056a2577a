"""Durable-run benchmark: what a checkpoint per node costs, next to the database's commit floor.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/durable.py            # full run: 1000-node chain, 1000 commits per floor
    python bench/durable.py --quick    # smoke run: 100 nodes, 100 commits, 2 timed runs
    python bench/durable.py --backends sqlite   # without PostgreSQL

What is measured (see bench/README.md for the numbers and how to read them), on the
1000-node no-op chain ``start -> n1 -> ... -> n999``:

- ``in_memory``: ``await run_workflow(plan, state, deps=RunDeps())`` - no checkpoint.
- ``<backend>.checkpointed``: the same run with a checkpoint into ``workers.sql.SqlStore``
  after every node: ``RunDeps(checkpoint=lambda state, delta: store.checkpoint(state,
  delta, owner_id=None))``, after ``await store.create_run(state)`` (not timed) with a
  state from ``engine.new_run_state(plan, {})``. SQLite: a file in a temporary
  directory (WAL, ``synchronous=NORMAL``, as the store opens it); PostgreSQL: a scratch
  database created for the run and dropped at the end.
- ``<backend>.floor_sqlalchemy``: one small ``INSERT`` + ``COMMIT`` per iteration on the
  store's own SQLAlchemy ``AsyncConnection`` (``async with conn.begin(): await
  conn.execute(insert)``).
- ``<backend>.floor_driver``: the same on a raw driver connection to the same database
  (aiosqlite with the store's pragmas: ``execute`` + ``commit``; asyncpg:
  ``async with conn.transaction(): await conn.execute(...)``).
- ratios: checkpointed µs per node / floor µs per commit, for both floors; the target is
  a ratio <= 2 against the driver floor (the honest one, see the README), and under
  1 ms per node.

Every figure is the median of the timed runs (``..._best``: the minimum) after a warm-up;
the in-memory run, each backend's checkpointed run and its two floors are interleaved
round by round, so background load hits them alike. GC stays enabled; ``gc.collect()``
runs before each timed block.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as _dt
import functools
import gc
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _checkout import ROOT as _ROOT
from _checkout import machine, print_report, provenance, sibling

import engine
from engine import RunDeps, compile_workflow, new_run_state, run_workflow

_noop = sibling("_noop")  # the bench-only noop kind, shared with the other bench
BENCH_CATALOG = _noop.BENCH_CATALOG  # type: ignore[attr-defined]
flowloom_chain = _noop.flowloom_chain  # type: ignore[attr-defined]

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from workers.sql import SqlStore, mask_url  # noqa: E402

SCHEMA = "flowloom-bench-durable/1"
DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: Checkpointed µs per node over the floor's µs per commit.
RATIO_MAX = 2.0
#: "Well under 1 ms per node" (DBOS: about 2-3 ms per step on this machine).
US_PER_NODE_MAX = 1000.0
#: The floor's row: about the size of a small node run.
PAYLOAD = '{"node_id": "n1", "status": "succeeded", "outputs": {}, "handles": ["out"]}'



# ------------------------------------------------------------------------ helpers

floor_metadata = sa.MetaData()
#: The floor's table (created next to the store's tables; never read by the store).
floor_table = sa.Table("bench_floor", floor_metadata,
                       sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                       sa.Column("payload", sa.Text, nullable=False))


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one ``await fn()``."""
    gc.collect()
    c0 = time.process_time()
    t0 = time.perf_counter()
    await fn()
    t1 = time.perf_counter()
    return t1 - t0, time.process_time() - c0


def _summary(samples_s: list[float], per: int, unit: float) -> dict[str, Any]:
    """Median and best of wall-time samples, divided by ``per`` and scaled by ``unit``."""
    values = [s / per * unit for s in samples_s]
    return {"median": _r(statistics.median(values)), "best": _r(min(values)),
            "samples": [_r(v, 2) for v in values]}


# ------------------------------------------------------------------------ backends


class Backend:
    """One database: the store under test, a raw driver connection and the floor loops."""

    name = ""

    def __init__(self, url: str) -> None:
        self.url = url
        self.store: SqlStore | None = None
        self.info: dict[str, Any] = {}

    async def open(self) -> None:
        """Open the store (migrating the schema), create the floor table, connect the driver."""
        self.store = await SqlStore.open(self.url)
        conn = await self.store._connection()  # the store's own connection (the floor runs on it)
        async with conn.begin():
            await conn.run_sync(floor_metadata.create_all)
        await self.open_driver()

    async def open_driver(self) -> None:
        """Connect the raw driver connection."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the driver connection and the store."""
        if self.store is not None:
            await self.store.close()

    async def floor_sqlalchemy(self, iterations: int) -> None:
        """``iterations`` x (INSERT + COMMIT) on the store's SQLAlchemy connection."""
        assert self.store is not None
        conn = await self.store._connection()
        stmt = sa.insert(floor_table)
        params = {"payload": PAYLOAD}
        for _ in range(iterations):
            async with conn.begin():
                await conn.execute(stmt, params)

    async def floor_driver(self, iterations: int) -> None:
        """``iterations`` x (INSERT + COMMIT) on the raw driver connection."""
        raise NotImplementedError

    async def checkpointed_run(self, plan: Any, check: bool = False) -> tuple[float, float, float, int]:
        """One run with a checkpoint per node: (wall s, CPU s, create_run s, checkpoints).

        ``check``: count the checkpoints (through a counting wrapper; only for the untimed
        warm-up) and read the node runs back from the store.
        """
        store = self.store
        assert store is not None
        state = new_run_state(plan, {})
        t0 = time.perf_counter()
        await store.create_run(state)
        created = time.perf_counter() - t0
        calls = 0
        if check:
            def hook(state: Any, delta: Any) -> Any:
                nonlocal calls
                calls += 1
                return store.checkpoint(state, delta, owner_id=None)
            deps = RunDeps(checkpoint=hook)
        else:
            deps = RunDeps(checkpoint=lambda state, delta: store.checkpoint(state, delta, owner_id=None))

        async def run() -> Any:
            final = await run_workflow(plan, state, deps=deps)
            assert final.status.value == "succeeded", final.error
            return final

        wall, cpu = await _timed(run)
        if check:
            saved = await store.list_node_runs(state.tenant_id, state.run_id)
            assert len(saved) == len(plan.workflow.nodes), (len(saved), len(plan.workflow.nodes))
            summary = await store.get_run(state.tenant_id, state.run_id)
            assert str(summary.status) in ("succeeded", "RunStatus.succeeded"), summary.status
        return wall, cpu, created, calls


class SqliteBackend(Backend):
    """A SQLite file in a temporary directory (the store sets WAL and ``synchronous=NORMAL``)."""

    name = "sqlite"

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "bench.db")
        super().__init__(f"sqlite+aiosqlite:///{self.path}")
        self.driver: Any = None

    async def open_driver(self) -> None:
        """aiosqlite on the same file with the store's pragmas."""
        import aiosqlite

        from workers.sql.connect import BUSY_TIMEOUT_MS

        self.driver = await aiosqlite.connect(self.path)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={BUSY_TIMEOUT_MS}",
                       "foreign_keys=ON"):
            await self.driver.execute(f"PRAGMA {pragma}")
        journal = await (await self.driver.execute("PRAGMA journal_mode")).fetchone()
        sync = await (await self.driver.execute("PRAGMA synchronous")).fetchone()
        self.info = {"file": "<tmp>/bench.db", "journal_mode": journal[0], "synchronous": {0: "off", 1: "normal",
                     2: "full", 3: "extra"}.get(sync[0], sync[0]), "driver": f"aiosqlite {aiosqlite.__version__}",
                     "sqlite_version": __import__("sqlite3").sqlite_version}

    async def floor_driver(self, iterations: int) -> None:
        """aiosqlite: ``execute(INSERT)`` (the module begins the transaction) + ``commit()``."""
        db = self.driver
        sql = "INSERT INTO bench_floor (payload) VALUES (?)"
        params = (PAYLOAD,)
        for _ in range(iterations):
            await db.execute(sql, params)
            await db.commit()

    async def close(self) -> None:
        """Close aiosqlite and the store."""
        if self.driver is not None:
            await self.driver.close()
        await super().close()


class PostgresBackend(Backend):
    """A scratch database ``flowloom_bench_<random>`` on the server, dropped by :meth:`drop`."""

    name = "postgresql"

    def __init__(self, server_url: str) -> None:
        self.server = make_url(server_url)
        self.database = f"flowloom_bench_{uuid.uuid4().hex[:12]}"
        url = self.server.set(drivername="postgresql+asyncpg", database=self.database)
        super().__init__(url.render_as_string(hide_password=False))
        self.driver: Any = None
        self.created = False

    def _connect_args(self, database: str) -> dict[str, Any]:
        u = self.server
        return {"host": u.host or "127.0.0.1", "port": u.port or 5432, "user": u.username or "postgres",
                "password": u.password, "database": database}

    async def _admin(self, statement: str) -> Any:
        import asyncpg

        conn = await asyncpg.connect(**self._connect_args(self.server.database or "postgres"), timeout=10)
        try:
            return await conn.fetch(statement)
        finally:
            await conn.close()

    async def create(self) -> None:
        """Create the scratch database."""
        await self._admin(f'CREATE DATABASE "{self.database}"')
        self.created = True

    async def drop(self) -> bool:
        """Drop the scratch database; True when it is gone afterwards."""
        if not self.created:
            return True
        await self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        rows = await self._admin(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'")
        return not rows

    async def open_driver(self) -> None:
        """asyncpg on the scratch database."""
        import asyncpg

        self.driver = await asyncpg.connect(**self._connect_args(self.database), timeout=10)
        settings = {}
        for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method"):
            settings[name] = await self.driver.fetchval(f"SHOW {name}")
        self.info = {"database": self.database, "server": mask_url(self.server), "driver":
                     f"asyncpg {asyncpg.__version__}", **settings}

    async def floor_driver(self, iterations: int) -> None:
        """asyncpg: ``BEGIN`` + ``INSERT`` (prepared, cached) + ``COMMIT`` per iteration."""
        conn = self.driver
        sql = "INSERT INTO bench_floor (payload) VALUES ($1)"
        for _ in range(iterations):
            async with conn.transaction():
                await conn.execute(sql, PAYLOAD)

    async def close(self) -> None:
        """Close asyncpg and the store."""
        if self.driver is not None:
            await self.driver.close()
        await super().close()


# ----------------------------------------------------------------------- measures


async def measure(backends: list[Backend], n: int, iterations: int, warmup: int, repeat: int,
                  verbose: bool) -> dict[str, Any]:
    """Interleave, round by round: the in-memory run, then per backend the checkpointed run
    and its two floors (in alternating order). Returns the ``in_memory`` section and one
    section per backend."""
    plan = compile_workflow(flowloom_chain(n), catalog=BENCH_CATALOG, models=None, use_cache=False)

    async def in_memory() -> Any:
        state = await run_workflow(plan, new_run_state(plan, {}), deps=RunDeps())
        assert state.status.value == "succeeded", state.error
        return state

    checkpoints: dict[str, int] = {}
    for i in range(warmup):
        await in_memory()
        for b in backends:
            _, _, _, calls = await b.checkpointed_run(plan, check=(i == 0))
            if i == 0:
                checkpoints[b.name] = calls
            await b.floor_sqlalchemy(min(iterations, 100))
            await b.floor_driver(min(iterations, 100))

    mem_wall: list[float] = []
    mem_cpu: list[float] = []
    runs: dict[str, dict[str, list[float]]] = {b.name: {"wall": [], "cpu": [], "create": [], "sa": [], "driver": [],
                                                                "sa_cpu": [], "driver_cpu": []}
                                               for b in backends}
    for rnd in range(repeat):
        wall, cpu = await _timed(in_memory)
        mem_wall.append(wall)
        mem_cpu.append(cpu)
        line = [f"round {rnd + 1}: in-memory {wall / n * 1e6:.1f} us/node"]
        for b in backends:
            r = runs[b.name]
            wall, cpu, created, _ = await b.checkpointed_run(plan)
            r["wall"].append(wall)
            r["cpu"].append(cpu)
            r["create"].append(created)
            floors = [("sa", b.floor_sqlalchemy), ("driver", b.floor_driver)]
            for key, floor in (floors if rnd % 2 == 0 else floors[::-1]):
                wall, cpu = await _timed(functools.partial(floor, iterations))
                r[key].append(wall)
                r[key + "_cpu"].append(cpu)
            line.append(f"{b.name}: {r['wall'][-1] / n * 1e6:.1f} us/node, floor sqlalchemy "
                        f"{r['sa'][-1] / iterations * 1e6:.1f} / driver {r['driver'][-1] / iterations * 1e6:.1f} "
                        "us/commit")
        _log(verbose, "; ".join(line))

    mem = _summary(mem_wall, n, 1e6)
    out: dict[str, Any] = {"in_memory": {
        "nodes": n,
        "ms_per_run_median": _summary(mem_wall, 1, 1e3)["median"],
        "us_per_node_median": mem["median"],
        "us_per_node_best": mem["best"],
        "cpu_us_per_node_median": _summary(mem_cpu, n, 1e6)["median"],
        "samples_us_per_node": mem["samples"],
    }}
    for b in backends:
        r = runs[b.name]
        node = _summary(r["wall"], n, 1e6)
        sa_floor = _summary(r["sa"], iterations, 1e6)
        drv_floor = _summary(r["driver"], iterations, 1e6)
        ratio_sa = _ratio(node["median"], sa_floor["median"])
        ratio_drv = _ratio(node["median"], drv_floor["median"])
        out[b.name] = {
            "connection": b.info,
            "checkpoints_per_run": checkpoints.get(b.name),
            "checkpointed": {
                "nodes": n,
                "ms_per_run_median": _summary(r["wall"], 1, 1e3)["median"],
                "ms_per_run_best": _summary(r["wall"], 1, 1e3)["best"],
                "us_per_node_median": node["median"],
                "us_per_node_best": node["best"],
                "cpu_us_per_node_median": _summary(r["cpu"], n, 1e6)["median"],
                "create_run_ms_median": _summary(r["create"], 1, 1e3)["median"],
                "samples_us_per_node": node["samples"],
            },
            "added_us_per_node_median": _r(node["median"] - mem["median"]),
            "floor_sqlalchemy": {"iterations": iterations, "us_per_commit_median": sa_floor["median"],
                                 "us_per_commit_best": sa_floor["best"],
                                 "cpu_us_per_commit_median": _summary(r["sa_cpu"], iterations, 1e6)["median"],
                                 "samples_us_per_commit": sa_floor["samples"]},
            "floor_driver": {"iterations": iterations, "us_per_commit_median": drv_floor["median"],
                             "us_per_commit_best": drv_floor["best"],
                             "cpu_us_per_commit_median": _summary(r["driver_cpu"], iterations, 1e6)["median"],
                             "samples_us_per_commit": drv_floor["samples"]},
            "ratio_vs_sqlalchemy_floor": ratio_sa,
            "ratio_vs_driver_floor": ratio_drv,
        }
    return out


def _checkout() -> dict[str, Any]:
    """Which Flowloom code was measured: the commit, and whether engine/schemas/nodes/workers differ from it."""
    found = provenance(("engine", "schemas", "nodes", "workers"))
    return {"root": _ROOT, "engine_path": os.path.dirname(engine.__file__), "commit": found["commit"],
            "engine_dirty": found["dirty"]}


def _machine() -> dict[str, Any]:
    return machine(("sqlalchemy", "aiosqlite", "asyncpg", "pydantic"))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measure and return the JSON report (a dict)."""
    if args.quick:
        n, iterations, warmup, repeat = 100, 100, 1, 2
    else:
        n, iterations, warmup, repeat = 1000, 1000, 1, 5
    if args.repeat:
        repeat = args.repeat
    names = [x.strip() for x in args.backends.split(",") if x.strip()]
    unknown = set(names) - {"sqlite", "postgresql"}
    if unknown:
        raise SystemExit(f"unknown backends {sorted(unknown)} (sqlite, postgresql)")
    machine = _machine()
    started = time.perf_counter()
    backends: list[Backend] = []
    cleanup: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flowloom-bench-") as tmp:
        pg: PostgresBackend | None = None
        try:
            if "sqlite" in names:
                backends.append(SqliteBackend(tmp))
            if "postgresql" in names:
                pg = PostgresBackend(args.postgres_server)
                await pg.create()
                backends.append(pg)
            for b in backends:
                await b.open()
            results = await measure(backends, n, iterations, warmup, repeat, args.verbose)
        finally:
            for b in backends:
                with contextlib.suppress(Exception):
                    await b.close()
            if pg is not None:
                cleanup["postgresql_database_dropped"] = await pg.drop()
        cleanup["sqlite_file_removed"] = "sqlite" in names  # the temporary directory goes with the block

    def target(value: float | None, limit: float, what: str) -> dict[str, Any]:
        return {"value": value, "target": f"<= {limit}", "what": what,
                "met": value is not None and value <= limit}

    targets: dict[str, Any] = {}
    for b in backends:
        section = results[b.name]
        targets[f"{b.name}_ratio_vs_driver_floor"] = target(
            section["ratio_vs_driver_floor"], RATIO_MAX, "checkpointed us/node / raw-driver us/commit")
        targets[f"{b.name}_us_per_node"] = target(
            section["checkpointed"]["us_per_node_median"], US_PER_NODE_MAX, "checkpointed us per node")
    # Reported, not part of all_targets_met: the floor that includes SQLAlchemy's own overhead.
    secondary = {f"{b.name}_ratio_vs_sqlalchemy_floor": target(
        results[b.name]["ratio_vs_sqlalchemy_floor"], RATIO_MAX, "checkpointed us/node / SQLAlchemy us/commit")
        for b in backends}
    return {
        "schema": SCHEMA,
        "quick": bool(args.quick),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "flowloom": _checkout(),
        "method": {
            "shape": f"chain of {n} no-op nodes (start + {n - 1} noop)",
            "warmup_runs": warmup,
            "timed_runs": repeat,
            "floor_iterations": iterations,
            "stat": "median of timed runs (best = min also reported)",
            "checkpoint": "RunDeps(checkpoint=lambda state, delta: store.checkpoint(state, delta, owner_id=None)) "
                          "after await store.create_run(state) (create_run not timed)",
            "floor_sqlalchemy": "async with conn.begin(): await conn.execute(insert(bench_floor), {payload}) on the "
                                "store's own AsyncConnection",
            "floor_driver": "sqlite: aiosqlite execute(INSERT) + commit(), store's pragmas; postgresql: asyncpg "
                            "async with conn.transaction(): execute(INSERT, $1)",
            "timer": "time.perf_counter around await run_workflow / the floor loop; cpu_*: time.process_time (this "
                     "process, driver threads included; not the PostgreSQL server)",
            "gc": "enabled; gc.collect() before each timed block",
        },
        "backends": [b.name for b in backends],
        **results,
        "reference": {"dbos_ms_per_step": "about 2-3 (reference text, not measured here)",
                      "aim": "well under 1 ms per node"},
        "targets": targets,
        "secondary_targets": secondary,
        "all_targets_met": all(t["met"] for t in targets.values()),
        "cleanup": cleanup,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the report as one JSON line on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 nodes, 100 commits per floor, 2 timed runs")
    parser.add_argument("--repeat", type=int, default=0, help="timed runs (default 5, quick 2)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--postgres-server",
                        default=os.environ.get("FLOWLOOM_TEST_POSTGRES_URL", DEFAULT_SERVER_URL),
                        help="maintenance URL of the PostgreSQL server; a scratch database is created on it and "
                             "dropped (default: $FLOWLOOM_TEST_POSTGRES_URL or %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    return print_report(lambda: asyncio.run(main_async(args)))


if __name__ == "__main__":
    raise SystemExit(main())
