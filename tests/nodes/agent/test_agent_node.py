"""The planning agent node (nodes/agent/node.py) through the real engine, against the scripted
OpenAI-compatible server: ask -> interrupt -> resume (embedded store and Redis, state and
store restored as another process would), every stop-gate refusal reason, the risk gate,
plan update atomicity, internal-name collisions, parallel-safe batching, sub-agents."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import nodes  # noqa: F401  - registers the executors
from engine import RunDeps, Settings, resume_run, run_workflow
from nodes.agent.plan import ASK_TOOL, PLAN_TOOL
from schemas.run import RunState
from schemas.types import NodeRunStatus, RunStatus
from tests.support.catalog import compile_workflow
from tests.support.openai_server import (  # noqa: F401  (fixtures)
    Finish,
    Reply,
    Text,
    ToolDelta,
    Usage,
    openai_server,
    scripted_registry,
)
from tests.support.workflows import build, edge, node
from workers.memory import FileNodeMemory

# ----------------------------------------------------------------------------- helpers


def calls(*items: tuple[str, str, Any], text: str = "") -> Reply:
    """A reply asking for tool calls ``(id, name, arguments)``."""
    steps: list[Any] = [Text(text)] if text else []
    for i, (cid, name, args) in enumerate(items):
        steps.append(ToolDelta(i, cid, name, args if isinstance(args, str) else json.dumps(args)))
    return Reply(steps + [Finish("tool_calls"), Usage(20, 10)])


def answer(text: str) -> Reply:
    return Reply([Text(text), Finish("stop"), Usage(30, 5)])


def set_plan(cid: str, *steps: str) -> tuple[str, str, Any]:
    return (cid, PLAN_TOOL, {"updates": [{"operation": "set_plan", "goal": "help", "steps": list(steps)}]})


def update(cid: str, *changes: dict[str, Any]) -> tuple[str, str, Any]:
    return (cid, PLAN_TOOL, {"updates": [{"operation": "update_step", **c} for c in changes]})


ASK_ARGS = {"question": "Which city?", "options": ["Paris", "Oslo", "Tokyo"], "reason": "missing_input"}


class Api:
    """A local JSON API: GET /weather?city=, GET /slow?s= (tracks requests in flight), POST /notes."""

    def __init__(self) -> None:
        self.notes: list[Any] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/weather":
                    self._send(200, {"city": query.get("city"), "temp_c": 18, "conditions": "sunny"})
                elif url.path == "/slow":
                    with api.lock:
                        api.in_flight += 1
                        api.max_in_flight = max(api.max_in_flight, api.in_flight)
                    time.sleep(float(query.get("s", "0.3")))
                    with api.lock:
                        api.in_flight -= 1
                    self._send(200, {"slept": query.get("s")})
                else:
                    self._send(404, {"error": "no route"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                api.notes.append(json.loads(self.rfile.read(length) or b"null"))
                self._send(201, {"saved": len(api.notes)})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api():
    server = Api()
    yield server
    server.stop()


def http_tools(api_url: str) -> list[dict[str, Any]]:
    return [
        {"operationId": "get_weather", "description": "weather of a city", "base_url": api_url, "path": "/weather",
         "parameters": [{"name": "city", "in": "query", "required": True}]},
        {"operationId": "slow", "base_url": api_url, "path": "/slow",
         "parameters": [{"name": "s", "in": "query", "schema": {"type": "string"}}]},
        {"operationId": "save_note", "method": "POST", "base_url": api_url, "path": "/notes",
         "requestBody": {"required": True, "schema": {"type": "object"}}},
    ]


def agent_flow(**config: Any) -> dict[str, Any]:
    cfg = {"model": "tools-model", **config}
    return build([node("agent", "agent", cfg), node("say", "answer", {"text": "{{ agent.answer }}"})],
                 [edge("start", "agent"), edge("agent", "say")], inputs=[{"name": "query", "type": "string"}])


class Harness:
    """Compile once, run and resume with the given memory store; keeps every event."""

    def __init__(self, registry: Any, store: Any, doc: dict[str, Any]) -> None:
        self.registry, self.store, self.doc = registry, store, doc
        self.plan = compile_workflow(doc, models=registry, use_cache=False)
        self.events: list[Any] = []

    def deps(self, store: Any = None) -> RunDeps:
        return RunDeps(on_event=self.events.append, models=self.registry, memory=store or self.store,
                       settings=Settings(http_allow=["127.0.0.1"]))

    async def start(self, query: str) -> RunState:
        return await run_workflow(self.plan, {"query": query}, deps=self.deps())

    async def answer(self, state: RunState, reply: Any, store: Any = None) -> RunState:
        (iid,) = state.interrupts
        return await resume_run(self.plan, state, answers={iid: reply}, deps=self.deps(store))


@pytest.fixture
def memory(tmp_path):
    return FileNodeMemory(tmp_path / "memory")


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


# ----------------------------------------------------------------------------- ask / resume


async def test_ask_pauses_and_resumes_the_same_chain_from_another_process_with_node_memory_empty(
        openai_server, scripted_registry, tmp_path):
    """Everything the paused agent needs is in the run state: the second process has an
    empty node memory store, and the first one's was never written."""
    openai_server.script(calls(("call_ask", ASK_TOOL, ASK_ARGS)), answer("Oslo: 4 C and snow."))
    first_store = FileNodeMemory(tmp_path / "first")
    h = Harness(scripted_registry, first_store, agent_flow())
    state = await h.start("What's the weather like?")

    assert state.status is RunStatus.paused
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "ask"
    assert interrupt.payload.question == "Which city?" and interrupt.payload.reason == "missing_input"
    assert [o.label for o in interrupt.payload.options] == ["Paris", "Oslo", "Tokyo"]
    assert state.node_runs["agent"].status is NodeRunStatus.waiting
    pending = state.node_runs["agent"].pending
    assert pending is not None and pending.call_id == "call_ask" and pending.kind == "ask"
    assert pending.pending_id == interrupt.payload.pending_id
    assert pending.messages[-1]["tool_calls"][0]["id"] == "call_ask"
    assert not list((tmp_path / "first").glob("*")), "node memory is not used to pause"
    await first_store.close()

    # another process: the run state from JSON, a fresh plan, an empty node memory store
    restored = RunState.model_validate_json(state.model_dump_json())
    second_store = FileNodeMemory(tmp_path / "second")
    h2 = Harness(scripted_registry, second_store, agent_flow())
    final = await h2.answer(restored, "2")
    try:
        assert final.status is RunStatus.succeeded, final.error
        assert final.run_id == state.run_id
        agent = final.node_runs["agent"]
        assert agent.id == state.node_runs["agent"].id, "the resumed node run is the one that paused"
        assert agent.outputs["answer"] == "Oslo: 4 C and snow." and final.answer == "Oslo: 4 C and snow."
        first, second = openai_server.bodies
        assert second["messages"][:len(first["messages"])] == first["messages"], "same message chain"
        assert second["messages"][len(first["messages"])]["tool_calls"][0]["function"]["name"] == ASK_TOOL
        assert "The user answered: Oslo" in tool_messages(second)["call_ask"]
        history = agent.outputs["history"]
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        assert history[1]["content"].startswith("Which city?") and history[2]["content"] == "Oslo"
        assert agent.outputs["asks"] == [{"question": "Which city?", "options": ["Paris", "Oslo", "Tokyo"],
                                          "answer": "Oslo"}]
        assert sum("Which city?" in json.dumps(m) for m in agent.outputs["messages"]) == 1
        assert agent.usage.calls == 2, "usage of both model calls on the one node run"
        assert [e.type for e in h2.events][0] == "run_resumed"
        assert agent.pending is None, "the pending context is removed once used"
    finally:
        await second_store.close()


