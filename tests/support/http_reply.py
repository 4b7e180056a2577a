"""Answering from the small HTTP servers tests start (``http.server`` handlers)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

__all__ = ["reply_json"]


def reply_json(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    """Send ``body`` (JSON bytes) with ``status``; a client that is gone already (a run
    killed or stopped mid-call) is not an error of the server."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except OSError:
        pass
