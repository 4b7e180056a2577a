"""Capabilities and limits: the older ``tool_calling`` key, the override file merged key by
key, the ``default`` model's variables, typed overrides, and writing the file back."""

from __future__ import annotations

import tomllib

import pytest

from engine.settings import Settings
from nodes.llm.model_overrides import ModelOverride, dump_toml, write_override
from nodes.llm.model_registry import Capabilities, ModelConfigError, ModelSpec, load_registry, registry_for


def test_older_tool_calling_key_still_reads():
    assert Capabilities(tool_calling=True, tool_choice=False).tools == "native"
    none = Capabilities(tool_calling=False, tool_choice=False)
    assert none.tools == "none" and not none.tool_calling and not none.forced_tool_calls
    assert Capabilities(tool_calling=True, tools="forced").tools == "forced"  # the new key wins
    with pytest.raises(ValueError, match="tool_calling must be true or false"):
        Capabilities(tool_calling="sometimes")
    with pytest.raises(ValueError, match='tools = "forced" needs tool_choice'):
        Capabilities(tools="forced", tool_choice=False)


def test_derived_tool_properties():
    forced = Capabilities(tools="forced")
    assert forced.tool_calling and forced.forced_tool_calls and not forced.free_tool_calls
    ollama = Capabilities(tools="native", tool_choice=False)
    assert ollama.free_tool_calls and not ollama.forced_tool_calls


def test_an_older_registry_file_loads(tmp_path):
    old = tmp_path / "models.toml"
    old.write_text('[providers.p]\nbase_url = "http://127.0.0.1:1/v1"\n'
                   '[models.m]\nprovider = "p"\nmax_context = 4096\nmax_output_tokens = 512\n'
                   'capabilities = { tool_calling = false, tool_choice = false, vision = true }\n')
    spec = load_registry(old, env={}).get("m")
    assert (spec.capabilities.tools, spec.capabilities.vision, spec.capabilities.stream_usage) == ("none", True, True)
    old.write_text(old.read_text().replace("tool_calling = false", 'tool_calling = "no"'))
    with pytest.raises(ModelConfigError, match="tool_calling must be true or false"):
        load_registry(old, env={})


def test_override_file_merges_key_by_key(tmp_path):
    override = tmp_path / "models.override.toml"
    override.write_text('[models."llama3.1-8b"]\nmax_context = 16384\ncapabilities = { tools = "forced" }\n'
                        '[models.default]\ncapabilities = { tool_calling = false }\n')
    registry = load_registry(env={}, override_file=override)
    llama = registry.get("llama3.1-8b")
    assert llama.max_context == 16384 and llama.max_output_tokens == 1024
    assert (llama.capabilities.tools, llama.capabilities.json_mode) == ("forced", True)  # others kept
    assert registry.get("default").capabilities.tools == "none"  # the older key over the bundled `tools`
    assert registry.get("gpt-4o").max_context == 128000
    missing = load_registry(env={}, override_file=tmp_path / "absent.toml")
    assert missing.get("llama3.1-8b").max_context == 4096


def test_override_file_errors_name_the_file_and_entry(tmp_path):
    override = tmp_path / "o.toml"
    override.write_text("[models.gtp-4o]\nmax_context = 1000\n")
    with pytest.raises(ModelConfigError, match="models.gtp-4o is not in the registry"):
        load_registry(env={}, override_file=override)
    override.write_text("[model.default]\nmax_context = 1000\n")
    with pytest.raises(ModelConfigError, match="unknown top-level keys"):
        load_registry(env={}, override_file=override)
    override.write_text("[models.default\n")
    with pytest.raises(ModelConfigError, match="not valid TOML"):
        load_registry(env={}, override_file=override)
    override.write_text('[models.default]\ncapabilities = { tools = "sometimes" }\n')
    with pytest.raises(ModelConfigError, match=str(override)):
        load_registry(env={}, override_file=override)