async def test_resume_without_the_pending_context_fails_clearly(openai_server, scripted_registry, tmp_path):
    openai_server.script(calls(("call_ask", ASK_TOOL, ASK_ARGS)))
    h = Harness(scripted_registry, FileNodeMemory(tmp_path / "a"), agent_flow())
    state = await h.start("weather?")
    state.node_runs["agent"].pending = None  # a state edited by hand, or written by an older version
    final = await h.answer(state, "Paris")
    assert final.status is RunStatus.failed
    assert final.error.reason == "pending_context_missing" and "node run" in final.error.message


async def test_malformed_ask_is_fed_back_without_pausing(openai_server, scripted_registry, memory):
    openai_server.script(
        calls(("c1", ASK_TOOL, {"question": "City?", "options": ["Paris", "Oslo"], "reason": "missing_input"})),
        calls(("c2", ASK_TOOL, {"question": "City?", "options": ["Paris", "paris ", "Oslo"],
                                "reason": "goal_unclear"})),
        answer("I will assume Paris."))
    state = await Harness(scripted_registry, memory, agent_flow()).start("weather?")
    assert state.status is RunStatus.succeeded
    second, third = openai_server.bodies[1:]
    assert "needs at least 3 item(s)" in tool_messages(second)["c1"] and "tool_error" in tool_messages(second)["c1"]
    assert "must be different" in tool_messages(third)["c2"] and "tool_error" in tool_messages(third)["c2"]
    assert state.interrupts == {}


