"""The model registry: which models a workflow may name, how to reach them, what they cost.

The registry is the operator's configuration, read from a TOML file (never from a
workflow). Resolution order of :func:`load_registry`:

1. an explicit ``path``;
2. the file named by ``FLOWLOOM_MODELS``;
3. the bundled ``nodes/llm/models.toml``, whose ``default`` provider/model follow
   ``FLOWLOOM_LLM_BASE_URL`` / ``FLOWLOOM_LLM_API_KEY`` / ``FLOWLOOM_LLM_MODEL``, so
   ``flowloom run`` works against any OpenAI-compatible endpoint given by env.

Over the file, :mod:`nodes.llm.model_overrides` merges, key by key, the override file
(``FLOWLOOM_MODELS_OVERRIDE``, else ``<home>/models.override.toml``) and, for the
``default`` model, ``FLOWLOOM_LLM_CONTEXT`` / ``FLOWLOOM_LLM_MAX_OUTPUT`` /
``FLOWLOOM_LLM_TOOLS`` / ...: a model's capabilities and limits change without a copy
of this file.

The environment (``${VAR}`` in the file, the API keys) is the mapping
:meth:`Settings.environ <engine.settings.Settings.environ>` gives: the process
environment over the working directory's ``.env`` file. This module never reads
``os.environ`` itself, so there is one place that decides where variables come from.
:func:`registry_for` builds the registry a :class:`~engine.settings.Settings` asks for.
The spec models (:class:`ModelSpec`, :class:`ProviderSpec`, pricing, capabilities) and
the errors live in :mod:`nodes.llm.model_specs`; this module re-exports them.

Local endpoints: ``FLOWLOOM_LLM_BASE_URL_OVERRIDE`` points *every* provider at one
URL - embedding and rerank models too, so that endpoint must serve ``/embeddings`` (and
``/rerank``) for knowledge bases - and ``FLOWLOOM_LLM_MODEL_OVERRIDE`` replaces every
*chat* model's upstream id (embedding and rerank models keep theirs); the key
sent there is ``FLOWLOOM_LLM_API_KEY`` when set, else none - never a cloud provider's
key, which would otherwise be handed to whatever server the URL names. A provider
whose base URL comes from the environment (``${OPENAI_BASE_URL:-...}`` with the
variable set) or from the override is a custom endpoint: its key is optional, since
Ollama, llama.cpp and vLLM need none.

File format::

    [providers.openai]
    base_url = "${OPENAI_BASE_URL:-https://api.openai.com/v1}"   # ${VAR:-fallback} allowed
    api_key_env = "OPENAI_API_KEY"        # omit for local providers without a key
    stream_idle_timeout = 60              # optional: seconds allowed between two streamed chunks

    [models.gpt-4o-mini]                  # the name workflows use
    provider = "openai"
    model = "gpt-4o-mini"                 # upstream id (default: the name); ${...} allowed
    max_context = 128000
    max_output_tokens = 16384
    default_temperature = 0.7
    capabilities = { tool_calling = true, vision = true, structured_output = true }
    pricing = { input_per_1k = 0.00015, output_per_1k = 0.0006 }
    stream_idle_timeout = 120             # optional: overrides the provider's (slow reasoning models)
    # or tiers chosen by the call's input tokens:
    # [[models.x.pricing.tiers]]  max_input_tokens = 128000, input_per_1k = ..., output_per_1k = ...

    [models.text-embedding-3-small]       # an embedding model (datasets' vectors)
    provider = "openai"
    type = "embedding"                    # chat (default), embedding or rerank
    max_context = 8191                    # max_output_tokens: chat models only
    dimension = 1536                      # optional: the vectors' expected length
    max_batch = 64                        # optional: texts per /embeddings request
    pricing = { input_per_1k = 0.00002 }

Lookups name the type they need (:meth:`ModelRegistry.get`, ``has``, ``names``; chat by
default): a workflow's chat node cannot name an embedding model, nor a dataset a chat
model (:class:`WrongModelType` says which type the model is).

API keys are never stored: a provider names the environment variable holding its key
and :meth:`ModelRegistry.client_for` reads it when a call is made. Nothing here puts a
key in a repr, a log line or an error message.

The stream idle timeout (:meth:`ModelRegistry.stream_idle_timeout`) is the model's
``stream_idle_timeout``, else its provider's, else :data:`DEFAULT_STREAM_IDLE_TIMEOUT`:
a reasoning model may think silently for minutes where a small chat model that says
nothing for a minute has stalled, so the operator sets it where they know the model.

Prices are per 1,000 tokens in one currency of the operator's choosing (the bundled
file uses USD). :func:`price` prices *one call*; a node that makes several calls
prices each and sums (tier pricing makes "sum tokens, price once" wrong).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tomllib
import weakref
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .model_specs import (  # the spec models live there; re-exported here
    MODEL_TYPES,  # noqa: F401 - re-exported
    TOOL_SUPPORT,
    Capabilities,
    MissingAPIKey,
    ModelConfigError,
    ModelSpec,
    PriceTier,
    Pricing,
    ProviderSpec,
    ToolSupport,
    UnknownModel,
    WrongModelType,
    migrate_tool_calling,
    price,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "DEFAULT_STREAM_IDLE_TIMEOUT",
    "Capabilities",
    "MissingAPIKey",
    "ModelConfigError",
    "ModelRegistry",
    "ModelSpec",
    "PriceTier",
    "Pricing",
    "ProviderSpec",
    "TOOL_SUPPORT",
    "ToolSupport",
    "UnknownModel",
    "WrongModelType",
    "get_registry",
    "load_registry",
    "migrate_tool_calling",
    "price",
]

#: Environment variable naming the registry file.
MODELS_ENV = "FLOWLOOM_MODELS"
#: The key sent to the endpoint of ``FLOWLOOM_LLM_BASE_URL_OVERRIDE`` (optional).
OVERRIDE_KEY_ENV = "FLOWLOOM_LLM_API_KEY"
#: Placeholder key sent to providers that need none (the SDK insists on a non-empty key).
NO_KEY = "no-key"
#: Connect timeout of provider clients (seconds). Stalls after connecting are caught by
#: ``call_llm``'s idle timeout, not by the HTTP client.
CONNECT_TIMEOUT = 10.0
#: Seconds allowed between two streamed chunks when neither the model nor its provider sets it.
DEFAULT_STREAM_IDLE_TIMEOUT = 60.0

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ModelRegistry:
    """Providers and models by name, plus cached SDK clients.

    Clients are cached per (event loop, provider, key): an ``AsyncOpenAI`` client's
    connection pool belongs to the loop that opened it, and the key is re-read from
    the environment on every :meth:`client_for`, so rotating it takes effect.
    """

    def __init__(
        self,
        providers: list[ProviderSpec],
        models: list[ModelSpec],
        *,
        env: Mapping[str, str] | None = None,
        url_vars: Mapping[str, str] | None = None,
    ):
        """``env``: where API keys are read (None: ``Settings.environ()`` of the process
        settings, read at call time); ``url_vars``: provider name -> the variable its
        base URL comes from (shown by :meth:`describe`).

        Raises:
            ModelConfigError: duplicate names, or a model naming an unknown provider.
        """
        self._env = env
        self._url_vars = dict(url_vars or {})
        self._providers = {p.name: p for p in providers}
        self._models = {m.name: m for m in models}
        if len(self._providers) != len(providers):
            raise ModelConfigError("duplicate provider names in the model registry")
        if len(self._models) != len(models):
            raise ModelConfigError("duplicate model names in the model registry")
        for m in models:
            if m.provider not in self._providers:
                raise ModelConfigError(
                    f"model {m.name!r} names unknown provider {m.provider!r} "
                    f"(providers: {', '.join(sorted(self._providers))})"
                )
        content = {
            "providers": [p.model_dump() for p in sorted(providers, key=lambda p: p.name)],
            "models": [m.model_dump() for m in sorted(models, key=lambda m: m.name)],
        }
        self._fingerprint = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
        self._clients: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], openai.AsyncOpenAI]] = (
            weakref.WeakKeyDictionary()
        )
        self._no_loop_clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        env: Mapping[str, str] | None = None,
        source: str = "<dict>",
        base_url_override: str | None = None,
        model_override: str | None = None,
    ) -> ModelRegistry:
        """Build from the parsed TOML layout (``providers`` / ``models`` tables keyed by name).

        ``${VAR}`` / ``${VAR:-fallback}`` in ``base_url`` and ``model`` are expanded from ``env``
        (default: ``Settings.environ()`` of the process settings). ``base_url_override``
        replaces every provider's URL (its key becomes ``FLOWLOOM_LLM_API_KEY``, optional);
        ``model_override`` every chat model's upstream id (embedding and rerank models keep
        theirs: a chat model's id names no embedding model). A base URL taken from the
        environment or the override makes the provider's key optional.

        Raises:
            ModelConfigError: naming ``source`` and the bad entry.
        """
        env = _process_env() if env is None else env
        providers: list[ProviderSpec] = []
        models: list[ModelSpec] = []
        url_vars: dict[str, str] = {}
        try:
            for name, raw in dict(data.get("providers") or {}).items():
                fields = dict(raw)
                if isinstance(fields.get("base_url"), str):
                    template = fields["base_url"]
                    fields["base_url"] = _expand(template, env, f"providers.{name}.base_url", source)
                    names = [m.group(1) for m in _ENV_REF.finditer(template)]
                    if names:
                        url_vars[name] = names[0]
                    if any(env.get(n, "") for n in names):  # a custom endpoint chosen by the operator
                        fields.setdefault("api_key_optional", True)
                if base_url_override:
                    fields.update(
                        base_url=base_url_override, api_key_optional=True, api_key_env=OVERRIDE_KEY_ENV
                    )
                    url_vars[name] = "FLOWLOOM_LLM_BASE_URL_OVERRIDE"
                providers.append(ProviderSpec(name=name, **fields))
            for name, raw in dict(data.get("models") or {}).items():
                fields = dict(raw)
                if "model" in fields:
                    fields["model"] = _expand(fields["model"], env, f"models.{name}.model", source)
                # a chat model's id only: the chat model a local server serves is no
                # embedding or rerank model, and a dataset's vectors must keep their model
                if model_override and fields.get("type", "chat") == "chat":
                    fields["model"] = model_override
                models.append(ModelSpec(name=name, **fields))
        except ValidationError as exc:
            raise ModelConfigError(f"invalid model registry {source}: {exc}") from None
        except TypeError as exc:
            raise ModelConfigError(f"invalid model registry {source}: {exc}") from None
        unknown = set(data) - {"providers", "models"}
        if unknown:
            raise ModelConfigError(
                f"invalid model registry {source}: unknown top-level keys {sorted(unknown)}"
            )
        try:
            return cls(providers, models, env=env, url_vars=url_vars)
        except ModelConfigError as exc:
            raise ModelConfigError(f"invalid model registry {source}: {exc}") from None

    # ------------------------------------------------------------------ lookups

    def get(self, name: str, kind: str | None = "chat") -> ModelSpec:
        """The model called ``name``, of type ``kind`` (None: any type).

        Raises:
            UnknownModel: a ``KeyError`` whose message lists the known names of that type
                (:class:`WrongModelType` when the model exists with another type).
        """
        spec = self._models.get(name)
        if spec is None:
            raise UnknownModel(name, self.names(kind))
        if kind is not None and spec.type != kind:
            raise WrongModelType(name, spec.type, kind, self.names(kind))
        return spec

    def has(self, name: str, kind: str | None = "chat") -> bool:
        """True when ``name`` is a model of this registry of type ``kind`` (None: any)."""
        spec = self._models.get(name)
        return spec is not None and (kind is None or spec.type == kind)

    def names(self, kind: str | None = "chat") -> list[str]:
        """Names of the models of type ``kind`` (default: chat models, what workflows may
        name; None: every model), sorted."""
        return sorted(n for n, m in self._models.items() if kind is None or m.type == kind)

    def provider(self, spec: ModelSpec) -> ProviderSpec:
        """The provider serving ``spec``."""
        return self._providers[spec.provider]

    def stream_idle_timeout(self, spec: ModelSpec) -> float:
        """Seconds allowed between two streamed chunks of ``spec``: the model's value, else its
        provider's, else :data:`DEFAULT_STREAM_IDLE_TIMEOUT`."""
        if spec.stream_idle_timeout is not None:
            return spec.stream_idle_timeout
        provider = self._providers.get(spec.provider)
        if provider is not None and provider.stream_idle_timeout is not None:
            return provider.stream_idle_timeout
        return DEFAULT_STREAM_IDLE_TIMEOUT

    @property
    def providers(self) -> list[ProviderSpec]:
        """Every provider, sorted by name."""
        return [self._providers[n] for n in sorted(self._providers)]

    @property
    def fingerprint(self) -> str:
        """Stable hash of the registry's content (compile cache key); equal content, equal hash."""
        return self._fingerprint

    def __repr__(self) -> str:
        return f"ModelRegistry(models={self.names()}, fingerprint={self._fingerprint!r})"

    def with_specs(self, specs: Mapping[str, ModelSpec]) -> ModelRegistry:
        """A copy of this registry (of its class, sharing its providers, keys and SDK
        clients) with the models of ``specs`` (name -> spec, same provider) in place of its
        own: a tenant's overrides of limits and capabilities. ``self`` is unchanged.

        Raises:
            ModelConfigError: a name that is not in the registry, or a changed provider.
        """
        import copy

        models = dict(self._models)
        for name, spec in specs.items():
            current = models.get(name)
            if current is None or spec.name != name or spec.provider != current.provider:
                raise ModelConfigError(
                    f"cannot replace model {name!r}: not in the registry or another provider"
                )
            models[name] = spec
        clone = copy.copy(self)
        clone._models = models
        changed = json.dumps({n: s.model_dump() for n, s in sorted(specs.items())}, sort_keys=True)
        clone._fingerprint = hashlib.sha256((self._fingerprint + changed).encode()).hexdigest()[:16]
        return clone

    # ------------------------------------------------------------------ clients

    def api_key(self, spec: ModelSpec) -> str | None:
        """The provider's key read from the environment now (None when it needs none).

        Raises:
            MissingAPIKey: the provider names an env var that is unset or empty and its
                key is not optional (a custom base URL makes it optional).
        """
        provider = self.provider(spec)
        if provider.api_key_env is None:
            return None
        env = self._env if self._env is not None else _process_env()
        key = str(env.get(provider.api_key_env, "") or "").strip()
        if not key:
            if provider.api_key_optional:
                return None
            raise MissingAPIKey(provider.name, provider.api_key_env)
        return key

    def required_key_env(self, name: str) -> str | None:
        """The variable :meth:`api_key` raises :class:`MissingAPIKey` for when it is unset:
        the provider's ``api_key_env`` unless the key is optional; None for an unknown
        ``name`` (the compiler reports that) or a provider that needs no key."""
        spec = self._models.get(name)
        if spec is None:
            return None
        provider = self.provider(spec)
        return None if provider.api_key_optional else provider.api_key_env

    def base_url_env(self, name: str) -> str | None:
        """The variable ``name``'s provider URL comes from (``${VAR}`` in the registry file),
        or None for an unknown name or a fixed URL."""
        spec = self._models.get(name)
        return None if spec is None else self._url_vars.get(spec.provider)

    def base_url(self, spec: ModelSpec) -> str:
        """The URL calls for ``spec`` are sent to (named in connection errors)."""
        return self.provider(spec).base_url

    def describe(self, name: str) -> dict[str, str | None]:
        """Where model ``name`` is served: ``model`` (registry name), ``upstream`` (the id
        sent), ``provider``, ``base_url``, ``base_url_env`` (the variable that sets the
        URL, if any), ``api_key_env`` (the variable holding the key, if any) and
        ``key`` (``required``, ``optional`` or ``none``). Never the key itself.

        Raises:
            UnknownModel: ``name`` is not in the registry.
        """
        spec = self.get(name, None)
        provider = self.provider(spec)
        key = (
            "none"
            if provider.api_key_env is None
            else ("optional" if provider.api_key_optional else "required")
        )
        return {
            "model": spec.name,
            "upstream": spec.model,
            "provider": provider.name,
            "base_url": provider.base_url,
            "base_url_env": self._url_vars.get(provider.name),
            "api_key_env": provider.api_key_env,
            "key": key,
        }

    def client_for(self, spec: ModelSpec) -> openai.AsyncOpenAI:
        """An ``AsyncOpenAI`` client for ``spec``'s provider (cached; SDK retries off).

        Its only HTTP timeout is the connect timeout: ``call_llm``'s idle timeout bounds
        every read, so callers using the client directly must bound their own calls.

        Raises:
            MissingAPIKey: the provider's ``api_key_env`` is set but not in the environment.
        """
        import openai  # deferred: compile-time users of the registry never need the SDK

        provider = self.provider(spec)
        key = self.api_key(spec) or NO_KEY
        cache_key = (provider.name, hashlib.sha256(key.encode()).hexdigest())
        try:
            loop = asyncio.get_running_loop()
            clients = self._clients.setdefault(loop, {})
        except RuntimeError:
            clients = self._no_loop_clients
        client = clients.get(cache_key)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=key,
                base_url=provider.base_url,
                max_retries=0,  # call_llm owns retries (only before any token was streamed)
                timeout=openai.Timeout(None, connect=CONNECT_TIMEOUT),  # call_llm owns the idle timeout
                http_client=self._http_client(provider),
            )
            clients[cache_key] = client
        return client

    def _http_client(self, provider: ProviderSpec) -> Any:
        """The HTTP client under ``provider``'s SDK client (a subclass may guard it)."""
        return _own_loop_http_client()

    async def aclose(self) -> None:
        """Close the clients opened on the running loop (tests and shutdown: whoever owns a
        loop closes its clients before the loop ends, see :func:`_own_loop_http_client`)."""
        try:
            clients = self._clients.pop(asyncio.get_running_loop(), {})
        except RuntimeError:
            clients = {}
        for client in clients.values():
            await client.close()


