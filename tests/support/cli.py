"""The ``flowloom`` console script of the interpreter running the tests.

Tests never rely on ``PATH``: a venv used through its ``bin/python`` (not activated) has
its scripts beside that interpreter, which is where pip put ``flowloom``. Also
:func:`serve_banner`, what ``flowloom serve`` says as it starts.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_BIN = Path(sys.executable).parent / "flowloom"
#: path of the console script (beside ``sys.executable``; else the one on PATH as a last resort)
FLOWLOOM = str(_BIN) if _BIN.exists() else (shutil.which("flowloom") or "flowloom")


def serve_banner(env: dict[str, str], until: str, *args: str, timeout: float = 30.0) -> str:
    """What ``flowloom serve`` (on a free loopback port, with ``args``) writes on stderr up
    to and including the first line holding ``until``; the server is then stopped.

    Raises AssertionError when the server exits or ``timeout`` seconds pass first.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), *args],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        while not any(until in line for line in seen):
            assert time.monotonic() < deadline and server.poll() is None, "".join(seen)
            seen.append(server.stderr.readline())
    finally:
        stop_server(server)
    return "".join(seen)


def stop_server(server: subprocess.Popen[str]) -> None:
    """Stop ``server`` as Ctrl-C would (SIGTERM), killing it after 30 s without an exit."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
