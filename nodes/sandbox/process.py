"""Runs user code (Python or JavaScript) in a separate, isolated, resource-limited process.

Used by the code node (:mod:`nodes.sandbox.code`). User code never runs in the engine process:
:func:`run_code` starts an interpreter in a child process, hands it the code and the
inputs, and reads back one result.

Protocol (parent <-> runner):

- stdin: one JSON document ``{"code": str, "inputs": {...}, "prelude": str,
  "max_output_bytes": int, "site_dirs": [str]}``, then EOF (``prelude``: JavaScript run
  before the code, in the same global scope; may be empty; ``site_dirs``: where the
  operator's Python packages are, appended to ``sys.path``).
- a dedicated pipe (its fd number is the runner's last argument): the result, one
  message: ``R`` + the JSON of the object ``main`` returned, or ``E`` + the JSON
  ``{"kind", "type", "message", "traceback"}`` of an error (``kind``: ``syntax``,
  ``definition``, ``runtime``, ``output``). Nothing the user prints can reach it.
- stdout / stderr: whatever the user code prints (kept for the record, capped).

The runners are small scripts kept as text in :mod:`nodes.sandbox.runners`
(:data:`PYTHON_RUNNER`, :data:`JS_RUNNER`, re-exported here) and passed with ``-c`` /
``-e``; they compile the user code under the file name ``<code>`` and report only the
frames of that file, so a traceback shows the user's line numbers and none of the
runner's or the engine's internals.

Isolation and resource limits (``mode="bwrap"``): bubblewrap with new namespaces, a
seccomp filter, a read-only root with the operator's package environment mounted
read-only, writable tmpfs only at :data:`WORKDIR` and ``/tmp``, an unprivileged user,
and ``prlimit`` rlimits - the command lines and their reasons are in
:mod:`nodes.sandbox.argv` (:func:`bwrap_argv` is re-exported here). The wall time is
enforced here: the parent SIGKILLs bwrap's whole process group, and the kernel then
kills everything in the sandbox's PID namespace, so user code can neither catch nor
outlive it. The same kill runs when the caller is cancelled. Output sizes are
checked while reading: a result, or stdout + stderr, larger than
``max_output_bytes`` kills the process (an error report has its own cap,
:data:`ERROR_MAX_BYTES`). The JavaScript runner writes prints through at once:
Node would otherwise queue pipe writes in memory until its event loop runs.

``mode="none"`` (only with the operator's explicit opt-in, see
:func:`choose_mode`): the same runner with the same rlimits (but no
``RLIMIT_NPROC``, which would count every process of the engine's user), a clean
environment, a new session and a temporary working directory - no filesystem,
network or process isolation. A process the code detaches into a new session can
survive the kill in this mode.

Whether bwrap works is checked once per configuration (:func:`probe_bwrap`, cached)
by running a trivial program through the full sandbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.settings import Settings

from .argv import (
    MAX_TASKS,
    SANDBOX_UIDS,
    WORKDIR,
    Limits,
    Tools,
    bwrap_argv,
    interpreter_argv,
    prlimit_argv,
    sandbox_env,
    site_dirs,
    tools_for,
    which,
)
from .runners import JS_RUNNER, PYTHON_RUNNER
from .seccomp import seccomp_filter

__all__ = [
    "JS_RUNNER",
    "MAX_TASKS",
    "PYTHON_RUNNER",
    "SANDBOX_UIDS",
    "WORKDIR",
    "Limits",
    "Outcome",
    "SandboxUnavailable",
    "bwrap_argv",
    "choose_mode",
    "probe_bwrap",
    "run_code",
    "seccomp_filter",
]

log = logging.getLogger(__name__)

Language = Literal["python", "javascript"]
Mode = Literal["bwrap", "none"]

#: stdout and stderr are each kept up to this many bytes in the record.
LOG_KEEP_BYTES = 64 * 1024
#: Cap on an error report (message + traceback) when max_output_bytes is smaller.
ERROR_MAX_BYTES = 256 * 1024
#: After the child ends, how long its pipes may take to drain.
DRAIN_GRACE_S = 2.0
#: How long the one-off check of the sandbox may take.
PROBE_TIMEOUT_S = 20.0

# ------------------------------------------------------------------- configuration


class SandboxUnavailable(Exception):
    """Code cannot run: no working sandbox and no opt-in to run without one (message says how to fix)."""


@dataclass(slots=True)
class Outcome:
    """What a run produced.

    ``status``: ``ok`` (``result`` holds the returned object), ``error`` (``error``
    holds ``{kind, type, message, traceback}``), ``timeout``, ``output_too_large``
    (``detail`` says which stream), ``killed`` (died without a result: memory, CPU
    limit, crash - ``detail`` explains, ``stderr`` has the interpreter's last words),
    ``bad_result`` (the result channel held something unreadable).
    """

    status: Literal["ok", "error", "timeout", "output_too_large", "killed", "bad_result"]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    detail: str = ""
    stdout: str = ""
    stderr: str = ""
    logs_truncated: bool = False
    exit_code: int | None = None
    elapsed_s: float = 0.0
    mode: Mode = "bwrap"
    pid: int | None = None


# -------------------------------------------------------------------- probe / mode

_PROBES: dict[tuple[str, ...], str | None] = {}


async def probe_bwrap(settings: Settings) -> str | None:
    """Why the bwrap sandbox cannot be used with ``settings`` (None: it works). Cached per configuration.

    Runs a trivial Python program through the full sandbox (namespaces, seccomp,
    uid drop, rlimits), so a kernel without user namespaces, a missing helper or an
    old bwrap all show up here, once.
    """
    tools = tools_for(settings)
    bwrap = which(settings.code_bwrap)
    key = (
        settings.code_bwrap,
        str(bwrap),
        tools.python,
        str(tools.prlimit),
        str(tools.setpriv),
        str(os.geteuid()),
    )
    if key in _PROBES:
        return _PROBES[key]
    problem: str | None = None
    if bwrap is None:
        problem = f"bubblewrap ({settings.code_bwrap!r}) was not found"
    elif tools.prlimit is None:
        problem = "prlimit (util-linux) was not found"
    elif os.geteuid() == 0 and tools.setpriv is None:
        problem = "setpriv (util-linux) was not found"
    else:
        try:
            outcome = await _run(
                "python",
                "def main():\n    return {'ok': 1}\n",
                {},
                Limits(timeout=PROBE_TIMEOUT_S, memory_mb=256, max_output_bytes=4096),
                "bwrap",
                bwrap,
                tools,
            )
        except OSError as exc:
            problem = f"{bwrap} could not start: {exc}"
        else:
            if outcome.status != "ok" or outcome.result != {"ok": 1}:
                said = (outcome.stderr.strip() or outcome.detail or str(outcome.error))[-400:]
                problem = f"{bwrap} failed a test run (exit code {outcome.exit_code}): {said}"
    _PROBES[key] = problem
    return problem


async def choose_mode(settings: Settings) -> tuple[Mode, str | None]:
    """The mode code runs in, and the reason when it runs without the sandbox.

    ``code_sandbox="bwrap"`` (default): bwrap when it works; otherwise ``none`` if
    ``allow_unsandboxed_code`` is set, else refused. ``code_sandbox="none"``: only with
    ``allow_unsandboxed_code``.

    Raises:
        SandboxUnavailable: no sandbox and no opt-in; the message says how to fix it.
    """
    if settings.code_sandbox == "none":
        if settings.allow_unsandboxed_code:
            return "none", "FLOWLOOM_CODE_SANDBOX=none"
        raise SandboxUnavailable(
            "code nodes are refused: FLOWLOOM_CODE_SANDBOX=none runs code without isolation, which also needs "
            "the explicit opt-in FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1 (better: install bubblewrap and use the "
            "default FLOWLOOM_CODE_SANDBOX=bwrap)"
        )
    problem = await probe_bwrap(settings)
    if problem is None:
        return "bwrap", None
    if settings.allow_unsandboxed_code:
        log.warning("code node running WITHOUT a sandbox (FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1): %s", problem)
        return "none", problem
    raise SandboxUnavailable(
        f"code nodes are refused: the bubblewrap sandbox does not work on this machine ({problem}). "
        "Fix: install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; it needs root or unprivileged "
        "user namespaces), or point FLOWLOOM_CODE_BWRAP at a working bwrap; or set "
        "FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1 to run code with only resource limits and a clean environment "
        "(no filesystem, network or process isolation)"
    )


# ------------------------------------------------------------------------- running


async def run_code(
    language: Language,
    code: str,
    inputs: dict[str, Any],
    limits: Limits,
    settings: Settings,
    *,
    mode: Mode,
    on_start: Callable[[int], None] | None = None,
    prelude: str = "",
) -> Outcome:
    """Run ``main`` of ``code`` with ``inputs`` in a child process (``mode`` from :func:`choose_mode`).

    ``on_start(pid)`` is called with the child's pid (bwrap's, in bwrap mode) once it runs.
    ``prelude`` (JavaScript only): a trusted script run first in the same global scope,
    e.g. the helper globals of imported FastGPT code (:mod:`nodes.sandbox.compat`); it
    runs inside the sandbox like the user's code.
    Cancelling the caller SIGKILLs the child's process group before re-raising.

    Raises:
        SandboxUnavailable: the interpreter or a helper binary is missing.
        ValueError: ``inputs`` are not JSON-serialisable.
    """
    tools = tools_for(settings)
    if language == "javascript" and tools.node is None:
        raise SandboxUnavailable(
            f"JavaScript code needs Node.js: {settings.code_node!r} was not found "
            "(install nodejs or set FLOWLOOM_CODE_NODE)"
        )
    if tools.prlimit is None:
        raise SandboxUnavailable("prlimit (util-linux) was not found; it sets the code's resource limits")
    bwrap = which(settings.code_bwrap) if mode == "bwrap" else None
    if mode == "bwrap" and bwrap is None:  # pragma: no cover - choose_mode checked it
        raise SandboxUnavailable(f"bubblewrap ({settings.code_bwrap!r}) was not found")
    return await _run(language, code, inputs, limits, mode, bwrap, tools, on_start, prelude)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Cap:
    """Byte accounting across the output streams."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.logs = 0
        self.exceeded = ""


