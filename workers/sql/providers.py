"""Tenants' model providers in the SQL store: endpoints, their keys (encrypted), their
models and the tenant's default models.

Every statement filters by ``tenant_id``: another tenant's provider or model is not
found, exactly like one that does not exist. A key is kept only as the token of the
deployment's :class:`~workers.secret_box.SecretBox` (sealed with its tenant and provider:
a token copied to another row does not decrypt there) and a masked form for display;
its plaintext leaves this module only through :meth:`SqlProviderStore.snapshot`, the
input of a tenant's model registry, never through a record a route returns.

A model's ``name`` is unique in the tenant, whatever its provider: it is what the
tenant's workflows write. Deleting a provider deletes its models (``ON DELETE
CASCADE``) and the defaults that named them.

:class:`SqlProviderStore` shares the connection (and its lock) of a :class:`SqlStore`::

    providers = SqlProviderStore(store, secret_box_for(settings))
    record = await providers.create_provider("default", "ollama", preset="ollama", base_url=...)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ..secret_box import SecretBox, SecretUnreadable, mask
from .model_overrides import read_overrides
from .rows import RowData
from .store import SqlStore, dialect_insert
from .tables import model_providers as providers_t
from .tables import provider_models as models_t
from .tables import tenant_model_defaults as defaults_t
from .tables import tenants as tenants_t

__all__ = [
    "KEEP",
    "ModelRecord",
    "ProviderConflict",
    "ProviderNotFound",
    "ProviderRecord",
    "SqlProviderStore",
    "TenantModelsSnapshot",
]


#: "leave the stored key as it is" (:meth:`SqlProviderStore.update_provider`)
KEEP: Any = object()


class ProviderNotFound(LookupError):
    """No such provider (or model) for this tenant - also when another tenant has one."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class ProviderConflict(ValueError):
    """The id or the model name is taken in the tenant."""


@dataclass(slots=True)
class ModelRecord:
    """A model of a tenant's provider: its name, provider and registry fields (``spec``)."""

    name: str
    provider_id: str
    spec: dict[str, Any]


@dataclass(slots=True)
class ProviderRecord:
    """A tenant's provider as it may be shown: never the key, only whether it is set
    and its mask."""

    id: str
    name: str
    preset: str
    base_url: str
    api_key_set: bool
    api_key_masked: str | None
    created_at: float
    updated_at: float
    models: list[ModelRecord] = field(default_factory=list)


@dataclass(slots=True)
class TenantModelsSnapshot:
    """What a tenant's model registry is built from: its providers, their keys in
    plaintext (``keys``: provider id -> key, absent when none), models and defaults, and
    the overrides applied over them (``overrides``: model name -> override table, as
    :meth:`workers.sql.model_overrides.SqlModelOverrideStore.overrides` returns them)."""

    providers: list[ProviderRecord]
    keys: dict[str, str]
    defaults: dict[str, str]
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __repr__(self) -> str:  # the keys never reach a log line through a repr
        return f"TenantModelsSnapshot(providers={[p.id for p in self.providers]}, defaults={self.defaults})"


