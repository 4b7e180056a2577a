"""Model providers managed per tenant: the bodies of ``/v1/model-providers``.

A tenant adds OpenAI-compatible endpoints of its own (a preset gives the usual base URL:
OpenAI, Azure OpenAI, DeepSeek, Qwen through DashScope, Ollama, vLLM, LM Studio, the
llama.cpp server), sets their keys, lists and adds their models, and picks its default
chat, embedding and rerank models. The operator's registry (``models.toml``) stays
beside them.

A key is write-only: it goes in as ``api_key`` and comes out only as ``api_key_set``
and ``api_key_masked`` (``sk-…a1b2``), in every answer. A model's ``capabilities`` and
``pricing`` are the registry's fields (``nodes.llm.model_registry``), validated by the
route that stores them; they are free-form here so these bodies do not depend on the
registry module.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = [
    "MODEL_NAME_PATTERN",
    "PRESETS",
    "PROVIDER_ID_PATTERN",
    "ModelDefaults",
    "PresetInfo",
    "PresetList",
    "ProbeOutcome",
    "ProviderCreate",
    "ProviderList",
    "ProviderModelIn",
    "ProviderModelOut",
    "ProviderModelUpdate",
    "ProviderOut",
    "ProviderUpdate",
    "UpstreamModel",
    "UpstreamModels",
]

#: a provider id: a short slug (it appears in URLs and model descriptions)
PROVIDER_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
#: a model name as workflows write it (``qwen2.5:7b``, ``deepseek-chat``, ``org/model``)
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"

Preset = Literal[
    "openai",
    "azure_openai",
    "deepseek",
    "dashscope",
    "ollama",
    "vllm",
    "lmstudio",
    "llamacpp",
    "openai_compatible",
]
KeyRule = Literal["required", "optional", "none"]
ModelType = Literal["chat", "embedding", "rerank"]


class PresetInfo(BaseModel):
    """A kind of OpenAI-compatible server: its usual base URL (``{resource}`` in Azure's
    is the builder's own resource name) and whether it needs a key."""

    model_config = ConfigDict(frozen=True)

    id: Preset
    label: str
    base_url: str
    key: KeyRule
    note: str = ""


#: The presets, in the order the canvas offers them.
PRESETS: tuple[PresetInfo, ...] = (
    PresetInfo(id="openai", label="OpenAI", base_url="https://api.openai.com/v1", key="required"),
    PresetInfo(
        id="azure_openai",
        label="Azure OpenAI",
        base_url="https://{resource}.openai.azure.com/openai/v1",
        key="required",
        note="Azure's v1 API; a model's upstream id is its deployment name",
    ),
    PresetInfo(id="deepseek", label="DeepSeek", base_url="https://api.deepseek.com/v1", key="required"),
    PresetInfo(
        id="dashscope",
        label="Qwen (DashScope)",
        base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
        key="required",
        note="outside mainland China: https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
    ),
    PresetInfo(id="ollama", label="Ollama", base_url="http://127.0.0.1:11434/v1", key="none"),
    PresetInfo(
        id="vllm",
        label="vLLM",
        base_url="http://127.0.0.1:8000/v1",
        key="optional",
        note="the key is vLLM's --api-key, when it was started with one",
    ),
    PresetInfo(id="lmstudio", label="LM Studio", base_url="http://127.0.0.1:1234/v1", key="none"),
    PresetInfo(
        id="llamacpp",
        label="llama.cpp server",
        base_url="http://127.0.0.1:8080/v1",
        key="optional",
        note="llama-server or llama-cpp-python's server; the key is its --api-key, if any",
    ),
    PresetInfo(id="openai_compatible", label="OpenAI-compatible", base_url="", key="optional"),
)


class PresetList(BaseModel):
    """``GET /v1/model-providers/presets``."""

    presets: list[PresetInfo]


def _no_blank(value: str | None) -> str | None:
    return value.strip() if isinstance(value, str) else value


class ProviderCreate(BaseModel):
    """A new provider. ``id`` defaults to the preset's id (then ``-2``, ``-3``... when taken);
    ``base_url`` to the preset's. ``api_key``: write-only, never returned."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, pattern=PROVIDER_ID_PATTERN)
    name: str = Field(default="", max_length=200)
    preset: Preset = "openai_compatible"
    base_url: str = Field(default="", max_length=2000)
    api_key: SecretStr | None = Field(
        default=None, description="write-only: stored encrypted, never returned"
    )

    _strip = field_validator("base_url")(_no_blank)


class ProviderUpdate(BaseModel):
    """Changes to a provider; absent fields stay. ``api_key``: a new key, or ``""`` to remove it."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: SecretStr | None = Field(default=None, description="write-only; an empty string removes the key")

    _strip = field_validator("base_url")(_no_blank)


class ProviderModelIn(BaseModel):
    """A model of a provider, added by hand or from its list. ``name`` is what workflows
    write (unique in the tenant); ``model`` the upstream id (default: the name).
    ``max_output_tokens`` applies to chat models (default 4096, kept below the context)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    model: str = Field(default="", max_length=400)
    type: ModelType = "chat"
    max_context: int = Field(default=8192, gt=0, le=10_000_000)
    max_output_tokens: int | None = Field(default=None, ge=0)
    dimension: int | None = Field(default=None, gt=0, le=65536)
    capabilities: dict[str, Any] = Field(default_factory=dict, description="the registry's capability fields")
    pricing: dict[str, Any] = Field(
        default_factory=dict, description="per 1,000 tokens: input_per_1k, output_per_1k (and tiers)"
    )


class ProviderModelUpdate(BaseModel):
    """Changes to a model (its capabilities, limits and pricing); absent fields stay.
    ``capabilities`` is merged field by field over the stored ones."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, max_length=400)
    max_context: int | None = Field(default=None, gt=0, le=10_000_000)
    max_output_tokens: int | None = Field(default=None, ge=0)
    dimension: int | None = Field(default=None, gt=0, le=65536)
    capabilities: dict[str, Any] | None = None
    pricing: dict[str, Any] | None = None


class ProviderModelOut(BaseModel):
    """A model of a tenant's provider as stored (the registry's fields).
    ``shadows_registry``: the operator's registry has a model of this name too; this one
    is what the tenant's runs use."""

    name: str
    provider_id: str
    model: str
    type: ModelType
    max_context: int
    max_output_tokens: int
    dimension: int | None = None
    capabilities: dict[str, Any]
    pricing: dict[str, Any]
    shadows_registry: bool = False


class ProviderOut(BaseModel):
    """A provider (never its key: ``api_key_set`` and a masked form only)."""

    id: str
    name: str
    preset: Preset
    base_url: str
    api_key_set: bool
    api_key_masked: str | None = None
    models: list[ProviderModelOut] = Field(default_factory=list)
    created_at: float
    updated_at: float


class ProviderList(BaseModel):
    """``GET /v1/model-providers``: the tenant's providers (by id) and its defaults."""

    providers: list[ProviderOut]
    defaults: ModelDefaults


class ModelDefaults(BaseModel):
    """The tenant's default model of each type, by name: a model of its providers or of
    the operator's registry (None: not chosen). The default chat model is what a node
    whose ``model`` is ``default`` calls in the tenant's runs."""

    model_config = ConfigDict(extra="forbid")

    chat: str | None = None
    embedding: str | None = None
    rerank: str | None = None


class UpstreamModel(BaseModel):
    """A model the endpoint lists (``GET {base_url}/models``); ``added``: the tenant has a
    model with this upstream id on this provider."""

    id: str
    owned_by: str | None = None
    added: bool = False


class UpstreamModels(BaseModel):
    """``GET /v1/model-providers/{id}/upstream-models``."""

    models: list[UpstreamModel]


class ProbeOutcome(BaseModel):
    """``POST .../models/{name}/probe``: the model as stored after the probe (its
    capabilities, and its context where the server told it) and the probe's report:
    each check's ``ok`` (true, false, or null when it could not tell) and ``detail``."""

    model: ProviderModelOut
    report: dict[str, Any]


ProviderList.model_rebuild()
