"""``flowloom rerun RUN_ID --from NODE [--workflow FILE]``: a new run from one node of a
past run, with the same inputs.

The node runs strictly before NODE are reused from the past run (not executed again:
no model call or HTTP request is repeated); NODE and what follows run with FILE (the
edited workflow), or with the past run's own document when no FILE is given. The past
run is not changed. Output and exit codes are those of ``flowloom run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import JsonFlag, JsonView, View, abort, app, err, node_titles, terminal_view
from .running import NoInputFlag, _drive, compile_or_exit, inline, load_workflow, report_end, with_service

__all__ = ["rerun"]


@app.command()
def rerun(
    run_id: Annotated[str, typer.Argument(help="the past run (ended or paused)")],
    from_node: Annotated[
        str,
        typer.Option(
            "--from",
            metavar="NODE",
            help="the node to run again; the nodes before it are reused from the past run",
        ),
    ],
    workflow: Annotated[
        Path | None,
        typer.Option(
            "--workflow",
            metavar="FILE",
            help="the edited workflow to run from NODE on (default: the past run's own document)",
        ),
    ] = None,
    as_json: JsonFlag = False,
    no_input: NoInputFlag = False,
) -> None:
    """Run a past run again from NODE: the same inputs, the nodes before NODE reused (not
    executed again), NODE and what follows executed with FILE."""
    doc: dict[str, Any] | None = None
    if workflow is not None:
        doc, problems = load_workflow(workflow)
        compile_or_exit(doc, problems)

    async def body(service: Any) -> int:
        from engine.rerun import RerunRefused
        from schemas.launch import RerunRun

        chosen = doc if doc is not None else await service.workflow_of("default", run_id)
        try:
            ticket = await service.launch("default", RerunRun(run_id, from_node, chosen), inline())
        except RerunRefused as exc:
            abort("cannot rerun:", [str(exc)])
        titles = node_titles(chosen)
        state = await service.state("default", ticket.run_id)
        reused = [nid for nid, run in state.node_runs.items() if "reused_from" in run.data]
        err().print(
            Text.assemble(
                ("rerun", "bold"),
                f" of {run_id} from {from_node!r} as run {ticket.run_id}; "
                f"reused (not executed again): {', '.join(reused) or 'none'}",
            )
        )
        view: View = JsonView() if as_json else terminal_view(titles)
        summary = await _drive(service, ticket, view, not no_input)
        view.close()
        return report_end(summary, no_input, titles)

    raise typer.Exit(with_service(body))
