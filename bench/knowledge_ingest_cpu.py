"""CPU time per chunk of Flowloom's ingestion alone: the ingestion of ``bench/knowledge.py``
(the ``--quick`` corpus through ``KnowledgeService`` and the registry's embeddings client
against the bench's embeddings server), repeated into fresh datasets of one store.

On a loaded machine wall-clock chunks/s moves by 2× between runs of the same code; the CPU
this process spends per chunk (``getrusage``: every thread, user + system; the embeddings
server is another process, and so is PostgreSQL) moves far less, so versions are compared
by it, alternating runs of each. Prints **one JSON line**: per run the CPU ms per chunk,
the wall chunks/s and the embedding requests sent; ``min`` / ``median`` over the runs after
the first (which warms the process: imports, the tokenizer, the store's statements),
from after a full garbage collection (which the CPU figure counted before 2026-12-04's
``ingest3`` work: ~0.1 ms a chunk in this process's heap, the same for every version).
The process's CPU includes its live child processes' but the embeddings server's (the
chunker's splitting process; ``children_cpu_ms_per_chunk`` of it). Beside it, the CPU
the embeddings server (``server_cpu_ms_per_chunk``) and, on PostgreSQL, the database's
processes (``postgres_cpu_ms_per_chunk``: the postmaster and its backends, from
``/proc``) spent in the same interval: the machine's two cores serve all of them, so
what the bench's wall time can reach depends on their sum too.

    python bench/knowledge_ingest_cpu.py                         # SQLite, 5 runs
    python bench/knowledge_ingest_cpu.py --database postgresql --runs 4
    python bench/knowledge_ingest_cpu.py --concurrency 2         # the in-process queue's width
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from _checkout import machine, print_report, provenance, sibling

knowledge: Any = sibling("knowledge")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat``'s fields after the command name ([1]: parent pid, [11..14]:
    user, system, waited-for children's user and system CPU in clock ticks); [] when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _tree_cpu_s(pid: int | None) -> float:
    """CPU seconds of process ``pid``, its live children and the children it reaped
    (a PostgreSQL backend is a child of the postmaster); 0.0 without a pid (Linux only)."""
    if pid is None:
        return 0.0
    fields = _stat(pid)
    if not fields:
        return 0.0
    ticks = sum(int(x) for x in fields[11:15])
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            child = _stat(int(entry))
            if child and child[1] == str(pid):
                ticks += sum(int(x) for x in child[11:15])
    return ticks * _TICK_S


def _helpers_cpu_s(skip: int) -> float:
    """CPU seconds of this process's live child processes but ``skip`` (the embeddings
    server): the chunker's splitting process (``nodes/knowledge/splitting.py``)."""
    own, ticks = str(os.getpid()), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != skip:
            child = _stat(int(entry))
            if child and child[1] == own:
                ticks += sum(int(x) for x in child[11:15])
    return ticks * _TICK_S


def _postmaster_pid(pg: Any) -> int | None:
    """The bench's PostgreSQL's postmaster (the first line of ``postmaster.pid``)."""
    try:
        with open(os.path.join(pg.folder, "pgdata", "postmaster.pid")) as f:
            return int(f.readline())
    except (OSError, ValueError):
        return None


async def run(database: str, runs: int, concurrency: int | None) -> dict[str, Any]:
    from engine.knowledge.service import LocalIngestionQueue
    from nodes.knowledge.embeddings import RegistryEmbedder

    class CountingEmbedder(RegistryEmbedder):
        """The registry's client, counting the requests it sends (one per batch)."""

        requests = 0

        async def _request(self, spec: Any, texts: list[str]) -> Any:
            self.requests += 1
            return await super()._request(spec, texts)

    proc, url = knowledge.start_embed_server()
    corpus = knowledge.load_corpus("topics")
    folder = tempfile.mkdtemp(prefix="flowloom-bench-ingest-cpu-")
    pg = knowledge.PgServer() if database == "postgresql" else None
    rows: list[dict[str, Any]] = []
    try:
        embedder = CountingEmbedder(knowledge.registry(url))
        for i in range(runs):
            where = os.path.join(folder, f"kb{i}.db") if pg is None else await pg.new_database(f"run{i}")
            store = await knowledge.open_store(database, where, folder)
            svc = knowledge.service(store, embedder)
            if concurrency is not None:
                svc.queue = LocalIngestionQueue(svc.ingest, concurrency=concurrency)
            postmaster = _postmaster_pid(pg) if pg is not None else None
            server_cpu, pg_cpu = _tree_cpu_s(proc.pid), _tree_cpu_s(postmaster)
            gc.collect()  # before the clock: a full collection of this process's heap is not ingestion's
            helpers, cpu, embedder.requests = _helpers_cpu_s(proc.pid), _cpu_s(), 0
            rate, _ = await knowledge.ingest_flowloom(corpus, svc, collect=False)
            helpers = _helpers_cpu_s(proc.pid) - helpers
            cpu = _cpu_s() - cpu + helpers
            server_cpu, pg_cpu = _tree_cpu_s(proc.pid) - server_cpu, _tree_cpu_s(postmaster) - pg_cpu
            per_chunk = 1000 / rate["chunks"]
            rows.append(
                {
                    "cpu_ms_per_chunk": round(cpu * per_chunk, 3),
                    "children_cpu_ms_per_chunk": round(helpers * per_chunk, 3),
                    "server_cpu_ms_per_chunk": round(server_cpu * per_chunk, 3),
                    **({"postgres_cpu_ms_per_chunk": round(pg_cpu * per_chunk, 3)} if pg else {}),
                    "chunks_per_s": rate["chunks_per_s"],
                    "chunks": rate["chunks"],
                    "embedding_requests": embedder.requests,
                }
            )
            await svc.aclose()
            await store.close()
    finally:
        knowledge.stop_process(proc)
        if pg is not None:
            pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    kept = rows[1:] or rows

    def summary(key: str) -> dict[str, float]:
        values = [r[key] for r in kept]
        return {"min": min(values), "median": round(statistics.median(values), 3)}

    others = ["server_cpu_ms_per_chunk"] + (["postgres_cpu_ms_per_chunk"] if pg else [])
    return {
        "database": database,
        "concurrency": concurrency,
        "runs": rows,
        "cpu_ms_per_chunk": summary("cpu_ms_per_chunk"),
        **{k: summary(k) for k in others},
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--concurrency", type=int, default=None, help="documents ingested at a time (default: the service's)"
    )
    args = parser.parse_args(argv)

    def make() -> dict[str, Any]:
        started = time.time()
        report = asyncio.run(run(args.database, max(1, args.runs), args.concurrency))
        return {
            "schema": "flowloom-bench-knowledge-ingest-cpu/1",
            "flowloom": provenance(("engine", "nodes", "workers", "schemas", "bench")),
            "machine": machine(("semantic-text-splitter", "openai")),
            **report,
            "seconds": round(time.time() - started, 1),
        }

    return print_report(make)


if __name__ == "__main__":
    sys.exit(main())
