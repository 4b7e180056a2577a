"""Local models: one setting points every registry model at a local OpenAI-compatible
endpoint, a custom base URL needs no key, the registry reads variables only through the
settings, and connection errors name the URL tried and the retries."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from engine.settings import Settings
from nodes.llm.model_registry import MissingAPIKey, load_registry, registry_for

ROOT = Path(__file__).resolve().parents[2]


def test_override_points_every_model_at_one_url_and_needs_no_key():
    registry = load_registry(env={}, base_url_override="http://127.0.0.1:11434/v1")
    for name in registry.names():
        spec = registry.get(name)
        assert registry.base_url(spec) == "http://127.0.0.1:11434/v1"
        assert registry.api_key(spec) is None, name


def test_override_sends_only_the_flowloom_key_never_a_cloud_key():
    env = {"OPENAI_API_KEY": "sk-cloud-secret", "FLOWLOOM_LLM_API_KEY": "local-key"}
    registry = load_registry(env=env, base_url_override="http://127.0.0.1:8000/v1")
    assert registry.api_key(registry.get("gpt-4o-mini")) == "local-key"
    without = load_registry(env={"OPENAI_API_KEY": "sk-cloud-secret"}, base_url_override="http://127.0.0.1:8000/v1")
    assert without.api_key(without.get("gpt-4o-mini")) is None


def test_model_override_replaces_every_upstream_id():
    registry = load_registry(env={}, base_url_override="http://127.0.0.1:11434/v1", model_override="qwen2.5:7b")
    assert {registry.get(n).model for n in registry.names()} == {"qwen2.5:7b"}


def test_a_base_url_from_the_environment_makes_the_key_optional():
    registry = load_registry(env={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"})
    spec = registry.get("gpt-4o")
    assert registry.base_url(spec) == "http://127.0.0.1:8080/v1"
    assert registry.api_key(spec) is None
    local_default = load_registry(env={"FLOWLOOM_LLM_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert local_default.api_key(local_default.get("default")) is None


def test_the_official_endpoint_still_needs_its_key():
    registry = load_registry(env={})
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        registry.api_key(registry.get("gpt-4o-mini"))
    keyed = load_registry(env={"OPENAI_API_KEY": "sk-x"})
    assert keyed.api_key(keyed.get("gpt-4o-mini")) == "sk-x"


def test_describe_names_the_variables_never_the_key():
    registry = load_registry(env={"DEEPSEEK_API_KEY": "sk-secret"})
    where = registry.describe("deepseek-chat")
    assert where == {"model": "deepseek-chat", "upstream": "deepseek-chat", "provider": "deepseek",
                     "base_url": "https://api.deepseek.com/v1", "base_url_env": "DEEPSEEK_BASE_URL",
                     "api_key_env": "DEEPSEEK_API_KEY", "key": "required"}
    assert "sk-secret" not in repr(where)
    assert registry.describe("llama3.1-8b")["key"] == "none"


def test_registry_for_applies_the_settings_override():
    settings = Settings(llm_base_url_override="http://127.0.0.1:11434/v1/", models=None)
    registry = registry_for(settings)
    assert registry.base_url(registry.get("deepseek-chat")) == "http://127.0.0.1:11434/v1"
    assert registry_for(settings) is registry, "cached per file and overrides"


def test_the_registry_never_reads_os_environ_itself():
    text = (ROOT / "nodes" / "llm" / "model_registry.py").read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", "``")))
    assert "os.environ." not in code and "os.getenv" not in code and "environ.get" not in code


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_error_names_the_url_tried_and_the_retries():
    from nodes.llm.call import LLMConnectionError, LLMRequest, call_llm

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    registry = load_registry(env={}, base_url_override=url)

    async def call() -> None:
        try:
            await call_llm(LLMRequest(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]),
                           registry=registry, max_retries=2, retry_base_delay=0.0, node_id="ask")
        finally:
            await registry.aclose()

    with pytest.raises(LLMConnectionError) as info:
        asyncio.run(call())
    message = str(info.value)
    assert f"(URL tried: {url})" in message
    assert "[after 3 attempts: 2 retries]" in message
    assert info.value.attempts == 3

