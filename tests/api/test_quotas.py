"""Quotas on SQLite and PostgreSQL: runs per minute and tokens per day, per tenant and per
app, checked before a run is created or continued (429 with ``Retry-After``, as JSON for
every response mode, in OpenAI's shape on the OpenAI endpoint), set and shown through
``/v1/quotas`` and ``flowloom quotas``, with the operator's defaults from the settings,
and exact under concurrent requests served by two app instances on one database."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from typing import Any

import httpx
import openai
import pytest

from api.app import create_app
from tests.support.chat_flow import chat_flow
from tests.support.openai_server import text_reply

from .conftest import hello_workflow, order_workflow


def _seconds_to_midnight() -> float:
    now = dt.datetime.now(dt.UTC)
    tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return (tomorrow - now).total_seconds()


async def _run(api, mode: str = "blocking", key: str | None = None) -> httpx.Response:
    return await api.client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"},
                                                   "response_mode": mode}, headers=api.auth(key))


async def _publish(api, doc: dict[str, Any]) -> None:
    assert (await api.client.post("/v1/workflows", json=doc, headers=api.auth())).status_code == 201
    published = await api.client.post(f"/v1/workflows/{doc['id']}/publish", json={}, headers=api.auth())
    assert published.status_code == 201, published.text


async def test_runs_per_minute_over_the_limit_is_429_with_retry_after_in_every_mode(api):
    put = await api.client.put("/v1/quotas", json={"runs_per_minute": 2}, headers=api.auth())
    assert put.status_code == 200, put.text
    assert put.json()["effective"]["runs_per_minute"] == 2 and put.json()["effective"]["runs_per_minute_source"] == "own"
    assert (await _run(api)).status_code == 200
    assert (await _run(api, "async")).status_code == 202
    for mode in ("blocking", "streaming", "async"):
        refused = await _run(api, mode)
        assert refused.status_code == 429, (mode, refused.text)
        assert refused.headers["content-type"].startswith("application/json"), "a readable error, not a stream"
        error = refused.json()["error"]
        assert error["type"] == "quota_exceeded"
        assert "runs_per_minute" in error["message"] and " is 2 " in error["message"], error["message"]
        assert 1 <= int(refused.headers["retry-after"]) <= 60
    runs = (await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]
    assert len(runs) == 2, "a refused request creates no run"
    other = await _run(api, key=api.other_key)
    assert other.status_code == 200, "another tenant has its own count"
    shown = (await api.client.get("/v1/quotas", headers=api.auth())).json()
    assert shown["tenant"]["usage"]["runs_last_minute"] == 2 and shown["apps"] == []


async def test_an_app_quota_of_tokens_per_day_refuses_the_next_turn_before_the_model_is_called(
        api, models_file, openai_server):
    await _publish(api, chat_flow())
    await _publish(api, {**hello_workflow(), "id": "hello"})
    put = await api.client.put("/v1/quotas/apps/chatbot", json={"tokens_per_day": 10}, headers=api.auth())
    assert put.status_code == 200 and put.json()["app_id"] == "chatbot"
    await api.http()
    client = openai.AsyncOpenAI(base_url=api.live.url + "/v1", api_key=api.key, max_retries=0, timeout=20)
    openai_server.script(text_reply("Hello Ada!", usage=(12, 3)), text_reply("never sent", usage=(1, 1)))
    first = await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "Hi"}])
    assert first.usage.total_tokens == 15
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.create(model="chatbot", messages=[{"role": "user", "content": "again"}])
    assert refused.value.status_code == 429 and refused.value.code == "quota_exceeded"
    assert "tokens_per_day of app 'chatbot' is 10" in refused.value.message
    retry_after = int(refused.value.response.headers["retry-after"])
    assert abs(retry_after - _seconds_to_midnight()) <= 5
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="chatbot", stream=True,
                                             messages=[{"role": "user", "content": "streamed"}])
    assert len(openai_server.bodies) == 1, "the model was not called for a refused turn"
    ran = await api.client.post("/v1/workflows/hello/runs", json={"inputs": {"name": "Bo"}}, headers=api.auth())
    assert ran.status_code == 200, "another app of the tenant is not limited"
    app_quota = (await api.client.get("/v1/quotas/apps/chatbot", headers=api.auth())).json()
    assert app_quota["usage"] == {"runs_last_minute": 1, "tokens_today": 15}
    assert app_quota["effective"]["runs_per_minute"] is None and app_quota["effective"]["runs_per_minute_source"] == "none"
    assert [a["app_id"] for a in (await api.client.get("/v1/quotas", headers=api.auth())).json()["apps"]] == ["chatbot"]
    assert (await api.client.delete("/v1/quotas/apps/chatbot", headers=api.auth())).status_code == 204
    assert (await api.client.get("/v1/quotas", headers=api.auth())).json()["apps"] == []


async def test_answering_or_resuming_a_paused_run_is_refused_when_the_quota_is_used_up(api):
    body = {"workflow": order_workflow(), "inputs": {"item": "tea"}, "chat_id": "q-1", "message": "tea"}
    paused = await api.client.post("/v1/runs", json=body, headers=api.auth())
    assert paused.json()["status"] == "paused"
    run_id = paused.json()["run_id"]
    await api.client.put("/v1/quotas", json={"runs_per_minute": 1}, headers=api.auth())
    answered = await api.client.post("/v1/runs", json={**body, "message": "confirm"}, headers=api.auth())
    assert answered.status_code == 429, answered.text
    resumed = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "confirm"}, headers=api.auth())
    assert resumed.status_code == 429 and "retry-after" in resumed.headers
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert run["status"] == "paused", "the run was not continued"
    await api.client.put("/v1/quotas", json={"runs_per_minute": 0}, headers=api.auth())
    resumed = await api.client.post(f"/v1/runs/{run_id}/resume", json={"answer": "confirm"}, headers=api.auth())
    assert resumed.status_code == 202, "0 is unlimited"


async def test_quota_routes_need_an_admin_key_of_the_whole_tenant_and_validate_limits(api):
    plain = (await api.client.post("/v1/keys", json={"name": "plain"}, headers=api.auth())).json()["secret"]
    assert (await api.client.post("/v1/workflows", json=hello_workflow(), headers=api.auth())).status_code == 201
    scoped = (await api.client.post("/v1/keys", json={"name": "app", "admin": True, "app_id": "hello"},
                                    headers=api.auth())).json()["secret"]
    for key in (plain, scoped):
        assert (await api.client.get("/v1/quotas", headers=api.auth(key))).status_code == 403
        assert (await api.client.put("/v1/quotas", json={"runs_per_minute": 100},
                                     headers=api.auth(key))).status_code == 403
    bad = await api.client.put("/v1/quotas", json={"runs_per_minute": -1}, headers=api.auth())
    assert bad.status_code == 422 and bad.json()["error"]["problems"][0]["loc"][-1] == "runs_per_minute"
    await api.client.put("/v1/quotas/apps/hello", json={"runs_per_minute": 1}, headers=api.auth())
    other = (await api.client.get("/v1/quotas", headers=api.auth(api.other_key))).json()
    assert other["apps"] == [] and other["tenant"]["runs_per_minute"] is None, "another tenant's quotas are its own"


@pytest.fixture
def default_quota_env(monkeypatch):
    """The operator's defaults, read by the settings of the app the ``api`` fixture builds."""
    monkeypatch.setenv("FLOWLOOM_QUOTA_RUNS_PER_MINUTE", "1")
    monkeypatch.setenv("FLOWLOOM_QUOTA_TOKENS_PER_DAY", "0")