# ----------------------------------------------------------------------------- stop gate


GATE_CASES = {
    # reason: (user message, replies before the refused answer, fixing replies)
    "plan_missing": ("请先制定一个计划，再告诉我巴黎的天气", [],
                     [calls(set_plan("p", "look up Paris")), calls(update("u", {"step_id": "1", "status": "done"}))]),
    "steps_open": ("weather in Paris?", [calls(set_plan("p", "look up Paris", "summarise"))],
                   [calls(update("u", {"step_id": "1", "status": "done"}, {"step_id": "2", "status": "skipped"}))]),
    "blocker_missing": ("weather in Paris?", [calls(set_plan("p", "look up Paris")),
                                              calls(update("b", {"step_id": "1", "status": "blocked"}))],
                        [calls(update("u", {"step_id": "1", "blocker": "the API is down"}))]),
    "needs_replan": ("weather in Paris?", [calls(set_plan("p", "look up Paris")),
                                           calls(update("b", {"step_id": "1", "status": "done",
                                                              "needs_replan": True}))],
                     [calls(update("u", {"step_id": "1", "needs_replan": False}))]),
    "results_unrecorded": ("weather in Paris?", [calls(set_plan("p", "look up Paris")),
                                                 calls(update("d", {"step_id": "1", "status": "done"}),
                                                       ("w", "get_weather", {"city": "Paris"}))],
                           [calls(update("u", {"step_id": "1", "note": "18 C"}))]),
}


@pytest.mark.parametrize("reason", list(GATE_CASES))
async def test_each_stop_gate_reason_refuses_then_the_fixed_plan_passes(
        reason, openai_server, scripted_registry, memory, api):
    message, before, fixes = GATE_CASES[reason]
    openai_server.script(*before, answer("Too early."), *fixes, answer("Paris: 18 C, sunny."))
    h = Harness(scripted_registry, memory, agent_flow(http_tools=http_tools(api.url)))
    state = await h.start(message)
    assert state.status is RunStatus.succeeded, state.error
    agent = state.node_runs["agent"]
    assert agent.outputs["answer"] == "Paris: 18 C, sunny.", "the refused reply is not the result"
    assert agent.data["planning"]["gate"][0] == {"round": len(before) + 1, "refused": [reason]}
    refused_at = len(before) + 1
    nxt = openai_server.bodies[refused_at]["messages"]
    assert nxt[-2] == {"role": "assistant", "content": "Too early."}, "kept as context"
    assert nxt[-1]["role"] == "user" and nxt[-1]["content"].startswith("<stop_gate_feedback>")
    # once the gate passes, the last round may only answer
    assert openai_server.bodies[-1]["tool_choice"] == "none"
    streamed = "".join(e.text for e in h.events if e.type == "node_delta" and e.node_id == "agent")
    assert streamed == "Paris: 18 C, sunny.", "a refused answer is never streamed"


