"""A tenant's model registry: its own providers and models layered over the operator's.

The operator's registry (``models.toml``, :mod:`nodes.llm.model_registry`) serves every
tenant. A tenant may add OpenAI-compatible endpoints of its own, with their keys and
models, and choose default models (``/v1/model-providers``). :func:`tenant_registry`
builds, from what the store holds for the tenant, the registry its runs, validations
and datasets use - the operator's registry itself when the tenant has nothing of its own.

Name resolution, in order:

1. **The tenant's models win over the operator's of the same name.** A tenant's
   workflows keep calling what its builders configured, on its own endpoint and key,
   whatever the operator adds later: a model the operator adds under a name the tenant
   already uses must not silently send that tenant's prompts to another endpoint, billed
   to another account. The API marks such a model ``shadows_registry`` so the builder
   sees it. Model names are unique within a tenant, so there is no tie between two
   providers of one tenant.
2. **``default`` is the tenant's default chat model** when it chose one: a node whose
   ``model`` is ``default`` (every bundled example, most imported flows) calls the model
   the tenant picked, as Dify's "system model" does, instead of the deployment's
   ``FLOWLOOM_LLM_*`` endpoint. The chosen model keeps its own endpoint, key, limits,
   capabilities and prices; only its name is ``default``. Without a choice, ``default``
   is the operator's. A tenant model cannot itself be called ``default``.
3. Everything else is the operator's registry.

The tenant's default embedding and rerank models are not aliased (a registry name has
one type, and ``default`` is a chat model): the API and the canvas offer them first
when a dataset is created or a rerank model is chosen.

Tenant endpoints are reached only through the HTTP node's address guard
(:class:`~nodes.http.guard.GuardedBackend`): an address that is loopback, private or
link-local is refused unless ``FLOWLOOM_HTTP_ALLOW`` allows it, checked at every
connection, so a tenant cannot make the server call its own internal services. The
operator's providers are the operator's choice and are not guarded. Keys of tenant
providers come from the store (decrypted), never from the environment.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .model_registry import ModelRegistry, ModelSpec, ProviderSpec

__all__ = [
    "RESERVED_NAMES",
    "TENANT_PROVIDER_PREFIX",
    "TenantRegistry",
    "model_spec_of",
    "snapshot_digest",
    "tenant_registry",
]

logger = logging.getLogger("flowloom.models")

#: provider names of tenant endpoints in a tenant's registry (never an operator's name)
TENANT_PROVIDER_PREFIX = "tenant:"
#: model names a tenant cannot take: ``default`` is its default chat model's alias
RESERVED_NAMES = frozenset({"default"})


def model_spec_of(name: str, provider_id: str, spec: Mapping[str, Any]) -> ModelSpec:
    """The registry entry of a tenant model stored as ``spec`` (the registry's fields).

    Raises:
        ValidationError: the fields do not make a valid model (limits, capabilities, pricing).
    """
    return ModelSpec(name=name, provider=TENANT_PROVIDER_PREFIX + provider_id, **dict(spec))


class TenantRegistry(ModelRegistry):
    """The operator's providers and models plus a tenant's (module docstring). Tenant
    providers send their stored key, need none from the environment, and connect
    through the address guard."""

    def __init__(
        self,
        base: ModelRegistry,
        providers: list[ProviderSpec],
        models: list[ModelSpec],
        *,
        keys: Mapping[str, str],
        guard: Any,
    ) -> None:
        """``providers``/``models``: every one of the combined registry; ``keys``: tenant
        provider name -> its key; ``guard``: the :class:`~nodes.http.guard.AddressPolicy`
        tenant endpoints are reached under."""
        super().__init__(providers, models, env=base._env, url_vars=base._url_vars)
        self._tenant = {p.name for p in providers if p.name.startswith(TENANT_PROVIDER_PREFIX)}
        self._keys = dict(keys)
        self._guard = guard

    def is_tenant_model(self, name: str) -> bool:
        """True when ``name`` is served by one of the tenant's providers."""
        return self.has(name, None) and self.get(name, None).provider in self._tenant

    def api_key(self, spec: ModelSpec) -> str | None:
        """A tenant provider's stored key (None: it has none), else as the operator's registry."""
        if spec.provider in self._tenant:
            return self._keys.get(spec.provider) or None
        return super().api_key(spec)

    def required_key_env(self, name: str) -> str | None:
        """None for a tenant model (its key is stored, not in a variable), else as the operator's."""
        if self.has(name, None) and self.get(name, None).provider in self._tenant:
            return None
        return super().required_key_env(name)

    def base_url_env(self, name: str) -> str | None:
        """None for a tenant model (its URL is stored), else as the operator's."""
        if self.has(name, None) and self.get(name, None).provider in self._tenant:
            return None
        return super().base_url_env(name)

    def describe(self, name: str) -> dict[str, str | None]:
        """As :meth:`ModelRegistry.describe`; a tenant model's ``key`` is ``stored`` or ``none``."""
        described = super().describe(name)
        provider = described["provider"] or ""
        if provider in self._tenant:
            described.update(
                api_key_env=None, base_url_env=None, key="stored" if self._keys.get(provider) else "none"
            )
        return described

    def _http_client(self, provider: ProviderSpec) -> Any:
        if provider.name not in self._tenant:
            return super()._http_client(provider)
        import httpx

        from ..http.guard import GuardedBackend, GuardedTransport

        return httpx.AsyncClient(transport=GuardedTransport(GuardedBackend(self._guard)))

    def __repr__(self) -> str:
        return f"TenantRegistry(models={self.names(None)}, fingerprint={self.fingerprint!r})"


def tenant_registry(
    base: ModelRegistry,
    providers: list[Any],
    keys: Mapping[str, str],
    defaults: Mapping[str, str],
    *,
    guard: Any,
) -> ModelRegistry:
    """The registry of a tenant whose store holds ``providers`` (records with ``id``,
    ``base_url`` and ``models``: records with ``name`` and ``spec``), ``keys`` (provider
    id -> key) and ``defaults`` (type -> model name); ``base`` itself when it has no
    provider and no default chat model. A stored model that no longer validates (an
    older field set) is left out with a warning naming it, rather than failing every run.
    """
    chosen = defaults.get("chat")
    if not providers and not chosen:
        return base
    tenant_providers = [
        ProviderSpec(name=TENANT_PROVIDER_PREFIX + p.id, base_url=p.base_url, api_key_optional=True)
        for p in providers
    ]
    own: dict[str, ModelSpec] = {}
    for p in providers:
        for m in p.models:
            if m.name in RESERVED_NAMES:
                continue
            try:
                own[m.name] = model_spec_of(m.name, p.id, m.spec)
            except (ValidationError, TypeError) as exc:
                logger.warning(
                    "model %r of provider %r is left out of tenant models: %s",
                    m.name,
                    p.id,
                    str(exc).splitlines()[0],
                )
    specs = {name: base.get(name, None) for name in base.names(None) if name not in own}
    specs.update(own)
    target = own.get(chosen or "") or (specs.get(chosen) if chosen and chosen != "default" else None)
    if target is not None and target.type == "chat":
        specs["default"] = target.model_copy(update={"name": "default"})
    named = {TENANT_PROVIDER_PREFIX + p.id for p in providers}
    all_providers = [*base.providers, *tenant_providers]
    keyed = {
        TENANT_PROVIDER_PREFIX + pid: key
        for pid, key in keys.items()
        if TENANT_PROVIDER_PREFIX + pid in named
    }
    return TenantRegistry(base, all_providers, list(specs.values()), keys=keyed, guard=guard)


def snapshot_digest(providers: list[Any], keys: Mapping[str, str], defaults: Mapping[str, str]) -> str:
    """A digest of what a tenant registry is built from (keys hashed in), so a cache
    rebuilds the registry only when something changed."""
    h = hashlib.sha256()
    for p in providers:
        h.update(
            repr((p.id, p.base_url, [(m.name, sorted(m.spec.items(), key=str)) for m in p.models])).encode()
        )
    for pid in sorted(keys):
        h.update(pid.encode() + b"\0" + hashlib.sha256(keys[pid].encode()).digest())
    h.update(repr(sorted(defaults.items())).encode())
    return h.hexdigest()
