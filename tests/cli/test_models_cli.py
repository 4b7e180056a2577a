"""``flowloom models``: probing a local endpoint, writing the findings to the override file,
and the limits and capabilities runs then see (the file and the ``default`` model's
variables applied without copying the registry)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import FLOWLOOM
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.probe_servers import server_like

pytestmark = pytest.mark.slow  # each command is a fresh interpreter


def _flowloom(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home"), **env}
    for var in ("FLOWLOOM_MODELS", "FLOWLOOM_MODELS_OVERRIDE", "FLOWLOOM_LLM_CONTEXT", "FLOWLOOM_LLM_TOOLS"):
        if var not in env:
            full.pop(var, None)
    return subprocess.run([FLOWLOOM, *args], capture_output=True, text=True, cwd=tmp_path, env=full, timeout=120)


def test_probe_write_stores_the_findings_runs_then_use(tmp_path):
    with ScriptedOpenAIServer(server_like(free_tools=False, forced_tools=True, json_mode="refused",
                                          stream_usage=False)) as server:
        server.json_routes["/props"] = {"default_generation_settings": {"n_ctx": 4096}}
        env = {"FLOWLOOM_LLM_BASE_URL": server.base_url, "FLOWLOOM_LLM_MODEL": "gemma"}
        shown = _flowloom(tmp_path, env, "models", "probe", "default")
        written = _flowloom(tmp_path, env, "models", "probe", "default", "--write", "--json")
    assert shown.returncode == 0, shown.stderr
    assert "free tool call" in shown.stdout and "llama.cpp /props" in shown.stdout
    assert "--write stores these findings" in shown.stdout
    assert written.returncode == 0, written.stderr
    report = json.loads(written.stdout)
    assert report["tools"] == "forced" and report["context_length"] == 4096
    override = tmp_path / "home" / "models.override.toml"
    assert report["written_to"] == str(override)
    text = override.read_text()
    assert "[models.default]" in text and "max_context = 4096" in text

    after = _flowloom(tmp_path, {}, "models", "show", "default", "--json")
    assert after.returncode == 0, after.stderr
    spec = json.loads(after.stdout)
    assert spec["max_context"] == 4096 and spec["max_output_tokens"] < 4096
    assert spec["capabilities"]["tools"] == "forced"
    assert spec["capabilities"]["stream_usage"] is False and spec["capabilities"]["json_mode"] is False


def test_default_model_env_and_override_file_change_limits(tmp_path):
    extra = tmp_path / "extra.toml"
    extra.write_text('[models."llama3.1-8b"]\nmax_context = 16384\ncapabilities = { tools = "none" }\n')
    env = {"FLOWLOOM_MODELS_OVERRIDE": str(extra), "FLOWLOOM_LLM_CONTEXT": "8192", "FLOWLOOM_LLM_TOOLS": "none"}
    listed = _flowloom(tmp_path, env, "models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    models = {m["name"]: m for m in json.loads(listed.stdout)}
    assert models["default"]["max_context"] == 8192 and models["default"]["capabilities"]["tools"] == "none"
    assert models["llama3.1-8b"]["max_context"] == 16384
    assert models["llama3.1-8b"]["capabilities"]["tool_choice"] is False  # kept: merged key by key
    assert models["gpt-4o"]["max_context"] == 128000


def test_bad_values_are_named_not_tracebacks(tmp_path):
    bad_env = _flowloom(tmp_path, {"FLOWLOOM_LLM_TOOLS": "sometimes"}, "models", "list")
    assert bad_env.returncode == 2 and "FLOWLOOM_LLM_TOOLS" in bad_env.stderr and "Traceback" not in bad_env.stderr
    typo = tmp_path / "typo.toml"
    typo.write_text("[models.defualt]\nmax_context = 4096\n")
    bad_file = _flowloom(tmp_path, {"FLOWLOOM_MODELS_OVERRIDE": str(typo)}, "models", "list")
    assert bad_file.returncode == 2 and "models.defualt is not in the registry" in bad_file.stderr
    unknown = _flowloom(tmp_path, {}, "models", "probe", "nope")
    assert unknown.returncode == 2 and "unknown model 'nope'" in unknown.stderr


def test_probe_of_an_unreachable_endpoint_exits_2(tmp_path):
    server = ScriptedOpenAIServer().start()
    url = server.base_url
    server.stop()
    result = _flowloom(tmp_path, {"FLOWLOOM_LLM_BASE_URL": url}, "models", "probe", "default", "--timeout", "5")
    assert result.returncode == 2 and "cannot reach" in result.stderr and "Traceback" not in result.stderr