async def test_third_refusal_fails_the_node_with_plan_not_complete(openai_server, scripted_registry, memory):
    openai_server.script(calls(set_plan("p", "a", "b")), answer("done?"), answer("done!"), answer("really done"))
    state = await Harness(scripted_registry, memory, agent_flow()).start("help")
    assert state.status is RunStatus.failed
    assert state.error.reason == "plan_not_complete"
    assert state.error.message.startswith("plan not complete")
    assert len(openai_server.bodies) == 4


async def test_agent_without_a_plan_may_answer_directly(openai_server, scripted_registry, memory):
    openai_server.script(answer("Hello!"))
    state = await Harness(scripted_registry, memory, agent_flow()).start("hi")
    assert state.status is RunStatus.succeeded and state.answer == "Hello!"
    assert state.node_runs["agent"].outputs["plan"] is None
    body = openai_server.bodies[0]
    assert sorted(t["function"]["name"] for t in body["tools"]) == [ASK_TOOL, PLAN_TOOL]
    assert body.get("tool_choice") is None


# ----------------------------------------------------------------------------- plan updates


async def test_failing_plan_batch_changes_nothing(openai_server, scripted_registry, memory):
    openai_server.script(
        calls(set_plan("p", "a", "b")),
        calls(update("bad", {"step_id": "1", "status": "done"}, {"step_id": "7", "status": "done"})),
        calls(update("ok", {"step_id": "1", "status": "done"}, {"step_id": "2", "status": "done"})),
        answer("All done."))
    state = await Harness(scripted_registry, memory, agent_flow()).start("help")
    assert state.status is RunStatus.succeeded, state.error
    refused = tool_messages(openai_server.bodies[2])["bad"]
    assert "update_plan refused, the plan is unchanged" in refused and "no step '7'" in refused
    assert "[pending] 1. a" in tool_messages(openai_server.bodies[1])["p"]
    plan = state.node_runs["agent"].outputs["plan"]
    assert [s["status"] for s in plan["steps"]] == ["done", "done"] and plan["version"] == 2


# ----------------------------------------------------------------------------- tools


async def test_business_tools_named_like_internal_ones_are_dropped(openai_server, scripted_registry, memory, api):
    tools = http_tools(api.url)[:1] + [{"operationId": PLAN_TOOL, "base_url": api.url, "path": "/weather"}]
    openai_server.script(answer("ok"))
    state = await Harness(scripted_registry, memory, agent_flow(http_tools=tools)).start("hi")
    assert state.status is RunStatus.succeeded
    offered = [t["function"] for t in openai_server.bodies[0]["tools"]]
    assert sorted(f["name"] for f in offered) == [ASK_TOOL, "get_weather", PLAN_TOOL]
    assert next(f for f in offered if f["name"] == PLAN_TOOL)["description"].startswith("Maintain your plan")
    assert state.node_runs["agent"].data["planning"]["dropped_tools"] == [PLAN_TOOL]


