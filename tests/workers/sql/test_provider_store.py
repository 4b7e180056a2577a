"""The providers' store on SQLite and PostgreSQL: keys stored as sealed tokens (never in
plaintext, unreadable when moved to another tenant's row), every read scoped by tenant,
and a provider's deletion taking its models and the defaults naming them."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from workers.secret_box import SecretBox, SecretUnreadable
from workers.sql.providers import ProviderNotFound, SqlProviderStore

KEY = "sk-store-test-9f8e7d6c5b4a"


@pytest.fixture
def providers(store) -> SqlProviderStore:
    return SqlProviderStore(store, SecretBox([Fernet.generate_key()]))


async def _row_token(store, tenant_id: str, provider_id: str) -> str:
    async with store._tx() as conn:
        return (await conn.execute(sa.text("SELECT api_key_token FROM model_providers WHERE tenant_id = :t AND "
                                           "provider_id = :p"), {"t": tenant_id, "p": provider_id})).scalar_one()


def _tenants() -> tuple[str, str]:
    """Two tenant ids of this test alone (the PostgreSQL database may be shared)."""
    run = uuid.uuid4().hex[:8]
    return f"a-{run}", f"b-{run}"


async def test_a_key_is_sealed_to_its_tenant_and_provider(store, providers):
    a, b = _tenants()
    await providers.create_provider(a, "team", name="A", preset="vllm", base_url="http://x/v1", api_key=KEY)
    await providers.create_provider(b, "team", name="B", preset="vllm", base_url="http://y/v1", api_key=None)
    token = await _row_token(store, a, "team")
    assert KEY not in token
    assert await providers.provider_key(a, "team") == KEY
    # a token copied into tenant b's row does not give b the key
    async with store._tx() as conn:
        await conn.execute(sa.text("UPDATE model_providers SET api_key_token = :k WHERE tenant_id = :b"),
                           {"k": token, "b": b})
    with pytest.raises(SecretUnreadable, match="belongs to another provider"):
        await providers.provider_key(b, "team")
    snapshot = await providers.snapshot(b)
    assert snapshot.keys == {} and KEY not in repr(snapshot)
    assert (await providers.snapshot(a)).keys == {"team": KEY}


async def test_reads_are_scoped_and_deletion_cascades(providers):
    a, b = _tenants()
    await providers.create_provider(a, "team", name="A", preset="vllm", base_url="http://x/v1", api_key=KEY)
    await providers.add_model(a, "team", "chat-1", {"model": "c", "type": "chat", "max_context": 8192,
                                                     "max_output_tokens": 1024})
    await providers.set_defaults(a, {"chat": "chat-1"})
    assert await providers.list_providers(b) == []
    for call in (providers.get_provider(b, "team"), providers.provider_key(b, "team"),
                 providers.get_model(b, "team", "chat-1"), providers.delete_provider(b, "team")):
        with pytest.raises(ProviderNotFound):
            await call
    await providers.delete_provider(a, "team")
    assert await providers.defaults(a) == {}
    assert (await providers.snapshot(a)).providers == []
