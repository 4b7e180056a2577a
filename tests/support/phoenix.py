"""Arize Phoenix as a real OTLP receiver for tests: installed by ``.ci/phoenix-env`` in a
virtual environment of its own (never the project's: it pins many libraries), started as
``phoenix serve`` on free ports of 127.0.0.1 with its working folder (its SQLite database)
in the test's temporary folder, and asked through its REST API for the spans it stored.

:func:`phoenix_env` runs the install script, which returns at once when Phoenix is
installed and waits for an install in progress (``.ci/run`` starts one in the background
first): a test waits for it rather than failing early, and fails with the script's output
and the background install's log when it fails. :func:`phoenix_server` starts the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ["PHOENIX_VENV_ENV", "Phoenix", "PhoenixSpan", "phoenix_env", "phoenix_server"]

ROOT = Path(__file__).resolve().parents[2]
#: the variable naming Phoenix's environment (the script's default otherwise)
PHOENIX_VENV_ENV = "FLOWLOOM_TEST_PHOENIX_VENV"
#: how long an install may take: on a fresh, busy machine the background one shares the
#: network and the cores with the rest of the set-up
INSTALL_TIMEOUT_S = 1500.0
#: how long ``phoenix serve`` may take to answer: it imports a large stack and migrates
#: its database on a first start, which takes a minute on a loaded 2-core machine
START_TIMEOUT_S = 300.0


def phoenix_venv() -> Path:
    default = Path.home() / ".cache" / "flowloom-ci" / "phoenix"
    return Path(os.environ.get(PHOENIX_VENV_ENV) or default)


def phoenix_env(timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The installed environment (``.ci/phoenix-env``: at once when installed, else it
    waits for an install in progress or installs).

    Raises:
        AssertionError: the install failed or took longer than ``timeout`` seconds (with
        the script's output and the tail of the background install's log).
    """
    venv = phoenix_venv()
    try:
        done = subprocess.run(
            ["bash", str(ROOT / ".ci" / "phoenix-env")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"timed out after {timeout:g} s: {exc.stdout or ''}{exc.stderr or ''}", -1
    if code != 0:
        log = Path(f"{venv}.log")
        background = (
            log.read_text(errors="replace")[-6000:] if log.is_file() else "(no background install log)"
        )
        raise AssertionError(f".ci/phoenix-env failed ({code}):\n{output[-6000:]}\n--- {log}:\n{background}")
    return venv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PhoenixSpan:
    """A span as Phoenix stored it: ids in hex, ``parent_id`` "" for a root, ``kind`` the
    OpenInference span kind Phoenix shows (LLM, CHAIN, TOOL...), attributes with their
    dotted keys, events as ``(name, attributes)``."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    status: str  # OK, ERROR or UNSET
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    raw: dict[str, Any]


@dataclass
class Phoenix:
    """A running ``phoenix serve``: ``url`` is its UI, REST API and OTLP/HTTP endpoint."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:]

    def spans(self, project: str, trace_id: str) -> list[PhoenixSpan]:
        """Every span Phoenix stored for ``trace_id`` in ``project`` (all pages of its REST API)."""
        found: list[PhoenixSpan] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"trace_id": trace_id, "limit": 1000}
            if cursor:
                params["cursor"] = cursor
            answer = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params, timeout=30)
            if answer.status_code == 404:  # the project appears with its first span
                return []
            answer.raise_for_status()
            body = answer.json()
            found += [_span(item) for item in body["data"]]
            cursor = body.get("next_cursor")
            if not cursor:
                return found

    def trace_of(self, project: str, attribute: str, value: str, timeout: float = 90.0) -> str:
        """The trace id of the span whose ``attribute`` is ``value`` (Phoenix's attribute
        filter), once Phoenix has it. Raises AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            answer = httpx.get(
                f"{self.url}/v1/projects/{project}/spans",
                params={"attribute": f"{attribute}:{json.dumps(value)}", "limit": 10},
                timeout=30,
            )
            if answer.status_code != 404:
                answer.raise_for_status()
                found = {item["context"]["trace_id"] for item in answer.json()["data"]}
                if found:
                    assert len(found) == 1, found
                    return found.pop()
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, f"Phoenix has no span with {attribute}={value!r}"
            time.sleep(0.5)

    def wait_for(
        self, project: str, trace_id: str, done: Callable[[list[PhoenixSpan]], bool], timeout: float = 90.0
    ) -> list[PhoenixSpan]:
        """The trace's spans once ``done(spans)`` holds (Phoenix stores what it receives in
        batches). Raises AssertionError naming what it had after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(project, trace_id)
            if done(spans):
                return spans
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, f"Phoenix has for {trace_id}: {sorted(s.name for s in spans)}"
            time.sleep(0.5)


def _span(item: dict[str, Any]) -> PhoenixSpan:
    return PhoenixSpan(
        name=item["name"],
        trace_id=item["context"]["trace_id"],
        span_id=item["context"]["span_id"],
        parent_id=item.get("parent_id") or "",
        kind=item.get("span_kind", ""),
        status=item.get("status_code", ""),
        attributes=dict(item.get("attributes") or {}),
        events=[(e["name"], dict(e.get("attributes") or {})) for e in item.get("events") or []],
        raw=item,
    )


@contextlib.contextmanager
def phoenix_server(venv: Path, work: Path, timeout: float = START_TIMEOUT_S) -> Iterator[Phoenix]:
    """``phoenix serve`` of ``venv`` on free ports of 127.0.0.1, working in ``work`` (its
    database, its log ``work/phoenix.log``), without its usage telemetry or resources from
    the internet; stopped (SIGINT, then killed) on exit.

    Raises:
        AssertionError: it exited or did not answer ``/healthz`` within ``timeout`` s (with its log).
    """
    work.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(_free_port()),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        PYTHONUNBUFFERED="1",
    )
    log = work / "phoenix.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(venv / "bin" / "phoenix"), "serve"],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    phoenix = Phoenix(f"http://127.0.0.1:{port}", log, process)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert process.poll() is None, (
                f"phoenix serve exited ({process.returncode}):\n{phoenix.log_tail()}"
            )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(phoenix.url + "/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, (
                f"phoenix serve did not answer in {timeout:g} s:\n{phoenix.log_tail()}"
            )
            time.sleep(0.25)
        yield phoenix
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:  # its database is the test's to throw away: a slow graceful stop is not waited for
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
