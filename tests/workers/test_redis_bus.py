"""The Redis event bus against a real Redis server: when events reach a run's stream (the
publisher), and how a follower merges the stream with the SQL log (never skipping an event
of the stream, deltas included, never repeating one)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from redis.exceptions import ResponseError

from schemas.events import RunStarted
from workers.redis_bus import RedisEventBus, _pack, _round_trip, redis_client


def event(seq: int) -> RunStarted:
    return RunStarted(seq=seq, run_id="r1", ts=time.time(), workflow_id="w", inputs={})


async def test_publisher_sends_at_once_after_a_quiet_spell_then_at_most_once_per_gap(redis_url):
    bus = RedisEventBus(redis_url)
    client = redis_client(redis_url)
    key = bus.key("default", "r1")
    publisher = bus.publisher("default", "r1")
    publisher.gap_s = 0.5

    async def seqs() -> list[int]:
        return [int(fields["seq"]) for _, fields in await client.xrange(key)]

    publisher.add(event(1))
    await asyncio.sleep(0.1)
    assert await seqs() == [1], "the first event goes at once"
    publisher.add(event(2))
    publisher.add(event(3))
    await asyncio.sleep(0.1)
    assert await seqs() == [1], "events within the gap wait for it"
    await asyncio.sleep(0.5)
    assert await seqs() == [1, 2, 3], "then travel together"
    publisher.add(event(4))
    await asyncio.sleep(0.05)
    assert await seqs() == [1, 2, 3], "the gap counts from the last send"
    started = asyncio.get_running_loop().time()
    await publisher.close(ended=False, also=lambda pipe: pipe.set(f"{key}:also", "1"))
    assert asyncio.get_running_loop().time() - started < 0.3, "a close does not wait out the gap"
    assert await seqs() == [1, 2, 3, 4]
    assert await client.get(f"{key}:also") == "1", "the close's own commands went with the last events"


async def test_one_round_trip_sends_what_redis_py_would_and_reads_every_reply(redis_url):
    """The publisher's raw request: byte for byte what redis-py packs (str, int, float,
    bytes, non-ASCII text, a command name with a space), replies in order; an error
    reply is raised only once every reply was read, so the pooled connection stays in
    step and the next request on it gets its own replies."""
    from redis.asyncio.connection import Connection

    client = redis_client(redis_url)
    pipe = client.pipeline(transaction=False)
    pipe.xadd("rt:s", {"seq": 7, "type": "node_delta", "data": "héllo ✓"}, maxlen=100, approximate=True)
    pipe.zadd("rt:z", {"r1": 1.5})
    pipe.set("rt:b", b"\x00\xff")
    pipe.execute_command("CONFIG GET", "maxmemory")
    stack = pipe.command_stack
    connection = Connection()
    assert _pack(connection.encoder, stack) == b"".join(connection.pack_commands([args for args, _ in stack]))
    replies = await _round_trip(client, pipe)
    assert replies[1:3] == [1, "OK"] and "maxmemory" in replies[3]
    assert (await client.xrange("rt:s"))[0][1] == {"seq": "7", "type": "node_delta", "data": "héllo ✓"}

    failing = client.pipeline(transaction=False)
    failing.set("rt:k", "v")
    failing.incr("rt:k")  # not an integer: an error reply in the middle
    failing.get("rt:k")
    with pytest.raises(ResponseError):
        await _round_trip(client, failing)
    assert await client.get("rt:k") == "v", "the commands around the error ran"
    again = client.pipeline(transaction=False)
    again.get("rt:k")
    again.exists("rt:s")
    assert await _round_trip(client, again) == ["v", 1], "no reply of the failed request was left behind"


async def test_a_round_trip_whose_replies_do_not_come_in_time_drops_its_connection(redis_url):
    """The replies of one request share one deadline, the connection's socket timeout: a
    reply that does not come within it ends the request with redis-py's TimeoutError (the
    callers back off and send again), and the connection, which still owes that reply, is
    dropped instead of going back to the pool out of step."""
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import TimeoutError as RedisTimeoutError

    client = Redis.from_url(redis_url, decode_responses=True, socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    try:
        slow = client.pipeline(transaction=False)
        slow.set("rt:t", "1")
        slow.blpop(["rt:empty"], timeout=2)  # Redis answers after 2 s
        started = time.monotonic()
        with pytest.raises(RedisTimeoutError):
            await _round_trip(client, slow)
        assert time.monotonic() - started < 1.5, "the deadline, not the slow reply, ended the request"
        assert not any(c.is_connected for c in client.connection_pool._available_connections)
        again = client.pipeline(transaction=False)
        again.get("rt:t")
        again.exists("rt:empty")
        assert await _round_trip(client, again) == ["1", 0], "the next request gets its own replies"
    finally:
        await client.aclose()


# ------------------------------------------------------------------ following a run
#
# The stream is written here as a worker's publisher writes it (one entry per event, in seq
# order); ``durable`` plays the SQL log, which holds every event but the text deltas. The
# hooks run at the exact moment the follower reads the log, so each timing is forced.

DURABLE = "node_finished"


def stream_event(seq: int, kind: str = "node_delta") -> dict:
    return {"seq": seq, "type": kind, "run_id": "r1"}


async def publish(client, key: str, *events: dict) -> None:
    for item in events:
        await client.xadd(key, {"seq": item["seq"], "type": item["type"], "data": json.dumps(item)})


class SqlLog:
    """The SQL event log of one run: its durable events; ``on_read(after)`` runs at each read."""

    def __init__(self, *events: dict, on_read=None) -> None:
        self.events, self.on_read, self.reads = list(events), on_read, 0

    async def read(self, after: int) -> list[dict]:
        self.reads += 1
        if self.on_read is not None:
            await self.on_read(after)
        return [e for e in self.events if e["seq"] > after]


async def follow(bus: RedisEventBus, log: SqlLog, *, after: int = 0, ended=None, block_ms: int = 100) -> list[int]:
    async def run_ended() -> bool:
        return bool(ended and ended())

    async def collect() -> list[int]:
        return [e["seq"] async for e in bus.follow("default", "r1", after, durable=log.read, ended=run_ended,
                                                  block_ms=block_ms)]

    return await asyncio.wait_for(collect(), 20)


async def test_a_follower_does_not_skip_deltas_published_while_it_reads_the_sql_log(redis_url):
    bus, client = RedisEventBus(redis_url), redis_client(redis_url)
    key = bus.key("default", "r1")
    head = [stream_event(1, "run_started"), stream_event(2, DURABLE), stream_event(3), stream_event(4, DURABLE)]
    deltas = [stream_event(seq) for seq in range(5, 13)]
    tail = [stream_event(13, DURABLE), stream_event(14, "run_finished")]
    await publish(client, key, *head)
    caught_up = asyncio.Event()

    async def worker_catches_up(after: int) -> None:
        # The read that timed out is over; while the follower asks the SQL log, the worker
        # publishes its deltas and commits the node's end.
        if after == 4 and not caught_up.is_set():
            await publish(client, key, *deltas, tail[0])
            log.events.append(tail[0])
            caught_up.set()

    log = SqlLog(head[0], head[1], head[3], on_read=worker_catches_up)
    task = asyncio.create_task(follow(bus, log))
    await asyncio.wait_for(caught_up.wait(), 20)
    await publish(client, key, tail[1])
    log.events.append(tail[1])
    assert await task == list(range(1, 15)), "every event of the stream once, deltas included, in order"


async def test_a_follower_waits_for_deltas_the_publisher_sends_after_the_sql_log_has_the_next_event(redis_url):
    bus, client = RedisEventBus(redis_url), redis_client(redis_url)
    key = bus.key("default", "r1")
    head = [stream_event(1, "run_started"), stream_event(2, DURABLE)]
    await publish(client, key, *head)
    late = asyncio.Event()

    async def committed_before_published(after: int) -> None:
        if after == 2:
            late.set()  # the SQL log has event 6; deltas 3-5 and event 6 are not on the stream yet

    log = SqlLog(head[0], head[1], stream_event(6, DURABLE), stream_event(7, "run_finished"),
                 on_read=committed_before_published)
    task = asyncio.create_task(follow(bus, log, block_ms=1000))
    await asyncio.wait_for(late.wait(), 20)
    await publish(client, key, stream_event(3), stream_event(4), stream_event(5), stream_event(6, DURABLE),
                  stream_event(7, "run_finished"))
    assert await task == [1, 2, 3, 4, 5, 6, 7]


async def test_a_follower_fills_in_from_the_sql_log_what_the_stream_never_had(redis_url):
    bus, client = RedisEventBus(redis_url), redis_client(redis_url)
    key = bus.key("default", "r1")
    # 1-3 published by a worker; 4-6 executed where nothing publishes (5, a delta, is lost);
    # 7-9 published again.
    await publish(client, key, stream_event(1, "run_started"), stream_event(2), stream_event(3, DURABLE),
                  stream_event(7, DURABLE), stream_event(8), stream_event(9, "run_finished"))
    log = SqlLog(stream_event(1, "run_started"), stream_event(3, DURABLE), stream_event(4, DURABLE),
                 stream_event(6, DURABLE), stream_event(7, DURABLE), stream_event(9, "run_finished"))
    assert await follow(bus, log) == [1, 2, 3, 4, 6, 7, 8, 9]
    assert await follow(bus, log, after=5) == [6, 7, 8, 9], "a follower re-attaching after 5"


async def test_a_follower_reads_a_trimmed_streams_start_from_the_sql_log_and_the_rest_from_the_stream(redis_url):
    bus, client = RedisEventBus(redis_url), redis_client(redis_url)
    key = bus.key("default", "r1")
    await publish(client, key, *(stream_event(seq) for seq in range(6, 10)), stream_event(10, "run_finished"))
    log = SqlLog(stream_event(1, "run_started"), stream_event(3, DURABLE), stream_event(8, DURABLE),
                 stream_event(10, "run_finished"))
    assert await follow(bus, log) == [1, 3, 6, 7, 8, 9, 10], "the deltas 6-9 come from the stream"


async def test_a_follower_of_a_run_nothing_publishes_reads_the_sql_log_past_the_deltas(redis_url):
    bus = RedisEventBus(redis_url)
    log = SqlLog(stream_event(1, "run_started"), stream_event(2, DURABLE), stream_event(5, DURABLE),
                 stream_event(6, "run_finished"))
    assert await follow(bus, log, block_ms=50) == [1, 2, 5, 6]
    stopped = SqlLog(stream_event(1, "run_cancelled"))
    assert await follow(bus, stopped, block_ms=5000) == [1], "a run ended in SQL only is read at once"
    assert stopped.reads == 1
