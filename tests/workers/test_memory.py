"""One behaviour suite for every node memory store: the embedded files and a real Redis."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from engine import Settings
from engine.ports import NodeMemory as MemoryPort
from engine.ports import node_memory_key
from workers.memory import FileNodeMemory, NodeMemoryBase, RedisNodeMemory, node_memory_for


@pytest.fixture(params=["local", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path) -> Callable[..., NodeMemoryBase]:
    """A factory of stores on ONE backend (same directory / same server): a new
    instance stands for a restarted process."""
    namespace = f"t{uuid.uuid4().hex[:8]}"
    if request.param == "local":
        directory = tmp_path / "memory"

        def make(ns: str = namespace) -> NodeMemoryBase:
            return FileNodeMemory(directory, namespace=ns)
    else:
        url = request.getfixturevalue("redis_url")

        def make(ns: str = namespace) -> NodeMemoryBase:
            return RedisNodeMemory(url, namespace=ns)

    make.backend = request.param  # type: ignore[attr-defined]
    return make


@pytest.fixture
async def store(make_store):
    s = make_store()
    yield s
    await s.close()


VALUES: list[Any] = [
    {"category": "billing", "turn": 3, "nested": {"ok": True, "list": [1, 2.5, None, "ü"]}},
    ["a", 1, False, None],
    "plain text with \"quotes\" and 中文",
    42,
    -0.125,
    True,
    {},
    [],
]


async def test_missing_key_gives_default(store: NodeMemoryBase):
    assert await store.get("nope") is None
    assert await store.get("nope", {"d": 1}) == {"d": 1}


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
async def test_json_values_round_trip_with_their_types(store: NodeMemoryBase, value: Any):
    await store.set("k", value)
    got = await store.get("k")
    assert got == value and type(got) is type(value)


async def test_get_returns_a_copy(store: NodeMemoryBase):
    await store.set("k", {"items": [1]})
    first = await store.get("k")
    first["items"].append(2)
    assert await store.get("k") == {"items": [1]}


async def test_overwrite_and_delete(store: NodeMemoryBase):
    await store.set("k", 1)
    await store.set("k", {"v": 2})
    assert await store.get("k") == {"v": 2}
    assert await store.delete("k") is True
    assert await store.get("k") is None
    assert await store.delete("k") is False


async def test_ttl_expires_value(store: NodeMemoryBase):
    await store.set("short", "x", ttl=0.3)
    await store.set("long", "y", ttl=60)
    await store.set("forever", "z")
    assert await store.get("short") == "x"
    await asyncio.sleep(0.45)
    assert await store.get("short") is None
    assert await store.delete("short") is False
    assert await store.get("long") == "y"
    assert await store.get("forever") == "z"


async def test_set_without_ttl_clears_an_earlier_ttl(store: NodeMemoryBase):
    await store.set("k", 1, ttl=0.2)
    await store.set("k", 2)
    await asyncio.sleep(0.3)
    assert await store.get("k") == 2


@pytest.mark.parametrize("ttl", [0, -1, "10", True])
async def test_invalid_ttl_is_refused(store: NodeMemoryBase, ttl: Any):
    with pytest.raises(ValueError, match="ttl"):
        await store.set("k", 1, ttl=ttl)
    assert await store.get("k") is None


@pytest.mark.parametrize("value", [float("nan"), {1, 2}, object(), {"a": float("inf")}])
async def test_non_json_values_are_refused_and_old_value_kept(store: NodeMemoryBase, value: Any):
    await store.set("k", "old")
    with pytest.raises((TypeError, ValueError)):
        await store.set("k", value)
    assert await store.get("k") == "old"


@pytest.mark.parametrize("key", ["", None, 5])
async def test_invalid_keys_are_refused(store: NodeMemoryBase, key: Any):
    with pytest.raises(ValueError, match="key"):
        await store.get(key)
    with pytest.raises(ValueError, match="key"):
        await store.set(key, 1)


async def test_any_string_is_a_key(store: NodeMemoryBase):
    odd = ["a/b/../c", "with space", "colon:separated:key", "中文", "x" * 500]
    for i, key in enumerate(odd):
        await store.set(key, i)
    assert [await store.get(key) for key in odd] == list(range(len(odd)))


async def test_namespaces_do_not_see_each_other(make_store):
    a, b = make_store("app_a"), make_store("app_b")
    try:
        await a.set("k", "from a")
        assert await b.get("k") is None
        await b.set("k", "from b")
        assert await a.get("k") == "from a"
        assert await b.delete("k") is True
        assert await a.get("k") == "from a"
    finally:
        await a.close()
        await b.close()


async def test_values_survive_a_new_store_instance(make_store):
    first = make_store()
    await first.set(node_memory_key("t", "wf", "classify", "chat-1"), {"category": "refund"}, ttl=60)
    await first.close()
    second = make_store()  # same directory / same server: a restarted process
    try:
        assert await second.get(node_memory_key("t", "wf", "classify", "chat-1")) == {"category": "refund"}
    finally:
        await second.close()


async def test_concurrent_writes_all_land(store: NodeMemoryBase):
    await asyncio.gather(*(store.set(f"k{i}", {"i": i}) for i in range(25)))
    got = await asyncio.gather(*(store.get(f"k{i}") for i in range(25)))
    assert got == [{"i": i} for i in range(25)]


async def test_concurrent_writes_to_one_key_leave_one_whole_value(store: NodeMemoryBase):
    await asyncio.gather(*(store.set("same", {"writer": i, "pad": "x" * 2000}) for i in range(20)))
    value = await store.get("same")
    assert value["pad"] == "x" * 2000 and 0 <= value["writer"] < 20


def test_node_memory_key_names_tenant_workflow_node_and_chat():
    assert node_memory_key("t1", "wf", "n1", "c1") == "node:t1:wf:n1:c1:state"
    assert node_memory_key("t1", "wf", "n1", "c1", "last") == "node:t1:wf:n1:c1:last"
    assert node_memory_key("t2", "wf", "n1", "c1") != node_memory_key("t1", "wf", "n1", "c1")


# ------------------------------------------------------------ backend specifics


async def test_local_store_files_are_json_and_corrupt_files_count_as_missing(tmp_path):
    store = FileNodeMemory(tmp_path / "m", namespace="ns")
    await store.set("k", {"a": 1}, ttl=30)
    files = list((tmp_path / "m").glob("*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["key"] == "ns:k" and record["value"] == {"a": 1} and record["expires_at"] > 0
    files[0].write_text("{not json")
    assert await store.get("k", "default") == "default"
    assert not list((tmp_path / "m").glob(".tmp-*")), "temporary files are renamed or removed"


async def test_local_store_purges_expired_files(tmp_path):
    store = FileNodeMemory(tmp_path / "m")
    await store.set("a", 1, ttl=0.1)
    await store.set("b", 2)
    await asyncio.sleep(0.2)
    assert await store.purge_expired() == 1
    assert len(list((tmp_path / "m").glob("*.json"))) == 1
    assert await FileNodeMemory(tmp_path / "absent").purge_expired() == 0


async def test_redis_store_uses_native_expiry_and_namespaced_keys(redis_url, flowloom_redis):
    store = RedisNodeMemory(redis_url, namespace="ns")
    try:
        await store.set("k", {"a": 1}, ttl=30)
        await store.set("plain", "v")
        assert flowloom_redis.get("ns:k") == '{"a":1}'
        assert 0 < flowloom_redis.pttl("ns:k") <= 30_000
        assert flowloom_redis.ttl("ns:plain") == -1
        flowloom_redis.set("ns:garbage", "not json")
        assert await store.get("garbage", "d") == "d"
    finally:
        await store.close()


def test_redis_store_works_across_event_loops(redis_url):
    store = RedisNodeMemory(redis_url, namespace="loops")
    asyncio.run(store.set("k", 1))
    assert asyncio.run(store.get("k")) == 1  # a second loop gets its own client


def test_redis_store_needs_a_url():
    with pytest.raises(ValueError, match="FLOWLOOM_REDIS_URL"):
        RedisNodeMemory()


def test_settings_pick_local_files_under_home_or_redis(tmp_path, redis_url):
    local = node_memory_for(Settings(home=tmp_path / "home"))
    assert isinstance(local, FileNodeMemory) and local.directory == tmp_path / "home" / "memory"
    remote = node_memory_for(Settings(home=tmp_path, redis_url=redis_url))
    assert isinstance(remote, RedisNodeMemory) and remote.url == redis_url
    asyncio.run(remote.set("via-settings", 7))
    assert asyncio.run(RedisNodeMemory(redis_url).get("via-settings")) == 7


def test_both_stores_implement_the_engine_port(tmp_path, redis_url):
    assert isinstance(FileNodeMemory(tmp_path), MemoryPort)
    assert isinstance(RedisNodeMemory(redis_url), MemoryPort)
