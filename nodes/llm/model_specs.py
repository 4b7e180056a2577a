"""The model registry's data: provider and model specs, pricing, capabilities, errors.

Split out of :mod:`nodes.llm.model_registry` (which re-exports every public name here):
these are the validated shapes of one registry entry; the registry itself, its clients
and the loading from files and environment stay there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.errors import FlowloomError

__all__ = [
    "MODEL_TYPES",
    "TOOL_SUPPORT",
    "Capabilities",
    "MissingAPIKey",
    "ModelConfigError",
    "ModelSpec",
    "PriceTier",
    "Pricing",
    "ProviderSpec",
    "ToolSupport",
    "UnknownModel",
    "WrongModelType",
    "migrate_tool_calling",
    "price",
]


class ModelConfigError(FlowloomError):
    """The model configuration is wrong (bad file, unknown provider, missing env value)."""


class MissingAPIKey(ModelConfigError):
    """The provider names an API-key environment variable that is not set."""

    def __init__(self, provider: str, env: str):
        self.provider = provider
        self.env = env
        super().__init__(f"provider {provider!r} needs an API key: set the environment variable {env}")


class UnknownModel(KeyError):
    """``get(name)`` of a name the registry does not have; the message lists known names."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown model {self.name!r}; known models: {', '.join(self.known) or '(none)'}"


class WrongModelType(UnknownModel):
    """A model of another type than the caller needs (an embedding model named as a chat
    model, a chat model named as an embedding model...). Still an :class:`UnknownModel`:
    to the caller it is not one of the models it may use; the message says why."""

    def __init__(self, name: str, kind: str, wanted: str, known: list[str]):
        self.kind, self.wanted = kind, wanted
        super().__init__(name, known)

    def __str__(self) -> str:
        return (
            f"model {self.name!r} is {_TYPE_NAMES[self.kind]}, not {_TYPE_NAMES[self.wanted]}; "
            f"known {self.wanted} models: {', '.join(self.known) or '(none)'}"
        )


#: the model types of the registry: ``chat`` (chat completions, what workflows name),
#: ``embedding`` (``/embeddings``: datasets' vectors), ``rerank`` (``/rerank``: search)
MODEL_TYPES = ("chat", "embedding", "rerank")
_TYPE_NAMES = {"chat": "a chat model", "embedding": "an embedding model", "rerank": "a rerank model"}


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PriceTier(_Spec):
    """One price step, applying to calls whose input tokens are ``<= max_input_tokens``.

    ``max_input_tokens=None`` is the open-ended last step.
    """

    max_input_tokens: int | None = Field(default=None, gt=0)
    input_per_1k: float = Field(ge=0)
    output_per_1k: float = Field(ge=0)


class Pricing(_Spec):
    """Per-1k-token prices. With ``tiers`` the call's input size picks the tier; without, the flat prices apply."""

    input_per_1k: float = Field(default=0.0, ge=0)
    output_per_1k: float = Field(default=0.0, ge=0)
    tiers: list[PriceTier] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sorted_tiers(self) -> Pricing:
        bounded = [t.max_input_tokens for t in self.tiers if t.max_input_tokens is not None]
        if bounded != sorted(bounded) or len(set(bounded)) != len(bounded):
            raise ValueError("pricing tiers must be listed by increasing max_input_tokens")
        if any(t.max_input_tokens is None for t in self.tiers[:-1]):
            raise ValueError("only the last pricing tier may be open-ended (no max_input_tokens)")
        return self

    def tier_for(self, tokens_in: int) -> tuple[float, float]:
        """(input_per_1k, output_per_1k) for a call with ``tokens_in`` input tokens."""
        for tier in self.tiers:
            if tier.max_input_tokens is None or tokens_in <= tier.max_input_tokens:
                return tier.input_per_1k, tier.output_per_1k
        if self.tiers:  # larger than every bounded tier: the last (most expensive) applies
            return self.tiers[-1].input_per_1k, self.tiers[-1].output_per_1k
        return self.input_per_1k, self.output_per_1k


#: How a model takes tools: ``native`` calls them on its own (``tool_choice`` "auto");
#: ``forced`` calls one only when ``tool_choice`` names it (small local models that
#: ignore tools under "auto"); ``none`` takes no ``tools`` at all.
ToolSupport = Literal["native", "forced", "none"]
TOOL_SUPPORT: tuple[str, ...] = ("native", "forced", "none")


def migrate_tool_calling(data: Any) -> Any:
    """Capabilities written with the old ``tool_calling`` flag, as ``tools`` (the registry's
    and the overrides' one migration rule); anything else unchanged.

    Raises:
        ValueError: ``tool_calling`` is not a bool.
    """
    if not isinstance(data, Mapping) or "tool_calling" not in data:
        return data
    fields = dict(data)
    legacy = fields.pop("tool_calling")
    if not isinstance(legacy, bool):
        raise ValueError(
            f"capabilities.tool_calling must be true or false, got {legacy!r} "
            f"(or write tools = {' | '.join(repr(t) for t in TOOL_SUPPORT)})"
        )
    fields.setdefault("tools", "native" if legacy else "none")
    return fields


