"""``flowloom serve`` as a real process: first start hint, a key made with
``flowloom keys create``, a run over HTTP, ``keys list``/``revoke`` from the CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.cli import serve_banner

from .conftest import hello_workflow

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def test_flowloom_serve_answers_over_http_with_a_key_from_the_cli(tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home")}
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--no-login-url"],
                              cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            assert server.poll() is None, server.communicate()
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "flowloom serve did not answer"
            time.sleep(0.1)
        assert httpx.get(f"{base}/v1/runs").status_code == 401
        created = _cli(env, "keys", "create", "--admin", "--name", "admin")
        assert created.returncode == 0, created.stderr
        key = created.stdout.strip()
        assert key.startswith("fl_") and "shown once" in created.stderr
        response = httpx.post(f"{base}/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                              headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"greeting": "Hello, Ada! Welcome to Flowloom."}
        listed = _cli(env, "keys", "list", "--json")
        assert listed.returncode == 0 and key not in listed.stdout
        (record,) = __import__("json").loads(listed.stdout)
        assert record["admin"] and record["last_used_at"] is not None
        revoked = _cli(env, "keys", "revoke", record["id"])
        assert revoked.returncode == 0, revoked.stderr
        assert httpx.get(f"{base}/v1/runs", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        try:
            _out, err = server.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            _out, err = server.communicate()
    assert f"http://127.0.0.1:{port}" in err
    assert "API clients should use a key of their own" in err and "flowloom keys create --admin" in err
    assert key not in err and key not in _out
    assert "Traceback" not in err


def _banner_store(env: dict[str, str]) -> str:
    """The ``run store:`` part of the banner of ``flowloom serve`` started with ``env``."""
    banner = serve_banner(env, "run store:", "--no-login-url", "--no-examples")
    return banner.partition("run store:")[2].splitlines()[0].strip()


def test_the_banner_shows_the_run_store_url_as_a_user_writes_it_default_or_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLOOM_DATABASE_URL", "FLOWLOOM_REDIS_URL")}
    home = (tmp_path / "home").absolute()
    assert _banner_store({**env, "FLOWLOOM_HOME": str(home)}) == f"sqlite:///{home / 'flowloom.db'}"
    given = f"sqlite:///{tmp_path.absolute() / 'chosen.db'}"
    assert _banner_store({**env, "FLOWLOOM_HOME": str(home), "FLOWLOOM_DATABASE_URL": given}) == given
    from api.cli.serve import store_label  # a PostgreSQL URL: no server needed to see the masking

    assert store_label("postgresql+asyncpg://flow:s3cret@db:5432/flowloom") == "postgresql://flow:***@db:5432/flowloom"


def test_the_banner_says_where_every_model_call_goes_with_the_override_and_hides_its_credentials(tmp_path):
    # A server keeps the environment it started with: the banner shows which override it has.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWLOOM_DATABASE_URL", "FLOWLOOM_REDIS_URL",
                                                                     "FLOWLOOM_LLM_"))}
    env |= {"FLOWLOOM_HOME": str(tmp_path / "home"),
            "FLOWLOOM_LLM_BASE_URL_OVERRIDE": "http://me:s3cret@127.0.0.1:8791/v1"}
    banner = serve_banner(env, "models:", "--no-login-url", "--no-examples")
    line = next(x for x in banner.splitlines() if x.startswith("models:"))
    assert "http://127.0.0.1:8791/v1" in line and "s3cret" not in banner and "me:" not in line