@pytest.mark.parametrize("parallel, expected", [(True, 2), (False, 1)])
async def test_parallel_safe_tools_run_together(parallel, expected, openai_server, scripted_registry, memory, api):
    openai_server.script(calls(("s1", "slow", {"s": "0.4"}), ("s2", "slow", {"s": "0.4"})), answer("slept"))
    doc = agent_flow(http_tools=http_tools(api.url), parallel_tools=parallel)
    started = time.perf_counter()
    state = await Harness(scripted_registry, memory, doc).start("sleep twice")
    elapsed = time.perf_counter() - started
    assert state.status is RunStatus.succeeded, state.error
    # Overlap is proven by the server's count of requests in flight; a wall-clock upper
    # bound would fail on a loaded machine. Serial calls cannot take less than both sleeps.
    assert api.max_in_flight == expected
    if not parallel:
        assert elapsed >= 0.8
    tools = {t["name"]: t for t in state.node_runs["agent"].data["tools"]}
    assert tools["slow"]["parallel_safe"] is parallel and tools["save_note"]["parallel_safe"] is False
    assert tools[PLAN_TOOL]["parallel_safe"] is False


# ----------------------------------------------------------------------------- risk gate


async def test_write_tool_waits_for_confirmation_then_runs(openai_server, scripted_registry, memory, api):
    openai_server.script(calls(("n1", "save_note", {"body": {"text": "hi"}})), answer("Saved."))
    h = Harness(scripted_registry, memory, agent_flow(http_tools=http_tools(api.url)))
    state = await h.start("save a note")
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "confirm" and interrupt.payload.tool == "save_note"
    assert [o.id for o in interrupt.payload.options] == ["approve", "reject"]
    assert api.notes == [], "nothing written before the person says yes"
    state = await h.answer(state, "maybe")
    (again,) = state.interrupts.values()
    assert again.kind == "confirm" and "neither approve nor reject" in again.payload.error
    final = await h.answer(state, "approve")
    assert final.status is RunStatus.succeeded, final.error
    assert api.notes == [{"text": "hi"}]
    assert '"saved": 1' in tool_messages(openai_server.bodies[1])["n1"]
    assert final.node_runs["agent"].data["planning"]["confirmations"][0]["approved"] is True


async def test_rejected_write_tool_is_not_run(openai_server, scripted_registry, memory, api):
    openai_server.script(calls(("n1", "save_note", {"body": {"text": "hi"}})), answer("Not saved."))
    h = Harness(scripted_registry, memory, agent_flow(http_tools=http_tools(api.url)))
    final = await h.answer(await h.start("save a note"), "reject")
    assert final.status is RunStatus.succeeded and api.notes == []
    assert "did not allow the write-level tool 'save_note'" in tool_messages(openai_server.bodies[1])["n1"]


async def test_allowed_write_tools_and_read_tools_need_no_confirmation(openai_server, scripted_registry, memory, api):
    openai_server.script(calls(("w", "get_weather", {"city": "Oslo"}), ("n", "save_note", {"body": {"t": 1}})),
                         answer("ok"))
    doc = agent_flow(http_tools=http_tools(api.url), allow_write_tools=["save_note"])
    state = await Harness(scripted_registry, memory, doc).start("go")
    assert state.status is RunStatus.succeeded and api.notes == [{"t": 1}]


async def test_tool_of_unknown_risk_counts_as_write(openai_server, scripted_registry, memory, tmp_path, monkeypatch):
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "greet.json").write_text(json.dumps(build(
        [node("say", "answer", {"text": "Hello {{ inputs.name }}!"})], [edge("start", "say")], id="greet",
        inputs=[{"name": "name", "type": "string", "required": True}])))
    monkeypatch.setenv("FLOWLOOM_WORKFLOW_PATH", str(flows))
    openai_server.script(calls(("g", "greet", {"name": "Ada"})), answer("Greeted."))
    h = Harness(scripted_registry, memory, agent_flow(workflow_tools=[{"workflow": "greet"}]))
    state = await h.start("greet Ada")
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "confirm" and interrupt.payload.tool == "greet"
    final = await h.answer(state, "yes")
    assert final.status is RunStatus.succeeded
    assert "Hello Ada!" in tool_messages(openai_server.bodies[1])["g"]


# ----------------------------------------------------------------------------- sub-agents


