"""The API takes what its OpenAPI document says, on SQLite and PostgreSQL: an integer or
boolean field of a request body is not coerced from ``true``, ``"yes"`` or ``1``
(a quota of ``true`` tokens a day, an admin key from ``"yes"``); ``PUT`` on the
``/v1/workflows/validate`` and ``/import`` actions is 405, not an update of a workflow
called ``validate``; ``GET /v1/chats?before=`` takes a JSON number only."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import schemas.api
import schemas.api_knowledge
import schemas.openai_compat
from api.app import create_app
from engine.settings import Settings

from .conftest import hello_workflow

#: values of the wrong JSON type that pydantic's lax mode would coerce
WRONG = {"integer": [True, "5"], "boolean": ["yes", "true", 1, 0], "number": [True, "0.5"]}


def _request_models(tmp_path) -> list[type[BaseModel]]:
    """The models of the request bodies the OpenAPI document names, and those of the
    routes that read their body themselves (chat completions, import)."""
    document = create_app(Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'x.db'}")).openapi()
    names = set()
    for path in document["paths"].values():
        for operation in path.values():
            content = operation.get("requestBody", {}).get("content", {}) if isinstance(operation, dict) else {}
            for media in content.values():
                ref = media.get("schema", {}).get("$ref", "")
                if ref:
                    names.add(ref.rsplit("/", 1)[-1])
    classes = {name: cls for module in (schemas.api, schemas.api_knowledge, schemas.openai_compat)
               for name, cls in inspect.getmembers(module, inspect.isclass) if issubclass(cls, BaseModel)}
    found = [classes[name] for name in sorted(names | {"ChatCompletionRequest", "WorkflowImport"}) if name in classes]
    assert {"QuotaUpdate", "KeyCreate", "WorkflowRollback", "ChatCompletionRequest"} <= {m.__name__ for m in found}
    return found


def _types(schema: dict[str, Any]) -> set[str]:
    return {schema["type"]} if "type" in schema else {t for s in schema.get("anyOf", []) for t in _types(s)}


def test_every_integer_boolean_or_number_field_of_a_request_body_refuses_other_json_types(tmp_path):
    checked = []
    for model in _request_models(tmp_path):
        for name, prop in model.model_json_schema()["properties"].items():
            for kind in _types(prop) & set(WRONG):
                for value in WRONG[kind]:
                    with pytest.raises(ValidationError) as refused:
                        model.model_validate({name: value})
                    assert any(error["loc"][:1] == (name,) for error in refused.value.errors()), (model, name, value)
                checked.append(f"{model.__name__}.{name}")
    assert {"QuotaUpdate.tokens_per_day", "KeyCreate.admin", "WorkflowImport.allow_partial",
            "DatasetSearch.top_k", "ChatCompletionRequest.stream"} <= set(checked), checked


async def test_a_boolean_quota_and_a_string_admin_flag_are_refused_naming_the_field(api):
    for body in ({"tokens_per_day": True}, {"runs_per_minute": "5"}):
        refused = await api.client.put("/v1/quotas", json=body, headers=api.auth())
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["message"].startswith(f"{next(iter(body))}: input should be a valid integer")
    assert (await api.client.get("/v1/quotas", headers=api.auth())).json()["tenant"]["tokens_per_day"] is None
    for flag in ("yes", "true", 1):
        refused = await api.client.post("/v1/keys", json={"name": "k", "admin": flag}, headers=api.auth())
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["message"].startswith("admin: input should be a valid boolean")
    made = await api.client.post("/v1/keys", json={"name": "k", "admin": True}, headers=api.auth())
    assert made.status_code == 201 and made.json()["key"]["admin"] is True, made.text
    assert (await api.client.put("/v1/quotas", json={"tokens_per_day": 1000}, headers=api.auth())).status_code == 200


async def test_put_on_the_validate_and_import_actions_is_405(api):
    for action in ("validate", "import"):
        refused = await api.client.put(f"/v1/workflows/{action}", json={"workflow": hello_workflow(),
                                                                         "draft_version": 1}, headers=api.auth())
        assert refused.status_code == 405, refused.text
        assert refused.headers["allow"] == "POST"
        error = refused.json()["error"]
        assert error["type"] == "method_not_allowed" and f"/v1/workflows/{action}" in error["message"], error


async def test_chats_before_takes_a_json_number_only(api):
    for value in ("nan", "inf", "-Infinity", "1e400", "1_0", " 5 ", ""):
        refused = await api.client.get("/v1/chats", params={"before": value}, headers=api.auth())
        assert refused.status_code == 422, (value, refused.text)
        assert refused.json()["error"]["message"].startswith("query.before: "), refused.text
    for value in ("5", "-0", "1796191694.4940207", "1.5e9"):
        listed = await api.client.get("/v1/chats", params={"before": value}, headers=api.auth())
        assert listed.status_code == 200, (value, listed.text)


async def test_a_workflow_cannot_take_the_id_of_an_action(api):
    """A workflow saved as ``validate`` or ``import`` could never be replaced by its path
    (``PUT`` there is the action's 405), so its id is refused when it is saved, by a
    create and by an import that saves."""
    for action in ("validate", "import"):
        refused = await api.client.post("/v1/workflows", json={**hello_workflow(), "id": action}, headers=api.auth())
        assert refused.status_code == 422, refused.text
        assert f"id: {action!r} names an action" in refused.json()["error"]["message"], refused.text
        imported = await api.client.post("/v1/workflows/import", params={"save": "true"}, headers=api.auth(),
                                         json={"source": json.dumps(hello_workflow()), "workflow_id": action})
        assert imported.status_code == 422 and "names an action" in imported.text, imported.text
    listed = await api.client.get("/v1/workflows", headers=api.auth())
    assert [w["workflow_id"] for w in listed.json()["workflows"]] == [], listed.text
