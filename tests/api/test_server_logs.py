"""The server's own logs: ``flowloom serve``'s access log never holds a key sent in the
query string or the path (a real server process, its real stdout), and the error log
goes to stderr when its file cannot be written (``/dev/full``: every write is ENOSPC)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from api.cli.running import log_to_home
from api.logs import FallbackFileHandler, mask_secrets

ROOT = Path(__file__).resolve().parents[2]
SECRET = "fl_abcd1234_S3cretS3cretS3cretS3cretS3cretS3cret"


def test_secret_query_values_and_keys_are_masked_whatever_their_spelling():
    assert mask_secrets(f"/v1/runs?api_key={SECRET}&limit=5") == "/v1/runs?api_key=***&limit=5"
    for name in ("key", "token", "access_token", "API_KEY", "Access_Token", "api%5Fkey"):
        assert mask_secrets(f"/v1/runs?limit=5&{name}=hunter2") == f"/v1/runs?limit=5&{name}=***", name
    assert mask_secrets(f"/v1/runs/{SECRET}") == "/v1/runs/***"
    assert mask_secrets("/v1/runs?status=paused&monkey=1") == "/v1/runs?status=paused&monkey=1"


@pytest.mark.slow
def test_flowloom_serve_writes_no_key_of_the_query_string_into_its_access_log(tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home")}
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--no-login-url",
                               "--no-examples"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
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
        for query in (f"api_key={SECRET}", "key=hunter2-key", "token=hunter2-token", "access_token=hunter2-access"):
            assert httpx.get(f"{base}/v1/runs?limit=1&{query}", timeout=10).status_code == 401
        assert httpx.get(f"{base}/v1/runs/{SECRET}", timeout=10).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        try:
            out, err = server.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            out, err = server.communicate()
    log = out + err
    assert "GET /v1/runs?limit=1&api_key=*** HTTP/1.1" in log and "GET /v1/runs/*** HTTP/1.1" in log, log
    for secret in (SECRET, "hunter2"):
        assert secret not in log


def test_the_error_log_falls_back_to_stderr_when_its_file_cannot_be_written(tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "flowloom.log").symlink_to("/dev/full")  # a disk with no space left
    logger = logging.getLogger("flowloom")
    before = list(logger.handlers)
    log_to_home(home)
    handlers = [h for h in logger.handlers if h not in before]
    assert [type(h) for h in handlers] == [FallbackFileHandler]
    try:
        try:
            raise RuntimeError("database or disk is full")
        except RuntimeError:
            logging.getLogger("flowloom.api").error("internal error: the store failed", exc_info=True)
        logging.getLogger("flowloom.api").error("a second problem")
        err = capsys.readouterr().err
        assert "cannot write the log file" in err and "No space left on device" in err, err
        assert err.count("cannot write the log file") == 1, "said once, not per record"
        assert "internal error: the store failed" in err and "RuntimeError: database or disk is full" in err
        assert "a second problem" in err and "--- Logging error ---" not in err
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()


def _closed_port() -> int:
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_json_logs_carry_the_tenant_run_and_node_of_each_record_written_during_a_run(tmp_path):
    import json

    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), "FLOWLOOM_LOG_FORMAT": "json",
           "FLOWLOOM_HTTP_ALLOW": "127.0.0.1"}
    port = _closed_port()
    made = subprocess.run([sys.executable, "-m", "api.cli", "keys", "create", "--admin", "--name", "logs"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    key = made.stdout.strip().splitlines()[-1]
    assert key.startswith("fl_"), made.stderr
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--no-login-url",
                               "--no-examples"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    base = f"http://127.0.0.1:{port}"
    unreachable = f"http://127.0.0.1:{_closed_port()}/gone"
    doc = {"id": "logged", "name": "Logged", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "call", "type": "http_request", "config": {"url": unreachable, "timeout": 5}},
        {"id": "end", "type": "end", "config": {"outputs": []}}],
        "edges": [{"id": "e1", "source": "start", "target": "call"}, {"id": "e2", "source": "call", "target": "end"}]}
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
        ran = httpx.post(f"{base}/v1/runs", json={"workflow": doc}, headers={"Authorization": f"Bearer {key}"},
                         timeout=30)
        assert ran.status_code == 200 and ran.json()["status"] == "failed", ran.text
    finally:
        server.send_signal(signal.SIGINT)
        try:
            out, err = server.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            out, err = server.communicate()
    # uvicorn's, the access log's and Flowloom's records are JSON; the banner before them is not a record
    records = [json.loads(line) for line in (out + err).splitlines() if line.startswith("{")]
    assert any(r["logger"] == "uvicorn.access" and "POST /v1/runs" in r["message"] for r in records), out
    failed = [r for r in records if r["logger"] == "flowloom.engine" and "failed" in r["message"]]
    assert failed, out + err
    assert {(r["tenant_id"], r["run_id"], r["node_id"]) for r in failed} == {("default", ran.json()["run_id"], "call")}
    assert all(r.keys() >= {"time", "level", "logger", "message", "tenant_id", "run_id", "node_id"} for r in records)
    assert not [r for r in records if "color_message" in r], "no terminal escape codes in a JSON record"
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert all(r["run_id"] is None for r in access), "a record outside a run names none"
    assert key not in out + err
