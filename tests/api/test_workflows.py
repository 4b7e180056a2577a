"""Saved workflows through the API on SQLite and PostgreSQL: the draft lifecycle with
optimistic concurrency, validate, publish and roll back, runs of the draft and of the
published version, import with its report, export round trip, the node-kind catalog,
and isolation: another tenant's key gets 404 everywhere, an app key sees only its app."""

from __future__ import annotations

from pathlib import Path

from nodes import builtin_catalog
from tests.importers.helpers import FASTGPT, require_corpus_or_fail

from .conftest import hello_workflow

DUAL_SWITCH = Path(__file__).resolve().parents[2] / "examples" / "imported" / "dual_switch_variable_aggregator_workflow.yml"


async def _create(api, doc=None, key=None):
    response = await api.client.post("/v1/workflows", json=doc or hello_workflow(), headers=api.auth(key))
    assert response.status_code == 201, response.text
    return response.json()


async def test_lifecycle_with_a_stale_draft_publish_rollback_and_delete(api):
    created = await _create(api)
    assert (created["id"], created["draft_version"], created["published_version"]) == ("hello", 1, None)
    taken = await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())
    assert taken.status_code == 409 and taken.json()["error"]["message"] == (
        "workflow 'hello' already exists: change it with PUT /v1/workflows/{id}, or give the document another id")
    listed = (await api.client.get("/v1/workflows", headers=api.auth())).json()["workflows"]
    assert [w["id"] for w in listed] == ["hello"] and "draft" not in listed[0]
    renamed = {**hello_workflow(), "name": "Hello v2"}
    updated = await api.client.put("/v1/workflows/hello", json={"workflow": renamed, "draft_version": 1},
                                   headers=api.auth())
    assert updated.status_code == 200 and updated.json()["draft_version"] == 2
    stale = await api.client.put("/v1/workflows/hello", json={"workflow": hello_workflow(), "draft_version": 1},
                                 headers=api.auth())
    assert stale.status_code == 409 and stale.json()["current_version"] == 2
    assert stale.json()["error"]["type"] == "conflict"
    first = await api.client.post("/v1/workflows/hello/publish", json={"note": "first"}, headers=api.auth())
    assert first.status_code == 201 and first.json()["version"] == 1
    await api.client.put("/v1/workflows/hello", json={"workflow": {**renamed, "name": "Hello v3"}, "draft_version": 2},
                         headers=api.auth())
    assert (await api.client.post("/v1/workflows/hello/publish", json={}, headers=api.auth())).json()["version"] == 2
    back = await api.client.post("/v1/workflows/hello/rollback", json={"version": 1}, headers=api.auth())
    assert back.status_code == 201 and back.json() == {**back.json(), "version": 3, "note": "rollback to version 1"}
    versions = (await api.client.get("/v1/workflows/hello/versions", headers=api.auth())).json()
    assert [v["version"] for v in versions["versions"]] == [1, 2, 3] and versions["published_version"] == 3
    assert versions["versions"][0]["doc_hash"] == versions["versions"][2]["doc_hash"]
    v3 = (await api.client.get("/v1/workflows/hello/export", params={"version": 3}, headers=api.auth())).json()
    assert v3["name"] == "Hello v2"
    assert (await api.client.delete("/v1/workflows/hello", headers=api.auth())).status_code == 204
    assert (await api.client.get("/v1/workflows/hello", headers=api.auth())).status_code == 404
    assert (await api.client.get("/v1/workflows/hello/versions", headers=api.auth())).status_code == 404


async def test_validate_and_an_invalid_draft_cannot_be_published(api):
    broken = {**hello_workflow(), "edges": []}
    await _create(api, broken)
    checked = (await api.client.post("/v1/workflows/hello/validate", headers=api.auth())).json()
    assert checked["valid"] is False and checked["problems"] and {"code", "severity", "message"} <= set(checked["problems"][0])
    unsaved = (await api.client.post("/v1/workflows/validate", json=hello_workflow(), headers=api.auth())).json()
    assert (unsaved["valid"], unsaved["problems"]) == (True, [])
    assert unsaved["inputs"] == [
        {"name": "name", "type": "string", "required": True, "default": None, "description": "who to greet"}]
    refused = await api.client.post("/v1/workflows/hello/publish", json={"note": "x"}, headers=api.auth())
    assert refused.status_code == 422 and refused.json()["error"]["problems"] == checked["problems"]
    first = next(p for p in checked["problems"] if p["severity"] == "error")
    # a client that shows only the message still learns what to fix first, as a refused run start says
    assert refused.json()["error"]["message"].startswith("the workflow has ")
    assert f"; first: [{first['code']}]" in refused.json()["error"]["message"]
    assert first["message"] in refused.json()["error"]["message"]


