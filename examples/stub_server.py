"""A tiny local JSON API for the examples and the CLI tests (standard library only).

Usage: ``python examples/stub_server.py [--port PORT]`` (the default, 0, takes a free port;
a bare ``PORT`` works too). Listens on 127.0.0.1 only and prints
``ready http://127.0.0.1:PORT`` once it accepts requests; a port already in use ends it
with exit code 2 and a message saying so.

Endpoints (GET):

- ``/weather?city=NAME``: 200 ``{"city", "temp_c", "conditions", "humidity"}`` for a
  known city, 404 ``{"error": "unknown city", "city": NAME}`` otherwise, 400 without ``city``.
- ``/slow?seconds=N``: answers ``{"slept": N}`` after N seconds (at most 120), for
  timeout and cancellation demos.
- ``/job?id=ID&after=N``: a job that is ``{"id", "status": "running", "polls": k}`` for
  the first N polls of that id (default 3), then ``{"id", "status": "done", "polls": k,
  "result": ...}`` - for the polling (loop-back) example.
- ``/health``: ``{"ok": true}``.
- ``/places?city=NAME``: 200 ``{"city", "places": [{"name", "kind"}]}`` (parks and picnic
  spots) for a known city, 404 ``{"error": "unknown city", "city": NAME}`` otherwise.
- ``/notes``: 200 ``{"notes": [...]}``, the notes saved so far.

Endpoints (POST, JSON body):

- ``/notes`` with ``{"title", "text"}``: saves a note (kept in memory for the server's
  lifetime), 201 ``{"id", "title"}``; 400 when the body is not such an object. The
  research agent example's write tool.

A stand-in model under ``/v1`` (``/v1/chat/completions``, ``/v1/embeddings``,
``GET /v1/models``): see ``examples/stub_model.py``. It reasons about nothing; it lets the
model examples run with no provider (``FLOWLOOM_LLM_BASE_URL_OVERRIDE=<this URL>/v1``).
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import stub_model  # beside this file: python puts the script's folder on the path

WEATHER = {
    "paris": {"city": "Paris", "temp_c": 18, "conditions": "partly cloudy", "humidity": 62},
    "london": {"city": "London", "temp_c": 14, "conditions": "light rain", "humidity": 81},
    "tokyo": {"city": "Tokyo", "temp_c": 23, "conditions": "sunny", "humidity": 55},
    "oslo": {"city": "Oslo", "temp_c": 4, "conditions": "snow showers", "humidity": 74},
}
MAX_SLEEP_S = 120.0


def weather(query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """Status and body of ``/weather``."""
    city = (query.get("city") or [""])[0].strip()
    if not city:
        return 400, {"error": "missing query parameter 'city'"}
    found = WEATHER.get(city.lower())
    return (200, found) if found else (404, {"error": "unknown city", "city": city})


def slow(query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """Sleep ``seconds`` (default 30), then answer."""
    try:
        seconds = min(float((query.get("seconds") or ["30"])[0]), MAX_SLEEP_S)
    except ValueError:
        return 400, {"error": "seconds must be a number"}
    time.sleep(max(seconds, 0.0))
    return 200, {"slept": seconds}


_POLLS: dict[str, int] = {}
_POLLS_LOCK = threading.Lock()


def job(query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """A job that finishes after ``after`` polls (counted per id, for this server's lifetime)."""
    job_id = (query.get("id") or [""])[0].strip()
    if not job_id:
        return 400, {"error": "missing query parameter 'id'"}
    try:
        after = int((query.get("after") or ["3"])[0])
    except ValueError:
        return 400, {"error": "after must be an integer"}
    with _POLLS_LOCK:
        polls = _POLLS[job_id] = _POLLS.get(job_id, 0) + 1
    if polls <= after:
        return 200, {"id": job_id, "status": "running", "polls": polls}
    return 200, {"id": job_id, "status": "done", "polls": polls, "result": f"report for {job_id} is ready"}


PLACES = {
    "paris": [{"name": "Parc des Buttes-Chaumont", "kind": "park"}, {"name": "Jardin du Luxembourg", "kind": "garden"}],
    "london": [{"name": "Hyde Park", "kind": "park"}, {"name": "Primrose Hill", "kind": "hill"}],
    "tokyo": [{"name": "Yoyogi Park", "kind": "park"}, {"name": "Shinjuku Gyoen", "kind": "garden"}],
    "oslo": [{"name": "Frogner Park", "kind": "park"}, {"name": "Bygdøy beaches", "kind": "beach"}],
}
_NOTES: list[dict[str, Any]] = []
_NOTES_LOCK = threading.Lock()


def places(query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """Picnic spots of a known city."""
    city = (query.get("city") or [""])[0].strip()
    if not city:
        return 400, {"error": "missing query parameter 'city'"}
    found = PLACES.get(city.lower())
    return (200, {"city": city, "places": found}) if found else (404, {"error": "unknown city", "city": city})


def list_notes(_query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """Every note saved so far."""
    with _NOTES_LOCK:
        return 200, {"notes": list(_NOTES)}


def save_note(body: Any) -> tuple[int, dict[str, Any]]:
    """Save ``{"title", "text"}``."""
    if not isinstance(body, dict) or not isinstance(body.get("title"), str) or not isinstance(body.get("text"), str):
        return 400, {"error": "expected a JSON object with string fields title and text"}
    with _NOTES_LOCK:
        note = {"id": len(_NOTES) + 1, "title": body["title"], "text": body["text"]}
        _NOTES.append(note)
    return 201, {"id": note["id"], "title": note["title"]}


ROUTES = {"/weather": weather, "/slow": slow, "/job": job, "/health": lambda _q: (200, {"ok": True}),
          "/places": places, "/notes": list_notes, "/v1/models": lambda _q: (200, stub_model.models())}
POST_ROUTES = {"/notes": save_note, "/v1/embeddings": stub_model.embeddings}
MAX_BODY = 64 * 1024
#: The stand-in model's requests carry prompts with quotes and batches of chunks.
MAX_MODEL_BODY = 8 * 1024 * 1024


class Handler(BaseHTTPRequestHandler):
    """Routes GET requests to :data:`ROUTES` and POST requests to :data:`POST_ROUTES`;
    everything else is a JSON 404."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        route = ROUTES.get(url.path)
        status, body = route(parse_qs(url.query)) if route else (404, {"error": f"no route {url.path}"})
        self._reply(status, body)

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        route = POST_ROUTES.get(url.path)
        length = int(self.headers.get("Content-Length") or 0)
        cap = MAX_MODEL_BODY if url.path.startswith("/v1/") else MAX_BODY
        if length > cap:
            self._reply(413, {"error": f"body larger than {cap} bytes"})
            return
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            self._reply(400, {"error": "the body is not JSON"})
            return
        if url.path == "/v1/chat/completions" and isinstance(data, dict):
            self._chat(data)
            return
        status, body = route(data) if route else (404, {"error": f"no route {url.path}"})
        self._reply(status, body)

    def _chat(self, data: dict[str, Any]) -> None:
        """The stand-in model's answer: one JSON object, or server-sent events when streamed."""
        if not data.get("stream"):
            self._reply(200, stub_model.completion(data))
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in stub_model.completion_chunks(data):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _reply(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. a cancelled run)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write("stub: " + (format % args) + "\n")


def parse_port(argv: list[str]) -> int:
    """The port of ``argv`` (``--port N`` or a bare ``N``; default 0: a free port).
    Exits 2 with argparse's message for anything else."""
    parser = argparse.ArgumentParser(prog="stub_server.py", description="The examples' local JSON API.")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 0: a free one)")
    parser.add_argument("bare_port", nargs="?", type=int, default=None, metavar="PORT", help="same as --port")
    args = parser.parse_args(argv[1:])
    port = args.port if args.port is not None else args.bare_port if args.bare_port is not None else 0
    if not 0 <= port <= 65535:
        parser.error(f"port {port} is out of range (0-65535)")
    return port


def main(argv: list[str]) -> None:
    """Serve on 127.0.0.1:PORT until SIGINT/SIGTERM."""
    port = parse_port(argv)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        sys.stderr.write(f"stub_server.py: port {port} on 127.0.0.1 is in use; pick another with --port "
                         "(or --port 0 for a free one)\n")
        sys.exit(2)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"ready http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main(sys.argv)
