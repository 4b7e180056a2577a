"""examples/research_agent.json end to end from the CLI, with the embedded store and with Redis.

The agent plans, asks which city (``ask`` interrupt), checks the weather through the
weather_lookup sub-workflow and finds a park through an HTTP tool (both read-level: one
parallel round), then saves a note with a POST tool (write-level: ``confirm`` interrupt).
The bundled ``default`` model points at the scripted OpenAI-compatible server
(FLOWLOOM_LLM_BASE_URL / _API_KEY / _MODEL); the tools hit the local stub API
(examples/stub_server.py). Nothing leaves 127.0.0.1.

- ``flowloom run`` prompts on the terminal for both answers and goes on;
- ``flowloom run --no-input`` pauses; ``flowloom resume RUN_ID --answer ...`` continues it
  from other processes, reusing the run id, the node run and the same message chain.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from nodes.agent.plan import ASK_TOOL, PLAN_TOOL
from nodes.llm.model_registry import load_registry
from schemas.run import Interrupt
from tests.support.catalog import compile_workflow
from tests.support.cli import FLOWLOOM
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage, openai_server  # noqa: F401
from tests.support.stub_api import stub_api

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "research_agent.json"
QUESTION = "Plan a picnic for tomorrow"
ANSWER = "Picnic in Paris at Parc des Buttes-Chaumont: 18 C and partly cloudy. I saved a note of the plan."


def calls(*items: tuple[str, str, Any]) -> Reply:
    steps: list[Any] = [ToolDelta(i, cid, name, json.dumps(args)) for i, (cid, name, args) in enumerate(items)]
    return Reply(steps + [Finish("tool_calls"), Usage(150, 30)])


def plan_op(cid: str, *updates: dict[str, Any]) -> tuple[str, str, Any]:
    return (cid, PLAN_TOOL, {"updates": list(updates)})


def done(step: str, note: str | None = None) -> dict[str, Any]:
    return {"operation": "update_step", "step_id": step, "status": "done", **({"note": note} if note else {})}


def script(server: Any, stub: str) -> None:
    """The model's side of the conversation (5 rounds)."""
    server.script(
        calls(plan_op("c_plan", {"operation": "set_plan", "goal": "a picnic plan",
                                 "steps": ["Find out the city", "Check the weather", "Find a park", "Save a note"]}),
              ("c_ask", ASK_TOOL, {"question": "Which city is the picnic in?", "options": ["Paris", "Oslo", "Tokyo"],
                                   "reason": "missing_input"})),
        calls(plan_op("c_p1", done("1", "Paris")),
              ("c_weather", "weather_report", {"city": "Paris", "base_url": stub}),
              ("c_places", "find_places", {"city": "Paris"})),
        calls(plan_op("c_p2", done("2", "18 C, partly cloudy"), done("3", "Parc des Buttes-Chaumont")),
              ("c_note", "save_note", {"body": {"title": "Picnic", "text": "Paris, Parc des Buttes-Chaumont"}})),
        calls(plan_op("c_p3", done("4", "saved"))),
        Reply([Text(ANSWER), Finish("stop"), Usage(300, 25)]),
    )


@pytest.fixture
def stub() -> Iterator[str]:
    """A fresh stub API (its notes start empty) on a free port of 127.0.0.1."""
    with stub_api() as url:
        yield url