async def test_a_body_that_wraps_the_document_is_told_to_send_the_document_itself(api):
    # POST /v1/runs and PUT /v1/workflows/{id} wrap the document in `workflow`; the routes
    # that take the document itself say so instead of only "unknown field".
    wrapped = {"workflow": hello_workflow(), "inputs": {"name": "Ada"}}
    checked = (await api.client.post("/v1/workflows/validate", json=wrapped, headers=api.auth())).json()
    assert checked["valid"] is False
    (problem,) = [p for p in checked["problems"] if p["path"] == "workflow"]
    assert problem["message"].startswith("unknown field 'workflow'") and "send the value of `workflow`" in problem["message"]
    refused = await api.client.post("/v1/workflows", json=wrapped, headers=api.auth())
    assert refused.status_code == 422 and "send the value of `workflow`" in refused.json()["error"]["message"]
    assert (await api.client.get("/v1/workflows/hello", headers=api.auth())).status_code == 404  # nothing saved


async def test_runs_of_the_draft_and_of_the_published_version(api):
    await _create(api)
    url = "/v1/workflows/hello/runs"
    nothing = await api.client.post(url, json={"inputs": {"name": "Ada"}}, headers=api.auth())
    assert nothing.status_code == 409
    drafted = await api.client.post(url, params={"draft": "true"}, json={"inputs": {"name": "Ada"}}, headers=api.auth())
    assert drafted.status_code == 200 and drafted.json()["workflow_version"] == "draft", drafted.text
    await api.client.post("/v1/workflows/hello/publish", json={"note": "v1"}, headers=api.auth())
    run = await api.client.post(url, json={"inputs": {"name": "Ada"}}, headers=api.auth())
    assert run.status_code == 200 and run.json()["status"] == "succeeded" and run.json()["workflow_version"] == "1"
    accepted = await api.client.post(url, json={"inputs": {"name": "Bo"}, "response_mode": "async"}, headers=api.auth())
    assert accepted.status_code == 202 and accepted.json()["run_id"]
    streamed = await api.client.post(url, json={"inputs": {"name": "Cy"}, "response_mode": "streaming"},
                                     headers=api.auth())
    assert streamed.headers["content-type"].startswith("text/event-stream") and "event: done" in streamed.text
    _record, app_key = await api.keys.create_key("default", name="app", app_id="hello")
    by_app = await api.client.post(url, json={"inputs": {"name": "Di"}}, headers=api.auth(app_key))
    assert by_app.status_code == 200 and by_app.json()["workflow_version"] == "1"
    assert (await api.client.post(url, params={"draft": "true"}, json={}, headers=api.auth(app_key))).status_code == 403