_OWN_LOOP_CLIENT: list[type] = []  # the class, made on first use (openai is imported late)


def _own_loop_http_client() -> Any:
    """The SDK's default HTTP client, except when it is garbage-collected unclosed: then it
    is closed only on the loop it was made on, never on another.

    The SDK's own client schedules its ``aclose`` on whatever loop is running in the thread
    that collects it. Its connections belong to the loop that opened them: when that loop
    has ended and the collection happens in another thread's loop (a server's, a test's),
    the close fails there with "Event loop is closed" (logged as "Task exception was
    never retrieved", in the middle of that loop's work). A client whose loop has ended
    is dropped instead: its sockets close with it.
    """
    if not _OWN_LOOP_CLIENT:
        import openai

        class OwnLoopClient(openai.DefaultAsyncHttpxClient):
            def __init__(self, **kwargs: Any) -> None:
                try:
                    self._owner: weakref.ref[Any] | None = weakref.ref(asyncio.get_running_loop())
                except RuntimeError:
                    self._owner = None
                super().__init__(**kwargs)

            def __del__(self) -> None:
                if self.is_closed or self._owner is None:
                    return
                try:
                    running = asyncio.get_running_loop()
                except RuntimeError:
                    return  # no loop here: nothing can be awaited
                if running is self._owner() and not running.is_closed():
                    running.create_task(self.aclose())

        _OWN_LOOP_CLIENT.append(OwnLoopClient)
    return _OWN_LOOP_CLIENT[0]()


