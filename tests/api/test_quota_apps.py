"""An app the tenant does not have is refused on every path, with the same message, on
SQLite and PostgreSQL: ``GET/PUT/DELETE /v1/quotas/apps/{app_id}`` (404, listed in the
OpenAPI document), ``POST /v1/keys`` with ``app_id`` (422 naming it) and
``flowloom keys create --app`` (exit 2), as ``flowloom quotas set --app`` already did.
An app with limits stored before its workflow was deleted can still be read and cleared."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from .conftest import hello_workflow
from .test_quotas import _save_workflow

NO_APP = "tenant 'default' has no workflow 'no_such_app' (saved or run)"


async def test_the_quota_routes_refuse_an_app_the_tenant_does_not_have(api):
    for method, body in (("GET", None), ("PUT", {"tokens_per_day": 10}), ("DELETE", None)):
        refused = await api.client.request(method, "/v1/quotas/apps/no_such_app", json=body, headers=api.auth())
        assert refused.status_code == 404, (method, refused.text)
        assert refused.json()["error"]["message"].startswith(NO_APP), refused.text
    listed = (await api.client.get("/v1/quotas", headers=api.auth())).json()
    assert listed["apps"] == [], "nothing was stored for the unknown app"
    other = {**hello_workflow(), "id": "hello"}
    assert (await api.client.post("/v1/workflows", json=other, headers=api.auth(api.other_key))).status_code == 201
    elsewhere = await api.client.put("/v1/quotas/apps/hello", json={"tokens_per_day": 10}, headers=api.auth())
    assert elsewhere.status_code == 404, "another tenant's workflow is not this tenant's app"


async def test_an_app_of_the_tenant_gets_its_quota_and_keeps_it_after_its_workflow_is_deleted(api):
    assert (await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())).status_code == 201
    put = await api.client.put("/v1/quotas/apps/hello", json={"tokens_per_day": 10}, headers=api.auth())
    assert put.status_code == 200 and put.json()["tokens_per_day"] == 10, put.text
    assert (await api.client.delete("/v1/workflows/hello", headers=api.auth())).status_code == 204
    kept = await api.client.get("/v1/quotas/apps/hello", headers=api.auth())
    assert kept.status_code == 200 and kept.json()["tokens_per_day"] == 10, kept.text
    assert (await api.client.delete("/v1/quotas/apps/hello", headers=api.auth())).status_code == 204
    assert (await api.client.get("/v1/quotas/apps/hello", headers=api.auth())).status_code == 404


async def test_a_key_for_an_app_the_tenant_does_not_have_is_refused_naming_app_id(api):
    refused = await api.client.post("/v1/keys", json={"name": "k", "app_id": "no_such_app"}, headers=api.auth())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["message"].startswith(f"app_id: {NO_APP}") and error["problems"][0]["loc"] == ["body", "app_id"]
    ran = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                                headers=api.auth())
    assert ran.status_code == 200, ran.text
    made = await api.client.post("/v1/keys", json={"name": "k", "app_id": "hello"}, headers=api.auth())
    assert made.status_code == 201, "a run of the app is enough, as for quotas"


async def test_the_openapi_document_lists_404_on_the_app_quota_routes(api):
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    for method in ("get", "put", "delete"):
        assert "404" in paths["/v1/quotas/apps/{app_id}"][method]["responses"], method


@pytest.mark.slow
def test_flowloom_keys_create_refuses_an_app_the_tenant_does_not_have(database_url, tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "cli-home"), "FLOWLOOM_DATABASE_URL": database_url}

    def keys(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "api.cli", "keys", *args], capture_output=True, text=True,
                              env=env, timeout=60)

    refused = keys("create", "--app", "no_such_app")
    assert refused.returncode == 2, refused.stderr
    assert NO_APP in " ".join(refused.stderr.split()) and "no key was made" in refused.stderr, refused.stderr
    assert "fl_" not in refused.stdout
    asyncio.run(_save_workflow(database_url, "default", {**hello_workflow(), "id": "chatbot"}))
    made = keys("create", "--app", "chatbot")
    assert made.returncode == 0 and made.stdout.strip().startswith("fl_"), made.stderr
