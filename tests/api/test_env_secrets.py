"""Environment variables and secrets through the API, on SQLite and PostgreSQL: a secret
set with the draft reaches a local HTTP server in an HTTP node's header (the node gets
the real value) and appears in no API answer (workflow, secrets, run, node runs, events
stream), no export, no log and no stored record; it is stored encrypted; another tenant
reads none of it; a Dify file's secret environment variable is asked for on import."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.http_reply import reply_json
from workers.sql.tables import workflow_secrets

from .conftest import read_messages

SECRET = "sk-env-4d2b9c8e71f0aa"
OTHER = "sk-tenant-b-0c55e1d9b3"


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.server.seen.append({"path": self.path, "headers": dict(self.headers),  # type: ignore[attr-defined]
                                 "body": self.rfile.read(length).decode()})
        reply_json(self, b'{"ok": true}')


@pytest.fixture
def echo() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _flow(url: str, secret: str | None = SECRET, wid: str = "vault") -> dict[str, Any]:
    return {
        "id": wid, "name": "Vault",
        "environment": [{"name": "API_TOKEN", "type": "secret", "value": secret, "description": "the service key"},
                        {"name": "BASE", "type": "string", "value": url},
                        {"name": "LIMIT", "type": "number", "value": 3}],
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "call", "type": "http_request",
             "config": {"method": "POST", "url": "{{ env.BASE }}/hook",
                        "headers": {"Authorization": "Bearer {{ env.API_TOKEN }}"},
                        "body": {"type": "raw", "raw": "token={{ env.API_TOKEN }} limit={{ env.LIMIT }}"},
                        "timeout": 10}},
            {"id": "show", "type": "template", "config": {"template": "sent {{ env.API_TOKEN }} ({{ call.status_code }})"}},
            {"id": "say", "type": "answer", "config": {"text": "{{ show.output }}"}},
            {"id": "end", "type": "end", "config": {"outputs": [{"name": "token", "value": {"ref": "env.API_TOKEN"}}]}},
        ],
        "edges": [{"id": "e1", "source": "start", "target": "call"}, {"id": "e2", "source": "call", "target": "show"},
                  {"id": "e3", "source": "show", "target": "say"}, {"id": "e4", "source": "say", "target": "end"}],
    }


async def _run(api: Any, wid: str, key: str | None = None) -> tuple[str, list[Any]]:
    http = await api.http()
    async with http.stream("POST", f"/v1/workflows/{wid}/runs?draft=true", json={"response_mode": "streaming"},
                           headers=api.auth(key)) as response:
        assert response.status_code == 200, await response.aread()
        streamed = await read_messages(response)
    return streamed[0]["data"]["run_id"], streamed


async def test_secret_reaches_the_http_node_and_appears_nowhere_else(api, echo, caplog):
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{echo.server_address[1]}"
    created = await api.client.post("/v1/workflows", json=_flow(url), headers=api.auth())
    assert created.status_code == 201, created.text
    env = created.json()["draft"]["environment"]
    assert env[0] == {"name": "API_TOKEN", "type": "secret", "value": None, "description": "the service key"}
    status = await api.client.get("/v1/workflows/vault/secrets", headers=api.auth())
    assert status.json()["secrets"][0]["name"] == "API_TOKEN" and status.json()["secrets"][0]["set"] is True

    run_id, streamed = await _run(api, "vault")
    assert streamed[-1]["data"]["status"] == "succeeded", streamed[-3:]
    (seen,) = echo.seen
    assert seen["headers"]["Authorization"] == f"Bearer {SECRET}", "the node sent the real value"
    assert seen["body"] == f"token={SECRET} limit=3"

    texts = [str(streamed), caplog.text, created.text, status.text]
    for path in ("/v1/workflows/vault", "/v1/workflows/vault/export", f"/v1/runs/{run_id}",
                 f"/v1/runs/{run_id}/events", "/v1/runs", "/v1/workflows/vault/secrets"):
        answer = await api.client.get(path, headers=api.auth())
        assert answer.status_code == 200, (path, answer.text)
        texts.append(answer.text)
    service = api.service
    texts.append((await service.state("default", run_id)).model_dump_json())
    texts += [run.model_dump_json() for run in await service.node_runs("default", run_id)]
    texts.append(repr(await service.stores.events.read("default", run_id, 0)))
    leaks = [t[max(0, t.find(SECRET) - 100): t.find(SECRET) + 40] for t in texts if SECRET in t]
    assert not leaks, leaks[:2]

    detail = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert detail["outputs"] == {"token": "******"}
    show = next(n for n in detail["node_runs"] if n["node_id"] == "show")
    assert show["outputs"] == {"output": "sent ****** (200)"}, "recorded masked, the trace stays readable"
    exported = (await api.client.get("/v1/workflows/vault/export", headers=api.auth())).json()
    assert exported["environment"][0] == {"name": "API_TOKEN", "type": "secret", "value": "",
                                          "description": "the service key"}
    assert exported["environment"][1]["value"] == url, "plain settings travel with the file"


async def test_secret_values_are_stored_encrypted_and_updated_without_publishing(api, echo):
    url = f"http://127.0.0.1:{echo.server_address[1]}"
    assert (await api.client.post("/v1/workflows", json=_flow(url), headers=api.auth())).status_code == 201
    published = await api.client.post("/v1/workflows/vault/publish", json={}, headers=api.auth())
    assert published.status_code == 201, published.text
    store = api.service.secrets
    async with store.store._tx() as conn:
        stored = (await conn.execute(sa.select(workflow_secrets))).mappings().all()
    assert [r["name"] for r in stored] == ["API_TOKEN"]
    assert SECRET not in stored[0]["token"], "encrypted at rest"
    # a token copied to another tenant's row (same workflow id and name) does not open there
    await store.set_secrets("tenant-b", "vault", {"API_TOKEN": "placeholder"})
    async with store.store._tx() as conn:
        await conn.execute(sa.update(workflow_secrets)
                           .where(workflow_secrets.c.tenant_id == "tenant-b")
                           .values(token=stored[0]["token"]))
    assert await store.secret_values("tenant-b", "vault") == {}
    assert await store.secret_values("default", "vault") == {"API_TOKEN": SECRET}

    changed = await api.client.put("/v1/workflows/vault/secrets", json={"values": {"API_TOKEN": "sk-rotated-9911"}},
                                   headers=api.auth())
    assert changed.status_code == 200 and changed.json()["secrets"][0]["set"] is True, changed.text
    assert "sk-rotated-9911" not in changed.text
    run = await api.client.post("/v1/workflows/vault/runs", json={}, headers=api.auth())
    assert run.json()["status"] == "succeeded", run.text
    assert echo.seen[-1]["headers"]["Authorization"] == "Bearer sk-rotated-9911", "the published version reads it"

    unknown = await api.client.put("/v1/workflows/vault/secrets", json={"values": {"NOPE": "x"}}, headers=api.auth())
    assert unknown.status_code == 422 and "NOPE" in unknown.json()["error"]["message"]
    cleared = await api.client.put("/v1/workflows/vault/secrets", json={"values": {"API_TOKEN": None}},
                                   headers=api.auth())
    assert cleared.json()["secrets"][0]["set"] is False
    checked = (await api.client.post("/v1/workflows/vault/validate", headers=api.auth())).json()
    (warning,) = [p for p in checked["problems"] if p["code"] == "unset_secret"]
    assert warning["severity"] == "warning" and "'API_TOKEN' has no value" in warning["message"]
    assert checked["valid"] is True, "a missing value is the deployment's, not the document's"


async def test_every_tenant_has_its_own_secrets(api, echo):
    url = f"http://127.0.0.1:{echo.server_address[1]}"
    assert (await api.client.post("/v1/workflows", json=_flow(url), headers=api.auth())).status_code == 201
    # tenant B sees no workflow of A, its secrets included, and cannot set them
    assert (await api.client.get("/v1/workflows/vault/secrets", headers=api.auth(api.other_key))).status_code == 404
    put = await api.client.put("/v1/workflows/vault/secrets", json={"values": {"API_TOKEN": "x"}},
                               headers=api.auth(api.other_key))
    assert put.status_code == 404
    # B copies A's workflow (its export) under the same id: no value comes with it
    exported = (await api.client.get("/v1/workflows/vault/export", headers=api.auth())).json()
    copied = await api.client.post("/v1/workflows", json=exported, headers=api.auth(api.other_key))
    assert copied.status_code == 201, copied.text
    status = (await api.client.get("/v1/workflows/vault/secrets", headers=api.auth(api.other_key))).json()
    assert status["secrets"] == [{"name": "API_TOKEN", "set": False, "declared": True, "updated_at": None}]
    _run_id, streamed = await _run(api, "vault", api.other_key)
    assert streamed[-1]["data"]["status"] == "failed" and not echo.seen, "B's run reads B's (unset) value, not A's"
    failed = next(m["data"] for m in streamed if m["data"].get("type") == "node_finished"
                  and m["data"]["node_id"] == "call")
    assert "'API_TOKEN' is not set" in failed["error"]["message"], failed
    await api.client.put("/v1/workflows/vault/secrets", json={"values": {"API_TOKEN": OTHER}},
                         headers=api.auth(api.other_key))
    await _run(api, "vault", api.other_key)
    assert echo.seen[-1]["headers"]["Authorization"] == f"Bearer {OTHER}"
    await _run(api, "vault")
    assert echo.seen[-1]["headers"]["Authorization"] == f"Bearer {SECRET}", "A keeps its own"


def _dify_app(url: str) -> str:
    import yaml

    graph = {
        "nodes": [
            {"id": "s", "data": {"type": "start", "title": "Start", "variables": []}},
            {"id": "h", "data": {"type": "http-request", "title": "Call", "method": "post",
                                 "url": "{{#env.BASE#}}/hook", "headers": "Authorization:Bearer {{#env.TOKEN#}}",
                                 "params": "", "body": {"type": "none", "data": []},
                                 "authorization": {"type": "no-auth"}, "timeout": {}}},
            {"id": "e", "data": {"type": "end", "title": "End",
                                 "outputs": [{"variable": "code", "value_selector": ["h", "status_code"]}]}},
        ],
        "edges": [{"id": "1", "source": "s", "target": "h", "sourceHandle": "source"},
                  {"id": "2", "source": "h", "target": "e", "sourceHandle": "source"}],
    }
    app = {"app": {"name": "Hooked", "mode": "workflow"}, "kind": "app", "version": "0.1.5",
           "workflow": {"environment_variables": [
               {"name": "TOKEN", "value_type": "secret", "value": "", "description": "service token"},
               {"name": "BASE", "value_type": "string", "value": url}],
               "conversation_variables": [], "graph": graph}}
    return yaml.safe_dump(app)


async def test_dify_environment_variables_import_and_ask_for_the_secret(api, echo):
    url = f"http://127.0.0.1:{echo.server_address[1]}"
    source = _dify_app(url)
    converted = await api.client.post("/v1/workflows/import", json={"source": source, "workflow_id": "hooked"},
                                      headers=api.auth())
    assert converted.status_code == 200, converted.text
    body = converted.json()
    assert body["secrets_needed"] == ["TOKEN"]
    assert body["workflow"]["environment"] == [
        {"name": "TOKEN", "type": "secret", "value": None, "description": "service token"}, {"name": "BASE", "value": url}]
    saved = await api.client.post("/v1/workflows/import?save=true", json={
        "source": source, "workflow_id": "hooked", "secrets": {"TOKEN": SECRET}}, headers=api.auth())
    assert saved.status_code == 200, saved.text
    assert SECRET not in saved.text
    run = await api.client.post("/v1/workflows/hooked/runs?draft=true", json={}, headers=api.auth())
    assert run.json()["status"] == "succeeded", run.text
    assert echo.seen[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in run.text
    # the multipart form of the canvas's import dialog
    form = await api.client.post("/v1/workflows/import?save=true", files={"file": ("other.yml", source.encode())},
                                 data={"secrets": json.dumps({"TOKEN": "sk-form-77aa"}), "workflow_id": "hooked2"},
                                 headers=api.auth())
    assert form.status_code == 200, form.text
    status = (await api.client.get("/v1/workflows/hooked2/secrets", headers=api.auth())).json()
    assert status["secrets"][0]["set"] is True
