"""``flowloom mcp tools SERVER``: the tools an MCP server lists, as a tool node would see them.

``SERVER`` is a Streamable HTTP endpoint (``https://host/mcp``) or, with ``--stdio``, a
command started as a stdio server (``flowloom mcp tools --stdio -- python server.py``).
The person at the terminal chose the server, and could reach it with any other tool
from the same shell: the guards against what *workflows* name do not apply to it. Its
host may be loopback or private without ``FLOWLOOM_HTTP_ALLOW`` (a Flowloom server on
127.0.0.1, a server on the LAN), and a stdio command needs no
``FLOWLOOM_MCP_ALLOW_STDIO``. Only the typed host is let through: any other address the
connection is sent to (a redirect) goes through the HTTP node's address policy. ``--header 'Name: value'`` is sent with every request: a literal value
(``-H 'Authorization: Bearer fl_...'``: typed here, stored nowhere) or
``{{secret:NAME}}`` references (``FLOWLOOM_SECRET_NAME``); values are never printed back. Each tool is printed with the risk a node gives it (``read`` for
``readOnlyHint``, ``write`` for ``destructiveHint``, else ``unknown``, confirmed as a
write) and its description; ``--json`` prints name, description, input schema,
annotations and risk. A server that answers with an error status is reported with the
status and its own message (``refused the request: 401 unauthorized: invalid or revoked
API key``). Exit codes: 0 listed, 2 the server was refused or did not answer.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from .common import EXIT_OK, JsonFlag, SynonymGroup, abort, app, out, print_columns, settings, write_json

__all__ = ["tools"]

mcp_app = typer.Typer(
    cls=SynonymGroup,
    help="MCP servers: list the tools a server offers to tool and agent nodes.",
    no_args_is_help=True,
)
app.add_typer(mcp_app, name="mcp")


def _server(target: list[str], headers: list[str], stdio: bool) -> Any:
    """The :class:`~schemas.nodes_agent.McpServer` the command line describes (exits 2 when invalid)."""
    from pydantic import ValidationError

    from schemas.nodes_agent import McpServer

    parsed: dict[str, str] = {}
    for index, header in enumerate(headers, start=1):
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            # Not echoed: a header typed without its name may be a bare credential.
            abort(
                "invalid header:", [f"--header number {index} has no 'Name:' part: write it as 'Name: value'"]
            )
        parsed[name.strip()] = _as_secret(value.strip(), index)
    config: dict[str, Any] = {"name": "cli"}
    if stdio:
        config.update(command=target[0], args=target[1:])
        if parsed:
            abort("invalid options:", ["--header is for HTTP servers, not --stdio"])
    else:
        if len(target) != 1:
            abort("invalid arguments:", ["give one URL (or --stdio -- COMMAND ARGS...)"])
        config.update(url=target[0], headers=parsed)
    try:
        return McpServer.model_validate(config)
    except ValidationError as exc:
        abort("invalid MCP server:", [e["msg"].removeprefix("Value error, ") for e in exc.errors()])


def _as_secret(value: str, index: int) -> str:
    """A literal header value typed on the command line, as a secret reference to a
    variable of this process only. A workflow may not hold a credential, but nothing is
    stored here; going through a secret keeps the node's rule that secret values are
    masked (``***``) wherever the server's answers would show them. A value that already
    uses ``{{secret:NAME}}`` is left as it is."""
    import os

    from nodes.agent.mcp_tools import SECRET_ENV_PREFIX
    from schemas.nodes_agent import SECRET_REF

    if not value or SECRET_REF.search(value) or "{{" in value:
        return value
    name = f"CLI_HEADER_{index}"
    os.environ[SECRET_ENV_PREFIX + name] = value
    return f"{{{{secret:{name}}}}}"


def _typed_server_allowed(current: Any, target: list[str], stdio: bool) -> Any:
    """``current`` settings letting this command reach the server typed on the command line
    (module docstring): its stdio command, or its URL's host added to ``http_allow``."""
    from urllib.parse import urlsplit

    if stdio:
        return current.model_copy(update={"mcp_allow_stdio": True})
    host = urlsplit(target[0]).hostname  # validated as an http(s) URL with a host by _server
    return current.model_copy(update={"http_allow": [*current.http_allow, host]}) if host else current


def _row(tool: Any) -> tuple[str, str, str]:
    from nodes.agent.mcp_tools import mcp_risk

    description = (tool.description or tool.title or "").strip().splitlines()
    return tool.name, mcp_risk(tool.annotations) or "unknown", description[0] if description else "-"


@mcp_app.command("tools")
def tools(
    target: Annotated[
        list[str], typer.Argument(help="the server's URL, or with --stdio its command and arguments")
    ],
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            "-H",
            help="'Name: value' sent with every "
            "request (a literal value or {{secret:NAME}} references; never printed)",
        ),
    ] = None,
    stdio: Annotated[bool, typer.Option("--stdio", help="start TARGET as a stdio server")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to connect and list")] = 20.0,
    as_json: JsonFlag = False,
) -> None:
    """List the tools an MCP server offers (name, risk, description)."""
    from engine.errors import NodeFailed
    from nodes.agent.mcp_tools import list_server_tools, mcp_risk

    server = _server(target, header or [], stdio).model_copy(update={"connect_timeout": timeout})
    chosen = _typed_server_allowed(settings(), target, stdio)
    try:
        found = asyncio.run(list_server_tools(server, chosen))
    except NodeFailed as exc:
        abort("cannot list the tools:", [str(exc)])
    if as_json:
        write_json(
            [
                {
                    "name": t.name,
                    "description": t.description or "",
                    "input_schema": t.input_schema,
                    "annotations": t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                    "risk": mcp_risk(t.annotations) or "unknown",
                }
                for t in found
            ]
        )
        raise typer.Exit(EXIT_OK)
    if not found:
        out().print("the server lists no tools")
        raise typer.Exit(EXIT_OK)
    print_columns(("TOOL", "RISK", "DESCRIPTION"), [_row(t) for t in found])
    raise typer.Exit(EXIT_OK)
