"""``flowloom secrets list | set | rm WORKFLOW_ID``: values of a workflow's secret
environment variables (``env.NAME`` of type ``secret``), kept encrypted in the run store
per tenant and workflow id, the store ``flowloom serve`` and ``flowloom run`` read.

``set`` reads the value from stdin when stdin is not a terminal (``printf %s "$TOKEN" |
flowloom secrets set my_flow API_TOKEN``), else asks for it without echo; a value is
never printed, listed or logged. ``list`` shows which names have a value and when it
was set. The name must be an identifier; whether the workflow declares it is the
workflow's business (``flowloom run FILE`` reads the secrets of the file's ``id``).
"""

from __future__ import annotations

import re
import sys
import time
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, EXIT_OK, JsonFlag, SynonymGroup, app, err, out, print_columns, write_json
from .running import with_service

__all__ = ["list_secrets", "remove", "set_secret"]

secrets_app = typer.Typer(
    cls=SynonymGroup,
    help="Secret values of a workflow's environment variables (stored encrypted; never shown).",
    no_args_is_help=True,
)
app.add_typer(secrets_app, name="secrets")

TenantOption = Annotated[str, typer.Option("--tenant", help="the tenant of the workflow")]
WorkflowArg = Annotated[str, typer.Argument(help="the workflow's id")]
NameArg = Annotated[str, typer.Argument(help="the secret environment variable's name")]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked(name: str) -> bool:
    if _NAME.match(name):
        return True
    err().print(
        Text(
            f"{name!r} is not an environment variable name (a letter or _ then letters, digits, _)",
            style="bold red",
        )
    )
    return False


@secrets_app.command("list")
def list_secrets(
    workflow_id: WorkflowArg, tenant: TenantOption = "default", as_json: JsonFlag = False
) -> None:
    """The names that have a value, and when each was set (never a value)."""

    async def body(service: Any) -> int:
        found = await service.secrets.secret_status(tenant, workflow_id)
        if as_json:
            write_json([{"name": n, "updated_at": at} for n, at in sorted(found.items())])
        elif not found:
            out().print(f"no secret is set for workflow {workflow_id} (tenant {tenant})")
        else:
            print_columns(
                ("NAME", "SET AT"),
                [
                    (n, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)))
                    for n, at in sorted(found.items())
                ],
            )
        return EXIT_OK

    raise typer.Exit(with_service(body))


@secrets_app.command("set")
def set_secret(workflow_id: WorkflowArg, name: NameArg, tenant: TenantOption = "default") -> None:
    """Set a secret's value (from stdin, or typed without echo); runs read it from their next start."""
    if not _checked(name):
        raise typer.Exit(EXIT_INVALID)
    if sys.stdin.isatty():
        value = typer.prompt(f"value of {name}", hide_input=True)
    else:
        value = sys.stdin.read().rstrip("\r\n")
    if not value:
        err().print(
            Text("an empty value: nothing was set (`flowloom secrets rm` deletes one)", style="bold red")
        )
        raise typer.Exit(EXIT_INVALID)

    async def body(service: Any) -> int:
        await service.secrets.set_secrets(tenant, workflow_id, {name: value})
        err().print(
            Text.assemble(
                ("secret set", "bold green"), f": {name} of workflow {workflow_id} (tenant {tenant})"
            )
        )
        return EXIT_OK

    raise typer.Exit(with_service(body))


@secrets_app.command("rm")
def remove(workflow_id: WorkflowArg, name: NameArg, tenant: TenantOption = "default") -> None:
    """Delete a secret's value."""
    if not _checked(name):
        raise typer.Exit(EXIT_INVALID)

    async def body(service: Any) -> int:
        await service.secrets.set_secrets(tenant, workflow_id, {name: None})
        err().print(f"secret {name} of workflow {workflow_id} removed")
        return EXIT_OK

    raise typer.Exit(with_service(body))