async def _pump_log(
    stream: asyncio.StreamReader, keep: bytearray, cap: _Cap, proc: asyncio.subprocess.Process
) -> None:
    while chunk := await stream.read(65536):
        cap.logs += len(chunk)
        room = LOG_KEEP_BYTES - len(keep)
        if room > 0:
            keep += chunk[:room]
        if cap.logs > cap.limit and not cap.exceeded:
            cap.exceeded = f"the code printed more than max_output_bytes={cap.limit} bytes (stdout + stderr)"
            _kill_group(proc.pid)


async def _pump_result(
    stream: asyncio.StreamReader, buf: bytearray, cap: _Cap, proc: asyncio.subprocess.Process
) -> None:
    while chunk := await stream.read(65536):
        buf += chunk
        # The outputs count against max_output_bytes; an error report (traceback) is not
        # an output and has its own fixed cap, so a small limit still shows the error.
        limit = cap.limit if buf[:1] == b"R" else max(cap.limit, ERROR_MAX_BYTES)
        if len(buf) - 1 > limit and not cap.exceeded:
            what = "the outputs are" if buf[:1] == b"R" else "the error report is"
            cap.exceeded = f"{what} larger than max_output_bytes={limit} bytes"
            _kill_group(proc.pid)
            return


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child died early; its exit status tells why


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Adds ``exited``, done when the process ends.

    ``Process.wait()`` (Python 3.11) also waits for every pipe to close, which a process
    the code left behind could delay until the timeout.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


