"""A zero-latency, deterministic OpenAI-compatible ``POST /v1/embeddings`` server for
``bench/knowledge.py``, and the vector function it serves.

Both sides of the knowledge bench (Flowloom's embedder and the Chroma embedding function)
call this one server, so neither pays a model: what is measured is the ingestion and
search machinery around the embeddings.

``embed_texts(texts) -> float32 array (n, DIM)`` is a hashed bag of words plus a little
per-text noise, unit length, rounded to 6 decimals: texts that share words get near
vectors (an ANN index sees clustered data, as with a real model, not uniform noise), and
two different texts never get the same vector (no ties in a recall check). The bench
computes vectors with the same function in-process when it inserts pre-computed vectors
or embeds a query without HTTP.

``python bench/_embed_server.py [--port N]`` serves on 127.0.0.1 (a free port unless
``--port``; ``--help`` prints the usage and starts nothing), prints its base URL
(``http://127.0.0.1:PORT``) on the first line of stdout and serves until stdin closes.
Requests: ``{"model": str, "input": str | [str], "encoding_format": "float" | "base64"}``
(``base64``: little-endian float32, as OpenAI's API); the answer has OpenAI's shape with
``usage.prompt_tokens`` = words counted. Any other path is a 404 JSON error.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import zlib
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIM = 384
NOISE = 0.3  # the share of a vector that is per-text noise (the rest: its words)
_WORD = re.compile(r"\w+")


def _word_vector(text: str) -> np.ndarray:
    # distinct words only (a word repeated 20 times must not dominate), hashed with crc32:
    # Python's own hash() is salted per process, and the server is another process
    words = {w for w in _WORD.findall(text.lower()) if len(w) > 2}
    if not words:
        return np.zeros(DIM, np.float64)
    codes = np.fromiter((zlib.crc32(w.encode("utf-8")) for w in words), dtype=np.uint64, count=len(words))
    signs = np.where(codes & 0x8000_0000, -1.0, 1.0)
    vec = np.bincount((codes % DIM).astype(np.intp), weights=signs, minlength=DIM)
    norm = np.linalg.norm(vec)
    return vec / norm if norm else vec


def embed_text(text: str) -> np.ndarray:
    """The unit vector of ``text`` (float64 rounded to 6 decimals: short in JSON, exact in
    float32; shape ``(DIM,)``); see the module docstring."""
    # noise from the text's own digest: deterministic in every process, and cheaper than
    # seeding a random generator per text
    digest = hashlib.shake_128(text.encode("utf-8", "surrogatepass")).digest(DIM)
    noise = np.frombuffer(digest, dtype=np.int8).astype(np.float64) + 0.5
    vec = (1.0 - NOISE) * _word_vector(text) + NOISE * noise / np.linalg.norm(noise)
    vec /= np.linalg.norm(vec)
    return np.round(vec, 6)


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """``embed_text`` of each text, stacked: float64 ``(len(texts), DIM)``."""
    out = np.empty((len(texts), DIM), np.float64)
    for i, text in enumerate(texts):
        out[i] = embed_text(text)
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse their connections
    # TCP_NODELAY, as uvicorn and every production server: else the body, written after
    # the headers, waits for the client's delayed ACK (~40 ms on Linux) when it is small,
    # which taxes small requests (a short document's one batch) and not 64-text ones
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())

    def do_GET(self) -> None:
        self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/embeddings":
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw)
            texts = body["input"]
            texts = [texts] if isinstance(texts, str) else list(texts)
            if not all(isinstance(t, str) for t in texts):
                raise ValueError("input must be a string or a list of strings")
        except (ValueError, KeyError, TypeError) as error:
            self._error(400, f"bad request: {error}")
            return
        vectors = embed_texts(texts)
        if body.get("encoding_format") == "base64":
            items = [base64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in vectors]
        else:
            items = vectors.tolist()
        tokens = sum(len(_WORD.findall(t)) for t in texts)
        reply = {"object": "list", "model": body.get("model", ""),
                 "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)],
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        self._send(200, json.dumps(reply, separators=(",", ":")).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client dropping its keep-alive connection at exit is not an error here


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until stdin closes (``--help``: the usage, and no server)."""
    import argparse
    import threading

    parser = argparse.ArgumentParser(
        prog="bench/_embed_server.py",
        description="A deterministic OpenAI-compatible POST /v1/embeddings server for bench/knowledge.py "
                    f"({DIM}-dimension hashed bag-of-words vectors, no model). It serves on 127.0.0.1, "
                    "prints its base URL (http://127.0.0.1:PORT) on the first line of stdout and serves "
                    "until stdin closes.")
    parser.add_argument("--port", type=int, default=0, help="the port to serve on (default: 0, a free one)")
    args = parser.parse_args(argv)
    server = _Server(("127.0.0.1", args.port), _Handler)

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin (or dies)
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
