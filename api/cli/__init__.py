"""The ``flowloom`` command line.

- ``validate FILE``, ``schema``, ``import FILE`` (:mod:`api.cli.files`): workflow files.
- ``run FILE``, ``resume RUN_ID``, ``recover [RUN_ID]``, ``cancel RUN_ID``
  (:mod:`api.cli.running`): executing runs, durably, through the run service.
- ``runs``, ``runs prune``, ``show RUN_ID`` (:mod:`api.cli.inspect`): the run store.
- ``worker [--queues Q] [--burst]`` (:mod:`api.cli.worker`): an RQ worker executing queued runs.
- ``quotas show | set | reset`` (:mod:`api.cli.quotas`): the HTTP API's quotas.
- ``rerun RUN_ID --from NODE`` (:mod:`api.cli.rerun`): a past run again from one node.
- ``mcp tools SERVER`` (:mod:`api.cli.mcp`): the tools an MCP server offers to tool nodes.
- ``datasets create | list | show | rm | add | search`` (:mod:`api.cli.datasets`): knowledge bases.
- ``secrets list | set | rm WORKFLOW_ID`` (:mod:`api.cli.secrets`): values of secret environment variables.
- ``sandbox install | list`` (:mod:`api.cli.sandbox`): the packages code nodes may import.
- ``models list | show NAME | probe NAME [--write]`` (:mod:`api.cli.models`): models'
  limits and capabilities, and what an endpoint really does.

Exit codes: 0 success; 1 the run failed; 2 invalid workflow, inputs, usage or
configuration; 3 paused, waiting for an answer; 130 interrupted or cancelled. Failures
are messages, never tracebacks.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.text import Text

from .common import EXIT_INVALID, err

if TYPE_CHECKING:
    from .common import app

#: The modules that add commands to the app, in the order of ``flowloom --help``'s listing.
COMMAND_MODULES = (
    "datasets",
    "files",
    "inspect",
    "keys",
    "mcp",
    "models",
    "quotas",
    "rerun",
    "running",
    "sandbox",
    "secrets",
    "serve",
    "worker",
)
#: The module of each command and command group (``flowloom NAME ...``): :func:`main`
#: imports only that one, so a command does not pay for the imports of the others
#: (``validate`` loads no asyncio nor run-store driver). A test checks it against what
#: the modules register.
COMMAND_MODULE: dict[str, str] = {
    **dict.fromkeys(("run", "resume", "recover", "cancel"), "running"),
    **dict.fromkeys(("validate", "import", "schema"), "files"),
    **dict.fromkeys(("runs", "show", "watch"), "inspect"),
    **{
        name: name
        for name in (
            "datasets",
            "keys",
            "mcp",
            "models",
            "quotas",
            "rerun",
            "sandbox",
            "secrets",
            "serve",
            "worker",
        )
    },
}

__all__ = ["app", "main"]

#: What :func:`main` registered with :mod:`atexit` (once per process).
_AT_EXIT: list[Any] = []


def _load_commands(names: tuple[str, ...]) -> Any:
    """Import the command modules ``names`` (each adds its commands to the app); the app."""
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    from .common import app

    return app


def __getattr__(name: str) -> Any:
    """``app``: the app with every command (``from api.cli import app``, tests' runners)."""
    if name == "app":
        return _load_commands(COMMAND_MODULES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console entry point: :data:`app`, with configuration problems (a bad ``FLOWLOOM_*``
    setting, an unreadable model registry, an unreachable store) reported as messages
    with exit code 2 instead of tracebacks."""
    from .common import spare_the_exit_collections, start_up

    if spare_the_exit_collections not in _AT_EXIT:  # once, whatever calls main in-process
        _AT_EXIT.append(spare_the_exit_collections)
        atexit.register(spare_the_exit_collections)
    first = sys.argv[1] if len(sys.argv) > 1 else None
    # --help, --version, a typo: every command (the listing and the suggestion need them)
    module = COMMAND_MODULE.get(first or "")
    try:
        with start_up(first):
            app = _load_commands((module,) if module else COMMAND_MODULES)
            with _only_the_invoked_command(app, sys.argv[1:2]):
                app()
    except Exception as exc:
        # Imported only on this path: engine.errors loads the whole engine package
        # (networkx, jinja2, every schema), which --help does not need.
        from pydantic import ValidationError

        from engine.errors import FlowloomError
        from engine.plain_errors import plain_message

        if isinstance(exc, ValidationError) and exc.title == "Settings":  # a FLOWLOOM_* environment setting
            _config_error(
                "invalid setting:",
                [
                    f"FLOWLOOM_{str(e['loc'][0]).upper() if e['loc'] else '?'}: {plain_message(e)}"
                    for e in exc.errors()
                ],
            )
        if _is_redis_outage(exc):
            from .common import redis_unreachable, settings

            try:
                redis_unreachable(settings().redis_url or "", exc)
            except typer.Exit as stop:
                raise SystemExit(stop.exit_code) from None
        if isinstance(exc, (FlowloomError, OSError)):
            _config_error("configuration problem:", [f"{type(exc).__name__}: {exc}"])
        # A bug of Flowloom's own: say so in one line, never with a traceback.
        err().print(Text(f"internal error: {type(exc).__name__}: {exc}", style="bold red"))
        err().print(Text("this is a bug in Flowloom; the run (if any) is kept in the run store", style="red"))
        raise SystemExit(1) from None


@contextlib.contextmanager
def _only_the_invoked_command(app: typer.Typer, first: list[str]) -> Iterator[None]:
    """While in the block, the app lists only the command (or command group) ``first``
    names, when it names exactly one.

    Typer builds the Click command of every registered command on each invocation (their
    signatures and annotations: about 25 commands, tens of milliseconds of start-up)
    although one runs. With anything else first (``--help``, ``--version``, a typo), every
    command stays: the listing and the "no such command" suggestion need them all.
    """
    name = first[0] if first else "-"
    saved = (app.registered_commands, app.registered_groups)
    commands = [c for c in app.registered_commands if _command_name(c) == name]
    groups = [g for g in app.registered_groups if _group_name(g) == name]
    if len(commands) + len(groups) == 1:
        app.registered_commands, app.registered_groups = commands, groups
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = saved


def _command_name(info: Any) -> str | None:
    """The name a registered command is invoked by (Typer's rule when none is given)."""
    if info.name:
        return str(info.name)
    callback = info.callback
    return typer.main.get_command_name(callback.__name__) if callback is not None else None


def _group_name(info: Any) -> str | None:
    """The name a registered command group (``add_typer``) is invoked by."""
    name = info.name if isinstance(info.name, str) else None
    if name is None and info.typer_instance is not None:
        instance_name = info.typer_instance.info.name
        name = instance_name if isinstance(instance_name, str) else None
    return name


def _is_redis_outage(exc: BaseException) -> bool:
    """True for redis-py's connection and timeout errors (redis is imported only when a
    command used it, so its absence from ``sys.modules`` means it was not the cause)."""
    import sys

    module = sys.modules.get("redis.exceptions")
    return module is not None and isinstance(exc, (module.ConnectionError, module.TimeoutError))


def _config_error(title: str, lines: list[str]) -> NoReturn:
    console = err()
    console.print(Text(title, style="bold red"))
    for line in lines:
        console.print(Text(f"  - {line}"))
    raise SystemExit(EXIT_INVALID)
