"""``missing_api_key``: validation warns, per node and model field, when the model's
provider needs an API key in a variable this deployment has not set (the environment over
``.env``, where the registry reads keys). Only a warning: the operator may set the key
before anyone runs the workflow. Providers that need no key (a local endpoint, a base URL
chosen by the environment, the override) never warn, and the key's value is never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.settings import Settings
from engine.shapes import deployment_problems
from nodes import builtin_catalog
from nodes.llm.model_registry import ModelRegistry, load_registry
from tests.support.workflows import build, chain_edges, node

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "FLOWLOOM_TEST_MISSING_KEY"
SIZES = {"max_context": 8192, "max_output_tokens": 512}


@pytest.fixture
def registry(monkeypatch) -> ModelRegistry:
    monkeypatch.delenv(KEY_ENV, raising=False)
    return ModelRegistry.from_dict({
        "providers": {"cloud": {"base_url": "https://llm.example.com/v1", "api_key_env": KEY_ENV},
                      "local": {"base_url": "http://127.0.0.1:11434/v1"}},
        "models": {"cloud-model": {"provider": "cloud", **SIZES}, "local-model": {"provider": "local", **SIZES}},
    }, env={})


def chat(model: str, node_id: str = "chat") -> dict:
    return build([node(node_id, "chat", {"model": model})], chain_edges("start", node_id))


def found(doc, models, settings=None):
    problems = deployment_problems(doc, catalog=builtin_catalog(), settings=settings or Settings(), models=models)
    return [(p.code, p.severity, p.node_id, p.path) for p in problems]


def test_a_model_whose_key_is_unset_warns_naming_node_field_model_and_variable(registry, monkeypatch):
    [problem] = deployment_problems(chat("cloud-model"), catalog=builtin_catalog(), settings=Settings(),
                                    models=registry)
    assert (problem.code, problem.severity, problem.node_id, problem.path) == (
        "missing_api_key", "warning", "chat", "config.model")
    assert "'cloud-model'" in problem.message and KEY_ENV in problem.message
    assert "point" not in problem.message, "a URL fixed in the registry has no local alternative to offer"
    monkeypatch.setenv(KEY_ENV, "   ")  # blank is not a key: the registry would refuse it too
    assert found(chat("cloud-model"), registry) == [("missing_api_key", "warning", "chat", "config.model")]
    monkeypatch.setenv(KEY_ENV, "sk-secret-value")
    assert found(chat("cloud-model"), registry) == []


def test_local_unknown_and_unchecked_models_do_not_warn(registry):
    assert found(chat("local-model"), registry) == []
    assert found(chat("no-such-model"), registry) == [], "unknown models are the compiler's to report"
    assert found(chat("cloud-model"), None) == [], "without a model catalog nothing is checked"


def test_every_model_field_of_a_node_is_checked(registry):
    doc = build([node("agent", "agent", {"model": "local-model", "model_agents": [
        {"name": "writer", "model": "cloud-model"}, {"name": "same", "description": "uses the agent's model"}]})],
        chain_edges("start", "agent"))
    assert found(doc, registry) == [("missing_api_key", "warning", "agent", "config.model_agents[0].model")]


def test_the_bundled_default_model_warns_until_its_key_or_a_local_url_is_set(monkeypatch):
    monkeypatch.delenv("FLOWLOOM_LLM_API_KEY", raising=False)
    cloud = load_registry(env={})
    [problem] = deployment_problems(chat("default"), catalog=builtin_catalog(), settings=Settings(), models=cloud)
    assert problem.code == "missing_api_key" and "FLOWLOOM_LLM_API_KEY" in problem.message
    assert "point FLOWLOOM_LLM_BASE_URL at your own OpenAI-compatible server" in problem.message, (
        "a model served from a URL variable can be given a local endpoint instead of a key")
    [reranker] = deployment_problems(
        build([node("kr", "knowledge_retrieval", {"datasets": ["handbook"], "rerank": {"model": "bge-reranker"}})],
              chain_edges("start", "kr")), catalog=builtin_catalog(), settings=Settings(), models=cloud)
    assert "FLOWLOOM_LLM_BASE_URL" in reranker.message
    local = load_registry(env={"FLOWLOOM_LLM_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert found(chat("default"), local) == []
    overridden = load_registry(env={}, base_url_override="http://127.0.0.1:8000/v1")
    assert found(chat("default"), overridden) == []


def test_the_registry_names_the_variable_never_the_key(registry, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-secret-value")
    assert registry.required_key_env("cloud-model") == KEY_ENV
    assert registry.required_key_env("local-model") is None
    assert registry.required_key_env("no-such-model") is None
    assert registry.base_url_env("cloud-model") is None and registry.base_url_env("no-such-model") is None
    assert load_registry(env={}).base_url_env("bge-m3") == "FLOWLOOM_LLM_BASE_URL"


def test_the_examples_only_warn_about_keys(monkeypatch):
    monkeypatch.delenv("FLOWLOOM_LLM_API_KEY", raising=False)
    models = load_registry(env={})
    warned = set()
    for path in sorted((ROOT / "examples").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        problems = deployment_problems(doc, catalog=builtin_catalog(), settings=Settings(), models=models)
        assert [str(p) for p in problems if p.severity == "error"] == [], path.name
        warned |= {path.name for p in problems if p.code == "missing_api_key"}
    assert {"research_agent.json", "support_triage.json", "tool_agent.json"} <= warned, "the default model needs its key"


def test_a_refused_launch_says_a_shared_models_remedy_once_naming_every_node():
    from engine.errors import MissingModelKey, Problem

    same = "model 'default' needs an API key in FLOWLOOM_LLM_API_KEY"
    other = "model 'cloud' needs an API key in CLOUD_KEY"
    refused = MissingModelKey([Problem("missing_api_key", same, node_id=n, path="config.model", severity="error")
                               for n in ("draft", "polish", "review")]
                              + [Problem("missing_api_key", other, node_id="judge", path="config.model",
                                         severity="error")])
    assert str(refused) == ("this deployment lacks what the workflow needs (nothing was run): "
                            f"nodes draft, polish, review: {same}; judge: {other}")
    assert len(refused.problems) == 4  # each node still named in the problems
