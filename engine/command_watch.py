"""The command channel watched for every run executing in this process, with one poll.

Each executing run must see a ``cancel`` command sent to it (by a stop through the API,
``flowloom runs stop`` in another process...) within :data:`COMMAND_POLL_S` seconds plus
one node step. Polling the channel once per run and interval made the command poll the
largest single read of a short run at concurrency: sixteen runs in flight, up to 160
reads a second. :class:`CommandWatch` holds every run executing here and polls for all
of those that are due in one read (the channel's ``poll_many`` when it has one; else
``poll`` per run, as a channel served from memory does not need more).

When a run is polled: first :data:`COMMAND_POLL_S` after it started (a run that ends
sooner never reads the channel), then every :data:`COMMAND_POLL_S`. Until the first
watched run is due the poll is a timer of the loop, not a task (:mod:`engine.deferred`):
runs that all end within the interval - most queued runs of instant nodes, one after
another - create, step and cancel no task. A read serves every
run due within the next half interval too, so runs started at different moments share
reads (at most about two a second per interval, however many runs execute) and none
waits longer than the interval. A store that is away (StoreError) is read again at the
next round; a command sent meanwhile is seen then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.records import CommandKind, RunCommand

from .context import CancelToken
from .deferred import Deferred
from .ports import StoreError

__all__ = ["COMMAND_POLL_S", "CommandWatch"]

#: seconds between two polls for commands (cancel is seen within this plus one node step)
COMMAND_POLL_S = 0.1


@dataclass(slots=True)
class _Watched:
    """A run being watched: its cancel token, the last command id it saw and when it is
    next due (``time.monotonic()`` seconds)."""

    token: CancelToken
    after: int
    due: float


class CommandWatch:
    """The runs executing in this process and the one task that polls ``channel`` for
    them (module docstring). The task runs while some run is watched, from the first due
    poll on."""

    def __init__(self, channel: Any, interval_s: float = COMMAND_POLL_S) -> None:
        """``channel``: the engine's ``CommandChannel`` port (``poll``; ``poll_many`` when it
        can read many runs at once); ``interval_s``: seconds between two polls of a run."""
        self.channel, self.interval_s = channel, interval_s
        self._runs: dict[str, _Watched] = {}
        #: the poll: a timer until the first watched run is due, then its task
        self._poller: Deferred | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop ``_poller`` belongs to

    def watch(self, run_id: str, token: CancelToken) -> None:
        """Watch ``run_id`` until :meth:`unwatch`: a cancel command for it fires ``token``."""
        self._runs[run_id] = _Watched(token, 0, time.monotonic() + self.interval_s)
        loop = asyncio.get_running_loop()
        poller = self._poller
        if poller is None or self._loop is not loop or (poller.task is not None and poller.task.done()):
            # nothing is due before this run's first poll, an interval from now
            self._poller, self._loop = Deferred(self.interval_s, self._forever), loop

    def unwatch(self, run_id: str) -> None:
        """Stop watching ``run_id`` (its execution ended); the poll stops with the last run,
        even in the middle of a read (as a run's own poll stopped when the run ended)."""
        self._runs.pop(run_id, None)
        if not self._runs and self._poller is not None:
            self._poller.cancel()
            self._poller = None

    async def _forever(self) -> None:
        while self._runs:
            wait = min(w.due for w in self._runs.values()) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            else:
                await self._round()

    async def _round(self) -> None:
        """Poll every run due within half an interval, in one read where the channel can."""
        horizon = time.monotonic() + self.interval_s / 2
        ready = [w for w in self._runs.values() if w.due <= horizon]
        due = {
            run_id: w.after for run_id, w in self._runs.items() if w.due <= horizon and not w.token.cancelled
        }
        try:  # a cancelled run has nothing more to hear: not read
            found = await self._poll(due) if due else {}
        except StoreError:  # the store is away: a command sent meanwhile is read at the next round
            found = {}
        finally:  # the next read an interval after this one ended, as a run's own poll waited
            after = time.monotonic() + self.interval_s
            for watched in ready:
                watched.due = after
        for run_id, commands in found.items():
            if (target := self._runs.get(run_id)) is None:  # ended meanwhile
                continue
            for command in commands:
                target.after = max(target.after, command.id)
                if command.kind is CommandKind.cancel:
                    target.token.cancel(command.reason or "cancelled by request")

    async def _poll(self, due: Mapping[str, int]) -> Mapping[str, list[RunCommand]]:
        many = getattr(self.channel, "poll_many", None)
        if many is not None:
            found: Mapping[str, list[RunCommand]] = await many(due)
            return found
        return {run_id: await self.channel.poll(run_id, after) for run_id, after in due.items()}
