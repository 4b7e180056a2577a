"""An unreachable ``FLOWLOOM_REDIS_URL`` is a deployment problem: a one-line message
naming the URL (password masked), never the "this is a bug" message or a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.cli import serve_banner

ROOT = Path(__file__).resolve().parents[2]


def _dead_redis_url() -> str:
    """A URL on a loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://:s3cret-pw@127.0.0.1:{port}/0"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_REDIS_URL": _dead_redis_url()}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def test_worker_exits_2_with_one_line_when_redis_is_unreachable(tmp_path):
    result = _cli(tmp_path, "worker", "--burst")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is unreachable" in lines[0], result.stderr
    assert "redis://:***@127.0.0.1:" in lines[0] and "s3cret-pw" not in result.stderr
    assert "bug" not in result.stderr and "Traceback" not in result.stderr


def test_run_succeeds_without_a_bug_message_when_redis_is_unreachable(tmp_path):
    result = _cli(tmp_path, "run", "examples/hello.json", "--input", "name=Ada")
    assert result.returncode == 0, result.stderr
    assert "Hello, Ada!" in result.stdout
    assert "internal error" not in result.stderr and "bug" not in result.stderr
    assert "s3cret-pw" not in result.stderr


def test_serve_warns_at_start_when_redis_is_unreachable(tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_REDIS_URL": _dead_redis_url()}
    text = serve_banner(env, "unreachable", "--no-login-url", "--no-examples")
    assert "queued" in text and "flowloom worker" in text
    assert "redis://:***@127.0.0.1:" in text and "s3cret-pw" not in text
