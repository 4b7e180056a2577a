"""The model registry: the TOML file, env substitution, prices, clients (real SDK over HTTP)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import openai
import pytest

from nodes.llm.model_registry import (
    Capabilities,
    MissingAPIKey,
    ModelConfigError,
    ModelRegistry,
    ModelSpec,
    PriceTier,
    Pricing,
    ProviderSpec,
    UnknownModel,
    get_registry,
    load_registry,
    price,
)
from tests.support.openai_server import (
    TEST_API_KEY,
    TEST_KEY_ENV,
    ScriptedOpenAIServer,
    registry_for,
    text_reply,
)

ROOT = Path(__file__).resolve().parents[3]
ENV_VARS = ("FLOWLOOM_MODELS", "FLOWLOOM_LLM_BASE_URL", "FLOWLOOM_LLM_MODEL", "FLOWLOOM_LLM_API_KEY",
            "OPENAI_BASE_URL", "DEEPSEEK_BASE_URL", "DASHSCOPE_BASE_URL", "OLLAMA_BASE_URL", "OLLAMA_MODEL")

SMALL_TOML = """
[providers.local]
base_url = "${LOCAL_URL:-http://127.0.0.1:1/v1}"

[models.tiny]
provider = "local"
max_context = 2048
max_output_tokens = 256
pricing = { input_per_1k = 0.5, output_per_1k = 1.0 }
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, text: str, name: str = "models.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ============================================================================ the bundled file


def test_bundled_registry_lists_default_and_real_models():
    registry = load_registry()

    assert {"default", "gpt-4o-mini", "gpt-4o", "deepseek-chat", "deepseek-reasoner", "qwen-plus",
            "llama3.1-8b"} <= set(registry.names())
    reasoner = registry.get("deepseek-reasoner")
    assert reasoner.capabilities.reasoning and not reasoner.capabilities.tool_calling
    assert registry.get("gpt-4o").capabilities.vision
    assert registry.provider(registry.get("qwen-plus")).base_url == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert registry.provider(registry.get("llama3.1-8b")).api_key_env is None  # local, no key
    assert len(registry.get("qwen-plus").pricing.tiers) == 3
    for name in registry.names():
        spec = registry.get(name)
        assert 0 < spec.max_output_tokens < spec.max_context
        assert registry.provider(spec).base_url.startswith("http")


def test_default_model_falls_back_to_openai_gpt_4o_mini():
    registry = load_registry()

    spec = registry.get("default")
    provider = registry.provider(spec)
    assert (provider.base_url, provider.api_key_env, spec.model) == (
        "https://api.openai.com/v1", "FLOWLOOM_LLM_API_KEY", "gpt-4o-mini")


def test_default_model_follows_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL", "http://gateway.internal:8000/v1")
    monkeypatch.setenv("FLOWLOOM_LLM_MODEL", "qwen2.5-72b-instruct")

    registry = load_registry()

    spec = registry.get("default")
    assert spec.model == "qwen2.5-72b-instruct"
    assert registry.provider(spec).base_url == "http://gateway.internal:8000/v1"
    assert registry.fingerprint != load_registry_without_env(monkeypatch).fingerprint


def load_registry_without_env(monkeypatch: pytest.MonkeyPatch) -> ModelRegistry:
    monkeypatch.delenv("FLOWLOOM_LLM_BASE_URL")
    monkeypatch.delenv("FLOWLOOM_LLM_MODEL")
    return load_registry()


def test_bundled_file_ships_as_package_data():
    from importlib import resources

    assert resources.files("nodes.llm").joinpath("models.toml").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "*.toml" in pyproject["tool"]["setuptools"]["package-data"]["nodes.llm"]