async def _run(
    language: Language,
    code: str,
    inputs: dict[str, Any],
    limits: Limits,
    mode: Mode,
    bwrap: str | None,
    tools: Tools,
    on_start: Callable[[int], None] | None = None,
    prelude: str = "",
) -> Outcome:
    """One run, in three steps: start the child (:func:`_spawn`), feed and watch it until it
    ends, times out or overflows (:func:`_supervise`), then read what it left (:func:`_outcome`).

    Raises:
        TypeError, ValueError: ``inputs`` cannot be sent as JSON.
        OSError: the child could not start.
    """
    # ASCII JSON: a lone surrogate in the code or an input still travels (as an escape).
    request = json.dumps(
        {
            "code": code,
            "inputs": inputs,
            "prelude": prelude,
            "max_output_bytes": limits.max_output_bytes,
            "site_dirs": site_dirs(tools, sandboxed=mode == "bwrap"),
        },
        allow_nan=False,
    ).encode("ascii")
    child = await _spawn(language, limits, mode, bwrap, tools)
    if on_start is not None:
        on_start(child.proc.pid)
    streams = await _supervise(child, request, limits, mode)
    return _outcome(language, child, streams, limits, mode)


@dataclass(slots=True)
class _Child:
    """A started child: ``proc`` (bwrap, or the interpreter in mode ``none``), its subprocess
    ``transport`` and ``protocol``, ``result_r`` (our end of the result pipe), ``workdir``
    (the temporary working directory of mode ``none``, else None) and ``started``
    (``time.monotonic()`` right before it was started)."""

    proc: asyncio.subprocess.Process
    transport: asyncio.SubprocessTransport
    protocol: _Protocol
    result_r: int
    workdir: str | None
    started: float


