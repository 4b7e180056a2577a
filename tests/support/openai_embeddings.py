"""The embeddings and rerank routes of the scripted OpenAI-compatible server
(:mod:`tests.support.openai_server`): ``POST /v1/embeddings`` and ``POST /v1/rerank``.

Vectors are deterministic, a hashed bag of words (:func:`embed_text`): texts sharing
words are near, so searches find what they should; the dimension comes from the model
name (``...-dim32``) or :attr:`EmbeddingControls.embedding_dims`, else 64. Rerank scores
are the share of the query's words a document holds (:func:`rerank_score`). Both answer
at once unless ``embedding_latency`` (seconds) is set.

The server counts every text whose vector it *returned* (``embedded``, a Counter: "no
chunk embedded twice"), queues scripted errors for these routes
(:meth:`~EmbeddingControls.script_embeddings`), and can hold embeddings requests
(:meth:`~EmbeddingControls.hold_embeddings`, ``wait_held``, ``release_embeddings``,
``drop_embeddings``): a held request whose client died (a worker SIGKILLed meanwhile)
never counts its texts, since no vector reached anyone.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import math
import re
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .openai_server import RecordedRequest, Reply, ScriptedOpenAIServer

__all__ = ["EmbeddingControls", "EmbeddingRoutes", "embed_text", "rerank_score"]


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _words(text: str) -> list[str]:
    """Lower-cased words, and every CJK character as a word of its own."""
    return [w for w in re.findall(r"\w+", text.lower()) if not _CJK.search(w)] + _CJK.findall(text)


def embed_text(text: str, dim: int) -> list[float]:
    """The scripted server's vector of ``text``: a unit-length hashed bag of words of
    ``dim`` dimensions (each word adds +-1 at a position its SHA-256 picks), so texts
    sharing words have a high cosine similarity and the same text always the same vector."""
    vector = [0.0] * dim
    for word in _words(text):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


def rerank_score(query: str, document: str) -> float:
    """The scripted rerank score: the share of the query's distinct words found in the document."""
    wanted = set(_words(query))
    return round(len(wanted & set(_words(document))) / len(wanted), 6) if wanted else 0.0


@dataclass
class _Held:
    released: threading.Event = field(default_factory=threading.Event)
    dropped: bool = False