async def test_the_operator_default_holds_until_a_tenant_has_its_own_limit(default_quota_env, api):
    shown = (await api.client.get("/v1/quotas", headers=api.auth())).json()["tenant"]
    assert shown["effective"] == {"runs_per_minute": 1, "tokens_per_day": None,
                                  "runs_per_minute_source": "default", "tokens_per_day_source": "default"}
    assert (await _run(api)).status_code == 200
    assert (await _run(api)).status_code == 429
    await api.client.put("/v1/quotas", json={"runs_per_minute": 3}, headers=api.auth())
    assert (await _run(api)).status_code == 200


async def test_concurrent_starts_on_two_app_instances_never_exceed_the_limit(api, database_url):
    await api.client.put("/v1/quotas", json={"runs_per_minute": 3}, headers=api.auth())
    second = create_app(api.settings, heartbeat_s=0.2, shutdown_grace_s=2)
    async with second.router.lifespan_context(second):
        transport = httpx.ASGITransport(app=second)
        async with httpx.AsyncClient(transport=transport, base_url="http://second.test", timeout=30) as other:
            requests = [client.post("/v1/runs", json={"workflow": hello_workflow(), "inputs": {"name": "Ada"},
                                                      "response_mode": "async"}, headers=api.auth())
                        for _ in range(5) for client in (api.client, other)]
            answers = await asyncio.gather(*requests)
            await asyncio.sleep(0.5)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [202] * 3 + [429] * 7, statuses
    assert len((await api.client.get("/v1/runs", headers=api.auth())).json()["runs"]) == 3