@pytest.fixture(params=["embedded", "redis"])
def store_env(request, tmp_path, openai_server) -> dict[str, str]:
    """Environment of the CLI processes: the scripted model, the stub allowed, one store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLOOM_")}
    env.update(FLOWLOOM_LLM_BASE_URL=openai_server.base_url, FLOWLOOM_LLM_API_KEY="test",
               FLOWLOOM_LLM_MODEL="scripted-upstream", FLOWLOOM_HTTP_ALLOW="127.0.0.1",
               FLOWLOOM_HOME=str(tmp_path / "home"))
    if request.param == "redis":
        env["FLOWLOOM_REDIS_URL"] = request.getfixturevalue("redis_url")
    return env


def flowloom(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLOWLOOM, *args], input=stdin, capture_output=True, text=True, env=env, timeout=90,
                          cwd=ROOT)


def events_of(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def notes(stub: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{stub}/notes", timeout=5) as response:
        return json.loads(response.read())["notes"]


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def check_conversation(server: Any) -> None:
    """Five model calls, one message chain: each request extends the previous one."""
    bodies = server.bodies
    assert len(bodies) == 5 and all(b["model"] == "scripted-upstream" for b in bodies)
    for before, after in pairwise(bodies):
        assert after["messages"][:len(before["messages"])] == before["messages"]
    second = tool_results(bodies[1])
    assert "The user answered: Paris" in second["c_ask"]
    third = tool_results(bodies[2])
    assert "Weather in Paris: 18 C, partly cloudy" in third["c_weather"]
    assert "Parc des Buttes-Chaumont" in third["c_places"]
    assert '"status_code": 201' in tool_results(bodies[3])["c_note"]
    assert bodies[4]["tool_choice"] == "none", "the plan is complete: only the answer is left"
    assert sum(1 for m in bodies[4]["messages"] if m.get("tool_call_id") == "c_ask") == 1


def check_outputs(outputs: dict[str, Any]) -> None:
    assert outputs["answer"] == ANSWER and outputs["stop_reason"] == "answer" and outputs["rounds"] == 5
    assert [s["status"] for s in outputs["plan"]["steps"]] == ["done"] * 4
    assert outputs["asks"] == [{"question": "Which city is the picnic in?", "options": ["Paris", "Oslo", "Tokyo"],
                                "answer": "Paris"}]


def test_example_compiles_against_the_bundled_registry(openai_server, monkeypatch):
    monkeypatch.delenv("FLOWLOOM_MODELS", raising=False)
    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("FLOWLOOM_LLM_API_KEY", "test")
    plan = compile_workflow(EXAMPLE.read_text(), models=load_registry(), use_cache=False)
    assert not plan.warnings
    config = plan.nodes["agent"].node.config
    assert config.model == "default" and config.plan == "required"


def test_run_prompts_for_the_question_and_the_confirmation(store_env, openai_server, stub):
    script(openai_server, stub)
    proc = flowloom(store_env, "run", str(EXAMPLE), "--input", f"question={QUESTION}", "--input", f"base_url={stub}",
                    stdin="1\napprove\n")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Which city is the picnic in?" in proc.stderr and "[1] Paris" in proc.stderr
    assert "write-level tool 'save_note'" in proc.stderr and "[approve] Allow this call" in proc.stderr
    assert ANSWER in proc.stdout
    check_conversation(openai_server)
    assert notes(stub) == [{"id": 1, "title": "Picnic", "text": "Paris, Parc des Buttes-Chaumont"}]


def test_resume_from_other_processes_continues_the_same_run(store_env, openai_server, stub, request):
    script(openai_server, stub)
    first = flowloom(store_env, "run", str(EXAMPLE), "--input", f"question={QUESTION}", "--input", f"base_url={stub}",
                     "--no-input", "--json")
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
    run_id = re.search(r"run paused: (\S+) waits", first.stderr).group(1)
    events = events_of(first)
    ask = next(e for e in events if e["type"] == "interrupt")
    assert ask["kind"] == "ask" and ask["payload"]["question"] == "Which city is the picnic in?"
    assert [o["label"] for o in ask["payload"]["options"]] == ["Paris", "Oslo", "Tokyo"]

    # the pending context is in the run store, on the waiting node run
    shown = flowloom(store_env, "show", run_id, "--node", "agent", "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    (agent_run,) = record["node_runs"]
    assert agent_run["status"] == "waiting"
    assert record["run"]["status"] == "paused"
    assert record["run"]["pending_interrupts"][0]["payload"]["question"] == "Which city is the picnic in?"

    second = flowloom(store_env, "resume", run_id, "--answer", "1", "--no-input", "--json")
    assert second.returncode == 3, second.stdout[-3000:] + second.stderr[-3000:]
    resumed = events_of(second)
    assert resumed[0]["type"] == "run_resumed" and resumed[0]["run_id"] == run_id
    confirm = next(e for e in resumed if e["type"] == "interrupt")
    assert confirm["kind"] == "confirm" and confirm["payload"]["tool"] == "save_note"
    assert confirm["node_run_id"] == ask["node_run_id"], "the same node run"
    assert notes(stub) == [], "nothing is written before the confirmation"

    third = flowloom(store_env, "resume", run_id, "--answer", "approve", "--json")
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    final = events_of(third)
    assert final[-1]["type"] == "run_finished" and final[-1]["run_id"] == run_id
    check_outputs(final[-1]["outputs"])
    assert final[-1]["answer"] == ANSWER
    check_conversation(openai_server)
    assert len(notes(stub)) == 1


def test_cli_prompt_shows_the_agent_question_and_options(monkeypatch, capsys):
    from api.cli.questions import ask

    monkeypatch.setattr(sys, "stdin", io.StringIO("2\n"))
    interrupt = Interrupt(id="i1", node_id="agent", node_run_id="run:agent", kind="ask",
                          payload={"question": "Which city?", "reason": "missing_input",
                                   "options": [{"id": "1", "label": "Paris"}, {"id": "2", "label": "Oslo"},
                                               {"id": "3", "label": "Tokyo"}]})
    assert ask(interrupt) == "2"
    err = capsys.readouterr().err
    assert "Which city?" in err and "[1] Paris" in err and "[3] Tokyo" in err
