"""Each tenant's registry with its own overrides of models' limits and capabilities.

:class:`OverriddenModelSource` is the run service's ``TenantModels`` port: the tenant's
registry as :class:`~api.tenant_models.TenantModelSource` builds it (its providers over
the operator's), then the tenant's overrides (``/v1/model-capabilities/{name}``,
:mod:`workers.sql.model_overrides`) applied with
:meth:`~nodes.llm.model_overrides.ModelOverride.apply`. A tenant admin whose ``default`` is
really a 4096-token llama.cpp says so once; other tenants keep the operator's values.

An override that no longer applies (the operator lowered the context below the cap it
sets, or removed the model) is left out with a warning naming the model, rather than
failing every run of the tenant. Overrides are read with the providers, in the same
transaction (:meth:`~workers.sql.providers.SqlProviderStore.snapshot`): at most once per
:data:`~api.tenant_models.CACHE_TTL_S` seconds per tenant, one commit of the database for
both, and callers of an expired entry share the read in flight
(:class:`~engine.shared_reads.SharedReads`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from engine.settings import Settings
from nodes.llm.model_overrides import ModelOverride
from nodes.llm.model_registry import ModelConfigError, ModelRegistry, ModelSpec
from workers.sql.model_overrides import SqlModelOverrideStore
from workers.sql.providers import SqlProviderStore

from .tenant_models import CACHE_TTL_S, TenantModelSource

__all__ = ["OverriddenModelSource", "apply_overrides"]

logger = logging.getLogger("flowloom.models")


def apply_overrides(registry: ModelRegistry, overrides: Mapping[str, Mapping[str, Any]]) -> ModelRegistry:
    """``registry`` with ``overrides`` (model name -> override table) applied; ``registry``
    itself when there is none. One that does not apply is logged and left out."""
    specs: dict[str, ModelSpec] = {}
    for name, table in overrides.items():
        if not registry.has(name, None):
            logger.warning("override of model %r left out: the tenant has no such model", name)
            continue
        try:
            specs[name] = ModelOverride.model_validate(table).apply(registry.get(name, None))
        except (ModelConfigError, ValueError) as exc:
            logger.warning("override of model %r left out: %s", name, str(exc).splitlines()[0])
    return registry.with_specs(specs) if specs else registry


class OverriddenModelSource(TenantModelSource):
    """The tenant's registry with its overrides applied (module docstring)."""

    def __init__(
        self,
        providers: SqlProviderStore,
        overrides: SqlModelOverrideStore,
        base: ModelRegistry,
        settings: Settings,
    ) -> None:
        super().__init__(providers, base, settings)
        self.overrides = overrides
        self._applied: dict[str, tuple[float, ModelRegistry, str, ModelRegistry]] = {}

    async def models_for(self, tenant_id: str) -> ModelRegistry:
        """The tenant's registry with its overrides. Raises StoreError when they cannot be read."""
        registry, cached = self._cache.get(tenant_id), self._applied.get(tenant_id)
        now = time.monotonic()
        if (
            registry is not None
            and cached is not None
            and min(registry[0], cached[0]) > now
            and cached[1] is registry[2]
        ):
            self._cache.move_to_end(tenant_id)
            return cached[3]
        return await self.reads.read(("overridden", tenant_id), lambda: self._read_overridden(tenant_id))

    async def _read_overridden(self, tenant_id: str) -> ModelRegistry:
        """Read the tenant's providers and overrides (one snapshot, one transaction) and
        remember its registry with and without them; who joined a read that the tenant's
        change forgot in flight is served by it, unremembered."""
        epoch, now = self.reads.epoch, time.monotonic()
        snapshot = await self.providers.snapshot(tenant_id)
        registry = self._remember(tenant_id, snapshot, epoch, now)
        cached = self._applied.get(tenant_id)
        digest = json.dumps(snapshot.overrides, sort_keys=True)
        if cached is not None and cached[1] is registry and cached[2] == digest:
            applied = cached[3]
        else:
            applied = apply_overrides(registry, snapshot.overrides)
        if self.reads.epoch == epoch:  # nothing forgotten meanwhile
            self._applied[tenant_id] = (now + CACHE_TTL_S, registry, digest, applied)
            if len(self._applied) > 512:  # bounded like the providers' cache
                self._applied.pop(next(iter(self._applied)))
        return applied

    def forget(self, tenant_id: str) -> None:
        """Read the tenant's providers and overrides again on the next :meth:`models_for`."""
        self._applied.pop(tenant_id, None)
        super().forget(tenant_id)

    async def unoverridden(self, tenant_id: str) -> ModelRegistry:
        """The tenant's registry without its overrides (what an override applies to)."""
        return await super().models_for(tenant_id)