class EmbeddingRoutes:
    """The request handler's side (a mixin of the server's handler class)."""

    server: Any

    def _embeddings(self, body: dict[str, Any], recorded: RecordedRequest) -> None:
        owner = self.server.owner
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not texts:
            self._send_json(400, {"error": {"message": "input must be a string or a list of strings",
                                            "type": "invalid_request_error"}})
            return
        with owner._lock:
            owner.embedding_texts.extend(texts)
            scripted = owner._embedding_replies.popleft() if owner._embedding_replies else None
        if scripted is not None and scripted.status != 200:
            self._send_json(scripted.status, {"error": scripted.error or {"message": "error"}}, scripted.headers)
            return
        if not self._wait_if_held(recorded):
            return
        model = str(body.get("model", ""))
        dim = owner.dimension_of(model)
        data = []
        for i, t in enumerate(texts):
            vector = embed_text(t, dim)
            if body.get("encoding_format") == "base64" and not owner.embedding_floats_only:
                encoded: Any = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        tokens = sum(len(_words(t)) or 1 for t in texts)
        # Counted before the answer leaves: a client may read it and look at the counter
        # before this thread runs again. A send that fails takes the count back.
        with owner._lock:
            owner.embedded.update(texts)
        try:
            self._send_json(200, {"object": "list", "model": model, "data": data,
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
            self.wfile.flush()
        except OSError:
            recorded.client_closed_at = time.monotonic()
            with owner._lock:
                owner.embedded.subtract(texts)
                owner.embedded += collections.Counter()  # drops the texts counted down to 0

    def _wait_if_held(self, recorded: RecordedRequest) -> bool:
        """While embeddings are held: wait for a release (True), a drop or the client
        going away (False: the connection is closed, no vector is returned)."""
        owner = self.server.owner
        model = str((recorded.body or {}).get("model", ""))
        with owner._lock:
            if not owner._holding or (owner._hold_models and model not in owner._hold_models):
                return True
            if owner._hold_skip > 0:
                owner._hold_skip -= 1
                return True
            slot = _Held()
            owner._held.append(slot)
        try:
            while not owner._stopping.is_set():
                released = slot.released.wait(0.02)
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable:  # looked at after a release too: a dead client gets no vector
                    try:
                        gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                    except OSError:
                        gone = True
                    if gone:
                        recorded.client_closed_at = time.monotonic()
                        self.close_connection = True
                        return False
                if released:
                    break
            if slot.dropped or owner._stopping.is_set():
                self._drop()
                return False
            return True
        finally:
            with owner._lock:
                if slot in owner._held:
                    owner._held.remove(slot)

    def _rerank(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(documents, list):
            self._send_json(400, {"error": {"message": "query (a string) and documents (a list) are required",
                                            "type": "invalid_request_error"}})
            return
        with owner._lock:
            scripted = owner._embedding_replies.popleft() if owner._embedding_replies else None
            owner.rerank_calls += 1
        if scripted is not None and scripted.status != 200:
            self._send_json(scripted.status, {"error": scripted.error or {"message": "error"}}, scripted.headers)
            return
        texts = [d if isinstance(d, str) else str((d or {}).get("text", "")) for d in documents]
        scored = sorted(((i, rerank_score(query, t)) for i, t in enumerate(texts)), key=lambda p: (-p[1], p[0]))
        top_n = body.get("top_n")
        if isinstance(top_n, int) and top_n > 0:
            scored = scored[:top_n]
        tokens = len(_words(query)) * len(texts) + sum(len(_words(t)) for t in texts)
        self._send_json(200, {"model": body.get("model", ""), "usage": {"total_tokens": tokens},
                              "results": [{"index": i, "relevance_score": s} for i, s in scored]})


class EmbeddingControls:
    """The server's side (a mixin of :class:`~tests.support.openai_server.ScriptedOpenAIServer`):
    the counters, the options and the controls of held requests."""

    _lock: threading.Lock
    requests: list[Any]

    def _init_embeddings(self) -> None:
            #: model name -> dimension of its vectors (else a ``dimNN`` in the name, else 64)
            self.embedding_dims: dict[str, int] = {}
            #: seconds every embeddings / rerank request waits before its answer (0: none)
            self.embedding_latency = 0.0
            #: answer lists of floats whatever ``encoding_format`` asks (as Ollama and llama.cpp do)
            self.embedding_floats_only = False
            #: text -> times its vector was returned (only answers that reached the client)
            self.embedded: collections.Counter[str] = collections.Counter()
            #: every text received by /v1/embeddings, answered or not, in order
            self.embedding_texts: list[str] = []
            self.rerank_calls = 0
            self._embedding_replies: collections.deque[Reply] = collections.deque()
            self._holding = False
            self._hold_models: set[str] = set()
            self._hold_skip = 0
            self._held: list[_Held] = []

    def dimension_of(self, model: str) -> int:
        """The dimension of ``model``'s vectors: :attr:`embedding_dims`, else the number
        after ``dim`` in the name (``embed-dim32``), else 64."""
        if model in self.embedding_dims:
            return self.embedding_dims[model]
        match = re.search(r"dim(\d+)", model)
        return int(match.group(1)) if match else 64

    @property
    def embedding_calls(self) -> int:
        """``/v1/embeddings`` requests received."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.rstrip("/") == "/v1/embeddings")

    def script_embeddings(self, *replies: Reply) -> ScriptedOpenAIServer:
        """Queue replies (``http_error(...)``, ``rate_limited()``) for the next embeddings
        or rerank requests; a 200 ``reply()`` answers normally."""
        with self._lock:
            self._embedding_replies.extend(replies)
        return self

    def hold_embeddings(self, *models: str, skip: int = 0) -> None:
        """Make the next embeddings requests (for those upstream ``models`` only, when
        named; after letting ``skip`` of them through) wait, sending nothing, until
        released or dropped."""
        with self._lock:
            self._holding, self._hold_models, self._hold_skip = True, set(models), skip

    @property
    def held(self) -> int:
        """Embeddings requests waiting now."""
        with self._lock:
            return len(self._held)

    def wait_held(self, count: int = 1, timeout: float = 30.0) -> None:
        """Return once ``count`` embeddings requests are held. Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while self.held < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.held} embeddings request(s) held after {timeout} s, wanted {count}")
            time.sleep(0.01)

    def release_embeddings(self) -> None:
        """Stop holding: the held requests are answered (if their client is still there)."""
        with self._lock:
            self._holding = False
            for slot in self._held:
                slot.released.set()

    def drop_embeddings(self) -> None:
        """Stop holding: the held requests' connections are closed with no answer."""
        with self._lock:
            self._holding = False
            for slot in self._held:
                slot.dropped = True
                slot.released.set()
