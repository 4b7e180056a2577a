"""``flowloom keys create | list | revoke``: API keys of the HTTP API.

A key is shown once, by ``create`` (on stdout, alone on its line, so scripts can take
it); the store keeps only its visible prefix and a hash of its secret. ``--tenant``
names the tenant (default ``default``); ``create`` makes the tenant when it does not
exist yet. ``create --app`` refuses (exit 2) an app the tenant does not have, as
``flowloom quotas set --app`` does: such a key could only ever get 404.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, EXIT_OK, JsonFlag, SynonymGroup, app, err, out, print_columns, write_json
from .running import with_service

__all__ = ["create", "list_keys", "revoke"]

keys_app = typer.Typer(
    cls=SynonymGroup,
    help="API keys of the HTTP API (`flowloom serve`): create (shown once), list, revoke.",
    no_args_is_help=True,
)
app.add_typer(keys_app, name="keys")

TenantOption = Annotated[str, typer.Option("--tenant", help="the tenant of the keys")]


def _store(service: Any) -> Any:
    from api.app import key_store_of

    return key_store_of(service)


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


@keys_app.command()
def create(
    name: Annotated[str, typer.Option("--name", help="what the key is for (shown in lists)")] = "",
    tenant: TenantOption = "default",
    admin: Annotated[
        bool, typer.Option("--admin", help="may manage the tenant's keys through the API")
    ] = False,
    app_id: Annotated[
        str | None, typer.Option("--app", help="scope the key to one app (default: the whole tenant)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a key and print it once (only a hash of it is kept)."""

    async def body(service: Any) -> int:
        from api.quotas import no_app_message, tenant_has_app

        keys = _store(service)
        if app_id is not None and not await tenant_has_app(service, tenant, app_id):
            err().print(Text(f"{no_app_message(tenant, app_id)}; no key was made", style="bold red"))
            return EXIT_INVALID
        await keys.ensure_tenant(tenant)
        record, plaintext = await keys.create_key(tenant, name=name, admin=admin, app_id=app_id)
        if as_json:
            write_json({"key": record.model_dump(mode="json"), "secret": plaintext})
            return EXIT_OK
        scope = f"app {app_id}" if app_id else f"tenant {tenant}"
        err().print(
            Text.assemble(
                ("API key created", "bold green"),
                f": {record.id} ({'admin, ' if admin else ''}{scope}); it is shown once, keep it now:",
            )
        )
        out().print(plaintext)
        err().print(Text(f"use it as: curl -H 'Authorization: Bearer {plaintext[:12]}...' ...", style="dim"))
        return EXIT_OK

    raise typer.Exit(with_service(body))


@keys_app.command("list")
def list_keys(tenant: TenantOption = "default", as_json: JsonFlag = False) -> None:
    """The tenant's keys (prefix, scope, last use, revocation; never a secret)."""

    async def body(service: Any) -> int:
        found = await _store(service).list_keys(tenant)
        if as_json:
            write_json([k.model_dump(mode="json") for k in found])
            return EXIT_OK
        if not found:
            out().print(f"no API key for tenant {tenant}; create one with: flowloom keys create --admin")
            return EXIT_OK
        rows = [
            (
                k.id,
                f"fl_{k.prefix}_...",
                k.name or "-",
                f"app {k.app_id}" if k.app_id else "tenant",
                "yes" if k.admin else "no",
                _when(k.created_at),
                _when(k.last_used_at),
                _when(k.revoked_at),
            )
            for k in found
        ]
        print_columns(("ID", "KEY", "NAME", "SCOPE", "ADMIN", "CREATED", "LAST USED", "REVOKED"), rows)
        return EXIT_OK

    raise typer.Exit(with_service(body))


async def _key_id(keys: Any, tenant: str, given: str) -> str:
    """The id of the key ``given`` names: its id (``key_...``), or the KEY column of
    ``flowloom keys list`` (``fl_<prefix>_...``, ``fl_<prefix>``, the bare prefix, or the
    whole key), since that is the part of a key a person recognises. A prefix is unique
    in the store, so it names at most one key; ``given`` as it is when nothing matches
    (the store then says there is no such key)."""
    if given.startswith("key_"):
        return given
    parts = given.split("_")
    prefix = parts[1] if parts[0] == "fl" and len(parts) > 1 else parts[0]
    return next((k.id for k in await keys.list_keys(tenant) if k.prefix == prefix), given)


@keys_app.command()
def revoke(
    key_id: Annotated[
        str,
        typer.Argument(
            help="the key: its ID or its KEY (`fl_<prefix>_...`) as `flowloom keys list` shows them"
        ),
    ],
    tenant: TenantOption = "default",
) -> None:
    """Revoke a key: it no longer authenticates."""
    from engine.ports import KeyNotFound

    from .common import abort

    async def body(service: Any) -> int:
        keys = _store(service)
        try:
            record = await keys.revoke_key(tenant, await _key_id(keys, tenant, key_id))
        except KeyNotFound as exc:
            abort("cannot revoke:", [f"{exc} (give its ID or KEY as `flowloom keys list` shows them)"])
        out().print(
            Text.assemble((f"API key {record.id} revoked", "bold yellow"), f" ({_when(record.revoked_at)})")
        )
        return EXIT_OK

    raise typer.Exit(with_service(body))
