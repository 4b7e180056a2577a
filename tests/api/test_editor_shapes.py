"""What an editor asks the API for while a workflow is being written, on SQLite and
PostgreSQL: validate answers each node's handles and typed outputs even when other parts
of the document are wrong; the node-kind catalog carries the model registry's names, the
``sys`` variables and the schema of the fields every node has; sticky notes travel with
the workflow and are not executed; every kind has its title and description in
Simplified Chinese."""

from __future__ import annotations

from .conftest import hello_workflow

BRANCHY = {
    "id": "branchy", "name": "Branchy", "inputs": [{"name": "score", "type": "number"}],
    "nodes": [
        {"id": "start", "type": "start"},
        {"id": "gate", "type": "if_else", "error_strategy": "error_branch", "config": {"cases": [
            {"id": "high", "conditions": [{"left": {"ref": "inputs.score"}, "operator": "gt", "right": 5}]}]}},
        {"id": "say", "type": "answer", "config": {"text": "{{ inputs.score }}"}},
        {"id": "broken", "type": "template", "config": {"no_such_field": 1}},
    ],
    "edges": [{"id": "e1", "source": "start", "target": "gate"},
              {"id": "e2", "source": "gate", "sourceHandle": "high", "target": "say"},
              {"id": "e3", "source": "say", "target": "nowhere"}],
}


async def test_validate_answers_node_shapes_while_other_parts_are_wrong(api):
    response = await api.client.post("/v1/workflows/validate", json=BRANCHY, headers=api.auth())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["valid"] is False
    codes = {p["code"] for p in body["problems"]}
    assert {"dangling_edge", "invalid_config"} <= codes
    shapes = body["nodes"]
    assert shapes["gate"]["handles"] == ["high", "else", "error"]
    assert shapes["gate"]["outputs"]["error"] == "object"
    assert shapes["start"]["outputs"] == {"score": "number"}
    assert "broken" not in shapes, "a node whose own fields are invalid has no shape"


async def test_validate_of_a_saved_draft_answers_its_shapes(api):
    created = await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())
    assert created.status_code == 201, created.text
    body = (await api.client.post("/v1/workflows/hello/validate", headers=api.auth())).json()
    assert body["valid"] is True and set(body["nodes"]) == {n["id"] for n in hello_workflow()["nodes"]}


async def test_node_kinds_carry_models_system_variables_and_node_fields(api):
    body = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()
    assert body["models"] == sorted(body["models"]) and body["models"], "the registry's model names"
    assert body["system_variables"]["chat_id"] == "string"
    fields = body["node_fields_schema"]["properties"]
    assert {"timeout", "max_retries", "error_strategy", "name"} <= set(fields)
    assert not {"id", "type", "config"} & set(fields)


async def test_sticky_notes_are_saved_exported_and_not_executed(api):
    doc = {**hello_workflow(), "notes": [{"id": "n1", "text": "ask legal first", "position": {"x": 10, "y": 20}}]}
    assert (await api.client.post("/v1/workflows", json=doc, headers=api.auth())).status_code == 201
    problems = (await api.client.post("/v1/workflows/hello/validate", headers=api.auth())).json()
    assert problems["valid"] is True, problems["problems"]
    exported = (await api.client.get("/v1/workflows/hello/export", headers=api.auth())).json()
    assert exported["notes"][0]["text"] == "ask legal first"
    bad = {**hello_workflow(), "notes": [{"id": "n 1", "text": "x"}]}
    checked = (await api.client.post("/v1/workflows/validate", json=bad, headers=api.auth())).json()
    assert any(p["path"].startswith("notes[0]") for p in checked["problems"]), checked["problems"]


async def test_node_kinds_carry_their_simplified_chinese_labels(api):
    kinds = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()["kinds"]
    assert all(k["labels"]["zh-CN"]["title"] and k["labels"]["zh-CN"]["description"] for k in kinds)
    by_kind = {k["kind"]: k for k in kinds}
    assert by_kind["classify_question"]["labels"]["zh-CN"]["title"] == "问题分类"