def test_default_model_variables():
    env = {"FLOWLOOM_LLM_CONTEXT": "4096", "FLOWLOOM_LLM_TOOLS": "forced", "FLOWLOOM_LLM_STREAM_USAGE": "false",
           "FLOWLOOM_LLM_STRUCTURED_OUTPUT": "yes", "FLOWLOOM_LLM_VISION": "1"}
    spec = load_registry(env=env).get("default")
    assert (spec.max_context, spec.max_output_tokens) == (4096, 1024)  # a cap that no longer fits: a quarter
    caps = spec.capabilities
    assert (caps.tools, caps.stream_usage, caps.structured_output, caps.vision) == ("forced", False, True, True)
    both = load_registry(env={"FLOWLOOM_LLM_CONTEXT": "8192", "FLOWLOOM_LLM_MAX_OUTPUT": "512"}).get("default")
    assert (both.max_context, both.max_output_tokens) == (8192, 512)
    assert load_registry(env=env).get("gpt-4o-mini").max_context == 128000  # only the default model
    for var, value in (("FLOWLOOM_LLM_CONTEXT", "4k"), ("FLOWLOOM_LLM_TOOLS", "auto"),
                       ("FLOWLOOM_LLM_VISION", "maybe")):
        with pytest.raises(ModelConfigError, match=var):
            load_registry(env={var: value})
    with pytest.raises(ModelConfigError, match="max_output_tokens"):
        load_registry(env={"FLOWLOOM_LLM_CONTEXT": "4096", "FLOWLOOM_LLM_MAX_OUTPUT": "8192"})


def test_typed_override_applies_to_a_spec():
    spec = ModelSpec(name="m", provider="p", max_context=128000, max_output_tokens=4096)
    changed = ModelOverride.model_validate({"max_context": 4096, "capabilities": {"tools": "none"}}).apply(spec)
    assert (changed.max_context, changed.max_output_tokens, changed.capabilities.tools) == (4096, 1024, "none")
    assert changed.capabilities.stream_usage is True and spec.max_context == 128000
    with pytest.raises(ModelConfigError, match="override of model 'm'"):
        ModelOverride(max_context=4096, max_output_tokens=4096).apply(spec)
    assert ModelOverride().table() == {}


def test_write_override_keeps_other_entries(tmp_path):
    path = tmp_path / "home" / "models.override.toml"
    path.parent.mkdir()
    path.write_text('[models."gpt-4o"]\nmax_context = 64000\n[models.default]\nmax_output_tokens = 800\n')
    write_override(path, "default", ModelOverride.model_validate(
        {"max_context": 4096, "capabilities": {"tools": "forced", "stream_usage": False}}))
    write_override(path, "default", ModelOverride.model_validate({"capabilities": {"json_mode": False}}))
    data = tomllib.loads(path.read_text())
    assert data["models"]["gpt-4o"] == {"max_context": 64000}
    assert data["models"]["default"] == {"max_output_tokens": 800, "max_context": 4096,
                                         "capabilities": {"tools": "forced", "stream_usage": False,
                                                          "json_mode": False}}
    spec = load_registry(env={}, override_file=path).get("default")
    assert (spec.max_context, spec.max_output_tokens, spec.capabilities.tools) == (4096, 800, "forced")


def test_dump_toml_round_trips_awkward_values():
    data = {"models": {"a b": {"model": 'quo"te \\ 世界 🙂 \x7f\n', "pricing": {"tiers": [
        {"max_input_tokens": 10, "input_per_1k": 0.5, "output_per_1k": 1.0}]}, "flag": True}}}
    assert tomllib.loads(dump_toml(data)) == data


def test_registry_for_reads_the_settings_override_file_and_notices_changes(tmp_path):
    settings = Settings(home=tmp_path, models=None)
    assert settings.models_override_path == tmp_path / "models.override.toml"
    assert registry_for(settings).get("default").max_context == 128000
    (tmp_path / "models.override.toml").write_text("[models.default]\nmax_context = 2048\n")
    assert registry_for(settings).get("default").max_context == 2048
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text("[models.default]\nmax_context = 3000\n")
    chosen = Settings(home=tmp_path, models=None, models_override=elsewhere)
    assert registry_for(chosen).get("default").max_context == 3000
