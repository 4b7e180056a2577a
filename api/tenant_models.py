"""Each tenant's model registry, for the run service and the routes: the operator's
registry with the tenant's own providers and models over it (:mod:`nodes.llm.tenant_registry`).

:class:`TenantModelSource` is the engine's ``TenantModels`` port. It reads the tenant's
providers from the SQL store (:mod:`workers.sql.providers`) at most once per
:data:`CACHE_TTL_S` seconds per tenant and rebuilds the registry only when what it is
built from changed (a digest of the providers, models, defaults and keys), so runs of a
tenant share its SDK clients and connection pools. A change through this process's
routes is seen at once (:meth:`TenantModelSource.forget`); one made by another process
(another server, ``flowloom worker``) within :data:`CACHE_TTL_S` seconds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the address guard loads httpx: only when a tenant's registry is built
    from engine.settings import Settings
    from nodes.llm.model_registry import ModelRegistry
    from workers.sql.providers import SqlProviderStore

__all__ = ["CACHE_TTL_S", "TenantModelSource"]

#: seconds a tenant's registry is used before its providers are read again
CACHE_TTL_S = 1.0
#: tenants whose registries are remembered (least recently used dropped first)
_CACHE_MAX = 512


class TenantModelSource:
    """The ``TenantModels`` port over :class:`SqlProviderStore` (module docstring)."""

    def __init__(self, providers: SqlProviderStore, base: ModelRegistry, settings: Settings) -> None:
        """``base``: the operator's registry; ``settings``: an :class:`~engine.settings.Settings`
        (its ``http_allow`` is the address guard of tenant endpoints)."""
        self.providers, self.base, self.settings = providers, base, settings
        self._guard: Any = None
        self._cache: OrderedDict[str, tuple[float, str, ModelRegistry]] = OrderedDict()

    @property
    def guard(self) -> Any:
        """The :class:`~nodes.http.guard.AddressPolicy` tenant endpoints are reached under."""
        if self._guard is None:
            from nodes.http.guard import AddressPolicy

            self._guard = AddressPolicy.from_settings(self.settings)
        return self._guard

    async def models_for(self, tenant_id: str) -> ModelRegistry:
        """The tenant's registry (the operator's when it has no provider and no default).
        Raises StoreError when its providers cannot be read."""
        now = time.monotonic()
        cached = self._cache.get(tenant_id)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(tenant_id)
            return cached[2]
        from nodes.llm.tenant_registry import snapshot_digest, tenant_registry

        snapshot = await self.providers.snapshot(tenant_id)
        digest = snapshot_digest(snapshot.providers, snapshot.keys, snapshot.defaults)
        if cached is not None and cached[1] == digest:
            registry = cached[2]
        elif not snapshot.providers and not snapshot.defaults.get("chat"):
            registry = self.base  # nothing of its own (and no address guard to load)
        else:
            registry = tenant_registry(
                self.base, snapshot.providers, snapshot.keys, snapshot.defaults, guard=self.guard
            )
        self._cache[tenant_id] = (now + CACHE_TTL_S, digest, registry)
        self._cache.move_to_end(tenant_id)
        while len(self._cache) > _CACHE_MAX:
            self._cache.popitem(last=False)
        return registry

    def forget(self, tenant_id: str) -> None:
        """Read the tenant's providers again on the next :meth:`models_for` (after a change)."""
        self._cache.pop(tenant_id, None)
