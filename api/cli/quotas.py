"""``flowloom quotas show | set | reset``: the quotas of the HTTP API, per tenant and per app.

The same limits as ``GET/PUT /v1/quotas`` (:mod:`api.quotas`): runs per minute (run
starts and continuations in any 60 seconds) and tokens per day (model tokens of the
runs admitted since 00:00 UTC). ``--tenant`` names the tenant (default ``default``);
``--app`` one of its apps (a workflow id: ``set`` refuses an id of which the tenant has
neither a saved workflow nor a run). A limit given as ``default`` drops the
scope's own limit (the tenant then gets the operator's ``FLOWLOOM_QUOTA_*`` default, an
app only the tenant's limit); ``0`` is unlimited. The CLI is the operator's: its own
runs are not counted against the quotas.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, EXIT_OK, JsonFlag, SynonymGroup, app, err, out, print_columns, write_json
from .running import with_service

__all__ = ["reset", "set_limits", "show"]

quotas_app = typer.Typer(
    cls=SynonymGroup,
    help="Quotas of the HTTP API per tenant and per app: runs per minute, tokens per day.",
    no_args_is_help=True,
)
app.add_typer(quotas_app, name="quotas")

TenantOption = Annotated[str, typer.Option("--tenant", help="the tenant")]
AppOption = Annotated[str | None, typer.Option("--app", help="one app of the tenant (a workflow id)")]


def _policy(service: Any) -> Any:
    from api.quotas import Quotas, quota_store_of

    return Quotas(quota_store_of(service.stores.runs), service.settings)


def _limit(value: str | None, name: str) -> tuple[bool, int | None]:
    """``(given, value)``: ``default`` -> None (no own limit), else a whole number >= 0."""
    if value is None:
        return False, None
    if value.strip().lower() == "default":
        return True, None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        err().print(
            Text(
                f"{name} must be a whole number >= 0 (0: unlimited) or 'default', not {value!r}",
                style="bold red",
            )
        )
        raise typer.Exit(EXIT_INVALID)
    return True, number


async def _describe(policy: Any, tenant: str, app_id: str | None) -> dict[str, Any]:
    own = await policy.store.get(tenant, app_id)
    effective = policy.effective(own, app=app_id is not None)
    usage = await policy.usage(tenant, app_id)
    return {
        "tenant_id": tenant,
        "app_id": app_id,
        "runs_per_minute": own.runs_per_minute if own else None,
        "tokens_per_day": own.tokens_per_day if own else None,
        "effective": {
            "runs_per_minute": effective.runs_per_minute or None,
            "tokens_per_day": effective.tokens_per_day or None,
            "runs_per_minute_source": effective.runs_per_minute_source,
            "tokens_per_day_source": effective.tokens_per_day_source,
        },
        "usage": {"runs_last_minute": usage.runs_last_minute, "tokens_today": usage.tokens_today},
    }


def _source(source: str, quota: str) -> str:
    """How a limit's source reads: ``own limit``, or the operator's variable that set it."""
    return (
        "own limit"
        if source == "own"
        else f"default: FLOWLOOM_QUOTA_{quota.upper()}"
        if source == "default"
        else source
    )


def _print(rows: list[dict[str, Any]], tenant: dict[str, Any]) -> None:
    """The rows as columns, each limit with where it comes from. An app without a limit
    of its own shows the tenant's, which is what holds for its runs (``tenant``: the
    tenant's row), never a bare "unlimited" while the tenant's limit applies."""

    def limit(row: dict[str, Any], quota: str) -> str:
        value, source = row["effective"][quota], row["effective"][f"{quota}_source"]
        if row["app_id"] is not None and source == "none":
            value, source = tenant["effective"][quota], tenant["effective"][f"{quota}_source"]
            return f"{value or 'unlimited'} (the tenant's {_source(source, quota)})"
        return f"{value or 'unlimited'} ({_source(source, quota)})"

    print_columns(
        ("SCOPE", "RUNS/MINUTE", "TOKENS/DAY", "RUNS LAST MINUTE", "TOKENS TODAY"),
        [
            (
                f"app {r['app_id']}" if r["app_id"] else f"tenant {r['tenant_id']}",
                limit(r, "runs_per_minute"),
                limit(r, "tokens_per_day"),
                str(r["usage"]["runs_last_minute"]),
                str(r["usage"]["tokens_today"]),
            )
            for r in rows
        ],
    )


@quotas_app.command()
def show(tenant: TenantOption = "default", app_id: AppOption = None, as_json: JsonFlag = False) -> None:
    """The limits that hold (and where they come from) and what was used: the tenant's
    and its apps' with limits of their own, or one app's with ``--app``."""

    async def body(service: Any) -> int:
        policy = _policy(service)
        if app_id is not None:
            scopes: list[str | None] = [app_id]
        else:
            scopes = [None] + [q.app_id for q in await policy.store.list(tenant) if q.app_id is not None]
        rows = [await _describe(policy, tenant, scope) for scope in scopes]
        if as_json:
            write_json(rows if app_id is None else rows[0])
        else:
            _print(rows, rows[0] if app_id is None else await _describe(policy, tenant, None))
        return EXIT_OK

    raise typer.Exit(with_service(body))


@quotas_app.command("set")
def set_limits(
    tenant: TenantOption = "default",
    app_id: AppOption = None,
    runs_per_minute: Annotated[
        str | None, typer.Option("--runs-per-minute", help="N, 0 (unlimited) or default")
    ] = None,
    tokens_per_day: Annotated[
        str | None, typer.Option("--tokens-per-day", help="N, 0 (unlimited) or default")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Set the tenant's (or with ``--app`` the app's) own limits; a limit not given keeps its value."""
    runs_given, runs = _limit(runs_per_minute, "--runs-per-minute")
    tokens_given, tokens = _limit(tokens_per_day, "--tokens-per-day")
    if not runs_given and not tokens_given:
        err().print(Text("give --runs-per-minute and/or --tokens-per-day", style="bold red"))
        raise typer.Exit(EXIT_INVALID)

    async def body(service: Any) -> int:
        from api.app import key_store_of
        from api.quotas import no_app_message, tenant_has_app

        policy = _policy(service)
        if app_id is not None and not await tenant_has_app(service, tenant, app_id):
            err().print(Text(f"{no_app_message(tenant, app_id)}; nothing was set", style="bold red"))
            return EXIT_INVALID
        await key_store_of(service).ensure_tenant(tenant)
        current = await policy.store.get(tenant, app_id)
        await policy.store.put(
            tenant,
            app_id,
            runs_per_minute=runs if runs_given else (current.runs_per_minute if current else None),
            tokens_per_day=tokens if tokens_given else (current.tokens_per_day if current else None),
        )
        row = await _describe(policy, tenant, app_id)
        if as_json:
            write_json(row)
        else:
            _print([row], row if app_id is None else await _describe(policy, tenant, None))
        return EXIT_OK

    raise typer.Exit(with_service(body))


@quotas_app.command()
def reset(tenant: TenantOption = "default", app_id: AppOption = None) -> None:
    """Drop the tenant's (or the app's) own limits: the defaults hold again."""

    async def body(service: Any) -> int:
        removed = await _policy(service).store.delete(tenant, app_id)
        scope = f"app {app_id}" if app_id else f"tenant {tenant}"
        out().print(
            f"{scope}: {'own limits removed' if removed else 'had no limits of its own'}; the defaults hold"
        )
        return EXIT_OK

    raise typer.Exit(with_service(body))
