"""A tenant's overrides of models' limits and capabilities in the SQL store.

One row per (tenant, model name): the override's table (the keys set, as JSON). Every
statement filters by ``tenant_id``, so one tenant's overrides never reach another's
models. Rows go with their tenant (``ON DELETE CASCADE``).

:class:`SqlModelOverrideStore` shares the connection (and its lock) of a :class:`SqlStore`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from .store import SqlStore, dialect_insert
from .tables import tenant_model_overrides as overrides_t
from .tables import tenants as tenants_t

__all__ = ["SqlModelOverrideStore", "read_overrides"]


async def read_overrides(conn: Any, tenant_id: str) -> dict[str, dict[str, Any]]:
    """Model name -> its override table, for the tenant, read on ``conn`` (in the caller's
    transaction: the providers' snapshot reads them with the providers)."""
    rows = (
        await conn.execute(
            sa.select(overrides_t.c.model, overrides_t.c.override)
            .where(overrides_t.c.tenant_id == tenant_id)
            .order_by(overrides_t.c.model)
        )
    ).all()
    return {model: dict(table or {}) for model, table in rows}


class SqlModelOverrideStore:
    """Tenants' model overrides (module docstring). Database errors surface as
    ``StoreError`` (URL masked)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._insert = dialect_insert(store.backend)

    async def overrides(self, tenant_id: str) -> dict[str, dict[str, Any]]:
        """Model name -> its override table, for the tenant."""
        async with self.store._tx() as conn:
            return await read_overrides(conn, tenant_id)

    async def set_override(self, tenant_id: str, model: str, table: Mapping[str, Any]) -> None:
        """Store ``table`` as the tenant's override of ``model`` (replacing any)."""
        now = time.time()
        async with self.store._tx() as conn:
            await conn.execute(
                self._insert(tenants_t).on_conflict_do_nothing(index_elements=[tenants_t.c.tenant_id]),
                {"tenant_id": tenant_id, "name": tenant_id, "created_at": now},
            )
            await conn.execute(
                sa.delete(overrides_t).where(
                    overrides_t.c.tenant_id == tenant_id, overrides_t.c.model == model
                )
            )
            await conn.execute(
                sa.insert(overrides_t),
                {"tenant_id": tenant_id, "model": model, "override": dict(table), "updated_at": now},
            )

    async def delete_override(self, tenant_id: str, model: str) -> bool:
        """Drop the tenant's override of ``model``; False when it had none."""
        async with self.store._tx() as conn:
            result = await conn.execute(
                sa.delete(overrides_t).where(
                    overrides_t.c.tenant_id == tenant_id, overrides_t.c.model == model
                )
            )
        return bool(result.rowcount)
