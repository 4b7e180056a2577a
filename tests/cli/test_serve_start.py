"""``flowloom serve`` before it serves: a port in use is one line and exit 2 with nothing
else printed; the first start's banner says where runs execute and that scripts need a
key of their own (the canvas key is the browser's)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.cli import serve_banner, stop_server

ROOT = Path(__file__).resolve().parents[2]


def test_serve_on_a_port_in_use_exits_2_with_one_line_and_no_banner(tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "api.cli", "serve", "--port", str(port)], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"cannot listen on 127.0.0.1:{port}: Address already in use (another server listens there: stop it or "
        "pick another --port)"]
    assert result.stdout == "" and not (tmp_path / "home" / "canvas-key").exists()


def test_serve_first_start_says_where_runs_execute_and_how_scripts_get_a_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FLOWLOOM_REDIS_URL"}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    text = serve_banner(env, "keys create", "--no-examples")
    assert "runs: executed in this process" in text
    assert "the canvas key is for the browser; scripts should use a key of their own" in text
    assert "no admin API key yet" not in text


def test_serve_on_port_0_prints_the_port_it_picked_and_serves_there(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FLOWLOOM_REDIS_URL"}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", "0", "--no-examples"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    try:
        first = server.stderr.readline()
        found = re.search(r"Flowloom API on (http://127\.0\.0\.1:(\d+)) ", first)
        assert found and found.group(2) != "0", first
        # Connect on the banner line, before uvicorn serves: the socket listens from the
        # moment its port is printed, so the request waits in the backlog, never refused.
        with urllib.request.urlopen(found.group(1) + "/healthz", timeout=60) as answer:
            assert answer.status == 200
    finally:
        stop_server(server)
