"""Size limits of the HTTP API: request bodies and workflow documents.

:class:`BodyLimit` is an ASGI middleware that refuses a request body larger than
``Settings.max_request_bytes`` with 413, without reading it into memory: a
``Content-Length`` over the cap is answered before the app runs (the body is never
read by the app); a body without one (chunked) is counted as its chunks arrive, and
the chunk that crosses the cap ends the request with 413. What arrives after the
response is dropped by the server (uvicorn), never kept: no part of the app ever holds
more than the cap of a body, and the server goes on serving the next requests.

:func:`check_document` applies the operator's document caps (``max_nodes``,
``max_id_length``, ``max_name_length``, ``max_document_depth``) of the *app's*
settings to a workflow document before anything else looks at it: 422 with one
problem per field over a cap, each naming its path (``nodes[3].name``), never echoing
the whole value back. :func:`check_published` does the same for a published version,
remembering the outcome by the version's content hash: a published version's run starts
check one document over and over.

:class:`JsonBodyCheck` is an ASGI middleware that looks at a JSON body as the app reads
it and refuses with 422 (:class:`api.errors.BodyRefused`) what the JSON parser accepts
but the API cannot use: nesting deeper than :data:`api.json_body.MAX_JSON_DEPTH`, and a
lone UTF-16 surrogate (``"\\ud800"``), named by its field's path. Doing it where the
body is read covers every route alike, those FastAPI parses and those that parse their
own body, before a value reaches a store or a model.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.documents import DocumentCaps, checked_document_text, document_caps
from engine.settings import Settings

from .errors import body_problem, error_body, is_json_type, shaped_error
from .json_body import MAX_JSON_DEPTH, may_hold_surrogate

__all__ = ["BodyLimit", "BodyTooLarge", "JsonBodyCheck", "check_document", "check_published"]

#: canonical texts of published documents found within the caps, by (content hash, caps)
_PUBLISHED: OrderedDict[tuple[str, DocumentCaps], str] = OrderedDict()
#: how many :data:`_PUBLISHED` keeps, and the longest text it keeps (characters): at most
#: 16 MiB; a longer document is checked at each start, a small cost next to its run's
_PUBLISHED_MAX, _PUBLISHED_CHARS = 256, 65536


class BodyTooLarge(HTTPException):
    """413: the request body is over ``max_request_bytes`` (an HTTP exception, so the
    app's error handlers answer it with the JSON error shape wherever it is raised)."""

    def __init__(self, cap: int) -> None:
        super().__init__(
            413,
            f"the request body is larger than the server's limit of {cap} bytes (FLOWLOOM_MAX_REQUEST_BYTES)",
        )


class BodyLimit:
    """ASGI middleware refusing request bodies over ``max_bytes`` with 413 (module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:  # raised where no handler of the app could answer it
                await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        """413 in the error shape of the path's endpoint (OpenAI's on the OpenAI-compatible
        paths), as the app's own handlers would answer it."""
        status, error, extra = shaped_error(
            scope.get("path", ""), 413, error_body("payload_too_large", BodyTooLarge(self.max_bytes).detail)
        )
        body = json.dumps(error).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *((k.encode(), v.encode()) for k, v in extra.items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class JsonBodyCheck:
    """ASGI middleware refusing a JSON body too deep or holding a lone surrogate (module
    docstring). Each chunk is scanned as it passes (C-speed counts and one regex over the
    chunk and the end of the one before); the body is joined and looked at as a whole
    only when a chunk gave cause, once the last chunk arrived, before the app gets it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_json_type(_header(scope, b"content-type")):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        openers = 0
        suspect = False
        tail = b""

        async def checking_receive() -> Message:
            nonlocal openers, suspect, tail
            message = await receive()
            if message["type"] != "http.request":
                return message
            chunk = message.get("body", b"")
            if chunk:
                chunks.append(chunk)
                openers += chunk.count(b"[") + chunk.count(b"{")
                joined = tail + chunk
                suspect = suspect or may_hold_surrogate(joined)
                tail = joined[-12:]  # an escape pair split between two chunks
            if not message.get("more_body", False) and (suspect or openers > MAX_JSON_DEPTH):
                refused = body_problem(b"".join(chunks), suspect)
                if refused is not None:
                    raise refused
            return message

        await self.app(scope, checking_receive, send)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def check_document(doc: Mapping[str, Any], settings: Settings) -> tuple[str, DocumentCaps]:
    """Refuse a document over the caps of ``settings``; else its canonical JSON text and
    those caps, which the compile of a run start takes instead of checking and encoding
    the document again (``StartRun.checked``, :func:`engine.documents.canonical_document`).

    Raises:
        CompileError: with one problem per cap exceeded (``too_many_nodes`` at ``nodes``,
        ``too_long`` at ``nodes[i].name``..., ``document_too_deep``); answered 422.
    """
    return checked_document_text(doc, settings)


def check_published(doc: Mapping[str, Any], doc_hash: str, settings: Settings) -> tuple[str, DocumentCaps]:
    """:func:`check_document` of a published version's document ``doc``, whose content
    hash (SHA-256 of its canonical text, ``engine.compiler.content_hash``) is ``doc_hash``.

    The hash names the text, so a document found within the caps of ``settings`` is not
    walked and encoded again while those caps hold: the text is remembered by
    ``(doc_hash, caps)`` (at most :data:`_PUBLISHED_MAX` texts of up to
    :data:`_PUBLISHED_CHARS` characters). Caps changed since are another key, checked
    afresh; a document over them is never remembered and raises each time.

    Raises:
        CompileError: as :func:`check_document`.
    """
    caps = document_caps(settings)
    key = (doc_hash, caps)
    text = _PUBLISHED.get(key)
    if text is not None:
        _PUBLISHED.move_to_end(key)
        return text, caps
    text, caps = checked_document_text(doc, settings)
    if len(text) <= _PUBLISHED_CHARS:
        _PUBLISHED[(doc_hash, caps)] = text
        while len(_PUBLISHED) > _PUBLISHED_MAX:
            _PUBLISHED.popitem(last=False)
    return text, caps
