"""Dify's ``conversation_variables`` import onto Flowloom's conversation variables: the
declarations, ``{{#conversation.x#}}`` and ``["conversation", "x"]`` references, and the
assigner writing them; three chat turns of the imported flow on the SQL store count
1, 2, 3, as the chatflow does in Dify."""

from __future__ import annotations

from engine.service import RunService, Stores
from engine.settings import Settings
from tests.support.catalog import TEST_CATALOG, import_workflow
from workers.sql import SqlStore

from . import dify_docs as dd


def counter_chatflow() -> dict:
    return dd.app([
        dd.node("start", "start", variables=[]),
        dd.node("bump", "assigner", version="2", items=[
            {"variable_selector": ["conversation", "count"], "input_type": "constant", "operation": "+=", "value": 1},
            {"variable_selector": ["conversation", "last"], "input_type": "variable", "operation": "over-write",
             "value": ["sys", "query"]}]),
        dd.node("say", "answer", answer="turn {{#conversation.count#}} after {{#conversation.last#}}"),
        dd.node("gate", "if-else", cases=[{"case_id": "many", "logical_operator": "and", "conditions": [
            {"variable_selector": ["conversation", "count"], "comparison_operator": ">", "value": "9"}]}]),
    ], [dd.edge("start", "bump"), dd.edge("bump", "gate"), dd.edge("gate", "say", "false")], mode="advanced-chat",
        conversation=[{"name": "count", "value_type": "number", "value": 0, "description": "turns so far"},
                      {"name": "last", "value_type": "string", "value": ""}])


def test_conversation_variables_import_as_declared_and_referenced(scripted_registry):
    result = import_workflow(counter_chatflow(), models=scripted_registry)
    assert not result.errors, result.errors
    wf = result.workflow
    assert wf["conversation_variables"] == [
        {"name": "count", "type": "number", "default": 0, "description": "turns so far"},
        {"name": "last", "default": ""}]
    nodes = {n["id"]: n for n in wf["nodes"]}
    assert nodes["bump"]["config"]["updates"] == [
        {"variable": "conversation.count", "operation": "add", "value": 1},
        {"variable": "conversation.last", "value": {"ref": "sys.query"}}]
    assert "conversation.count" in nodes["say"]["config"]["text"]
    assert nodes["gate"]["config"]["cases"][0]["conditions"][0]["left"] == {"ref": "conversation.count"}
    assert not [i for i in result.report if "per-conversation" in i.message]


async def test_the_imported_chatflow_counts_turns_per_chat(scripted_registry, tmp_path):
    doc = import_workflow(counter_chatflow(), models=scripted_registry).workflow
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    try:
        service = RunService(catalog=TEST_CATALOG, stores=Stores(store, store, store, store),
                             settings=Settings(home=tmp_path), models=scripted_registry)
        answers = []
        for message in ("a", "b", "c"):
            async for _ in service.start(doc, {}, chat_id="chat-1", message=message):
                pass
            [newest] = await service.list("default", chat_id="chat-1", limit=1)
            answers.append((await store.load_run("default", newest.run_id)).answer)
        assert answers == ["turn 1 after a", "turn 2 after b", "turn 3 after c"]
    finally:
        await store.close()
