"""examples/tool_agent.json end to end from the CLI: ``examples/run_tool_agent.sh`` starts the
local stub API, ``flowloom run`` runs the agent, and the bundled ``default`` model points at
the scripted OpenAI-compatible server (FLOWLOOM_LLM_BASE_URL / _API_KEY / _MODEL).
Nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nodes.llm.model_registry import load_registry
from tests.support.catalog import compile_workflow
from tests.support.cli import FLOWLOOM
from tests.support.openai_server import Finish, Reply, Text, ToolDelta, Usage, openai_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool_agent.json"
RUNNER = ROOT / "examples" / "run_tool_agent.sh"


def call(call_id: str, name: str, args: dict) -> Reply:
    return Reply([ToolDelta(0, call_id, name, json.dumps(args)), Finish("tool_calls"), Usage(120, 20)])


def llm_env(server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLOOM_MODELS", "FLOWLOOM_HTTP_ALLOW")}
    env.update(FLOWLOOM_LLM_BASE_URL=server.base_url, FLOWLOOM_LLM_API_KEY="sk-example-test",
               FLOWLOOM_LLM_MODEL="scripted-upstream", FLOWLOOM=FLOWLOOM, PYTHON=sys.executable)
    return env


def test_example_compiles_against_the_bundled_registry(openai_server, monkeypatch):
    for key, value in llm_env(openai_server).items():
        if key.startswith("FLOWLOOM_LLM"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("FLOWLOOM_MODELS", raising=False)
    plan = compile_workflow(EXAMPLE.read_text(), models=load_registry(), use_cache=False)
    assert plan.nodes["agent"].body is not None and set(plan.nodes["agent"].body.nodes) == {"to_f"}
    assert not plan.warnings


def test_runs_from_the_cli_with_the_stub_api_and_the_scripted_model(openai_server):
    openai_server.script(
        call("call_w", "get_weather", {"city": "Paris"}),
        call("call_f", "to_fahrenheit", {"celsius": 18}),
        Reply([Text("It is 64.4 F and partly cloudy in Paris."), Finish("stop"), Usage(200, 12)]),
    )
    proc = subprocess.run(["bash", str(RUNNER), "Weather in Paris in Fahrenheit?", "--json"], cwd=ROOT,
                          env=llm_env(openai_server), capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    finished = events[-1]
    assert finished["type"] == "run_finished"
    assert finished["answer"] == "It is 64.4 F and partly cloudy in Paris."
    assert finished["outputs"]["rounds"] == 3 and finished["outputs"]["stop_reason"] == "answer"
    bodies = openai_server.bodies
    assert len(bodies) == 3 and bodies[0]["model"] == "scripted-upstream"
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["to_fahrenheit", "get_weather"]
    weather = [m for m in bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert '"temp_c": 18' in weather and "partly cloudy" in weather and "BEGIN tool_observation" in weather
    converted = [m for m in bodies[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert converted.splitlines()[1] == "64.4 F"
    body_runs = [e for e in events if e["type"] == "node_finished" and e["node_id"] == "to_f"]
    assert body_runs and body_runs[0]["loop_id"] == "agent" and body_runs[0]["status"] == "succeeded"


def test_an_unknown_city_is_a_tool_error_the_model_sees(openai_server):
    openai_server.script(
        call("call_w", "get_weather", {"city": "Atlantis"}),
        Reply([Text("I could not find weather data for Atlantis."), Finish("stop"), Usage(150, 10)]),
    )
    proc = subprocess.run(["bash", str(RUNNER), "Weather in Atlantis?", "--json"], cwd=ROOT,
                          env=llm_env(openai_server), capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = [m for m in openai_server.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "BEGIN tool_error" in result and '"status_code": 404' in result and "unknown city" in result
