"""The models a knowledge operation of one tenant may call.

The knowledge service serves every tenant of a process with one embedder, reranker and
relevance judge, built on the operator's model registry. A tenant may also have models
of its own (its providers, :class:`~engine.ports.TenantModels`): a dataset of that
tenant may embed with one of them. The service sets :data:`TENANT_MODELS` to the
tenant's registry for the length of each operation that checks or calls a model
(:func:`tenant_models_scope`: creating or changing a dataset, ingesting a document,
searching), and the registry-backed parts (``nodes.knowledge``) read it before their
own. The variable is a :class:`contextvars.ContextVar`, so concurrent operations of
different tenants (tasks) each see their own, and tasks an operation starts inherit it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

__all__ = ["TENANT_MODELS", "tenant_models_scope"]

#: the model registry of the tenant whose knowledge operation runs in this context (None: the operator's)
TENANT_MODELS: ContextVar[Any] = ContextVar("flowloom_tenant_models", default=None)


@contextlib.asynccontextmanager
async def tenant_models_scope(source: Any, tenant_id: str) -> AsyncIterator[None]:
    """Within the block, :data:`TENANT_MODELS` is ``source.models_for(tenant_id)`` (a
    :class:`~engine.ports.TenantModels`); nothing changes when ``source`` is None.
    Raises StoreError when the tenant's models cannot be read."""
    if source is None:
        yield
        return
    token = TENANT_MODELS.set(await source.models_for(tenant_id))
    try:
        yield
    finally:
        TENANT_MODELS.reset(token)