def test_flowloom_quotas_sets_and_shows_the_limits(database_url, tmp_path):
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "cli-home"), "FLOWLOOM_DATABASE_URL": database_url}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "api.cli", "quotas", *args], capture_output=True, text=True,
                              env=env, timeout=60)

    done = cli("set", "--tenant", "acme", "--runs-per-minute", "5", "--tokens-per-day", "1000", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["effective"]["runs_per_minute"] == 5
    unknown = cli("set", "--tenant", "acme", "--app", "chatbot", "--tokens-per-day", "0")
    assert unknown.returncode == 2 and "has no workflow 'chatbot'" in unknown.stderr, unknown.stderr
    asyncio.run(_save_workflow(database_url, "acme", {**hello_workflow(), "id": "chatbot"}))
    assert cli("set", "--tenant", "acme", "--app", "chatbot", "--tokens-per-day", "0").returncode == 0
    shown = cli("show", "--tenant", "acme", "--json")
    rows = json.loads(shown.stdout)
    assert [(r["app_id"], r["runs_per_minute"], r["tokens_per_day"]) for r in rows] == [
        (None, 5, 1000), ("chatbot", None, 0)]
    app_row = cli("show", "--tenant", "acme", "--app", "chatbot").stdout
    assert "unlimited (own limit)" in app_row and "5 (the tenant's own limit)" in app_row, app_row
    refused = cli("set", "--tenant", "acme", "--runs-per-minute", "-3")
    assert refused.returncode == 2 and "whole number" in refused.stderr and "Traceback" not in refused.stderr
    assert cli("reset", "--tenant", "acme").returncode == 0
    assert json.loads(cli("show", "--tenant", "acme", "--json").stdout)[0]["runs_per_minute"] is None


async def _save_workflow(database_url: str, tenant: str, doc: dict[str, Any]) -> None:
    from workers.sql import SqlStore
    from workers.sql.workflows import SqlWorkflowStore

    store = await SqlStore.open(database_url)
    try:
        await SqlWorkflowStore(store).create(tenant, doc)
    finally:
        await store.close()


def test_a_refusal_counts_runs_and_tokens_in_the_right_number():
    from api.quotas import QuotaExceeded
    from workers.sql.quotas import QuotaRefusal

    one = QuotaExceeded(QuotaRefusal(None, "runs_per_minute", 1, 1, 30.0))
    assert "(1 run in the last minute)" in one.message, one.message
    assert "(2 runs in the last minute)" in QuotaExceeded(QuotaRefusal("a", "runs_per_minute", 2, 2, 5.0)).message
    assert "(1 token since 00:00 UTC)" in QuotaExceeded(QuotaRefusal(None, "tokens_per_day", 1, 1, 5.0)).message


async def test_starts_without_any_limit_are_counted_once_a_limit_is_set(api):
    assert (await _run(api)).status_code == 200
    shown = (await api.client.get("/v1/quotas", headers=api.auth())).json()["tenant"]
    assert shown["usage"]["runs_last_minute"] == 1
    await api.client.put("/v1/quotas", json={"runs_per_minute": 2}, headers=api.auth())
    assert (await _run(api)).status_code == 200
    assert (await _run(api)).status_code == 429
