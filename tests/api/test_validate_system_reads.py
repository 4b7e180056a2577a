"""The validate answer says which ``sys`` variables a document reads (``system_reads``),
for an unsaved document and for a saved draft alike, on SQLite and PostgreSQL: the
canvas shows its message box only for workflows that read ``sys.query``."""

from __future__ import annotations

from .conftest import hello_workflow

CLASSIFIER = {
    "id": "triage_reads", "name": "Triage", "inputs": [],
    "nodes": [
        {"id": "start", "type": "start"},
        # question is left at its default, "{{ sys.query }}"
        {"id": "route", "type": "classify_question", "config": {
            "model": "default", "categories": [{"id": "billing", "name": "Billing"}, {"id": "other", "name": "Other"}]}},
        {"id": "say", "type": "answer", "config": {"text": "for {{ sys.user_id }}"}},
        {"id": "broken", "type": "answer", "config": {"text": "{{ sys.now }}", "no_such_field": 1}},
    ],
    "edges": [{"id": "e1", "source": "start", "target": "route"},
              {"id": "e2", "source": "route", "sourceHandle": "billing", "target": "say"}],
}


async def test_validate_answers_the_sys_variables_a_document_reads(api):
    response = await api.client.post("/v1/workflows/validate", json=CLASSIFIER, headers=api.auth())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["valid"] is False, "the broken node is still reported"
    # the classifier's default (4 turns of sys.history, the message) and the answer's
    # template; the node that does not validate adds nothing
    assert body["system_reads"] == ["history", "query", "user_id"]


async def test_a_saved_draft_that_reads_no_message_answers_an_empty_list(api):
    created = await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())
    assert created.status_code == 201, created.text
    body = (await api.client.post("/v1/workflows/hello/validate", headers=api.auth())).json()
    assert body["valid"] is True and body["system_reads"] == []


async def test_the_openapi_document_describes_system_reads(api):
    schema = (await api.client.get("/openapi.json")).json()["components"]["schemas"]["WorkflowProblems"]
    field = schema["properties"]["system_reads"]
    assert field["items"] == {"type": "string"} and "sys.query" in field["description"]
    assert "system_reads" not in schema.get("required", [])
