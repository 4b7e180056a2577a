"""``flowloom worker``: an RQ worker that executes queued runs.

Needs ``FLOWLOOM_REDIS_URL`` (the queues, live events, commands and node memory) and the
same run store as the API (``FLOWLOOM_DATABASE_URL``, or SQLite under
``FLOWLOOM_HOME`` for workers of one machine). Start as many as you like, on one
machine or many: each takes one run at a time from its queues, most urgent first.
Every log line starts with ``flowloom-worker <pid>``. SIGTERM (or Ctrl-C) finishes the
current run and stops; a second one stops at once, leaving the run to be continued from
its last checkpoint by another worker (exit code 1).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, app, err, redis_unreachable, settings

__all__ = ["worker"]


@app.command()
def worker(
    queues: Annotated[
        list[str] | None,
        typer.Option(
            "--queues",
            "-q",
            metavar="QUEUES",
            help="priorities (high, default, low) or queue names to serve, most urgent first; "
            "repeat or separate with commas (default: all three)",
        ),
    ] = None,
    burst: Annotated[bool, typer.Option("--burst", help="quit once the queues are empty")] = False,
    name: Annotated[
        str | None, typer.Option(help="the worker's name in `rq info` (default: host.pid)")
    ] = None,
    sweep: Annotated[
        float, typer.Option(min=0.1, help="seconds between two looks for runs whose worker died")
    ] = 1.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="serve this worker's Prometheus metrics on this port (address: "
            "FLOWLOOM_METRICS_HOST, default 127.0.0.1)",
        ),
    ] = None,
) -> None:
    """Execute queued runs (RQ); see `rq info` for queues, workers and jobs."""
    current = settings()
    if not current.redis_url:
        err().print(
            Text(
                "flowloom worker needs FLOWLOOM_REDIS_URL (e.g. redis://127.0.0.1:6379/0): "
                "the queues and the live events are in Redis",
                style="bold red",
            )
        )
        raise typer.Exit(EXIT_INVALID)
    from redis import Redis
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from rq.logutils import setup_loghandlers

    from api.composition import open_service
    from api.gc_tuning import tune_gc
    from workers.rq.queues import queue_names
    from workers.rq.runtime import WorkerRuntime, install_runtime
    from workers.rq.worker import LOG_DATE_FORMAT, LOG_FORMAT, FlowloomWorker, WorkerNameTaken

    try:
        names = queue_names(
            [q.strip() for item in queues or [] for q in item.split(",") if q.strip()] or None
        )
    except ValueError as exc:
        err().print(Text(f"--queues: {exc}", style="bold red"))
        raise typer.Exit(EXIT_INVALID) from None
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
    log = logging.getLogger("flowloom")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    setup_loghandlers("INFO", date_format=LOG_DATE_FORMAT, log_format=LOG_FORMAT, name="rq.worker")
    if current.log_format == "json":
        _json_logs([handler, *logging.getLogger("rq.worker").handlers])
    connection = Redis.from_url(current.redis_url, socket_connect_timeout=2, health_check_interval=5)
    try:
        connection.ping()  # RQ's worker talks to Redis as it is made: a dead URL is a message, not a traceback
    except (RedisConnectionError, RedisTimeoutError) as exc:
        connection.close()
        redis_unreachable(current.redis_url, exc)
    rq_worker = FlowloomWorker(
        names, connection=connection, name=name or f"{socket.gethostname()}.{os.getpid()}"
    )
    rq_worker.wait_until_reachable()
    # a worker that stops abandons its runs to the others' recovery (none is recorded cancelled)
    runtime = WorkerRuntime(
        current, functools.partial(open_service, shutdown_grace_s=None), sweep_s=sweep, name=rq_worker.name
    )
    runtime.start()
    install_runtime(runtime)
    if metrics_port is not None:
        try:
            _serve_metrics(connection, names, runtime, metrics_port, current.metrics_host)
        except OSError as exc:  # the port is taken, or the address is not this machine's
            runtime.stop()
            err().print(
                Text(
                    f"--metrics-port {metrics_port}: cannot listen on {current.metrics_host}: "
                    f"{exc.strerror or exc}",
                    style="bold red",
                )
            )
            raise typer.Exit(EXIT_INVALID) from None
    tracing = _start_traces()
    # the service is open and every module a run needs is loaded: out of the collector's sight
    tune_gc()
    try:
        _work(rq_worker, runtime, burst, log, handler)
    except WorkerNameTaken as exc:
        # a live worker holds the name: the operator picks another, nothing is broken
        err().print(Text(str(exc), style="bold red"))
        raise typer.Exit(EXIT_INVALID) from None
    finally:
        if tracing is not None:
            tracing.close()  # the spans not exported yet


def _json_logs(handlers: list[logging.Handler]) -> None:
    """Every record of ``handlers`` as one JSON object carrying its run scope (FLOWLOOM_LOG_FORMAT=json)."""
    from api.logs import RunFields, json_formatter

    for each in handlers:
        each.setFormatter(json_formatter())
        each.addFilter(RunFields())


def _serve_metrics(connection: Any, names: list[str], runtime: Any, port: int, host: str) -> None:
    """Count this worker's runs, model calls and checkpoints, with its queues' depth, and
    serve them in the Prometheus text format on ``host:port`` (a thread of this process:
    the worker executes its runs here, no fork per job). The store's run counts are the
    API server's to serve."""
    from prometheus_client import start_http_server

    from engine.telemetry import install_telemetry
    from workers.metrics import PrometheusTelemetry, QueueCollector

    telemetry = PrometheusTelemetry(executing=lambda: len(runtime.executing))
    telemetry.registry.register(QueueCollector(connection, names))
    install_telemetry(telemetry)
    start_http_server(port, addr=host, registry=telemetry.registry)


def _start_traces() -> Any:
    """Trace this worker's runs when the ``OTEL_*`` variables ask for it (over its metrics,
    when served); returns the :class:`workers.tracing.Tracing` to close, or None."""
    from workers.tracing_env import configured

    if not configured():
        return None
    from engine.telemetry import install_telemetry, telemetry
    from workers.tracing import TracedTelemetry, Tracing

    tracing = Tracing.from_env("flowloom-worker")
    tracing.instrument_httpx()
    install_telemetry(TracedTelemetry(telemetry(), tracing))
    return tracing


def _work(rq_worker: Any, runtime: Any, burst: bool, log: logging.Logger, handler: logging.Handler) -> None:
    """Serve the queues until told to stop; a cold stop with runs in progress leaves at once."""
    from workers.rq.runtime import install_runtime
    from workers.rq.worker import LOG_DATE_FORMAT, LOG_FORMAT

    try:
        rq_worker.work(burst=burst, logging_level="INFO", date_format=LOG_DATE_FORMAT, log_format=LOG_FORMAT)
    finally:
        install_runtime(None)
        if runtime.executing:
            # A cold shutdown: closing the service would end those runs cancelled, and the
            # runtime's threads are mid-run. Leave at once, as a crash would: the lease and
            # the executing set name a process that is gone, so another worker continues.
            log.warning(
                "stopping with run(s) %s in progress: another worker continues them from their last "
                "checkpoint",
                ", ".join(runtime.executing),
            )
            handler.flush()
            os._exit(1)
        runtime.stop()
