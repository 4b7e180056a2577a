"""Error messages a client can act on, on SQLite and PostgreSQL: a request that fails
validation names the field and what is wrong (never pydantic's ``1 validation error
for <model>``), in the endpoint's own error shape - Flowloom's ``{"error": {type,
message, problems}}``, or OpenAI's ``{"error": {message, type, code, param}}`` on
``/v1/chat/completions`` with ``param`` the field."""

from __future__ import annotations


async def test_import_without_source_or_with_an_object_names_the_field(api):
    for body, what in (({}, "source: field required"), ({"source": {"a": 1}}, "source: input should be a valid string")):
        refused = await api.client.post("/v1/workflows/import", json=body, headers=api.auth())
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["type"] == "invalid_request" and what in error["message"], error
        assert "validation error for" not in error["message"] and "WorkflowImport" not in error["message"]
        assert error["problems"][0]["loc"] == ["body", "source"]


async def test_chat_completions_without_messages_names_the_field_as_openai_param(api):
    refused = await api.client.post("/v1/chat/completions", json={"model": "echo_chat"}, headers=api.auth())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["message"] == "invalid request: messages: field required", error
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_request", "messages")
    wrong = await api.client.post("/v1/chat/completions", json={"model": "x", "messages": [{"role": "user"}],
                                                                  "stream": "often"}, headers=api.auth())
    error = wrong.json()["error"]
    assert wrong.status_code == 422 and "stream: input should be a valid boolean" in error["message"], error
    assert error["param"] == "stream"


async def test_a_body_fastapi_validates_names_the_field_too(api):
    refused = await api.client.post("/v1/workflows/hello/rollback", json={"version": "latest"}, headers=api.auth())
    error = refused.json()["error"]
    assert refused.status_code == 422 and error["message"].startswith("version: input should be a valid integer"), error


async def test_a_workflow_document_posted_as_the_run_body_is_told_to_wrap_it(api):
    from .conftest import hello_workflow

    refused = await api.client.post("/v1/runs", json=hello_workflow(), headers=api.auth())
    error = refused.json()["error"]
    assert refused.status_code == 422 and error["type"] == "invalid_request", error
    assert error["message"].startswith("this body is a workflow document: send it wrapped as"), error
    assert '{"workflow": <the document>, "inputs": {...}}' in error["message"]
    assert any(p["loc"] == ["body", "workflow"] for p in error["problems"])  # every problem still listed
    other = await api.client.post("/v1/runs", json={"inputs": {}}, headers=api.auth())  # no document at all
    assert other.json()["error"]["message"] == "workflow: field required", other.text


async def test_a_json_body_sent_as_text_plain_is_told_to_send_the_json_content_type(api):
    for url, body in (("/v1/workflows", b'{"id": "a", "nodes": [], "edges": []}'),
                      ("/v1/workflows/hello/rollback", b'{"version": 1}')):
        refused = await api.client.post(url, content=body, headers={**api.auth(), "Content-Type": "text/plain"})
        error = refused.json()["error"]
        assert refused.status_code == 422 and "Content-Type: application/json" in error["message"], (url, error)
        assert "text/plain" in error["message"] and "extract fields from" not in refused.text


async def test_a_body_that_is_not_utf8_is_said_to_be_not_utf8_json(api):
    latin1 = '{"id": "caf\u00e9", "nodes": [], "edges": []}'.encode("latin-1")
    for url in ("/v1/workflows", "/v1/workflows/import", "/v1/chat/completions"):
        refused = await api.client.post(url, content=latin1, headers={**api.auth(), "Content-Type": "application/json"})
        error = refused.json()["error"]
        assert refused.status_code == 422 and "not UTF-8 JSON" in error["message"], (url, error)
        assert "error parsing the body" not in error["message"]


async def test_every_error_of_the_openai_paths_is_openai_shaped_even_413_from_the_body_limit(api):
    over = b"x" * (api.settings.max_request_bytes + 1)  # Content-Length declared: refused before the app runs
    refused = await api.client.post("/v1/chat/completions", content=over,
                                    headers={**api.auth(), "Content-Type": "application/json"})
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}, error
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "payload_too_large", None)
    assert "FLOWLOOM_MAX_REQUEST_BYTES" in error["message"] and str(api.settings.max_request_bytes) in error["message"]
    assert refused.headers["x-should-retry"] == "false"
    for method, url in (("GET", "/v1/models"), ("POST", "/v1/models")):
        answer = await api.client.request(method, url, content=over, headers=api.auth())
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large", answer.text
    wrong_method = await api.client.post("/v1/models", headers=api.auth())
    error = wrong_method.json()["error"]
    assert wrong_method.status_code == 405 and set(error) == {"message", "type", "code", "param"}, error
    elsewhere = await api.client.post("/v1/runs", content=over, headers={**api.auth(), "Content-Type": "application/json"})
    error = elsewhere.json()["error"]  # the API's own shape outside the OpenAI paths
    assert elsewhere.status_code == 413 and error["type"] == "payload_too_large" and "code" not in error
    assert "FLOWLOOM_MAX_REQUEST_BYTES" in error["message"]