@dataclass(slots=True)
class _Streams:
    """What a finished child left: the kept ``stdout`` / ``stderr`` bytes (each up to
    :data:`LOG_KEEP_BYTES`), the ``result`` message (``R``/``E`` + JSON), the byte
    accounting ``cap`` and whether the wall timeout hit (``timed_out``)."""

    stdout: bytearray
    stderr: bytearray
    result: bytearray
    cap: _Cap
    timed_out: bool


async def _spawn(language: Language, limits: Limits, mode: Mode, bwrap: str | None, tools: Tools) -> _Child:
    """Start the runner: inside bwrap (seccomp program passed through a pipe, prlimit, uid
    drop when root) or, in mode ``none``, under prlimit alone in a temporary working
    directory. The result pipe's write end goes to the child; our copies of the child's fds
    are closed whatever happens (and the read end and the directory too on failure)."""
    as_root = os.geteuid() == 0
    loop = asyncio.get_running_loop()
    result_r, result_w = os.pipe()
    pass_fds = [result_w]
    seccomp_r: int | None = None
    workdir: str | None = None
    inner = interpreter_argv(language, tools, limits, result_w)
    try:
        if mode == "bwrap":
            assert bwrap is not None
            program = seccomp_filter()
            if program is not None:
                # The filter is small (< 1 KiB): it fits the pipe buffer before bwrap reads it.
                seccomp_r, seccomp_w = os.pipe()
                os.write(seccomp_w, program)
                os.close(seccomp_w)
                pass_fds.append(seccomp_r)
            argv = bwrap_argv(
                bwrap,
                tools,
                prlimit_argv(language, tools, limits, nproc=True) + inner,
                seccomp_fd=seccomp_r,
                as_root=as_root,
                uid=random.choice(SANDBOX_UIDS),
            )
            cwd = "/"
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # bwrap's own; it sets the code's inside
        else:
            workdir = tempfile.mkdtemp(prefix="flowloom-code-")
            argv = prlimit_argv(language, tools, limits, nproc=False) + inner
            cwd = workdir
            env = {**sandbox_env(tools, sandboxed=False), "HOME": workdir}
        started = time.monotonic()
        transport_, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=pass_fds,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        proc = asyncio.subprocess.Process(transport_, protocol, loop)
    except BaseException:
        os.close(result_r)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    finally:
        os.close(result_w)
        if seccomp_r is not None:
            os.close(seccomp_r)
    return _Child(proc, transport_, protocol, result_r, workdir, started)


