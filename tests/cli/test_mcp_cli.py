"""``flowloom mcp tools``: a real MCP server (``tests/support/mcp_server.py``) listed over
HTTP and over stdio by the command line run as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.mcp_server import SCRIPT, start_http


def flowloom(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", "mcp", "tools", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


@pytest.fixture
def http_url():
    proc, url = start_http()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(5)


def test_tools_of_an_http_server_are_listed_with_their_risk(http_url):
    proc = flowloom(http_url, FLOWLOOM_HTTP_ALLOW="127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()[1:] if line.strip()}
    assert rows["lookup"] == "read" and rows["delete_item"] == "write"
    assert "The weather in a city." in proc.stdout


def test_json_gives_the_input_schemas_of_a_stdio_server():
    proc = flowloom("--json", "--stdio", "--", sys.executable, str(SCRIPT))
    assert proc.returncode == 0, proc.stderr
    tools = {t["name"]: t for t in json.loads(proc.stdout)}
    assert tools["lookup"]["input_schema"]["required"] == ["city"]
    assert tools["delete_item"]["annotations"]["destructiveHint"] is True


def test_the_loopback_server_typed_by_the_operator_is_listed_without_the_allow_setting(http_url):
    """The person at the terminal chose the server (as with --stdio): FLOWLOOM_HTTP_ALLOW
    guards what workflows name, not what an operator types."""
    proc = flowloom(http_url, FLOWLOOM_HTTP_ALLOW="")
    assert proc.returncode == 0, proc.stderr
    assert "lookup" in proc.stdout and "delete_item" in proc.stdout


def test_a_literal_credential_header_typed_on_the_command_line_is_sent_and_never_printed(http_url):
    proc = flowloom(http_url, "-H", "Authorization: Bearer abc123-literal", FLOWLOOM_HTTP_ALLOW="127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    assert "lookup" in proc.stdout and "abc123-literal" not in proc.stdout + proc.stderr


def test_a_malformed_header_is_refused_without_echoing_its_value():
    proc = flowloom("https://mcp.example.com/mcp", "--header", "Bearer abc123-literal")
    assert proc.returncode == 2 and "Name: value" in proc.stderr and "Traceback" not in proc.stderr
    assert "abc123" not in proc.stderr


@pytest.fixture
def flowloom_server(tmp_path):
    """``flowloom serve`` (in-process runs, no examples) on a free port; its base URL."""
    import socket
    import time
    from pathlib import Path

    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env["FLOWLOOM_HOME"] = str(tmp_path / "home")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--no-examples"],
                              cwd=Path(__file__).resolve().parents[2], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "flowloom serve did not start"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(30)


def test_a_server_refusing_the_key_is_named_with_the_status_and_its_message(flowloom_server):
    url = flowloom_server + "/v1/mcp"
    for args, said in ((["-H", "Authorization: Bearer wrong"], "invalid or revoked API key"),
                       ([], "missing API key")):
        proc = flowloom(url, *args, FLOWLOOM_HTTP_ALLOW="127.0.0.1")
        assert proc.returncode == 2, proc.stderr
        assert f"MCP server 'cli' ({url}) refused the request: 401 unauthorized: {said}" in proc.stderr, proc.stderr
        assert "could not be reached" not in proc.stderr and "Traceback" not in proc.stderr
        assert "wrong" not in proc.stderr, "the typed credential is never printed"