async def test_default_model_runs_against_an_endpoint_given_by_env(openai_server: ScriptedOpenAIServer,
                                                                   monkeypatch: pytest.MonkeyPatch):
    from nodes.llm.call import LLMRequest, call_llm

    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("FLOWLOOM_LLM_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("FLOWLOOM_LLM_MODEL", "my-upstream-model")
    openai_server.script(text_reply("hi from env"))
    registry = load_registry()

    try:
        response = await call_llm(LLMRequest("default", [{"role": "user", "content": "hi"}]), registry=registry)
    finally:
        await registry.aclose()

    assert response.text == "hi from env"
    body = openai_server.bodies[0]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("my-upstream-model", 0.7, 4096)
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {TEST_API_KEY}"


# ============================================================================ loading


def test_explicit_path_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    explicit = write(tmp_path, SMALL_TOML)
    other = write(tmp_path, SMALL_TOML.replace("tiny", "other"), "other.toml")
    monkeypatch.setenv("FLOWLOOM_MODELS", str(other))

    assert load_registry(explicit).names() == ["tiny"]
    from engine.settings import Settings

    assert load_registry(Settings().models).names() == ["other"], "FLOWLOOM_MODELS is read by Settings"
    monkeypatch.delenv("FLOWLOOM_MODELS")
    assert "tiny" not in load_registry(Settings().models).names(), "the bundled registry by default"


def test_env_substitution_uses_the_variable_then_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = write(tmp_path, SMALL_TOML)

    assert load_registry(path).providers[0].base_url == "http://127.0.0.1:1/v1"
    monkeypatch.setenv("LOCAL_URL", "http://10.0.0.2/v1")
    assert load_registry(path).providers[0].base_url == "http://10.0.0.2/v1"


def test_missing_variable_without_fallback_is_named(tmp_path: Path):
    path = write(tmp_path, SMALL_TOML.replace("${LOCAL_URL:-http://127.0.0.1:1/v1}", "${NOT_SET_ANYWHERE}"))

    with pytest.raises(ModelConfigError, match="NOT_SET_ANYWHERE") as info:
        load_registry(path)

    assert "providers.local.base_url" in str(info.value)


@pytest.mark.parametrize(("text", "fragment"), [
    ("[models.x\n", "not valid TOML"),
    (SMALL_TOML.replace('provider = "local"', 'provider = "nowhere"'), "unknown provider 'nowhere'"),
    (SMALL_TOML.replace("max_output_tokens = 256", "max_output_tokens = 4096"), "must be below max_context"),
    (SMALL_TOML + "colour = 'blue'\n", "colour"),
    (SMALL_TOML.replace("max_context = 2048", "max_context = 2048\ntemprature = 1"), "temprature"),
    (SMALL_TOML.replace("pricing = { input_per_1k = 0.5, output_per_1k = 1.0 }", "")
     + "[[models.tiny.pricing.tiers]]\nmax_input_tokens = 10\ninput_per_1k = 1\noutput_per_1k = 1\n"
     "[[models.tiny.pricing.tiers]]\nmax_input_tokens = 5\ninput_per_1k = 1\noutput_per_1k = 1\n",
     "increasing max_input_tokens"),
], ids=["bad-toml", "unknown-provider", "output-over-context", "unknown-top-key", "unknown-model-field",
        "unsorted-tiers"])
def test_invalid_files_name_the_file_and_the_problem(tmp_path: Path, text: str, fragment: str):
    path = write(tmp_path, text)

    with pytest.raises(ModelConfigError) as info:
        load_registry(path)

    assert fragment in str(info.value) and str(path) in str(info.value)


def test_unreadable_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ModelConfigError, match="cannot read"):
        load_registry(tmp_path / "absent.toml")


def test_get_registry_is_cached():
    get_registry.cache_clear()
    try:
        assert get_registry() is get_registry()
        assert get_registry().has("default")
    finally:
        get_registry.cache_clear()


# ============================================================================ lookups