def _provider(row: RowData, models: list[ModelRecord]) -> ProviderRecord:
    return ProviderRecord(
        id=row["provider_id"],
        name=row["name"],
        preset=row["preset"],
        base_url=row["base_url"],
        api_key_set=row["api_key_token"] is not None,
        api_key_masked=row["api_key_mask"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        models=models,
    )


class SqlProviderStore:
    """Tenants' providers on the tables of :mod:`workers.sql.tables` (module docstring).
    Database errors surface as ``StoreError`` (URL masked); a key that no longer
    decrypts as :class:`~workers.secret_box.SecretUnreadable`."""

    def __init__(self, store: SqlStore, box: SecretBox | Callable[[], SecretBox]) -> None:
        """``box``: the secret box, or a function making it on first use (a process that
        never reads or writes a key never creates a key file)."""
        self.store = store
        self._box = box
        self._insert = dialect_insert(store.backend)

    @property
    def box(self) -> SecretBox:
        """The secret box keys are encrypted with."""
        if not isinstance(self._box, SecretBox):
            self._box = self._box()
        return self._box

    @staticmethod
    def _mine(tenant_id: str, provider_id: str) -> Any:
        return sa.and_(providers_t.c.tenant_id == tenant_id, providers_t.c.provider_id == provider_id)

    # ---------------------------------------------------------------- providers

    async def list_providers(self, tenant_id: str) -> list[ProviderRecord]:
        """The tenant's providers by id, each with its models by name."""
        async with self.store._tx() as conn:
            rows = (
                (
                    await conn.execute(
                        sa.select(providers_t)
                        .where(providers_t.c.tenant_id == tenant_id)
                        .order_by(providers_t.c.provider_id)
                    )
                )
                .mappings()
                .all()
            )
            model_rows = (
                (
                    await conn.execute(
                        sa.select(models_t).where(models_t.c.tenant_id == tenant_id).order_by(models_t.c.name)
                    )
                )
                .mappings()
                .all()
            )
        by_provider: dict[str, list[ModelRecord]] = {}
        for m in model_rows:
            by_provider.setdefault(m["provider_id"], []).append(
                ModelRecord(m["name"], m["provider_id"], dict(m["spec"]))
            )
        return [_provider(row, by_provider.get(row["provider_id"], [])) for row in rows]

    async def get_provider(self, tenant_id: str, provider_id: str) -> ProviderRecord:
        """The tenant's provider with its models. Raises ProviderNotFound."""
        for record in await self.list_providers(tenant_id):
            if record.id == provider_id:
                return record
        raise ProviderNotFound(f"no model provider {provider_id!r}")

    async def create_provider(
        self, tenant_id: str, provider_id: str, *, name: str, preset: str, base_url: str, api_key: str | None
    ) -> ProviderRecord:
        """A new provider of the tenant (the tenant row is made when missing).
        Raises ProviderConflict: the id is taken in the tenant."""
        now = time.time()
        row = {
            "tenant_id": tenant_id,
            "provider_id": provider_id,
            "name": name or provider_id,
            "preset": preset,
            "base_url": base_url,
            **self._key_columns(tenant_id, provider_id, api_key),
            "settings": None,
            "created_at": now,
            "updated_at": now,
        }
        async with self.store._tx() as conn:
            await conn.execute(
                self._insert(tenants_t).on_conflict_do_nothing(index_elements=[tenants_t.c.tenant_id]),
                {"tenant_id": tenant_id, "name": tenant_id, "created_at": now},
            )
            inserted = await conn.execute(
                self._insert(providers_t).on_conflict_do_nothing(
                    index_elements=[providers_t.c.tenant_id, providers_t.c.provider_id]
                ),
                row,
            )
        if inserted.rowcount != 1:
            raise ProviderConflict(f"a model provider {provider_id!r} exists already")
        return await self.get_provider(tenant_id, provider_id)

    async def free_id(self, tenant_id: str, wanted: str) -> str:
        """``wanted``, else ``wanted-2``, ``wanted-3``... : the first id the tenant has no provider of."""
        taken = {p.id for p in await self.list_providers(tenant_id)}
        candidate, n = wanted, 1
        while candidate in taken:
            n += 1
            candidate = f"{wanted}-{n}"
        return candidate

    def _key_columns(self, tenant_id: str, provider_id: str, api_key: str | None) -> dict[str, Any]:
        """The stored form of a key: sealed with the tenant and provider it belongs to, so
        a token moved to another row (another tenant's provider) does not decrypt there."""
        if not api_key:
            return {"api_key_token": None, "api_key_mask": None}
        sealed = json.dumps([tenant_id, provider_id, api_key])
        return {"api_key_token": self.box.encrypt(sealed), "api_key_mask": mask(api_key)}

    def _open(self, tenant_id: str, provider_id: str, token: str) -> str:
        """The key in ``token``. Raises SecretUnreadable: another key, an altered token, or a
        token sealed for another tenant or provider."""
        try:
            owner_tenant, owner_provider, key = json.loads(self.box.decrypt(token))
        except (ValueError, TypeError):
            raise SecretUnreadable(
                f"the key of model provider {provider_id!r} is not in the stored form; set it again"
            ) from None
        if (owner_tenant, owner_provider) != (tenant_id, provider_id):
            raise SecretUnreadable(
                f"the stored key of model provider {provider_id!r} belongs to another provider; set it again"
            )
        return str(key)

    async def update_provider(
        self,
        tenant_id: str,
        provider_id: str,
        *,
        name: str | None = None,
        base_url: str | None = None,
        api_key: Any = KEEP,
    ) -> ProviderRecord:
        """Change a provider; None (``KEEP`` for the key) leaves a field; ``api_key`` ``""``
        or None removes the key. Raises ProviderNotFound."""
        values: dict[str, Any] = {"updated_at": time.time()}
        if name is not None:
            values["name"] = name or provider_id
        if base_url is not None:
            values["base_url"] = base_url
        if api_key is not KEEP:
            values.update(self._key_columns(tenant_id, provider_id, api_key))
        async with self.store._tx() as conn:
            done = await conn.execute(
                sa.update(providers_t).where(self._mine(tenant_id, provider_id)).values(**values)
            )
        if done.rowcount != 1:
            raise ProviderNotFound(f"no model provider {provider_id!r}")
        return await self.get_provider(tenant_id, provider_id)

    async def delete_provider(self, tenant_id: str, provider_id: str) -> None:
        """Delete the provider, its models and the defaults naming them. Raises ProviderNotFound."""
        async with self.store._tx() as conn:
            names = (
                (
                    await conn.execute(
                        sa.select(models_t.c.name).where(
                            models_t.c.tenant_id == tenant_id, models_t.c.provider_id == provider_id
                        )
                    )
                )
                .scalars()
                .all()
            )
            if names:
                await conn.execute(
                    sa.delete(defaults_t).where(
                        defaults_t.c.tenant_id == tenant_id, defaults_t.c.model.in_(names)
                    )
                )
            await conn.execute(
                sa.delete(models_t).where(
                    models_t.c.tenant_id == tenant_id, models_t.c.provider_id == provider_id
                )
            )
            done = await conn.execute(sa.delete(providers_t).where(self._mine(tenant_id, provider_id)))
        if done.rowcount != 1:
            raise ProviderNotFound(f"no model provider {provider_id!r}")

    async def provider_key(self, tenant_id: str, provider_id: str) -> str | None:
        """The provider's key in plaintext (to call its endpoint), None when it has none.
        Raises ProviderNotFound; SecretUnreadable when the encryption key changed."""
        async with self.store._tx() as conn:
            token = (
                await conn.execute(
                    sa.select(providers_t.c.api_key_token).where(self._mine(tenant_id, provider_id))
                )
            ).first()
        if token is None:
            raise ProviderNotFound(f"no model provider {provider_id!r}")
        return self._open(tenant_id, provider_id, token[0]) if token[0] is not None else None

    # ------------------------------------------------------------------- models

    async def add_model(
        self, tenant_id: str, provider_id: str, name: str, spec: dict[str, Any]
    ) -> ModelRecord:
        """A new model of the provider. Raises ProviderNotFound (no such provider),
        ProviderConflict (the tenant has a model of this name, on any provider)."""
        now = time.time()
        async with self.store._tx() as conn:
            found = (
                await conn.execute(
                    sa.select(providers_t.c.provider_id).where(self._mine(tenant_id, provider_id))
                )
            ).first()
            if found is None:
                raise ProviderNotFound(f"no model provider {provider_id!r}")
            inserted = await conn.execute(
                self._insert(models_t).on_conflict_do_nothing(
                    index_elements=[models_t.c.tenant_id, models_t.c.name]
                ),
                {
                    "tenant_id": tenant_id,
                    "name": name,
                    "provider_id": provider_id,
                    "spec": spec,
                    "created_at": now,
                    "updated_at": now,
                },
            )
        if inserted.rowcount != 1:
            raise ProviderConflict(f"a model named {name!r} exists already in this tenant; pick another name")
        return ModelRecord(name, provider_id, spec)

    async def get_model(self, tenant_id: str, provider_id: str, name: str) -> ModelRecord:
        """The provider's model ``name``. Raises ProviderNotFound."""
        async with self.store._tx() as conn:
            row = (
                (
                    await conn.execute(
                        sa.select(models_t).where(
                            models_t.c.tenant_id == tenant_id,
                            models_t.c.provider_id == provider_id,
                            models_t.c.name == name,
                        )
                    )
                )
                .mappings()
                .first()
            )
        if row is None:
            raise ProviderNotFound(f"no model {name!r} on model provider {provider_id!r}")
        return ModelRecord(row["name"], row["provider_id"], dict(row["spec"]))

    async def replace_model(
        self, tenant_id: str, provider_id: str, name: str, spec: dict[str, Any]
    ) -> ModelRecord:
        """Store ``spec`` as the model's fields. Raises ProviderNotFound."""
        async with self.store._tx() as conn:
            done = await conn.execute(
                sa.update(models_t)
                .where(
                    models_t.c.tenant_id == tenant_id,
                    models_t.c.provider_id == provider_id,
                    models_t.c.name == name,
                )
                .values(spec=spec, updated_at=time.time())
            )
        if done.rowcount != 1:
            raise ProviderNotFound(f"no model {name!r} on model provider {provider_id!r}")
        return ModelRecord(name, provider_id, spec)

    async def delete_model(self, tenant_id: str, provider_id: str, name: str) -> None:
        """Delete the model and the defaults naming it. Raises ProviderNotFound."""
        async with self.store._tx() as conn:
            done = await conn.execute(
                sa.delete(models_t).where(
                    models_t.c.tenant_id == tenant_id,
                    models_t.c.provider_id == provider_id,
                    models_t.c.name == name,
                )
            )
            if done.rowcount == 1:
                await conn.execute(
                    sa.delete(defaults_t).where(
                        defaults_t.c.tenant_id == tenant_id, defaults_t.c.model == name
                    )
                )
        if done.rowcount != 1:
            raise ProviderNotFound(f"no model {name!r} on model provider {provider_id!r}")

    # ----------------------------------------------------------------- defaults

    async def defaults(self, tenant_id: str) -> dict[str, str]:
        """The tenant's default model per type (``chat``, ``embedding``, ``rerank``) it chose."""
        async with self.store._tx() as conn:
            rows = (
                await conn.execute(
                    sa.select(defaults_t.c.type, defaults_t.c.model).where(
                        defaults_t.c.tenant_id == tenant_id
                    )
                )
            ).all()
        return {kind: model for kind, model in rows}

    async def set_defaults(self, tenant_id: str, chosen: Mapping[str, str | None]) -> dict[str, str]:
        """Set (a name) or clear (None) the default of each type in ``chosen``; other types stay.
        The caller checks that each name is a model of that type."""
        now = time.time()
        async with self.store._tx() as conn:
            await conn.execute(
                self._insert(tenants_t).on_conflict_do_nothing(index_elements=[tenants_t.c.tenant_id]),
                {"tenant_id": tenant_id, "name": tenant_id, "created_at": now},
            )
            for kind, model in chosen.items():
                await conn.execute(
                    sa.delete(defaults_t).where(
                        defaults_t.c.tenant_id == tenant_id, defaults_t.c.type == kind
                    )
                )
                if model:
                    await conn.execute(
                        sa.insert(defaults_t),
                        {"tenant_id": tenant_id, "type": kind, "model": model, "updated_at": now},
                    )
        return await self.defaults(tenant_id)

    # ----------------------------------------------------------------- snapshot

    async def snapshot(self, tenant_id: str) -> TenantModelsSnapshot:
        """Everything the tenant's model registry needs, keys decrypted (module docstring),
        read in one transaction (runs ask for it, once a second while they come: one commit
        of the database, not one for the providers and one for the overrides). A key that
        no longer decrypts is left out (its calls then fail as unauthorised, naming the
        provider) rather than failing every run of the tenant."""
        async with self.store._tx() as conn:
            rows = (
                (
                    await conn.execute(
                        sa.select(providers_t)
                        .where(providers_t.c.tenant_id == tenant_id)
                        .order_by(providers_t.c.provider_id)
                    )
                )
                .mappings()
                .all()
            )
            model_rows = (
                (
                    await conn.execute(
                        sa.select(models_t).where(models_t.c.tenant_id == tenant_id).order_by(models_t.c.name)
                    )
                )
                .mappings()
                .all()
                if rows
                else []
            )
            chosen = (
                await conn.execute(
                    sa.select(defaults_t.c.type, defaults_t.c.model).where(
                        defaults_t.c.tenant_id == tenant_id
                    )
                )
            ).all()
            overridden = await read_overrides(conn, tenant_id)
        by_provider: dict[str, list[ModelRecord]] = {}
        for m in model_rows:
            by_provider.setdefault(m["provider_id"], []).append(
                ModelRecord(m["name"], m["provider_id"], dict(m["spec"]))
            )
        keys: dict[str, str] = {}
        for row in rows:
            if row["api_key_token"] is not None:
                try:
                    keys[row["provider_id"]] = self._open(tenant_id, row["provider_id"], row["api_key_token"])
                except SecretUnreadable:
                    continue
        providers = [_provider(row, by_provider.get(row["provider_id"], [])) for row in rows]
        return TenantModelsSnapshot(
            providers,
            keys,
            {kind: model for kind, model in chosen},
            overridden,
        )
