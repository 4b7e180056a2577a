"""API keys and tenants over the real app (SQLite and PostgreSQL): what is open, 401s,
keys shown once and stored hashed, last use recorded, admin-only key management, and
a key of tenant B finding nothing of tenant A (404 on every run endpoint)."""

from __future__ import annotations

import asyncio
import json

import sqlalchemy as sa

from workers.sql.tables import metadata

from .conftest import hello_workflow, order_workflow


async def test_health_and_the_openapi_document_are_open_everything_else_needs_a_key(api):
    assert (await api.client.get("/health")).json()["status"] == "ok"
    openapi = (await api.client.get("/openapi.json")).json()
    assert "/v1/runs/{run_id}/events" in openapi["paths"]
    assert (await api.client.get("/docs")).status_code == 200
    calls = [("GET", "/v1/runs"), ("POST", "/v1/runs"), ("GET", "/v1/runs/r1"), ("POST", "/v1/runs/r1/stop"),
             ("POST", "/v1/runs/r1/resume"), ("GET", "/v1/runs/r1/events"), ("GET", "/v1/keys"),
             ("POST", "/v1/keys"), ("DELETE", "/v1/keys/k1")]
    for method, path in calls:
        for headers in ({}, {"Authorization": "Bearer fl_abcdefgh_" + "x" * 43}, {"Authorization": "Basic abc"},
                        {"Authorization": "Bearer not-a-key"}):
            response = await api.client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, headers, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            body = response.json()
            assert body["error"]["type"] == "unauthorized" and body["error"]["message"]
            assert "x" * 43 not in response.text and "not-a-key" not in response.text


async def test_a_401_says_what_the_request_sent_instead_of_a_bearer_key_without_repeating_it(api):
    secret = "fl_abcdefgh_" + "y" * 43
    cases = [
        ({}, "missing API key"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "uses the `Basic` scheme"),
        ({"Authorization": secret}, "holds a key without the `Bearer ` prefix"),
        ({"Authorization": "Bearer "}, "no key after `Bearer`"),
        ({"X-API-Key": secret}, "API-key header"),
        ({"Authorization": "Sesame " + secret}, "holds a value without the `Bearer ` prefix"),
    ]
    doors = [("GET", "/v1/runs"), ("POST", "/v1/runs"), ("POST", "/v1/chat/completions"), ("POST", "/v1/mcp")]
    for method, path in doors:
        for headers, said in cases:
            response = await api.client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (path, headers, response.text)
            message = response.json()["error"]["message"]
            assert said in message and "Authorization: Bearer <key>" in message, (path, headers, message)
            assert "y" * 43 not in response.text and "dXNlcjpwYXNz" not in response.text


async def test_a_key_is_shown_once_stored_hashed_its_last_use_recorded_and_a_revoked_key_refused(api):
    created = await api.client.post("/v1/keys", json={"name": "ci"}, headers=api.auth())
    assert created.status_code == 201, created.text
    secret, record = created.json()["secret"], created.json()["key"]
    assert secret.startswith(f"fl_{record['prefix']}_") and len(secret) >= 40
    assert record["last_used_at"] is None and not record["admin"]
    listed = await api.client.get("/v1/keys", headers=api.auth())
    assert secret not in listed.text and secret.split("_", 2)[2] not in listed.text
    assert (await api.client.get("/v1/runs", headers=api.auth(secret))).status_code == 200
    mine = [k for k in (await api.client.get("/v1/keys", headers=api.auth())).json()["keys"] if k["id"] == record["id"]]
    assert mine[0]["last_used_at"] is not None
    store = api.service.stores.runs
    async with store._tx() as conn:  # every row of every table: the secret is nowhere
        dump = json.dumps([[list(map(str, row)) for row in (await conn.execute(sa.select(table))).all()]
                           for table in metadata.sorted_tables])
    assert record["prefix"] in dump
    assert secret not in dump and secret.split("_", 2)[2] not in dump and api.key not in dump
    assert (await api.client.get("/v1/runs", headers=api.auth(secret))).status_code == 200
    revoked = await api.client.delete(f"/v1/keys/{record['id']}", headers=api.auth())
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    refused = await api.client.get("/v1/runs", headers=api.auth(secret))
    assert refused.status_code == 401 and refused.json()["error"]["message"].startswith("invalid or revoked API key")


