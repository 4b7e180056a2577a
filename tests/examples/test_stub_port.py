"""The examples' stub API takes a port: ``stub_server.py --port N`` (a bare ``N`` too,
default a free port), refused with a message when the port is in use, and the example
scripts pass ``--port N`` through to it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.cli import FLOWLOOM

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(EXAMPLES / "stub_server.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_the_stub_server_listens_on_the_port_it_is_given_and_refuses_a_taken_one():
    port = _free_port()
    first = _start("--port", str(port))
    try:
        assert first.stdout.readline().strip() == f"ready http://127.0.0.1:{port}"
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json() == {"ok": True}
        second = _start("--port", str(port))
        _out, err = second.communicate(timeout=30)
        assert second.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in err, err
    finally:
        first.terminate()
        first.wait(timeout=10)
    bad = _start("--port", "99999")
    _out, err = bad.communicate(timeout=30)
    assert bad.returncode == 2 and "out of range" in err, err


def test_the_stub_server_takes_a_free_port_by_default():
    proc = _start()
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("ready http://127.0.0.1:") and not line.endswith(":0"), line
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_weather_script_runs_its_stub_on_the_port_given():
    port = _free_port()
    env = {**os.environ, "PYTHON": sys.executable, "FLOWLOOM": FLOWLOOM}
    proc = subprocess.run(["bash", str(EXAMPLES / "run_weather.sh"), "--port", str(port), "Oslo"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"stub API on http://127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert "Weather in Oslo: 4 C, snow showers" in proc.stdout, proc.stdout
    refused = subprocess.run(["bash", str(EXAMPLES / "with_stub.sh"), "--port", "many", "x.json"],
                             capture_output=True, text=True, timeout=60, env=env)
    assert refused.returncode == 2 and "--port needs a number" in refused.stderr, refused.stderr