async def test_import_with_the_report_save_and_export_round_trip(api):
    response = await api.client.post("/v1/workflows/import", params={"save": "true"},
                                     files={"file": (DUAL_SWITCH.name, DUAL_SWITCH.read_bytes(), "application/x-yaml")},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["source_format"] == "dify" and isinstance(body["report"], list)
    assert body["saved"]["id"] == body["workflow"]["id"] == "dual_switch_variable_aggregator_workflow"
    exported = await api.client.get(f"/v1/workflows/{body['workflow']['id']}/export", headers=api.auth())
    assert exported.json() == body["workflow"]
    again = await api.client.post("/v1/workflows/import", json={"source": exported.text}, headers=api.auth())
    assert again.status_code == 200 and again.json()["workflow"] == body["workflow"]
    bad = await api.client.post("/v1/workflows/import", json={"source": "[1, 2]"}, headers=api.auth())
    assert bad.status_code == 422 and bad.json()["error"]["problems"][0]["code"] == "invalid_source"


async def test_a_multipart_import_option_that_is_no_json_object_is_named_with_its_form(api):
    file = {"file": (DUAL_SWITCH.name, DUAL_SWITCH.read_bytes(), "application/x-yaml")}
    for field, sent, example in (("dataset_map", "*=office-sem", '{"*": "my-dataset"}'),
                                 ("model_map", "gpt-4o=default", '{"gpt-4o": "default"}'),
                                 ("dataset_map", '["office"]', '{"*": "my-dataset"}')):
        refused = await api.client.post("/v1/workflows/import", files=file, data={field: sent}, headers=api.auth())
        assert refused.status_code == 422, refused.text
        message = refused.json()["error"]["message"]
        assert message == f"invalid import options: {field}: must be a JSON object such as {example} (got {sent!r})"
    mapped = await api.client.post("/v1/workflows/import", files=file, data={"dataset_map": '{"*": "kb"}'},
                                   headers=api.auth())
    assert mapped.status_code == 200, mapped.text


async def test_node_kinds_lists_every_kind_of_the_catalog_with_a_schema(api):
    kinds = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()["kinds"]
    assert [k["kind"] for k in kinds] == list(builtin_catalog())
    assert all(k["config_schema"].get("type") == "object" and k["title"] and "traits" in k for k in kinds)
    start = next(k for k in kinds if k["kind"] == "start")
    assert start["traits"]["entry"] is True and start["handles"] == ["out"]


async def test_another_tenant_gets_404_everywhere_and_an_app_key_sees_only_its_app(api):
    await _create(api)
    await api.client.post("/v1/workflows/hello/publish", json={}, headers=api.auth())
    other = api.auth(api.other_key)
    calls = [("GET", "/v1/workflows/hello", None), ("PUT", "/v1/workflows/hello",
                                                    {"workflow": hello_workflow(), "draft_version": 1}),
             ("POST", "/v1/workflows/hello/validate", None), ("POST", "/v1/workflows/hello/publish", {}),
             ("GET", "/v1/workflows/hello/versions", None), ("POST", "/v1/workflows/hello/rollback", {"version": 1}),
             ("GET", "/v1/workflows/hello/export", None), ("GET", "/v1/workflows/hello/export?version=1", None),
             ("POST", "/v1/workflows/hello/runs", {}), ("POST", "/v1/workflows/hello/runs?draft=true", {}),
             ("DELETE", "/v1/workflows/hello", None)]
    for method, url, body in calls:
        response = await api.client.request(method, url, json=body, headers=other)
        assert response.status_code == 404, (method, url, response.text)
    assert (await api.client.get("/v1/workflows", headers=other)).json()["workflows"] == []
    mine = await _create(api, key=api.other_key)  # the same id is another workflow in tenant B
    assert mine["draft_version"] == 1
    assert (await api.client.get("/v1/workflows/hello", headers=api.auth())).json()["published_version"] == 1
    await _create(api, {**hello_workflow(), "id": "other"})
    _record, app_key = await api.keys.create_key("default", name="app", app_id="hello")
    app = api.auth(app_key)
    assert [w["id"] for w in (await api.client.get("/v1/workflows", headers=app)).json()["workflows"]] == ["hello"]
    assert (await api.client.get("/v1/workflows/other", headers=app)).status_code == 404
    assert (await api.client.get("/v1/workflows/hello", headers=app)).status_code == 200
    assert (await api.client.put("/v1/workflows/hello", json={"workflow": hello_workflow(), "draft_version": 1},
                                 headers=app)).status_code == 403
    assert (await api.client.delete("/v1/workflows/other", headers=app)).status_code == 404


async def test_import_advises_model_map_not_the_cli_flag_for_an_unknown_model(api):
    require_corpus_or_fail()
    source = (FASTGPT / "TranslateRobot_template.json").read_text(encoding="utf-8")
    refused = await api.client.post("/v1/workflows/import", json={"source": source}, headers=api.auth())
    assert refused.status_code == 422, refused.text
    message = next(p["message"] for p in refused.json()["error"]["problems"] if p["code"] == "unknown_model")
    assert '"model_map": {"claude-3-5-sonnet-20240620": "NAME"}' in message and '"model_map": {"*": "NAME"}' in message
    assert "--model" not in refused.text
    wildcard = await api.client.post("/v1/workflows/import", json={"source": source, "model_map": {"*": "nosuch"}},
                                     headers=api.auth())
    assert wildcard.status_code == 422
    messages = [p["message"] for p in wildcard.json()["error"]["problems"]]
    assert any('"model_map": {"*": "nosuch"} names \'nosuch\'' in m for m in messages), messages
    assert not any("--model" in m for m in messages)
