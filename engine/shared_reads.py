"""Reads shared by the callers that need the same thing at the same time.

A remembered value that expires (an API key, a tenant's quota limits or model registry,
each remembered for about a second) is needed by every request in flight at that
moment: sixteen concurrent runs meant up to sixteen reads of the same rows, each on the
store's one connection. :class:`SharedReads` lets the first caller read and the others
wait for that read. The read runs as a task of its own, so a caller that is cancelled
(its client went away) does not cancel it for the others; its error reaches every
caller of it; the next caller after it ended reads again.

A change to what is read (a key revoked, limits set) must not be undone by a read that
started before it: :meth:`SharedReads.forget` drops the reads in flight (later callers
read anew) and advances :attr:`SharedReads.epoch`; a read remembers its value only when
the epoch it started in is still the current one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["SharedReads"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class SharedReads(Generic[K]):
    """Reads in flight by key (module docstring)."""

    def __init__(self) -> None:
        self._reading: dict[K, asyncio.Future[Any]] = {}
        #: advanced by every :meth:`forget`: a read that started in an older epoch is not remembered
        self.epoch = 0

    async def read(self, key: K, read: Callable[[], Awaitable[T]]) -> T:
        """``await read()``, or the read of ``key`` already in flight (its value or error)."""
        reading = self._reading.get(key)
        if reading is None or reading.get_loop() is not asyncio.get_running_loop():
            reading = self._reading[key] = asyncio.ensure_future(read())
            reading.add_done_callback(lambda done: self._done(key, done))
        result: T = await asyncio.shield(reading)
        return result

    def forget(self, match: Callable[[K], bool] | None = None) -> None:
        """What is read changed: reads in flight of keys that ``match`` (default: all) serve
        who joined them but nobody after, and none started before now is remembered."""
        self.epoch += 1
        for key in [key for key in self._reading if match is None or match(key)]:
            del self._reading[key]

    def _done(self, key: K, done: asyncio.Future[Any]) -> None:
        if self._reading.get(key) is done:
            del self._reading[key]
        if not done.cancelled():
            done.exception()  # retrieved: a read nobody awaits any more is not reported as lost
