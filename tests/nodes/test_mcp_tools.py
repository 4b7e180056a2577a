"""MCP servers as tools of the tool-loop nodes, through the real engine: a real MCP server
(the SDK's ``MCPServer``, ``tests/support/mcp_server.py``) over stdio and over Streamable
HTTP as a local process, and the model scripted by the OpenAI-compatible test server."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import nodes  # noqa: F401  - registers the executors
from engine import RunDeps, Settings, resume_run, run_workflow
from engine.context import CancelToken
from engine.errors import CompileError
from schemas.types import NodeRunStatus, RunStatus
from tests.nodes.agent.conftest import answer_reply, calls_reply
from tests.support.catalog import compile_workflow
from tests.support.mcp_server import SCRIPT, sha, start_http
from tests.support.openai_server import openai_server, scripted_registry  # noqa: F401  (fixtures)
from tests.support.workflows import build, edge, node

STDIO_OK = Settings(mcp_allow_stdio=True)


def stdio_server(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"name": "demo", "command": sys.executable, "args": [str(SCRIPT)],
            "env": {"MCP_TEST_LOG": str(tmp_path / "calls.log"), **extra.pop("env", {})}, **extra}


def flow(kind: str = "tool_call", **config: Any) -> dict[str, Any]:
    cfg = {"model": "tools-model", "user_prompt": "help me", "stream": False, **config}
    return build([node("agent", kind, cfg),
                  node("end", "end", {"outputs": [{"name": "answer", "value": {"ref": "agent.answer"}}]})],
                 [edge("start", "agent"), edge("agent", "end")])


async def run(registry: Any, doc: dict[str, Any], settings: Settings, cancel: CancelToken | None = None):
    plan = compile_workflow(doc, models=registry, use_cache=False)
    deps = RunDeps(models=registry, settings=settings)
    return plan, deps, await run_workflow(plan, {}, deps=deps, cancel=cancel)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body.get("tools") or []}


@pytest.fixture
def http_server(tmp_path):
    proc, url = start_http({"MCP_TEST_LOG": str(tmp_path / "calls.log")})
    try:
        yield proc, url
    finally:
        proc.kill()
        proc.wait(5)


@pytest.mark.parametrize("kind", ["tool_call", "agent"])
async def test_a_tool_node_calls_tools_of_a_stdio_server(openai_server, scripted_registry, tmp_path, monkeypatch,
                                                         kind):
    monkeypatch.setenv("FLOWLOOM_SECRET_DEMO_TOKEN", "tok-7f3a")
    server = stdio_server(tmp_path, env={"MCP_TEST_TOKEN": "{{secret:DEMO_TOKEN}}"})
    openai_server.script(calls_reply(("c1", "lookup", {"city": "Paris"}), ("c2", "whoami", {})),
                         answer_reply("Sunny in Paris."))
    _plan, _deps, state = await run(scripted_registry, flow(kind, mcp_servers=[server]), STDIO_OK)
    assert state.status is RunStatus.succeeded, state.error
    assert state.outputs["answer"] == "Sunny in Paris."
    tools = offered(openai_server.bodies[0])
    assert {"lookup", "delete_item", "crash", "slow", "whoami"} <= set(tools)
    assert tools["lookup"]["description"] == "The weather in a city."
    assert tools["lookup"]["parameters"]["properties"]["city"]["type"] == "string"
    results = tool_results(openai_server.bodies[1])
    assert "weather in Paris: sunny" in results["c1"]
    # the server got the secret; its echo of it is redacted before the model or the record sees it
    assert f"token_sha={sha('tok-7f3a')}" in results["c2"] and "token=***" in results["c2"]
    assert "tok-7f3a" not in json.dumps(state.model_dump(mode="json"))
    assert "tool_observation" in results["c1"]  # fenced as data, like every tool result
    run_data = state.node_runs["agent"].data
    assert run_data["mcp_servers"][0]["name"] == "demo" and "lookup" in run_data["mcp_servers"][0]["tools"]
    risks = {t["name"]: t["risk"] for t in run_data["tools"]}
    assert risks["lookup"] == "read" and risks["delete_item"] == "write"
    assert "tok-7f3a" not in json.dumps(state.node_runs["agent"].inputs)


async def test_an_agent_node_calls_tools_of_an_http_server_with_a_secret_header(
        openai_server, scripted_registry, http_server, monkeypatch):
    _proc, url = http_server
    monkeypatch.setenv("FLOWLOOM_SECRET_MCP_TOKEN", "s3cret-9d")
    # by name: localhost may resolve to ::1 first, where nothing listens; the next address is tried
    server = {"name": "remote", "url": url.replace("127.0.0.1", "localhost"),
              "headers": {"Authorization": "Bearer {{secret:MCP_TOKEN}}"}, "tools": ["lookup", "whoami"],
              "prefix": "r_"}
    openai_server.script(calls_reply(("c1", "r_lookup", {"city": "Oslo"})),
                         calls_reply(("c2", "r_whoami", {})), answer_reply("Oslo is sunny."))
    _plan, _deps, state = await run(scripted_registry, flow("agent", mcp_servers=[server]),
                                    Settings(http_allow=["localhost"]))
    assert state.status is RunStatus.succeeded, state.error
    assert state.outputs["answer"] == "Oslo is sunny."
    assert {"r_lookup", "r_whoami"} <= set(offered(openai_server.bodies[0]))
    assert "r_delete_item" not in offered(openai_server.bodies[0])  # only the tools named
    assert "weather in Oslo: sunny" in tool_results(openai_server.bodies[1])["c1"]
    whoami = tool_results(openai_server.bodies[2])["c2"]
    assert f"auth_sha={sha('Bearer s3cret-9d')}" in whoami and "auth=Bearer ***" in whoami


async def test_an_http_servers_header_reads_the_workflows_environment_variable(
        openai_server, scripted_registry, http_server):
    _proc, url = http_server
    server = {"name": "remote", "url": url.replace("127.0.0.1", "localhost"),
              "headers": {"Authorization": "Bearer {{ env.MCP_TOKEN }}"}, "tools": ["whoami"], "prefix": "r_"}
    doc = flow("agent", mcp_servers=[server])
    doc["environment"] = [{"name": "MCP_TOKEN", "value": "env-tok-51c2"}]
    openai_server.script(calls_reply(("c1", "r_whoami", {})), answer_reply("done"))
    _plan, _deps, state = await run(scripted_registry, doc, Settings(http_allow=["localhost"]))
    assert state.status is RunStatus.succeeded, state.error
    assert f"auth_sha={sha('Bearer env-tok-51c2')}" in tool_results(openai_server.bodies[1])["c1"]

    missing = flow("agent", mcp_servers=[{**server, "headers": {"Authorization": "Bearer {{ env.NOPE }}"}}])
    _plan, _deps, failed = await run(scripted_registry, missing, Settings(http_allow=["localhost"]))
    assert failed.status is RunStatus.failed and failed.error.reason == "missing_secret"
    assert "'NOPE'" in failed.error.message and "header 'Authorization'" in failed.error.message


async def test_a_loopback_http_server_is_refused_unless_the_operator_allows_it(openai_server, scripted_registry,
                                                                               http_server):
    _proc, url = http_server
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[{"name": "remote", "url": url}]),
                                    Settings())
    assert state.status is RunStatus.failed
    assert state.error.reason == "blocked_address" and "FLOWLOOM_HTTP_ALLOW" in state.error.message
    assert "remote" in state.error.message and openai_server.bodies == []


@pytest.mark.parametrize("kind", ["tool_call", "agent"])
async def test_a_destructive_tool_asks_first_and_runs_only_after_approval(openai_server, scripted_registry,
                                                                        tmp_path, kind):
    log = tmp_path / "calls.log"
    openai_server.script(calls_reply(("c1", "delete_item", {"item_id": "42"})))
    plan, deps, state = await run(scripted_registry, flow(kind, mcp_servers=[stdio_server(tmp_path)]), STDIO_OK)
    assert state.status is RunStatus.paused, state.error
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "confirm" and interrupt.payload.tool == "delete_item"
    assert "42" in interrupt.payload.arguments and not log.exists()
    openai_server.script(answer_reply("Deleted item 42."))
    state = await resume_run(plan, state, answers={interrupt.id: "approve"}, deps=deps)
    assert state.status is RunStatus.succeeded, state.error
    assert log.read_text().split() == ["42"]
    assert "deleted 42" in tool_results(openai_server.bodies[-1])["c1"]


async def test_a_refused_destructive_call_never_reaches_the_server(openai_server, scripted_registry, tmp_path):
    log = tmp_path / "calls.log"
    openai_server.script(calls_reply(("c1", "delete_item", {"item_id": "7"})))
    plan, deps, state = await run(scripted_registry, flow(mcp_servers=[stdio_server(tmp_path)]), STDIO_OK)
    (interrupt,) = state.interrupts.values()
    openai_server.script(answer_reply("Nothing deleted."))
    state = await resume_run(plan, state, answers={interrupt.id: "reject"}, deps=deps)
    assert state.status is RunStatus.succeeded and not log.exists()
    assert "did not allow" in tool_results(openai_server.bodies[-1])["c1"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_that_dies_mid_call_fails_the_node_naming_server_and_tool(
        openai_server, scripted_registry, tmp_path, transport):
    if transport == "http":
        proc, url = start_http()
        server: dict[str, Any] = {"name": "demo", "url": url}
        settings = Settings(http_allow=["127.0.0.1"])
    else:
        proc, server, settings = None, stdio_server(tmp_path), STDIO_OK
    try:
        openai_server.script(calls_reply(("c1", "crash", {})), answer_reply("never"))
        started = time.monotonic()
        _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[server]), settings)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(5)
    assert state.status is RunStatus.failed
    assert time.monotonic() - started < 30
    error = state.node_runs["agent"].error
    assert error.reason == "mcp_server_failed", error
    assert "MCP server 'demo'" in error.message and "'crash'" in error.message
    assert len(openai_server.bodies) == 1  # the model was not asked to work around it


async def test_a_tool_the_server_no_longer_has_is_a_clear_error(openai_server, scripted_registry, tmp_path):
    server = stdio_server(tmp_path, tools=["lookup", "archive_all"])
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[server]), STDIO_OK)
    assert state.status is RunStatus.failed and state.error.reason == "mcp_tool_missing"
    assert "MCP server 'demo'" in state.error.message and "'archive_all'" in state.error.message


async def test_stdio_servers_are_refused_unless_the_operator_enables_them(openai_server, scripted_registry,
                                                                          tmp_path):
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[stdio_server(tmp_path)]), Settings())
    assert state.status is RunStatus.failed and state.error.reason == "mcp_stdio_disabled"
    assert "FLOWLOOM_MCP_ALLOW_STDIO" in state.error.message


async def test_a_secret_that_is_not_set_is_named(openai_server, scripted_registry, tmp_path, monkeypatch):
    monkeypatch.delenv("FLOWLOOM_SECRET_NOT_THERE", raising=False)
    server = stdio_server(tmp_path, env={"MCP_TEST_TOKEN": "{{secret:NOT_THERE}}"})
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[server]), STDIO_OK)
    assert state.status is RunStatus.failed and state.error.reason == "missing_secret"
    assert "FLOWLOOM_SECRET_NOT_THERE" in state.error.message


async def test_bad_arguments_are_fed_back_to_the_model(openai_server, scripted_registry, tmp_path):
    openai_server.script(calls_reply(("c1", "lookup", {"city": 3})), answer_reply("ok"))
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[stdio_server(tmp_path)]), STDIO_OK)
    assert state.status is RunStatus.succeeded
    assert "do not match its schema" in tool_results(openai_server.bodies[1])["c1"]


async def test_cancelling_the_run_closes_the_session_and_ends_the_server(openai_server, scripted_registry,
                                                                        tmp_path):
    import asyncio

    cancel = CancelToken()
    openai_server.script(calls_reply(("c1", "slow", {"seconds": 30})))
    task = asyncio.create_task(run(scripted_registry, flow(mcp_servers=[stdio_server(tmp_path)]), STDIO_OK,
                                   cancel=cancel))
    pid_file = tmp_path / "calls.log"
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    while not pid_file.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text().split()[-1])
    cancel.cancel("stop it")
    _plan, _deps, state = await asyncio.wait_for(task, 10)
    assert state.status is RunStatus.cancelled
    assert state.node_runs["agent"].status is NodeRunStatus.cancelled
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        await asyncio.sleep(0.05)
    assert not _alive(pid), "the stdio server outlived its node"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().split()[2] != "Z"


@pytest.mark.parametrize(("server", "problem"), [
    ({"name": "s", "url": "ftp://example.com/mcp"}, "http:// or https://"),
    ({"name": "s", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer abc123"}},
     "secret reference"),
    ({"name": "s", "url": "https://example.com/mcp", "headers": {"X-Team": "{{secret:bad-name}}"}},
     "not a secret reference"),
    ({"name": "s", "command": "server", "headers": {"X-Team": "a"}}, "headers are for HTTP servers"),
])
def test_the_compiler_checks_the_source_without_connecting(scripted_registry, server, problem):
    with pytest.raises(CompileError) as caught:
        compile_workflow(flow(mcp_servers=[server]), models=scripted_registry, use_cache=False)
    (found,) = caught.value.problems
    assert found.node_id == "agent" and problem in found.message and found.path == "config.mcp_servers[0]"


async def test_a_server_that_never_answers_fails_after_its_connect_timeout(openai_server, scripted_registry):
    import socket

    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        started = time.monotonic()
        _plan, _deps, state = await run(
            scripted_registry, flow(mcp_servers=[{"name": "mute", "url": url, "connect_timeout": 1}]),
            Settings(http_allow=["127.0.0.1"]))
    assert state.status is RunStatus.failed and state.error.reason == "mcp_server_failed"
    assert "MCP server 'mute'" in state.error.message and "connect_timeout" in state.error.message
    assert time.monotonic() - started < 15 and openai_server.bodies == []


async def test_two_servers_listing_the_same_tool_name_need_a_prefix(openai_server, scripted_registry, tmp_path):
    first, second = stdio_server(tmp_path), {**stdio_server(tmp_path), "name": "again"}
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[first, second]), STDIO_OK)
    assert state.status is RunStatus.failed and state.error.reason == "mcp_tool_name_taken"
    assert "MCP server 'again'" in state.error.message and "prefix" in state.error.message
    openai_server.script(answer_reply("ok"))
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[first, {**second, "prefix": "b_"}],
                                                            stop_tool={}), STDIO_OK)
    assert state.status is RunStatus.succeeded, state.error
    assert {"lookup", "b_lookup", "stop"} <= set(offered(openai_server.bodies[0]))


async def test_a_call_over_its_timeout_is_an_error_for_the_model_and_the_session_goes_on(
        openai_server, scripted_registry, tmp_path):
    server = stdio_server(tmp_path, timeout=1)
    openai_server.script(calls_reply(("c1", "slow", {"seconds": 30})), calls_reply(("c2", "lookup", {"city": "Oslo"})),
                         answer_reply("done"))
    started = time.monotonic()
    _plan, _deps, state = await run(scripted_registry, flow(mcp_servers=[server]), STDIO_OK)
    assert state.status is RunStatus.succeeded, state.error
    assert time.monotonic() - started < 20
    assert "timed out after 1s" in tool_results(openai_server.bodies[1])["c1"]
    assert "weather in Oslo: sunny" in tool_results(openai_server.bodies[2])["c2"]


def test_validation_names_what_the_deployment_lacks_for_mcp_servers():
    from engine.shapes import deployment_problems
    from nodes import builtin_catalog

    doc = flow(mcp_servers=[{"name": "local", "command": "server"},
                            {"name": "team", "url": "https://example.com/mcp",
                             "headers": {"Authorization": "Bearer {{secret:TEAM_TOKEN}}"}}])
    closed = Settings(mcp_allow_stdio=False)
    found = {p.code: p for p in deployment_problems(doc, catalog=builtin_catalog(), settings=closed)}
    assert set(found) == {"disabled_by_operator", "missing_secret"}
    assert found["disabled_by_operator"].path == "config.mcp_servers[0].command"
    assert "FLOWLOOM_MCP_ALLOW_STDIO=1" in found["disabled_by_operator"].message
    assert found["missing_secret"].node_id == "agent" and "FLOWLOOM_SECRET_TEAM_TOKEN" in found["missing_secret"].message
    os.environ["FLOWLOOM_SECRET_TEAM_TOKEN"] = "t0k3n"
    try:
        assert deployment_problems(doc, catalog=builtin_catalog(), settings=Settings(mcp_allow_stdio=True)) == []
    finally:
        del os.environ["FLOWLOOM_SECRET_TEAM_TOKEN"]
