"""bench/_embed_server.py's command line: ``--help`` prints the usage and starts no
server; without arguments it serves and prints its URL first."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "bench" / "_embed_server.py"


def test_help_prints_the_usage_and_starts_nothing() -> None:
    # stdin stays open: a server started by mistake would serve until the timeout
    proc = subprocess.run([sys.executable, str(SERVER), "--help"], stdin=subprocess.PIPE, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and "/v1/embeddings" in proc.stdout
    assert "http://127.0.0.1:" not in proc.stdout.splitlines()[0]
    wrong = subprocess.run([sys.executable, str(SERVER), "--bogus"], stdin=subprocess.PIPE, capture_output=True,
                           text=True, timeout=30)
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr


def test_without_arguments_it_serves_embeddings_until_stdin_closes() -> None:
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(url + "/v1/embeddings", data=json.dumps({"model": "m", "input": ["a b c"]})
                                         .encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.load(response)
        assert len(body["data"][0]["embedding"]) == 384
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