def test_lookups_and_unknown_model(tmp_path: Path):
    registry = load_registry(write(tmp_path, SMALL_TOML))

    assert registry.has("tiny") and not registry.has("huge")
    assert registry.get("tiny").model == "tiny"  # upstream id defaults to the name
    with pytest.raises(KeyError) as info:
        registry.get("huge")
    assert isinstance(info.value, UnknownModel)
    assert str(info.value) == "unknown model 'huge'; known models: tiny"


def test_fingerprint_is_stable_and_follows_content(tmp_path: Path):
    one = load_registry(write(tmp_path, SMALL_TOML, "a.toml"))
    same = load_registry(write(tmp_path, "# reordered comment\n" + SMALL_TOML, "b.toml"))
    cheaper = load_registry(write(tmp_path, SMALL_TOML.replace("0.5", "0.4"), "c.toml"))

    assert one.fingerprint == same.fingerprint
    assert one.fingerprint != cheaper.fingerprint
    assert len(one.fingerprint) == 16


def test_defaults_of_specs():
    spec = ModelSpec(name="m", provider="p", max_context=1000, max_output_tokens=100)

    assert spec.capabilities == Capabilities(tool_calling=True, tool_choice=True, vision=False, reasoning=False,
                                             structured_output=False)
    assert (spec.default_temperature, spec.default_system_prompt, spec.model) == (0.7, "", "m")
    assert spec.pricing == Pricing(input_per_1k=0, output_per_1k=0, tiers=[])
    assert spec.max_input_tokens == 900


# ============================================================================ prices


def test_flat_price():
    spec = ModelSpec(name="m", provider="p", max_context=1000, max_output_tokens=100,
                     pricing=Pricing(input_per_1k=0.5, output_per_1k=1.5))

    assert price(spec, 2000, 1000) == pytest.approx(2.5)
    assert price(spec, 0, 0) == 0


def test_tier_is_chosen_by_the_calls_input_tokens():
    tiers = [PriceTier(max_input_tokens=1000, input_per_1k=1, output_per_1k=2),
             PriceTier(max_input_tokens=5000, input_per_1k=3, output_per_1k=4),
             PriceTier(max_input_tokens=None, input_per_1k=5, output_per_1k=6)]
    spec = ModelSpec(name="m", provider="p", max_context=100_000, max_output_tokens=100, pricing=Pricing(tiers=tiers))

    assert price(spec, 1000, 1000) == pytest.approx(1 + 2)  # the bound is inclusive
    assert price(spec, 1001, 1000) == pytest.approx(1.001 * 3 + 4)
    assert price(spec, 9000, 0) == pytest.approx(9 * 5)


def test_bounded_tiers_only_use_the_last_tier_beyond_them():
    spec = ModelSpec(name="m", provider="p", max_context=100_000, max_output_tokens=100,
                     pricing=Pricing(tiers=[PriceTier(max_input_tokens=10, input_per_1k=1, output_per_1k=1),
                                            PriceTier(max_input_tokens=20, input_per_1k=2, output_per_1k=2)]))

    assert price(spec, 1000, 0) == pytest.approx(2)


def test_open_ended_tier_must_be_last():
    with pytest.raises(ValueError, match="only the last"):
        Pricing(tiers=[PriceTier(input_per_1k=1, output_per_1k=1),
                       PriceTier(max_input_tokens=5, input_per_1k=1, output_per_1k=1)])


def test_bundled_qwen_tiers_price_each_call_by_its_size():
    spec = load_registry().get("qwen-plus")

    assert price(spec, 10_000, 1_000) == pytest.approx(10 * 0.00011 + 0.00028)
    assert price(spec, 100_000, 1_000) == pytest.approx(100 * 0.00033 + 0.00278)


# ============================================================================ clients (real SDK over HTTP)


