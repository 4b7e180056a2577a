"""Conversation variables over the real SQL store (SQLite file and PostgreSQL): a chat keeps
them across turns, a variable_update node changes them, a run variable still starts
afresh every turn, a failed turn leaves them as they were, an edit between turns is what
the next turn reads, and another tenant's chat of the same id keeps its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import InvalidInputs
from engine.ports import ChatNotFound
from engine.service import RunService, Stores
from engine.settings import Settings
from nodes.llm.model_registry import get_registry
from schemas.types import RunStatus
from tests.support.catalog import TEST_CATALOG, check_workflow
from tests.support.workflows import build, chain_edges, node
from workers.sql import SqlStore

COUNTER = build(
    [node("bump", "variable_update", {"updates": [
        {"variable": "conversation.count", "operation": "add", "value": 1},
        {"variable": "n", "operation": "add", "value": 1},
        {"variable": "conversation.seen", "operation": "append", "value": {"ref": "sys.query"}}]}),
     node("gate", "if_else", {"cases": [{"id": "boom", "conditions": [
         {"left": {"ref": "sys.query"}, "operator": "equals", "right": "fail"}]}]}),
     node("bad", "probe", {"fail_times": 1}),
     node("say", "answer", {"text": "count={{ conversation.count }} n={{ vars.n }} seen={{ conversation.seen | length }}"})],
    chain_edges("start", "bump", "gate") + [
        {"id": "g-boom", "source": "gate", "sourceHandle": "boom", "target": "bad"},
        {"id": "g-else", "source": "gate", "sourceHandle": "else", "target": "say"}],
    variables=[{"name": "n", "type": "number", "default": 0}],
    conversation_variables=[{"name": "count", "type": "number", "default": 0},
                            {"name": "seen", "type": "array", "default": []}],
)


@pytest.fixture
async def store(database_url) -> Any:
    opened = await SqlStore.open(database_url)
    yield opened
    await opened.close()


def service_of(store: SqlStore, tmp_path: Path) -> RunService:
    return RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                      settings=Settings(home=tmp_path), models=get_registry())


async def turn(service: RunService, message: str, chat_id: str = "c1", tenant_id: str = "default") -> Any:
    async for _ in service.start(COUNTER, {}, chat_id=chat_id, message=message, tenant_id=tenant_id):
        pass
    runs = await service.list(tenant_id, chat_id=chat_id, limit=1)
    return await service.stores.runs.load_run(tenant_id, runs[0].run_id)


async def test_a_chat_keeps_its_counter_across_three_turns_while_run_variables_reset(store, tmp_path):
    service = service_of(store, tmp_path)
    answers = [(await turn(service, f"turn {i}")).answer for i in range(3)]
    assert answers == ["count=1 n=1 seen=1", "count=2 n=1 seen=2", "count=3 n=1 seen=3"]
    assert await store.chat_variables("default", "c1") == {"count": 3, "seen": ["turn 0", "turn 1", "turn 2"]}


async def test_a_failed_turn_leaves_the_chat_values_unchanged(store, tmp_path):
    service = service_of(store, tmp_path)
    await turn(service, "one")
    failed = await turn(service, "fail")
    assert failed.status is RunStatus.failed
    assert failed.conversation["count"] == 2, "the run itself saw its update"
    assert (await turn(service, "three")).answer == "count=2 n=1 seen=2"


async def test_an_edit_between_turns_is_what_the_next_turn_reads(store, tmp_path):
    service = service_of(store, tmp_path)
    await turn(service, "one")
    assert await store.set_chat_variables("default", "c1", {"count": 40}) == {"count": 40, "seen": ["one"]}
    assert (await turn(service, "two")).answer == "count=41 n=1 seen=2"
    with pytest.raises(ChatNotFound):
        await store.set_chat_variables("default", "nobody", {"count": 1})
    await store.set_chat_variables("default", "c1", {"count": "many"})
    with pytest.raises(InvalidInputs, match="conversation variable 'count' must be number"):
        await turn(service, "three")


async def test_each_tenant_keeps_its_own_values_for_the_same_chat_id(store, tmp_path):
    service = service_of(store, tmp_path)
    await turn(service, "a")
    await turn(service, "b")
    assert (await turn(service, "x", tenant_id="acme")).answer == "count=1 n=1 seen=1"
    assert await store.chat_variables("acme", "c1") == {"count": 1, "seen": ["x"]}
    assert (await store.chat_variables("default", "c1"))["count"] == 2


async def test_a_run_outside_a_chat_starts_from_the_defaults(store, tmp_path):
    service = service_of(store, tmp_path)
    async for _ in service.start(COUNTER, {}, message="solo"):
        pass
    [summary] = await service.list("default")
    assert (await service.stores.runs.load_run("default", summary.run_id)).answer == "count=1 n=1 seen=1"


def test_undeclared_conversation_references_are_compile_errors():
    doc = build([node("say", "answer", {"text": "{{ conversation.nope }}"}),
                 node("agg", "variable_aggregator", {"refs": [{"ref": "conversation.missing"}]})],
                chain_edges("start", "say", "agg"), conversation_variables=[{"name": "count", "type": "number"}])
    codes = {(p.node_id, p.code) for p in check_workflow(doc)}
    assert {("say", "unknown_conversation_variable"), ("agg", "unknown_conversation_variable")} <= codes
    bad_default = build([], [], conversation_variables=[{"name": "count", "type": "number", "default": "x"}])
    assert any("default of conversation variable 'count' must be number" in p.message for p in check_workflow(bad_default))


def test_an_update_of_an_undeclared_variable_is_a_compile_error():
    doc = build([node("bump", "variable_update", {"updates": [
        {"variable": "conversation.cout", "operation": "add", "value": 1},
        {"variable": "nope", "value": 1}]})], chain_edges("start", "bump"),
        conversation_variables=[{"name": "count", "type": "number", "default": 0}])
    found = {(p.code, p.path) for p in check_workflow(doc)}
    assert ("unknown_conversation_variable", "config.updates[0].variable") in found
    assert ("unknown_variable", "config.updates[1].variable") in found
    messages = " ".join(p.message for p in check_workflow(doc))
    assert "conversation.cout is not declared" in messages and "did you mean" in messages.lower()