async def _supervise(child: _Child, request: bytes, limits: Limits, mode: Mode) -> _Streams:
    """Feed ``request`` to the child's stdin and read its three pipes under the output caps
    until it exits or ``limits.timeout`` passes. Whatever happens (done, timeout,
    cancellation) nothing of the child survives: its process group is killed, the pipes
    drained for at most :data:`DRAIN_GRACE_S`, our fds and the working directory released."""
    proc, loop = child.proc, asyncio.get_running_loop()
    cap = _Cap(limits.max_output_bytes)
    out_keep, err_keep, result_buf = bytearray(), bytearray(), bytearray()
    result_file = os.fdopen(child.result_r, "rb", buffering=0)
    transport: asyncio.BaseTransport | None = None
    waiter: asyncio.Future[Any] | None = None
    pumps: asyncio.Future[Any] | None = None
    timed_out = False
    try:
        result_reader = asyncio.StreamReader(limit=2**31)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(result_reader), result_file
        )
        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(
            _pump_log(proc.stdout, out_keep, cap, proc),
            _pump_log(proc.stderr, err_keep, cap, proc),
            _pump_result(result_reader, result_buf, cap, proc),
        )
        waiter = asyncio.gather(_feed(proc, request), child.protocol.exited)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout=limits.timeout)
        except TimeoutError:
            timed_out = True
    finally:
        # Whatever happened (done, timeout, cancellation): nothing of the child survives.
        # Without the sandbox, processes the code left in its group are killed too.
        if proc.returncode is None or mode == "none":
            _kill_group(proc.pid)
        # Drain what the pipes still hold. A process that escaped the group (possible only
        # without the sandbox) may keep them open: stop waiting after a grace period.
        drain = [f for f in (waiter, pumps) if f is not None]
        if drain:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.gather(*drain)), timeout=DRAIN_GRACE_S)
            except BaseException:
                for f in drain:
                    f.cancel()
        if transport is not None:
            transport.close()
        else:
            result_file.close()
        child.transport.close()  # our ends of stdin/stdout/stderr
        if child.workdir:
            shutil.rmtree(child.workdir, ignore_errors=True)
    return _Streams(out_keep, err_keep, result_buf, cap, timed_out)


def _outcome(language: Language, child: _Child, streams: _Streams, limits: Limits, mode: Mode) -> Outcome:
    """The :class:`Outcome` of a finished child: ``timeout``, ``output_too_large``, then what
    the result pipe holds (``ok`` / ``error`` / ``bad_result``), else ``killed`` with the
    reason read from its exit status and stderr (:func:`_why_killed`)."""
    proc, cap, result_buf = child.proc, streams.cap, streams.result
    outcome = Outcome(
        status="ok",
        stdout=streams.stdout.decode("utf-8", "replace"),
        stderr=streams.stderr.decode("utf-8", "replace"),
        logs_truncated=cap.logs > len(streams.stdout) + len(streams.stderr),
        exit_code=proc.returncode,
        elapsed_s=time.monotonic() - child.started,
        mode=mode,
        pid=proc.pid,
    )
    if streams.timed_out:
        outcome.status, outcome.detail = "timeout", f"the code ran longer than timeout={limits.timeout}s"
    elif cap.exceeded:
        outcome.status, outcome.detail = "output_too_large", cap.exceeded
    elif result_buf[:1] in (b"R", b"E"):
        try:
            payload = json.loads(result_buf[1:])
        except ValueError:
            payload = None
        if result_buf[:1] == b"R" and isinstance(payload, dict):
            outcome.result = payload
        elif result_buf[:1] == b"E" and isinstance(payload, dict) and payload.get("kind") == "too_large":
            outcome.status, outcome.detail = "output_too_large", str(payload.get("message"))
        elif result_buf[:1] == b"E" and isinstance(payload, dict):
            outcome.status, outcome.error = "error", payload
        else:
            outcome.status = "bad_result"
            outcome.detail = "the result channel held no valid result (did the code write to it?)"
    else:
        outcome.status, outcome.detail = (
            "killed",
            _why_killed(language, proc.returncode, outcome.stderr, limits),
        )
    return outcome


def _why_killed(language: Language, code: int | None, stderr: str, limits: Limits) -> str:
    """Explain a child that ended without a result, from its exit status and last words."""
    # bwrap reports a child killed by signal N as exit code 128 + N; a direct child gives -N.
    sig = (
        -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
    )
    if language == "javascript" and (
        "heap out of memory" in stderr
        or "Fatal process out of memory" in stderr
        or "Array buffer allocation failed" in stderr
    ):
        return f"the code ran out of memory (memory_mb={limits.memory_mb})"
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "CPU" in stderr):
        return f"the code used more CPU time than its limit ({math.ceil(limits.timeout) + 1}s)"
    if language == "javascript" and sig in (signal.SIGABRT, signal.SIGTRAP, signal.SIGSEGV):
        return f"the JavaScript runtime aborted, most likely out of memory (memory_mb={limits.memory_mb})"
    if sig is not None and sig in signal.valid_signals():
        return f"the code was killed by {signal.Signals(sig).name}"
    return f"the code exited (exit code {code}) without returning a result"