def _expand(value: Any, env: Mapping[str, str], where: str, source: str) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-fallback}`` (an empty VAR takes the fallback)."""
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        name, fallback = match.group(1), match.group(2)
        found = env.get(name, "")
        if found:
            return found
        if fallback is not None:
            return fallback
        raise ModelConfigError(
            f"{source}: {where} needs the environment variable {name} (or write ${{{name}:-fallback}})"
        )

    return _ENV_REF.sub(sub, value)


def _process_env() -> Mapping[str, str]:
    """The process settings' environment (environment over ``.env``), for callers that
    did not pass one."""
    from engine.settings import get_settings

    return get_settings().environ()


def load_registry(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    base_url_override: str | None = None,
    model_override: str | None = None,
    override_file: str | os.PathLike[str] | None = None,
) -> ModelRegistry:
    """Read a registry: ``path`` (``Settings.models``, from ``FLOWLOOM_MODELS``), else the
    bundled ``models.toml``; then ``override_file`` (when it exists) and the ``default``
    model's environment variables merged over it (:mod:`nodes.llm.model_overrides`).
    ``env`` and the URL/model overrides: see :meth:`ModelRegistry.from_dict`.

    Raises:
        ModelConfigError: unreadable file, invalid TOML or invalid entries (names the file).
    """
    from .model_overrides import apply_env_overrides, merge_registry_data, read_override_file

    if path is None:
        source = "bundled nodes/llm/models.toml"
        text = resources.files("nodes.llm").joinpath("models.toml").read_text(encoding="utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelConfigError(f"cannot read model registry {source}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelConfigError(f"model registry {source} is not valid TOML: {exc}") from None
    if override_file is not None:
        changes = read_override_file(Path(override_file))
        if changes:
            data = merge_registry_data(data, changes, source=str(override_file))
            source = f"{source} with {override_file}"
    data = apply_env_overrides(data, _process_env() if env is None else env)
    return ModelRegistry.from_dict(
        data, source=source, env=env, base_url_override=base_url_override, model_override=model_override
    )


def get_registry(path: str | os.PathLike[str] | None = None) -> ModelRegistry:
    """The registry of ``path`` (None: the bundled one), loaded once per path per process
    (``get_registry.cache_clear()`` reloads), with the process settings' environment and
    no overrides. Prefer :func:`registry_for`, which applies the settings' overrides."""
    return _cached_registry(str(path) if path is not None else None, None, None)


