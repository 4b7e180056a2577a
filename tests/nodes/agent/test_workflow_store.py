"""engine/workflow_store.py: lookup by id over Settings.workflow_path, compile, child runs."""

from __future__ import annotations

import json
import os

import pytest

from engine import RunDeps, Settings
from engine.errors import CompileError
from engine.workflow_store import MAX_DEPTH, WorkflowNotFound, WorkflowRecursion, WorkflowStore, run_child
from schemas.types import RunStatus
from tests.support.catalog import TEST_CATALOG

HELLO = {"id": "hello2", "name": "Hello", "inputs": [{"name": "name", "type": "string", "required": True}],
         "nodes": [{"id": "start", "type": "start"}, {"id": "say", "type": "answer",
                                                      "config": {"text": "Hi {{ inputs.name }}"}},
                   {"id": "end", "type": "end", "config": {"outputs": [{"name": "n", "value": {"ref": "inputs.name"}}]}}],
         "edges": [{"id": "e1", "source": "start", "target": "say"}, {"id": "e2", "source": "say", "target": "end"}]}


def write(directory, doc, name=None):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name or doc['id']}.json").write_text(json.dumps(doc))


def test_lookup_order_and_env(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, {**HELLO, "name": "first"})
    write(second, {**HELLO, "name": "second"})
    write(second, {**HELLO, "id": "other"})
    monkeypatch.setenv("FLOWLOOM_WORKFLOW_PATH", os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)]))
    store = WorkflowStore.from_settings(Settings())
    assert store.load("hello2")["name"] == "first"
    assert store.ids() == ["hello2", "other"]
    assert store.compile("hello2", catalog=TEST_CATALOG).workflow.id == "hello2"


def test_default_directories_are_workflows_then_examples(tmp_path, monkeypatch):
    monkeypatch.delenv("FLOWLOOM_WORKFLOW_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "examples", HELLO)
    assert WorkflowStore.from_settings(Settings()).paths == [tmp_path / "workflows", tmp_path / "examples"]
    assert WorkflowStore.from_settings(Settings()).find("hello2") == tmp_path / "examples" / "hello2.json"


@pytest.mark.parametrize("bad", ["../hello2", "a/b", "", "x.json", "..", "a b"])
def test_ids_that_could_escape_are_refused(tmp_path, bad):
    with pytest.raises(WorkflowNotFound, match="invalid workflow id"):
        WorkflowStore([tmp_path]).find(bad)


def test_not_found_mismatch_and_bad_files(tmp_path):
    store = WorkflowStore([tmp_path])
    with pytest.raises(WorkflowNotFound, match="not found: no nothing.json in"):
        store.load("nothing")
    write(tmp_path, HELLO, name="renamed")
    with pytest.raises(WorkflowNotFound, match="holds workflow id 'hello2'"):
        store.load("renamed")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(WorkflowNotFound, match="cannot read"):
        store.load("broken")
    write(tmp_path, {**HELLO, "id": "invalid", "nodes": HELLO["nodes"] + [{"id": "x", "type": "answer", "config": {}}]})
    with pytest.raises(CompileError):
        store.compile("invalid", catalog=TEST_CATALOG)


async def test_child_run_and_recursion_guard(tmp_path):
    store = WorkflowStore([tmp_path])
    write(tmp_path, HELLO)
    plan = store.compile("hello2", catalog=TEST_CATALOG)
    state = await run_child(plan, {"name": "Ada"}, parent_deps=RunDeps(), run_id="parent.c1")
    assert state.status is RunStatus.succeeded and state.answer == "Hi Ada" and state.outputs == {"n": "Ada"}
    assert state.run_id == "parent.c1"
    with pytest.raises(WorkflowRecursion, match="cannot call itself"):
        await run_child(plan, {"name": "x"}, parent_deps=RunDeps(), caller="hello2")
    assert MAX_DEPTH >= 2
