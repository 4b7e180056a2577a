"""Run store: the same behaviour on local files and on a real Redis (issue 5)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from engine import compile_workflow, run_workflow
from workers.memory import LocalMemoryStore, RedisMemoryStore
from workers.run_store import RunNotFound, RunStore
from tests.support.workflows import build, edge, node

DOC = build([node("ask", "user_select", {"description": "Go?", "options": [{"id": "go", "label": "Go"}]}),
             node("done", "answer", {"text": "went"})],
            [edge("start", "ask"), edge("ask", "done", "go")], id="store_wf")


@pytest.fixture(params=["local", "redis"])
def make_store(request, tmp_path):
    namespace = f"t{uuid.uuid4().hex[:8]}"
    if request.param == "local":
        return lambda: RunStore(LocalMemoryStore(tmp_path / "runs", namespace=namespace))
    url = request.getfixturevalue("redis_url")
    return lambda: RunStore(RedisMemoryStore(url, namespace=namespace))


def test_paused_run_round_trips_through_a_new_store_instance(make_store):
    plan = compile_workflow(DOC)

    async def scenario():
        state = await run_workflow(plan, {}, chat_id="chat-1")
        assert state.status == "paused"
        first = make_store()
        await first.save(state, DOC)
        await first.close()
        second = make_store()  # another process, after a restart
        try:
            loaded, doc = await second.load(state.run_id)
            assert loaded == state and doc == DOC
            assert await second.paused_run_for_chat("chat-1") == state.run_id
            assert await second.paused_run_for_chat("other") is None
            with pytest.raises(RunNotFound, match="no saved run 'nope'"):
                await second.load("nope")
        finally:
            await second.close()

    asyncio.run(scenario())


def test_finishing_the_run_clears_the_chat_index(make_store):
    plan = compile_workflow(DOC)

    async def scenario():
        from engine import resume_run

        store = make_store()
        try:
            state = await run_workflow(plan, {}, chat_id="chat-2")
            await store.save(state, DOC)
            (iid,) = state.interrupts
            state = await resume_run(plan, state, answers={iid: "go"})
            assert state.status == "succeeded"
            await store.save(state, DOC)
            assert await store.paused_run_for_chat("chat-2") is None
            loaded, _ = await store.load(state.run_id)
            assert loaded.status == "succeeded" and loaded.answer == "went"
        finally:
            await store.close()

    asyncio.run(scenario())