class Capabilities(_Spec):
    """What the model does, as the endpoint really serves it; ``call_llm`` refuses requests
    that need more, and nodes pick their protocol from it.

    - ``tools``: :data:`ToolSupport`. Nodes that let the model choose (agent, tool call)
      use native tools only when free calls work (``native``), else the JSON protocol in
      the prompt; nodes that force one call (classify, extract) use native tools when
      forced calls work (:attr:`forced_tool_calls`).
    - ``tool_choice``: the server honours ``tool_choice`` naming a function (``forced``
      needs it; Ollama calls tools freely but ignores it).
    - ``structured_output``: ``response_format`` ``json_schema`` is honoured;
      ``json_mode``: ``response_format`` ``json_object`` is.
    - ``stream_usage``: a stream ends with usage when ``stream_options.include_usage``
      asks (False: the option is not sent, since some servers reject it, and usage is
      estimated).
    - ``vision``: images in messages; ``reasoning``: streams its thinking.

    The older key ``tool_calling`` (a bool) is still read: true is ``native``, false is
    ``none``; an explicit ``tools`` wins.
    """

    tools: ToolSupport = "native"
    tool_choice: bool = True
    structured_output: bool = False
    json_mode: bool = False
    stream_usage: bool = True
    vision: bool = False
    reasoning: bool = False

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return migrate_tool_calling(data)

    @model_validator(mode="after")
    def _forced_needs_choice(self) -> Capabilities:
        if self.tools == "forced" and not self.tool_choice:
            raise ValueError(
                'capabilities: tools = "forced" needs tool_choice = true '
                "(a call is forced through tool_choice)"
            )
        return self

    @property
    def tool_calling(self) -> bool:
        """The request may carry ``tools`` (native or forced)."""
        return self.tools != "none"

    @property
    def free_tool_calls(self) -> bool:
        """The model calls tools on its own under ``tool_choice`` "auto"."""
        return self.tools == "native"

    @property
    def forced_tool_calls(self) -> bool:
        """A call forced through ``tool_choice`` works."""
        return self.tools != "none" and self.tool_choice


class ProviderSpec(_Spec):
    """An OpenAI-compatible endpoint. ``api_key_env`` names the env var holding the key (None: no key);
    ``api_key_optional``: an unset key is sent as no key instead of failing the call (set
    for custom base URLs: local servers need no key);
    ``stream_idle_timeout``: seconds allowed between two streamed chunks for its models (None: the default)."""

    name: str
    base_url: str
    api_key_env: str | None = None
    api_key_optional: bool = False
    stream_idle_timeout: float | None = Field(default=None, gt=0, le=3600)


class ModelSpec(_Spec):
    """A model of the registry. ``model`` is the upstream id sent to the provider.

    ``type``: ``chat`` (the default: chat completions, the models workflows name),
    ``embedding`` (an OpenAI-compatible ``/embeddings`` endpoint: OpenAI, Ollama, vLLM,
    llama.cpp, TEI) or ``rerank`` (a Jina/Cohere-style ``/rerank`` endpoint). Lookups
    name the type they need, so a chat node cannot name an embedding model nor a
    dataset a chat model. ``max_output_tokens`` is required for chat models only;
    ``dimension`` (embedding models): the vectors' expected length (None: whatever the
    model answers first); ``max_batch``: texts per embeddings request.
    """

    name: str
    provider: str
    type: Literal["chat", "embedding", "rerank"] = "chat"
    model: str = ""
    max_context: int = Field(gt=0)
    max_output_tokens: int = Field(default=0, ge=0)
    dimension: int | None = Field(default=None, gt=0, le=65536)
    max_batch: int = Field(default=64, gt=0, le=2048)
    capabilities: Capabilities = Field(default_factory=Capabilities)
    default_system_prompt: str = ""
    default_temperature: float = Field(default=0.7, ge=0, le=2)
    pricing: Pricing = Field(default_factory=Pricing)
    stream_idle_timeout: float | None = Field(
        default=None, gt=0, le=3600, description="seconds between two streamed chunks; None: the provider's"
    )

    @model_validator(mode="after")
    def _defaults(self) -> ModelSpec:
        if not self.model:
            object.__setattr__(self, "model", self.name)
        if self.type == "chat" and self.max_output_tokens <= 0:
            raise ValueError("max_output_tokens is required for a chat model (and must be above 0)")
        if self.max_output_tokens >= self.max_context:
            raise ValueError(
                f"max_output_tokens ({self.max_output_tokens}) must be below max_context ({self.max_context})"
            )
        return self

    @property
    def max_input_tokens(self) -> int:
        """Prompt budget: ``max_context - max_output_tokens`` (history is trimmed to this)."""
        return self.max_context - self.max_output_tokens


def price(spec: ModelSpec, tokens_in: int, tokens_out: int) -> float:
    """Cost of ONE call; the tier is chosen by this call's ``tokens_in``."""
    per_in, per_out = spec.pricing.tier_for(tokens_in)
    return (tokens_in * per_in + tokens_out * per_out) / 1000.0
