"""``flowloom sandbox install | list``: the packages code nodes may import.

Code nodes run in a sandbox with no network, so nothing can be installed while a flow
runs. The operator declares Python requirements and npm packages here; ``install``
installs everything declared into an environment under ``FLOWLOOM_HOME`` with pip and
npm (:mod:`nodes.sandbox.packages`), which the sandbox mounts read-only. ``flowloom
import`` and validation name what a flow needs with the exact ``install`` command.

- ``install [REQUIREMENT...] [-r FILE] [--npm SPEC] [--find-links DIR] [--no-index]``:
  adds the requirements (pip's format: ``json-repair``, ``numpy==2.1``), the lines of
  each requirements file and the npm specs to the declarations, and installs all of
  them (a new environment, made active only when pip and npm succeed). Without
  arguments: installs what is declared again (after editing
  ``$FLOWLOOM_HOME/sandbox/requirements.txt``, or a Python upgrade). ``--find-links``
  / ``--no-index``: install from a directory of wheels (``pip download -d DIR ...``) on
  a host without network.
- ``list [--json]``: what is declared, what the active environment holds (name and
  version), and declarations not installed yet.

Exit codes: 0 done; 2 a bad requirements file, or pip or npm failed (their last lines
are printed; nothing changed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import EXIT_OK, JsonFlag, SynonymGroup, abort, app, err, out, settings, write_json

__all__ = ["install", "list_"]

sandbox_app = typer.Typer(
    cls=SynonymGroup,
    help="The code sandbox: install and list the packages code nodes may import.",
    no_args_is_help=True,
)
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command()
def install(
    requirements: Annotated[
        list[str] | None,
        typer.Argument(help="Python requirements to add, in pip's format (json-repair, numpy==2.1)"),
    ] = None,
    requirement_file: Annotated[
        list[Path] | None,
        typer.Option("--requirement", "-r", dir_okay=False, help="add the requirements of this file"),
    ] = None,
    npm: Annotated[
        list[str] | None, typer.Option("--npm", metavar="SPEC", help="npm package to add (lodash, lodash@4)")
    ] = None,
    find_links: Annotated[
        list[str] | None,
        typer.Option("--find-links", "-f", metavar="DIR", help="also look for wheels in DIR (pip)"),
    ] = None,
    no_index: Annotated[
        bool, typer.Option("--no-index", help="use no package index: only --find-links (npm: --offline)")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Declare packages for code nodes and install everything declared into the sandbox's environment."""
    from nodes.sandbox.packages import InstallFailed, absolute, requirement_lines
    from nodes.sandbox.packages import install as install_packages

    python = [absolute(r) for r in requirements or []]
    for path in requirement_file or []:
        try:
            python += requirement_lines(path.read_text(encoding="utf-8"), str(path), path.parent.resolve())
        except (OSError, UnicodeDecodeError) as exc:
            abort("cannot read the requirements file:", [f"{path}: {getattr(exc, 'strerror', None) or exc}"])
        except ValueError as exc:
            abort("cannot use the requirements file:", [str(exc)])
    console = err()
    try:
        env = install_packages(
            settings(),
            python=python,
            npm=[absolute(spec) for spec in npm or []],
            find_links=list(find_links or []),
            no_index=no_index,
            on_line=lambda line: console.print(Text(line, style="dim")),
        )
    except InstallFailed as exc:
        abort("install failed (the sandbox's packages are unchanged):", str(exc).splitlines())
    except OSError as exc:
        abort("install failed (the sandbox's packages are unchanged):", [f"{type(exc).__name__}: {exc}"])
    report = _inventory()
    if as_json:
        write_json(report, indent=2)
        raise typer.Exit(EXIT_OK)
    console.print(
        Text.assemble(("installed ", "bold green"), f"into {env.root}; code nodes import from it (read-only)")
    )
    _print_inventory(report)


@sandbox_app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """What is declared and what the sandbox's environment holds."""
    report = _inventory()
    if as_json:
        write_json(report, indent=2)
        return
    if report["environment"] is None and not any(report["declared"].values()):
        out().print(
            "no packages installed: code nodes get the Python standard library and Node's built-in modules "
            "(add some with flowloom sandbox install NAME, or --npm NAME)"
        )
        return
    _print_inventory(report)


def _inventory() -> dict[str, Any]:
    from nodes.sandbox.packages import inventory

    return inventory(settings())


def _print_inventory(report: dict[str, Any]) -> None:
    console = out()
    where = report["environment"] or "(none installed)"
    console.print(Text.assemble(("environment: ", "bold"), str(where)))
    if report["installed_at"]:
        console.print(f"  installed {report['installed_at']} for Python {report['python_version']}")
    for label, key in (("Python", "python"), ("npm", "npm")):
        packages = report[key]
        declared = report["declared"][key]
        shown = ", ".join(f"{p['name']} {p['version']}" for p in packages) or "none"
        console.print(Text.assemble((f"{label}: ", "bold"), shown))
        if declared:
            console.print(f"  declared: {', '.join(declared)}")
    pending = [*report["pending"]["python"], *(f"--npm {s}" for s in report["pending"]["npm"])]
    if pending:
        console.print(
            Text(
                f"declared but not installed: {', '.join(pending)} (run flowloom sandbox install)",
                style="yellow",
            )
        )
    if report["problem"]:
        console.print(Text(report["problem"], style="yellow"))
