"""An answer whose required text is empty, on SQLite and PostgreSQL: validate reports it
as an error naming the node and the field, and publishing or running the draft is refused
with the same problem (the canvas checklist shows what validate answers)."""

from __future__ import annotations

from .conftest import hello_workflow


def with_answer_text(text: str) -> dict:
    doc = hello_workflow()
    for node in doc["nodes"]:
        if node["type"] == "answer":
            node["config"]["text"] = text
    return doc


async def test_an_empty_answer_text_is_an_error_and_blocks_publish_and_run(api):
    answer_id = next(n["id"] for n in hello_workflow()["nodes"] if n["type"] == "answer")
    checked = (await api.client.post("/v1/workflows/validate", json=with_answer_text(" "), headers=api.auth())).json()
    assert checked["valid"] is False
    assert [(p["code"], p["node_id"], p["path"], p["severity"], p["message"]) for p in checked["problems"]] == [
        ("empty_required", answer_id, "config.text", "error", "text is required and empty")]
    created = await api.client.post("/v1/workflows", json=with_answer_text(""), headers=api.auth())
    assert created.status_code == 201, created.text
    saved = (await api.client.post("/v1/workflows/hello/validate", headers=api.auth())).json()
    assert [p["code"] for p in saved["problems"]] == ["empty_required"]
    published = await api.client.post("/v1/workflows/hello/publish", json={}, headers=api.auth())
    assert published.status_code == 422 and published.json()["error"]["problems"] == saved["problems"]
    ran = await api.client.post("/v1/workflows/hello/runs", params={"draft": "true"}, json={"inputs": {"name": "Ada"}},
                                headers=api.auth())
    assert ran.status_code == 422, ran.text