async def test_client_talks_to_the_provider_with_the_key_from_env(openai_server: ScriptedOpenAIServer,
                                                                  scripted_registry: ModelRegistry):
    openai_server.script(text_reply("plain completion", usage=(3, 2)))
    spec = scripted_registry.get("tools-model")
    client = scripted_registry.client_for(spec)

    completion = await client.chat.completions.create(
        model=spec.model, messages=[{"role": "user", "content": "hi"}], temperature=0, max_tokens=5)

    assert completion.choices[0].message.content == "plain completion"
    assert openai_server.requests[0].path == "/v1/chat/completions"
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert isinstance(client, openai.AsyncOpenAI) and client.max_retries == 0


async def test_clients_are_cached_per_provider_and_key(openai_server: ScriptedOpenAIServer,
                                                       scripted_registry: ModelRegistry,
                                                       monkeypatch: pytest.MonkeyPatch):
    tools, plain = scripted_registry.get("tools-model"), scripted_registry.get("plain-model")

    first = scripted_registry.client_for(tools)
    assert scripted_registry.client_for(plain) is first  # same provider
    monkeypatch.setenv(TEST_KEY_ENV, "sk-rotated-000000")
    assert scripted_registry.client_for(tools) is not first  # a new key, a new client


def test_missing_key_is_a_clear_error_naming_the_variable(openai_server: ScriptedOpenAIServer,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TEST_KEY_ENV, raising=False)
    registry = registry_for(openai_server)

    with pytest.raises(MissingAPIKey) as info:
        registry.client_for(registry.get("tools-model"))

    assert str(info.value) == f"provider 'scripted' needs an API key: set the environment variable {TEST_KEY_ENV}"


def test_provider_without_key_env_needs_no_key(openai_server: ScriptedOpenAIServer):
    registry = registry_for(openai_server, api_key_env=None)

    client = registry.client_for(registry.get("plain-model"))

    assert registry.api_key(registry.get("plain-model")) is None
    assert client.api_key == "no-key"


async def test_the_key_is_never_in_reprs(openai_server: ScriptedOpenAIServer, scripted_registry: ModelRegistry):
    spec = scripted_registry.get("tools-model")
    provider = scripted_registry.provider(spec)
    scripted_registry.client_for(spec)

    for thing in (scripted_registry, spec, provider, provider.model_dump(), spec.model_dump(),
                  scripted_registry.fingerprint):
        assert TEST_API_KEY not in repr(thing) and TEST_API_KEY not in str(thing)
    assert "api_key_env='FLOWLOOM_TEST_LLM_KEY'" in repr(provider)  # the variable's name, never its value


def test_registry_rejects_duplicates_and_unknown_providers():
    provider = ProviderSpec(name="p", base_url="http://x/v1")
    spec = ModelSpec(name="m", provider="p", max_context=100, max_output_tokens=10)

    with pytest.raises(ModelConfigError, match="duplicate model"):
        ModelRegistry([provider], [spec, spec])
    with pytest.raises(ModelConfigError, match="unknown provider 'p'"):
        ModelRegistry([], [spec])


def test_model_override_changes_chat_ids_only_and_the_url_override_every_model():
    # a local server's chat model is no embedding model: a dataset's vectors keep their
    # model's id, while every model (embeddings and rerank too) goes to the override URL
    url = "http://127.0.0.1:11434/v1"
    registry = load_registry(env={}, base_url_override=url, model_override="llama3.1:8b")
    assert registry.get("gpt-4o-mini").model == "llama3.1:8b"
    assert registry.get("text-embedding-3-small", "embedding").model == "text-embedding-3-small"
    assert registry.get("bge-m3", "embedding").model == "bge-m3"
    assert registry.get("bge-reranker", "rerank").model != "llama3.1:8b"
    for name, kind in (("gpt-4o-mini", "chat"), ("bge-m3", "embedding"), ("bge-reranker", "rerank")):
        assert registry.base_url(registry.get(name, kind)) == url
    local = load_registry(env={"FLOWLOOM_EMBEDDING_MODEL": "nomic-embed-text"}, base_url_override=url,
                          model_override="llama3.1:8b")
    assert local.get("bge-m3", "embedding").model == "nomic-embed-text"