def registry_for(settings: Any) -> ModelRegistry:
    """The registry ``settings`` (an :class:`~engine.settings.Settings`) ask for: its
    ``models`` file (else the bundled one), ``${VAR}`` and keys read from
    ``settings.environ()`` (the environment over ``.env``), and its
    ``llm_base_url_override`` / ``llm_model_override`` applied to every model.

    Cached per (file, overrides, ``.env`` content) like :func:`get_registry`: the
    environment itself is read live for keys, but a different ``.env`` file is a
    different registry.

    Raises:
        ModelConfigError: the file is unreadable or invalid (names it).
    """
    path = str(settings.models) if settings.models is not None else None
    env = settings.environ()
    maps = getattr(env, "maps", None)
    dotenv = frozenset(maps[-1].items()) if maps else frozenset()
    return _cached_registry(
        path,
        settings.llm_base_url_override,
        settings.llm_model_override,
        env=env,
        dotenv=dotenv,
        override_file=settings.models_override_path,
    )


_REGISTRIES: dict[tuple[Any, ...], ModelRegistry] = {}


def _override_state(override_file: Path | None, env: Mapping[str, str] | None) -> tuple[Any, ...]:
    """What the overrides depend on (part of the cache key): the override file's
    modification time and size, and the ``default`` model's variables."""
    from .model_overrides import DEFAULT_MODEL_ENV

    stat: tuple[Any, ...] = ()
    if override_file is not None:
        try:
            info = override_file.stat()
            stat = (str(override_file), info.st_mtime_ns, info.st_size)
        except OSError:
            stat = (str(override_file),)
    values = tuple(str(env.get(var, "") or "") for var in DEFAULT_MODEL_ENV) if env is not None else ()
    return stat + values


def _cached_registry(
    path: str | None,
    base_url_override: str | None,
    model_override: str | None,
    env: Mapping[str, str] | None = None,
    dotenv: frozenset[Any] = frozenset(),
    override_file: Path | None = None,
) -> ModelRegistry:
    key = (path, base_url_override, model_override, dotenv, _override_state(override_file, env))
    registry = _REGISTRIES.get(key)
    if registry is None:
        registry = _REGISTRIES[key] = load_registry(
            path,
            env=env,
            base_url_override=base_url_override,
            model_override=model_override,
            override_file=override_file,
        )
    return registry


get_registry.cache_clear = _REGISTRIES.clear  # type: ignore[attr-defined]  # as functools.cache would give
