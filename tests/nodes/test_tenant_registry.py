"""A tenant's registry over the operator's: its models win over the operator's of the
same name, ``default`` is its default chat model, its keys are its own (never the
environment's), a stored model that no longer validates is left out, and its endpoints
connect through the address guard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.errors import BlockedAddress
from engine.settings import Settings
from nodes.http.guard import AddressPolicy
from nodes.llm.model_registry import load_registry
from nodes.llm.tenant_registry import TenantRegistry, snapshot_digest, tenant_registry


@dataclass
class Model:
    name: str
    spec: dict[str, Any]


@dataclass
class Provider:
    id: str
    base_url: str
    models: list[Model] = field(default_factory=list)


def _chat(model: str, context: int = 8192) -> dict[str, Any]:
    return {"model": model, "type": "chat", "max_context": context, "max_output_tokens": 1024}


@pytest.fixture
def base():
    return load_registry(env={"OPENAI_API_KEY": "sk-operator"})


def _guard(*allow: str) -> AddressPolicy:
    return AddressPolicy.from_settings(Settings(http_allow=list(allow)))


def test_a_tenant_without_providers_or_defaults_uses_the_operator_registry(base):
    assert tenant_registry(base, [], {}, {}, guard=_guard()) is base


def test_tenant_models_win_and_default_is_the_tenant_choice(base):
    team = Provider("team", "https://llm.team.example/v1", [Model("gpt-4o-mini", _chat("team-mini")),
                                                           Model("team-chat", _chat("qwen"))])
    registry = tenant_registry(base, [team], {"team": "sk-team"}, {"chat": "team-chat"}, guard=_guard())
    assert isinstance(registry, TenantRegistry)
    shadowed = registry.get("gpt-4o-mini")
    assert shadowed.model == "team-mini" and registry.base_url(shadowed) == "https://llm.team.example/v1"
    assert registry.api_key(shadowed) == "sk-team", "the tenant's own key, not OPENAI_API_KEY"
    default = registry.get("default")
    assert default.model == "qwen" and registry.api_key(default) == "sk-team"
    assert registry.has("gpt-4o") and registry.api_key(registry.get("gpt-4o")) == "sk-operator"
    assert registry.required_key_env("team-chat") is None
    described = registry.describe("team-chat")
    assert described["key"] == "stored" and "sk-team" not in repr(described) and "sk-team" not in repr(registry)
    assert registry.fingerprint != base.fingerprint


def test_the_default_may_be_an_operator_model_and_must_be_a_chat_model(base):
    registry = tenant_registry(base, [], {}, {"chat": "gpt-4o"}, guard=_guard())
    assert registry.get("default").model == "gpt-4o"
    embed = Provider("e", "https://e.example/v1", [Model("vec", {"model": "vec", "type": "embedding",
                                                                 "max_context": 512})])
    registry = tenant_registry(base, [embed], {}, {"chat": "vec"}, guard=_guard())
    assert registry.get("default") == base.get("default"), "an embedding model is never the chat default"


def test_a_stored_model_that_no_longer_validates_is_left_out(base, caplog):
    team = Provider("team", "https://t.example/v1", [Model("ok", _chat("ok")),
                                                     Model("broken", {"type": "chat", "max_context": 10,
                                                                      "max_output_tokens": 20})])
    registry = tenant_registry(base, [team], {}, {}, guard=_guard())
    assert registry.has("ok") and not registry.has("broken")
    assert "broken" in caplog.text


def test_the_digest_changes_with_any_part_and_never_holds_the_key():
    one = Provider("p", "http://a/v1", [Model("m", _chat("m"))])
    digest = snapshot_digest([one], {"p": "sk-1"}, {})
    assert digest != snapshot_digest([one], {"p": "sk-2"}, {})
    assert digest != snapshot_digest([one], {"p": "sk-1"}, {"chat": "m"})
    assert "sk-1" not in digest


async def test_tenant_endpoints_connect_through_the_address_guard(base):
    team = Provider("team", "http://127.0.0.1:9/v1", [Model("local", _chat("local"))])
    registry = tenant_registry(base, [team], {}, {}, guard=_guard())
    client = registry.client_for(registry.get("local"))
    try:
        with pytest.raises(BlockedAddress, match="FLOWLOOM_HTTP_ALLOW"):
            await client.models.list()
    finally:
        await registry.aclose()
