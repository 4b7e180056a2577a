"""Secret values of environment variables in the SQL store (the engine's ``SecretStore``).

One row per tenant, workflow id and name, the value sealed by
:class:`~workers.secret_box.SecretBox`. Every statement filters by tenant. A value that
no longer decrypts (the master key changed) is left out of a run's values with a
warning naming the workflow and the name, never the value: the node that reads it gets
``""`` and the builder sets it again.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

import sqlalchemy as sa

from ..secret_box import SecretBox, SecretUnreadable
from .store import SqlStore, dialect_insert
from .tables import WorkflowSecretRow

__all__ = ["SqlSecretStore"]

logger = logging.getLogger(__name__)
table = WorkflowSecretRow.__table__


class SqlSecretStore:
    """Secrets on the connection of ``store`` (its transactions and lock), sealed by ``box``."""

    def __init__(self, store: SqlStore, box: SecretBox) -> None:
        self.store = store
        self.box = box
        self._insert = dialect_insert(store.backend)

    @staticmethod
    def _mine(tenant_id: str, workflow_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(table.c.tenant_id == tenant_id, table.c.workflow_id == workflow_id)

    async def secret_values(self, tenant_id: str, workflow_id: str) -> dict[str, str]:
        """``{name: plaintext}`` of the workflow's secrets that decrypt (module docstring)."""
        async with self.store._tx() as conn:
            rows = (await conn.execute(sa.select(table.c.name, table.c.ciphertext)
                                       .where(self._mine(tenant_id, workflow_id)))).all()
        values: dict[str, str] = {}
        for name, sealed in rows:
            try:
                values[name] = self.box.open(tenant_id, workflow_id, name, bytes(sealed))
            except SecretUnreadable as exc:
                logger.warning("%s", exc)
        return values

    async def secret_status(self, tenant_id: str, workflow_id: str) -> dict[str, float]:
        """``{name: updated_at}`` of the secrets set (no value is read)."""
        async with self.store._tx() as conn:
            rows = (await conn.execute(sa.select(table.c.name, table.c.updated_at)
                                       .where(self._mine(tenant_id, workflow_id)))).all()
        return {name: at for name, at in rows}

    async def set_secrets(self, tenant_id: str, workflow_id: str, values: Mapping[str, str | None]) -> None:
        """Set (or with ``None`` delete) each value, in one transaction."""
        now = time.time()
        async with self.store._tx() as conn:
            for name, value in values.items():
                if value is None:
                    await conn.execute(sa.delete(table).where(self._mine(tenant_id, workflow_id), table.c.name == name))
                    continue
                row = {"tenant_id": tenant_id, "workflow_id": workflow_id, "name": name, "updated_at": now,
                       "ciphertext": self.box.seal(tenant_id, workflow_id, name, value)}
                stmt = self._insert(table).values(row)
                stmt = stmt.on_conflict_do_update(index_elements=[table.c.tenant_id, table.c.workflow_id, table.c.name],
                                                  set_={"ciphertext": stmt.excluded.ciphertext,
                                                        "updated_at": stmt.excluded.updated_at})
                await conn.execute(stmt)

    async def delete_secrets(self, tenant_id: str, workflow_id: str) -> None:
        """Delete every secret of the workflow."""
        async with self.store._tx() as conn:
            await conn.execute(sa.delete(table).where(self._mine(tenant_id, workflow_id)))