async def test_only_admin_keys_manage_keys(api):
    secret = (await api.client.post("/v1/keys", json={"name": "plain"}, headers=api.auth())).json()["secret"]
    for method, path in (("GET", "/v1/keys"), ("POST", "/v1/keys"), ("DELETE", "/v1/keys/anything")):
        response = await api.client.request(method, path, headers=api.auth(secret), json={})
        assert response.status_code == 403 and response.json()["error"]["type"] == "forbidden"


async def _paused_run(api) -> dict:
    response = await api.client.post("/v1/runs", json={"workflow": order_workflow(), "inputs": {"item": "tea"}},
                                     headers=api.auth())
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "paused"
    return response.json()


async def test_a_key_of_another_tenant_finds_nothing_of_this_tenant(api):
    paused = await _paused_run(api)
    run_id = paused["run_id"]
    other = api.auth(api.other_key)
    interrupt = paused["pending_interrupts"][0]["id"]
    calls = [("GET", f"/v1/runs/{run_id}", None), ("POST", f"/v1/runs/{run_id}/stop", None),
             ("POST", f"/v1/runs/{run_id}/resume", {"answer": "confirm"}),
             ("POST", f"/v1/runs/{run_id}/resume", {"answers": {interrupt: "confirm"}}),
             ("GET", f"/v1/runs/{run_id}/events", None), ("GET", f"/v1/runs/{run_id}/events?after=1", None)]
    for method, path, body in calls:
        response = await api.client.request(method, path, headers=other, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["type"] == "not_found"
    listed = await api.client.get("/v1/runs", headers=other)
    assert listed.status_code == 200 and run_id not in listed.text
    by_chat = await api.client.get("/v1/runs", params={"workflow_id": "order_confirm"}, headers=other)
    assert by_chat.json() == {"runs": []}
    a_keys = (await api.client.get("/v1/keys", headers=api.auth())).json()["keys"]
    b_keys = (await api.client.get("/v1/keys", headers=other)).json()["keys"]
    assert {k["id"] for k in a_keys}.isdisjoint({k["id"] for k in b_keys})
    for key in a_keys:
        response = await api.client.delete(f"/v1/keys/{key['id']}", headers=other)
        assert response.status_code == 404, response.text
    # nothing of tenant A changed: its run is still paused, its keys still work
    mine = await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())
    assert mine.status_code == 200 and mine.json()["status"] == "paused"
    assert all(k["revoked_at"] is None for k in (await api.client.get("/v1/keys", headers=api.auth())).json()["keys"])


async def test_a_key_scoped_to_an_app_sees_only_that_apps_runs(api):
    paused = await _paused_run(api)
    await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"}},
                          headers=api.auth())
    scoped = (await api.client.post("/v1/keys", json={"name": "order app", "app_id": "order_confirm"},
                                    headers=api.auth())).json()["secret"]
    runs = (await api.client.get("/v1/runs", headers=api.auth(scoped))).json()["runs"]
    assert [r["workflow_id"] for r in runs] == ["order_confirm"]
    assert (await api.client.get(f"/v1/runs/{paused['run_id']}", headers=api.auth(scoped))).status_code == 200
    hello_run = [r for r in (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
                 if r["workflow_id"] == "hello"][0]
    assert (await api.client.get(f"/v1/runs/{hello_run['run_id']}", headers=api.auth(scoped))).status_code == 404
    started = await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "x"}},
                                    headers=api.auth(scoped))
    assert started.status_code == 403
    await asyncio.sleep(0)
