"""Each tenant's model registry, for the run service and the routes: the operator's
registry with the tenant's own providers and models over it (:mod:`nodes.llm.tenant_registry`).

:class:`TenantModelSource` is the engine's ``TenantModels`` port. It reads the tenant's
providers from the SQL store (:mod:`workers.sql.providers`) at most once per
:data:`CACHE_TTL_S` seconds per tenant and rebuilds the registry only when what it is
built from changed (a digest of the providers, models, defaults and keys), so runs of a
tenant share its SDK clients and connection pools. A change through this process's
routes is seen at once (:meth:`TenantModelSource.forget`); one made by another process
(another server, ``flowloom worker``) within :data:`CACHE_TTL_S` seconds.

Callers that find a tenant's entry expired while a read of it is in flight wait for that
read (:class:`~engine.shared_reads.SharedReads`) instead of each reading: at sixteen runs in flight
every expiry used to start up to sixteen reads of the same rows. A read in flight when
the tenant is forgotten serves the callers that joined it but is not remembered.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from engine.shared_reads import SharedReads

if TYPE_CHECKING:  # the address guard loads httpx: only when a tenant's registry is built
    from engine.settings import Settings
    from nodes.llm.model_registry import ModelRegistry
    from workers.sql.providers import SqlProviderStore, TenantModelsSnapshot

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
        #: reads in flight, by (what, tenant): callers of an expired entry join them
        self.reads: SharedReads[tuple[str, str]] = SharedReads()

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
        cached = self._cache.get(tenant_id)
        if cached is not None and cached[0] > time.monotonic():
            self._cache.move_to_end(tenant_id)
            return cached[2]
        return await self.reads.read(("providers", tenant_id), lambda: self._read(tenant_id))

    async def _read(self, tenant_id: str) -> ModelRegistry:
        """Read the tenant's providers and remember its registry (rebuilt only when they changed)."""
        epoch, now = self.reads.epoch, time.monotonic()
        snapshot = await self.providers.snapshot(tenant_id)
        return self._remember(tenant_id, snapshot, epoch, now)

    def _remember(
        self, tenant_id: str, snapshot: TenantModelsSnapshot, epoch: int, now: float
    ) -> ModelRegistry:
        """The registry of ``snapshot`` (the one remembered when its digest is unchanged),
        remembered until ``now`` + :data:`CACHE_TTL_S` unless the tenant was forgotten
        since ``epoch`` (the reads' epoch when the snapshot's read started)."""
        from nodes.llm.tenant_registry import snapshot_digest, tenant_registry

        cached = self._cache.get(tenant_id)
        digest = snapshot_digest(snapshot.providers, snapshot.keys, snapshot.defaults)
        if cached is not None and cached[1] == digest:
            registry = cached[2]
        elif not snapshot.providers and not snapshot.defaults.get("chat"):
            registry = self.base  # nothing of its own (and no address guard to load)
        else:
            registry = tenant_registry(
                self.base, snapshot.providers, snapshot.keys, snapshot.defaults, guard=self.guard
            )
        if self.reads.epoch == epoch:  # nothing forgotten meanwhile
            self._cache[tenant_id] = (now + CACHE_TTL_S, digest, registry)
            self._cache.move_to_end(tenant_id)
            while len(self._cache) > _CACHE_MAX:
                self._cache.popitem(last=False)
        return registry

    def forget(self, tenant_id: str) -> None:
        """Read the tenant's providers again on the next :meth:`models_for` (after a change)."""
        self._cache.pop(tenant_id, None)
        self.reads.forget(lambda key: key[1] == tenant_id)  # in flight from before the change