async def test_model_sub_agent_is_one_call_without_tools(openai_server, scripted_registry, memory):
    openai_server.script(calls(("m", "summariser", {"task": "Summarise: sun and wind"})), answer("Sunny, windy."),
                         answer("Summary: sunny and windy."))
    doc = agent_flow(model_agents=[{"name": "summariser", "model": "plain-model", "system_prompt": "Be brief."}])
    state = await Harness(scripted_registry, memory, doc).start("summarise")
    assert state.status is RunStatus.succeeded, state.error
    sub = openai_server.bodies[1]
    assert "tools" not in sub and sub["model"] == "plain-model"
    assert sub["messages"] == [{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "Summarise: sun and wind"}]
    assert "Sunny, windy." in tool_messages(openai_server.bodies[2])["m"]
    assert state.node_runs["agent"].usage.calls == 3


async def test_file_reader_reads_uploads_only_under_the_upload_directory(
        openai_server, scripted_registry, memory, tmp_path, monkeypatch):
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "notes.txt").write_text("Picnic: bring bread.", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    monkeypatch.setenv("FLOWLOOM_UPLOAD_DIR", str(uploads))
    files = [{"name": "notes.txt", "path": "notes.txt"}, {"name": "secret.txt", "path": str(tmp_path / "secret.txt")},
             {"name": "remote.txt", "url": "https://example.com/remote.txt"}]
    openai_server.script(calls(("r1", "read_file", {"file": "notes.txt"}), ("r2", "read_file", {"file": "secret.txt"}),
                               ("r3", "read_file", {"file": "remote.txt"})), answer("Bring bread."))
    doc = build([node("agent", "agent", {"model": "tools-model", "file_reader": {"files": {"ref": "inputs.files"}}})],
                [edge("start", "agent")],
                inputs=[{"name": "query", "type": "string"}, {"name": "files", "type": "array"}])
    h = Harness(scripted_registry, memory, doc)
    state = await run_workflow(h.plan, {"query": "what to bring?", "files": files}, deps=h.deps())
    assert state.status is RunStatus.succeeded, state.error
    results = tool_messages(openai_server.bodies[1])
    assert "Picnic: bring bread." in results["r1"]
    assert "outside the upload directory" in results["r2"] and "top secret" not in results["r2"]
    assert "not a local upload" in results["r3"]


async def test_two_write_calls_in_one_round_are_confirmed_one_by_one(openai_server, scripted_registry, memory, api):
    openai_server.script(calls(("n1", "save_note", {"body": {"n": 1}}), ("n2", "save_note", {"body": {"n": 2}})),
                         answer("Both saved."))
    h = Harness(scripted_registry, memory, agent_flow(http_tools=http_tools(api.url)))
    state = await h.start("save two notes")
    assert next(iter(state.interrupts.values())).payload.arguments == '{"body": {"n": 1}}'
    restored = RunState.model_validate_json((await h.answer(state, "approve")).model_dump_json())
    (second,) = restored.interrupts.values()
    assert second.kind == "confirm" and second.payload.arguments == '{"body": {"n": 2}}'
    assert api.notes == [{"n": 1}]
    final = await h.answer(restored, "approve")
    assert final.status is RunStatus.succeeded, final.error
    assert api.notes == [{"n": 1}, {"n": 2}]
    results = tool_messages(openai_server.bodies[1])
    assert '"saved": 1' in results["n1"] and '"saved": 2' in results["n2"]


async def test_ask_and_resume_with_a_model_without_native_tools(openai_server, scripted_registry, memory):
    ask = {"type": "tool_calls", "calls": [{"tool": ASK_TOOL, "params": ASK_ARGS}]}
    openai_server.script(Reply([Text(json.dumps(ask)), Finish("stop"), Usage(20, 10)]),
                         Reply([Text('{"type": "answer", "text": "Tokyo it is."}'), Finish("stop"), Usage(20, 10)]))
    h = Harness(scripted_registry, memory, agent_flow(model="plain-model"))
    state = await h.start("weather?")
    (interrupt,) = state.interrupts.values()
    assert interrupt.kind == "ask" and "tools" not in openai_server.bodies[0]
    final = await h.answer(state, "Tokyo")
    assert final.status is RunStatus.succeeded, final.error
    assert final.answer == "Tokyo it is."
    last = openai_server.bodies[1]["messages"][-1]
    assert last["role"] == "user" and "The user answered: Tokyo" in last["content"]


# ----------------------------------------------------------------------------- compile checks


def test_config_checks_at_compile_time(scripted_registry):
    from engine import CompileError

    def problems(doc: dict[str, Any]) -> set[tuple[str, str | None]]:
        with pytest.raises(CompileError) as caught:
            compile_workflow(doc, models=scripted_registry, use_cache=False)
        return {(p.code, p.node_id) for p in caught.value.problems}

    inside = build([node("iter", "iteration", {"items": [1, 2]}), node("agent", "agent", {"model": "tools-model"},
                                                                       parent="iter")],
                   [edge("start", "iter")])
    assert ("interrupt_in_loop", "agent") in problems(inside), "an agent asks people: not inside a loop body"
    dupes = agent_flow(model_agents=[{"name": "x"}], http_tools=[{"operationId": "x", "base_url": "http://h"}])
    assert ("invalid_config", "agent") in problems(dupes)
    assert ("unknown_model", "agent") in problems(agent_flow(model_agents=[{"name": "m", "model": "nope"}]))


async def test_graph_tool_in_the_agent_body_runs_with_the_call_arguments(openai_server, scripted_registry, memory):
    doc = agent_flow(tools=[{"node": "to_f", "name": "to_fahrenheit", "description": "Celsius to Fahrenheit",
                             "parameters": [{"name": "celsius", "type": "number", "required": True}],
                             "result": {"ref": "to_f.output"}}], allow_write_tools=True)
    doc["nodes"].append(node("to_f", "template", {"template": "{{ agent.args.celsius * 9 / 5 + 32 }}"},
                             parent="agent"))
    openai_server.script(calls(("c1", "to_fahrenheit", {"celsius": 100})), answer("100 C is 212 F."))
    harness = Harness(scripted_registry, memory, doc)
    state = await harness.start("convert 100 C")
    assert state.status == "succeeded", state.error
    assert state.answer == "100 C is 212 F."
    assert tool_messages(openai_server.bodies[1])["c1"].splitlines()[1] == "212.0"


def _protocol(value: dict[str, Any]) -> Reply:
    return Reply([Text(json.dumps(value)), Finish("stop"), Usage(30, 5)])


async def test_an_echoed_format_hint_is_a_parse_failure_not_a_stop_attempt(openai_server, scripted_registry, memory):
    from nodes.agent.protocol import EXAMPLE_ANSWER

    plan = {"tool": PLAN_TOOL, "params": {"updates": [{"operation": "set_plan", "goal": "help", "steps": ["a"]}]}}
    done = {"tool": PLAN_TOOL, "params": {"updates": [{"operation": "update_step", "step_id": "1", "status": "done"}]}}
    openai_server.script(_protocol({"type": "tool_calls", "calls": [plan]}),
                         _protocol({"type": "answer", "text": EXAMPLE_ANSWER}),
                         _protocol({"type": "answer", "text": "<your final answer>"}),
                         _protocol({"type": "tool_calls", "calls": [done]}),
                         _protocol({"type": "answer", "text": "All done."}))
    state = await Harness(scripted_registry, memory, agent_flow(model="plain-model")).start("help")
    assert state.status is RunStatus.succeeded and state.answer == "All done.", state.error
    gate = state.node_runs["agent"].data["planning"]["gate"]
    assert [g.get("passed") for g in gate] == [True], "an echo is never a stop attempt"
    for body in openai_server.bodies[2:4]:
        assert "repeats the format example" in body["messages"][-1]["content"]
