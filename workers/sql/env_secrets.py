"""Secret values of environment variables in the SQL store (the engine's ``SecretStore``).

One row per tenant, workflow id and name; the value is encrypted by the deployment's
:class:`~workers.secret_box.SecretBox` together with the tenant, the workflow id and the
name it belongs to, and opened only where those match: a token copied to another
tenant's (or workflow's, or name's) row does not decrypt there. Every statement filters
by tenant. A value that no longer decrypts (the key changed) is left out of a run's
values with a warning naming the workflow and the name, never the value: the node that
reads it fails saying it is not set, and the builder sets it again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from ..secret_box import SecretBox, SecretUnreadable
from .store import SqlStore, dialect_insert
from .tables import workflow_secrets as table

__all__ = ["SqlSecretStore"]

logger = logging.getLogger(__name__)


class SqlSecretStore:
    """Secrets on the connection of ``store`` (its transactions and lock), encrypted by
    the box ``box`` returns (asked for at the first value, so a deployment that keeps no
    secret makes no key file)."""

    def __init__(self, store: SqlStore, box: Callable[[], SecretBox]) -> None:
        self.store = store
        self._box_of = box
        self._box: SecretBox | None = None
        self._insert = dialect_insert(store.backend)

    @property
    def box(self) -> SecretBox:
        if self._box is None:
            self._box = self._box_of()
        return self._box

    @staticmethod
    def _mine(tenant_id: str, workflow_id: str) -> Any:
        return sa.and_(table.c.tenant_id == tenant_id, table.c.workflow_id == workflow_id)

    def _seal(self, tenant_id: str, workflow_id: str, name: str, value: str) -> str:
        return self.box.encrypt(json.dumps({"t": tenant_id, "w": workflow_id, "n": name, "v": value}))

    def _open(self, tenant_id: str, workflow_id: str, name: str, token: str) -> str:
        sealed = json.loads(self.box.decrypt(token))
        if (sealed.get("t"), sealed.get("w"), sealed.get("n")) != (tenant_id, workflow_id, name):
            raise SecretUnreadable(
                f"secret {name!r} of workflow {workflow_id!r} was stored for another tenant, "
                "workflow or name: set it again"
            )
        return str(sealed["v"])

    async def secret_values(self, tenant_id: str, workflow_id: str) -> dict[str, str]:
        """``{name: plaintext}`` of the workflow's secrets that decrypt (module docstring)."""
        async with self.store._tx() as conn:
            rows = (
                await conn.execute(
                    sa.select(table.c.name, table.c.token).where(self._mine(tenant_id, workflow_id))
                )
            ).all()
        values: dict[str, str] = {}
        for name, token in rows:
            try:
                values[name] = self._open(tenant_id, workflow_id, name, token)
            except SecretUnreadable as exc:
                logger.warning("workflow %s, secret %s: %s", workflow_id, name, exc)
        return values

    async def secret_status(self, tenant_id: str, workflow_id: str) -> dict[str, float]:
        """``{name: updated_at}`` of the secrets set (no value is read)."""
        async with self.store._tx() as conn:
            rows = (
                await conn.execute(
                    sa.select(table.c.name, table.c.updated_at).where(self._mine(tenant_id, workflow_id))
                )
            ).all()
        return {name: at for name, at in rows}

    async def set_secrets(self, tenant_id: str, workflow_id: str, values: Mapping[str, str | None]) -> None:
        """Set (or with ``None`` delete) each value, in one transaction."""
        now = time.time()
        sealed = {n: self._seal(tenant_id, workflow_id, n, v) for n, v in values.items() if v is not None}
        async with self.store._tx() as conn:
            for name, value in values.items():
                if value is None:
                    await conn.execute(
                        sa.delete(table).where(self._mine(tenant_id, workflow_id), table.c.name == name)
                    )
                    continue
                stmt = self._insert(table).values(
                    tenant_id=tenant_id,
                    workflow_id=workflow_id,
                    name=name,
                    token=sealed[name],
                    updated_at=now,
                )
                stmt = stmt.on_conflict_do_update(
                    index_elements=[table.c.tenant_id, table.c.workflow_id, table.c.name],
                    set_={"token": stmt.excluded.token, "updated_at": stmt.excluded.updated_at},
                )
                await conn.execute(stmt)

    async def delete_secrets(self, tenant_id: str, workflow_id: str) -> None:
        """Delete every secret of the workflow."""
        async with self.store._tx() as conn:
            await conn.execute(sa.delete(table).where(self._mine(tenant_id, workflow_id)))
