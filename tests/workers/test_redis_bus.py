"""The Redis event publisher against a real Redis server: when events reach a run's stream."""

from __future__ import annotations

import asyncio
import time

from schemas.events import RunStarted
from workers.redis_bus import RedisEventBus, redis_client


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
