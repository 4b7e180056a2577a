"""Server-sent events: the wire format, heartbeats and errors as events.

A stream is made of *frames* ``(event, id, data)``: ``event`` is the type (the run
events' own ``type``, or ``meta`` / ``error`` / ``done``), ``id`` the run event's
``seq`` (None for the frames that are not run events, which then leave the client's
``Last-Event-ID`` as it was) and ``data`` a JSON object::

    event: node_finished
    id: 4
    data: {"type": "node_finished", "seq": 4, ...}

:func:`event_stream` turns an async iterator of frames into the text of the stream:
a comment line (``: keep-alive``) after every ``heartbeat_s`` seconds without a
frame, so proxies keep the connection open and a client sees it is alive; an exception
from the frames, once the stream has started, becomes one ``error`` frame and the end
of the stream, never a silent disconnect. :class:`EventStreamResponse` closes the
frames' iterator when the client goes away (the run itself is not the stream's to stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.telemetry import telemetry

from .errors import describe

__all__ = ["EventStreamResponse", "Frame", "HEARTBEAT", "event_stream", "format_frame", "with_heartbeats"]

Frame = tuple[str, "int | None", dict[str, Any]]
HEARTBEAT = ": keep-alive\n\n"
_DONE: Any = object()


def format_frame(event: str, event_id: int | None, data: dict[str, Any]) -> str:
    """One SSE message (``data`` as one line of JSON: orjson's, or for what it refuses -
    an integer past 64 bits - the standard library's; a value JSON has no type for as its
    ``str``)."""
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    try:
        text = orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return head + "data: " + text + "\n\n"


async def _pump(frames: AsyncIterator[Frame], queue: asyncio.Queue[Any]) -> None:
    try:
        async for frame in frames:
            await queue.put(frame)
        await queue.put(_DONE)
    except Exception as exc:
        await queue.put(exc)


async def with_heartbeats(queue: asyncio.Queue[Any], seconds: float) -> AsyncIterator[Any]:
    """The items of ``queue`` as they arrive, and :data:`HEARTBEAT` after every ``seconds``
    of silence (an idle stream must still show proxies and clients it is alive); endless:
    the reader stops when it has what it waits for."""
    while True:
        if not queue.empty():  # no timer for an item that is there (wait_for costs a task)
            yield queue.get_nowait()
            continue
        try:
            item = await asyncio.wait_for(queue.get(), seconds)
        except TimeoutError:
            item = HEARTBEAT
        yield item


async def event_stream(frames: AsyncIterator[Frame], heartbeat_s: float) -> AsyncIterator[str]:
    """The text of the stream of ``frames`` with heartbeats; an error ends it with an
    ``error`` frame. Closing this iterator closes ``frames``."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)
    pump = asyncio.create_task(_pump(frames, queue))
    try:
        async for item in with_heartbeats(queue, heartbeat_s):
            if item is HEARTBEAT:
                yield HEARTBEAT
                continue
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                _status, body, _headers = describe(item)
                yield format_frame("error", None, body)
                return
            yield format_frame(*item)
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pump
        with contextlib.suppress(Exception):
            await frames.aclose()  # type: ignore[attr-defined]  # the frames are an async generator


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` without caching or proxy buffering; the body iterator is
    closed however the response ends (finished, or the client went away)."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[str], status_code: int = 200) -> None:
        super().__init__(
            content, status_code=status_code, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        telemetry().subscribers(1)
        try:
            await super().__call__(scope, receive, send)
        except (OSError, ClientDisconnect):
            pass  # the client went away: nothing left to tell it
        finally:
            telemetry().subscribers(-1)
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]  # an async generator
