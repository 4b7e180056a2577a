"""A backlog is not an orphan: queued runs that wait in their queue longer than the pending
grace are left to the queue by the recovery loop - asked about in one Redis round trip for
the whole look - while a pending run whose job never reached the queue is still recovered."""

from __future__ import annotations

from redis import Redis

from engine.recovery import OrphanRecovery
from tests.workers.rq.conftest import chain, open_api, post
from workers.rq.recovery import still_queued


async def test_runs_waiting_in_the_queue_are_not_handed_to_recovery_but_a_run_never_queued_is(deployment, counter):
    redis = Redis.from_url(deployment.redis_url)
    doc = chain("backlog", [post("a", f"{counter.url}/hit/a")])
    async for api in open_api(deployment, recovery_concurrency=0):  # no worker: every job waits
        waiting = []
        for _ in range(3):
            reply = await api.start(doc)
            assert reply.status_code == 202, reply.text
            waiting.append(reply.json()["run_id"])
        lost = (await api.service.prepare(doc, {})).run_id  # stored, its job never queued (a process died)

        handed: list[str] = []

        async def recover_one(summary, handed: list[str] = handed) -> None:
            handed.append(summary.run_id)

        calls = redis.info("commandstats").get("cmdstat_hget", {}).get("calls", 0)
        recovery = OrphanRecovery(api.service, recover_one, pending_grace_s=0,
                                  still_queued=lambda found: still_queued(redis, found))
        assert await recovery.scan() == [lost]
        assert redis.info("commandstats")["cmdstat_hget"]["calls"] - calls == 4, "one status read per run"
        for task in list(recovery._busy.values()):
            await task
        assert handed == [lost]

        without = OrphanRecovery(api.service, recover_one, pending_grace_s=0)  # what a look did before
        assert sorted(await without.scan()) == sorted([*waiting, lost])
        for task in list(without._busy.values()):
            await task
        assert counter.names() == [], "nothing executed"
    redis.close()
