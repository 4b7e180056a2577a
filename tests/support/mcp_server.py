"""A real MCP server (the official SDK's ``MCPServer``) for the MCP tests, run as a process.

``python tests/support/mcp_server.py`` serves over stdio; ``--http PORT`` serves
Streamable HTTP on 127.0.0.1:PORT at ``/mcp``. Tools:

- ``lookup(city)``: read-only (``readOnlyHint``): ``"weather in <city>: sunny"``;
- ``delete_item(item_id)``: destructive (``destructiveHint``): appends the id to the file
  named by ``MCP_TEST_LOG`` (so a test sees whether it ran) and answers ``"deleted <id>"``;
- ``crash()``: read-only; the process exits at once, mid-call;
- ``slow(seconds)``: read-only; writes ``slow <pid>`` to ``MCP_TEST_LOG``, answers after ``seconds``;
- ``whoami()``: read-only; the ``Authorization`` header it got over HTTP (``"none"`` on stdio)
  and the value of ``MCP_TEST_TOKEN`` in its environment, each with the first 12 hex digits
  of its SHA-256 (:func:`sha`), so a test sees the value arrived even where it is redacted.

:func:`start_http` starts it over HTTP for a test and waits until it accepts connections.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

SCRIPT = Path(__file__).resolve()


def _build() -> MCPServer:
    server = MCPServer("flowloom-test")
    read = ToolAnnotations(readOnlyHint=True)

    @server.tool(annotations=read)
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"weather in {city}: sunny"

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def delete_item(item_id: str) -> str:
        """Delete an item for good."""
        log = os.environ.get("MCP_TEST_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(item_id + "\n")
        return f"deleted {item_id}"

    @server.tool(annotations=read)
    def crash() -> str:
        """Exit the server process."""
        os._exit(3)

    @server.tool(annotations=read)
    async def slow(seconds: float) -> str:
        """Answer after some seconds (its process id goes to ``MCP_TEST_LOG`` first)."""
        log = os.environ.get("MCP_TEST_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(f"slow {os.getpid()}\n")
        await asyncio.sleep(seconds)
        return "slow done"

    @server.tool(annotations=read)
    async def whoami(ctx: Context) -> str:
        """The credentials this server received."""
        request = ctx.request_context.request
        header = request.headers.get("authorization", "none") if request is not None else "none"
        token = os.environ.get("MCP_TEST_TOKEN", "none")
        return f"auth={header} auth_sha={sha(header)} token={token} token_sha={sha(token)}"

    @server.tool(annotations=read)
    async def traceparent(ctx: Context) -> str:
        """The W3C trace context this server received (``none`` when none came)."""
        request = ctx.request_context.request
        return request.headers.get("traceparent", "none") if request is not None else "none"

    return server


def sha(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_http(env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server over HTTP: ``(process, endpoint URL)``; the caller kills the process."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the MCP test server exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the MCP test server did not start")


if __name__ == "__main__":
    app = _build()
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
