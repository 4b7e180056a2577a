"""The process's command watch (engine.command_watch) over the SQL store, on SQLite and
PostgreSQL: a cancel sent to one of many watched runs fires that run's token only, within
the poll interval; the runs share reads; a channel without ``poll_many`` is polled per run."""

from __future__ import annotations

import asyncio
import time

from engine.command_watch import CommandWatch
from engine.context import CancelToken
from schemas.records import RunCommand

from .conftest import new_state

INTERVAL_S = 0.05


class _Counting:
    """The store as a command channel, counting its reads (``poll_many`` kept or hidden)."""

    def __init__(self, store, many: bool) -> None:
        self.store, self.reads, self.runs_read = store, 0, 0
        if many:
            self.poll_many = self._poll_many

    async def poll(self, run_id, after_id=0):
        self.reads += 1
        self.runs_read += 1
        return await self.store.poll(run_id, after_id)

    async def _poll_many(self, runs):
        self.reads += 1
        self.runs_read += len(runs)
        return await self.store.poll_many(runs)


async def _until(check, seconds: float = 5.0) -> float:
    """Seconds until ``check()`` held (AssertionError when it did not within ``seconds``)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, "not within the time allowed"
        await asyncio.sleep(0.005)
    return time.monotonic() - start


async def _watched(store, many: bool, runs: int = 8):
    states = [new_state() for _ in range(runs)]
    for state in states:
        await store.create_run(state)
    channel = _Counting(store, many)
    watch = CommandWatch(channel, INTERVAL_S)
    tokens = {}
    for state in states:
        tokens[state.run_id] = CancelToken()
        watch.watch(state.run_id, tokens[state.run_id])
        await asyncio.sleep(0.003)  # started at different moments, as runs are
    return channel, watch, tokens


async def test_a_cancel_reaches_its_run_only_and_runs_share_reads(store):
    channel, watch, tokens = await _watched(store, many=True)
    target, *others = tokens
    await asyncio.sleep(INTERVAL_S * 4)
    assert not any(token.cancelled for token in tokens.values())
    sent = time.monotonic()
    await store.send("default", RunCommand(run_id=target, kind="cancel", reason="stop it"))
    await _until(lambda: tokens[target].cancelled)
    # seen within an interval, plus a read's time and a loaded machine's scheduling
    assert time.monotonic() - sent < INTERVAL_S * 2 + 0.5
    assert tokens[target].reason == "stop it" and not any(tokens[run].cancelled for run in others)
    # eight runs polled every interval, in reads that each served several of them
    assert channel.runs_read >= 2 * len(tokens) and channel.reads * 2 <= channel.runs_read
    for run_id in tokens:
        watch.unwatch(run_id)
    reads = channel.reads
    await asyncio.sleep(INTERVAL_S * 3)
    assert channel.reads == reads  # nothing left to watch: no read


async def test_a_channel_without_poll_many_is_polled_per_run(store):
    channel, watch, tokens = await _watched(store, many=False, runs=3)
    target = next(iter(tokens))
    await store.send("default", RunCommand(run_id=target, kind="cancel", reason=""))
    await _until(lambda: tokens[target].cancelled)
    assert tokens[target].reason == "cancelled by request"
    assert sum(token.cancelled for token in tokens.values()) == 1 and channel.reads == channel.runs_read
    for run_id in tokens:
        watch.unwatch(run_id)


async def test_a_run_is_first_read_an_interval_after_it_started(store):
    channel, watch, tokens = await _watched(store, many=True, runs=1)
    (run_id,) = tokens
    watch.unwatch(run_id)  # ended within its first interval: never read
    await asyncio.sleep(INTERVAL_S * 2)
    assert channel.reads == 0


async def test_a_poll_cancelled_during_its_read_keeps_the_store_connection(store):
    """The watch stops its poll when the last run ends, often during the read: the caller is
    cancelled at once, the read runs to its end, and the store keeps its connection (on
    PostgreSQL a statement cut short used to cost a new connection every time)."""
    state = new_state()
    await store.create_run(state)
    conn = await store._connection()
    for delay in (0.0, 0.0002, 0.0005, 0.001, 0.002) * 4:
        read = asyncio.ensure_future(store.poll_many({state.run_id: 0}))
        await asyncio.sleep(delay)
        read.cancel()
        try:
            await read
        except asyncio.CancelledError:
            pass
        assert await store._connection() is conn
    await store.send(state.tenant_id, RunCommand(run_id=state.run_id, kind="cancel", reason="stop"))
    found = await store.poll_many({state.run_id: 0})
    assert [c.reason for c in found[state.run_id]] == ["stop"] and await store._connection() is conn
