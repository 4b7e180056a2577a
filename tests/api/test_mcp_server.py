"""Published workflows as MCP tools at ``/v1/mcp``, with the official ``mcp`` SDK's client
against the app served over real HTTP (uvicorn in the test's loop), on SQLite and
PostgreSQL: the tools a key may run with their input schemas, a call with progress
notifications, a long call cancelled by the client (the run ends cancelled), a key of
another tenant that sees and runs nothing, a request without a valid key (and a tool
node it refuses, whose error names the status and the server's message); and the node
catalog showing the MCP tool source fields of the tool nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from schemas.types import RunStatus
from tests.support.openai_server import openai_server, scripted_registry  # noqa: F401  (fixtures)

from .conftest import http_chain

GREETER: dict[str, Any] = {
    "id": "greeter", "name": "Greeter", "description": "Greets a person by name.",
    "inputs": [{"name": "name", "type": "string", "required": True, "description": "who to greet"},
               {"name": "times", "type": "number", "default": 1}],
    "nodes": [{"id": "start", "type": "start"},
              {"id": "hello", "type": "template", "config": {"template": "Hello {{ inputs.name }}!"}},
              {"id": "say", "type": "answer", "config": {"text": "{{ hello.output }}"}}],
    "edges": [{"id": "e1", "source": "start", "target": "hello"}, {"id": "e2", "source": "hello", "target": "say"}],
}


async def _publish(api, doc: dict[str, Any]) -> None:
    created = await api.client.post("/v1/workflows", json=doc, headers=api.auth())
    assert created.status_code == 201, created.text
    published = await api.client.post(f"/v1/workflows/{doc['id']}/publish", json={"note": "v1"}, headers=api.auth())
    assert published.status_code == 201, published.text


@contextlib.asynccontextmanager
async def _mcp(api, key: str | None = None) -> AsyncIterator[Client]:
    await api.http()
    http = httpx2.AsyncClient(headers=api.auth(key), timeout=httpx2.Timeout(20, read=60))
    async with http, Client(streamable_http_client(api.live.url + "/v1/mcp", http_client=http)) as client:
        yield client


async def test_a_client_lists_and_calls_a_published_workflow_with_progress(api):
    await _publish(api, GREETER)
    async with _mcp(api) as client:
        listed = (await client.list_tools()).tools
        (tool,) = [t for t in listed if t.name == "greeter"]
        assert tool.description == "Greets a person by name."
        assert tool.input_schema["properties"]["name"] == {"type": "string", "description": "who to greet"}
        assert tool.input_schema["required"] == ["name"]
        assert tool.annotations.read_only_hint is True, "templates and answers only read"
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        result = await client.call_tool("greeter", {"name": "Ada"}, progress_callback=on_progress)
    assert not result.is_error
    assert result.content[0].text == "Hello Ada!"
    assert result.structured_content["status"] == "succeeded"
    run_id = result.structured_content["run_id"]
    assert (await api.service.get("default", run_id)).status is RunStatus.succeeded
    messages = [m for _v, m in progress]
    assert messages[0] == f"run {run_id} started"
    assert "node 'hello' succeeded" in messages and "node 'say' succeeded" in messages
    assert [v for v, _m in progress] == sorted(v for v, _m in progress)


async def test_the_server_announces_flowloom_and_its_package_version(api):
    from importlib import metadata

    async with _mcp(api) as client:
        info = client.server_info
    assert info.name == "flowloom" and info.version == metadata.version("flowloom") and info.version


async def test_bad_arguments_and_unknown_tools_are_error_results(api):
    await _publish(api, GREETER)
    async with _mcp(api) as client:
        missing = await client.call_tool("greeter", {})
        unknown = await client.call_tool("nope", {"name": "x"})
    assert missing.is_error and "name" in missing.content[0].text
    assert unknown.is_error and "no tool 'nope'" in unknown.content[0].text


async def test_a_workflow_that_may_write_is_not_offered_as_read_only(api, target):
    doc = http_chain(target.url, 1)
    doc["nodes"][1]["config"]["method"] = "POST"
    await _publish(api, {**doc, "id": "poster"})
    await _publish(api, {**http_chain(target.url, 1), "id": "getter"})
    async with _mcp(api) as client:
        hints = {t.name: t.annotations.read_only_hint for t in (await client.list_tools()).tools}
    assert hints["poster"] is False and hints["getter"] is True


async def test_a_client_cancels_a_long_call_and_the_run_ends_cancelled(api, target):
    await _publish(api, {**http_chain(target.url, 1, path="/slow"), "id": "slowpoke"})
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if message == "node 'h0' started":
            started.set()

    async with _mcp(api) as client:
        call = asyncio.create_task(client.call_tool("slowpoke", {}, progress_callback=on_progress))
        await asyncio.wait_for(started.wait(), 20)
        assert await asyncio.to_thread(target.server.slow_started.wait, 10)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        (run,) = await api.service.list("default", limit=1)
        for _ in range(100):
            run = await api.service.get("default", run.run_id)
            if run.status is RunStatus.cancelled:
                break
            await asyncio.sleep(0.05)
        assert run.status is RunStatus.cancelled, run.status
        # the session is still usable after the cancelled call
        assert any(t.name == "slowpoke" for t in (await client.list_tools()).tools)


async def test_a_key_of_another_tenant_sees_no_tools_and_runs_nothing(api):
    await _publish(api, GREETER)
    async with _mcp(api, api.other_key) as client:
        assert (await client.list_tools()).tools == []
        result = await client.call_tool("greeter", {"name": "Eve"})
    assert result.is_error and "no tool 'greeter'" in result.content[0].text
    assert await api.service.list("tenant-b") == [] and await api.service.list("default") == []


async def test_a_request_without_a_valid_key_is_refused(api):
    await api.http()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer fl_nope_nope"}):
            response = await http.post(api.live.url + "/v1/mcp", json=body,
                                       headers={**headers, "Accept": "application/json, text/event-stream"})
            assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
            assert "fl_nope_nope" not in response.text


async def test_the_node_catalog_shows_the_mcp_tool_source_fields(api):
    response = await api.client.get("/v1/node-kinds", headers=api.auth())
    assert response.status_code == 200, response.text
    kinds = {k["kind"]: k for k in response.json()["kinds"]}
    for kind in ("tool_call", "agent"):
        schema = kinds[kind]["config_schema"]
        assert "mcp_servers" in schema["properties"], kind
        text = json.dumps(schema)
        for field in ("url", "headers", "command", "args", "env", "tools", "prefix", "connect_timeout"):
            assert f'"{field}"' in text, (kind, field)
        assert "FLOWLOOM_MCP_ALLOW_STDIO" in text and "{{secret:NAME}}" in text


async def test_a_key_scoped_to_an_app_sees_and_runs_that_app_only(api):
    await _publish(api, GREETER)
    await _publish(api, {**GREETER, "id": "other", "name": "Other"})
    _record, app_key = await api.keys.create_key("default", name="greeter only", app_id="greeter")
    async with _mcp(api, app_key) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["greeter"]
        refused = await client.call_tool("other", {"name": "Eve"})
        allowed = await client.call_tool("greeter", {"name": "Eve"})
    assert refused.is_error and "no tool 'other'" in refused.content[0].text
    assert not allowed.is_error and allowed.content[0].text == "Hello Eve!"


async def test_a_tool_node_refused_by_the_server_fails_naming_the_status_and_the_servers_message(
        api, openai_server, scripted_registry, monkeypatch):
    from engine import Settings
    from tests.nodes.test_mcp_tools import flow, run

    await api.http()
    monkeypatch.setenv("FLOWLOOM_SECRET_FLOWLOOM_KEY", "fl_wrong_wrong")
    url = api.live.url + "/v1/mcp"
    for headers, said in (({"Authorization": "Bearer {{secret:FLOWLOOM_KEY}}"}, "invalid or revoked API key"),
                          ({}, "missing API key")):
        _plan, _deps, state = await run(
            scripted_registry, flow(mcp_servers=[{"name": "flowloom", "url": url, "headers": headers}]),
            Settings(http_allow=["127.0.0.1"]))
        assert state.status is RunStatus.failed and state.error.reason == "mcp_server_failed", state.error
        assert state.error.message.startswith(
            f"MCP server 'flowloom' ({url}) refused the request: 401 unauthorized: {said}"), state.error.message
        assert "fl_wrong_wrong" not in state.error.message
    assert openai_server.bodies == [], "the node fails before asking the model"


async def test_a_chat_flow_takes_the_message_as_a_required_parameter_and_answers_it(api):
    from pathlib import Path

    echo = json.loads((Path(__file__).resolve().parents[2] / "examples" / "echo_chat.json").read_text("utf-8"))
    chatty = {**GREETER, "id": "chatty", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "hello", "type": "template", "config": {"template": "Hello {{ inputs.name }}, you said {{ sys.query }}"}},
        {"id": "say", "type": "answer", "config": {"text": "{{ hello.output }}"}}]}
    for doc in (echo, chatty, GREETER):
        await _publish(api, doc)
    async with _mcp(api) as client:
        tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        assert tools["echo_chat"]["properties"]["message"]["type"] == "string"
        assert tools["echo_chat"]["required"] == ["message"]
        assert tools["chatty"]["required"] == ["name", "message"]
        assert "message" not in tools["greeter"]["properties"], "a workflow that reads no message takes none"
        result = await client.call_tool("echo_chat", {"message": "hi there"})
        named = await client.call_tool("chatty", {"name": "Ada", "message": "hello"})
    assert not result.is_error and result.content[0].text == "You said: hi there"
    assert not named.is_error and named.content[0].text == "Hello Ada, you said hello"


async def test_progress_says_a_skipped_branch_was_skipped_not_finished(api):
    from pathlib import Path

    router = json.loads((Path(__file__).resolve().parents[2] / "examples" / "grade_router.json").read_text("utf-8"))
    await _publish(api, router)
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with _mcp(api) as client:
        result = await client.call_tool("grade_router", {"score": 95}, progress_callback=on_progress)
    assert not result.is_error
    assert "node 'msg_invalid' skipped" in progress and "node 'route' succeeded" in progress
    assert not any(m and m.startswith("node ") and m.endswith(" finished") for m in progress), progress
