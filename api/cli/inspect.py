"""``flowloom runs``, ``runs prune`` and ``show``: reading the run store.

Durations never include time spent waiting for a person; that time is shown apart
(``waited``), as are tokens and cost.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from .common import (
    EXIT_OK,
    JsonFlag,
    SynonymGroup,
    abort,
    app,
    named,
    node_titles,
    out,
    print_columns,
    write_json,
)
from .running import with_service

if TYPE_CHECKING:
    from schemas.node_records import AgentRound

__all__ = ["prune", "runs", "show", "watch"]

runs_app = typer.Typer(
    cls=SynonymGroup,
    help="List runs (newest first); `flowloom runs prune` deletes old ones.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(runs_app, name="runs")


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _questions(summary: Any) -> str:
    texts = [
        str(getattr(i.payload, "description", None) or getattr(i.payload, "question", None) or i.kind)
        for i in summary.pending_interrupts
    ]
    return "; ".join(texts)


@runs_app.callback()
def runs(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option(
            help="only runs with this status (running, paused, succeeded, failed, cancelled, pending)"
        ),
    ] = None,
    workflow: Annotated[str | None, typer.Option(help="only runs of this workflow id")] = None,
    chat: Annotated[str | None, typer.Option(help="only runs of this chat id")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="at most this many runs")] = 20,
    as_json: JsonFlag = False,
) -> None:
    """List runs: id, workflow, status, started, duration, tokens, cost; paused runs with their questions."""
    if ctx.invoked_subcommand is not None:
        return
    from schemas.types import RunStatus

    try:
        wanted = RunStatus(status) if status else None
    except ValueError:
        abort("invalid --status:", [f"{status!r}: one of {', '.join(s.value for s in RunStatus)}"])

    async def body(service: Any) -> int:
        found = await service.list("default", status=wanted, workflow_id=workflow, chat_id=chat, limit=limit)
        if as_json:
            write_json([{**s.model_dump(mode="json"), "duration_s": s.duration_s} for s in found])
            return EXIT_OK
        if not found:
            out().print("no runs")
            return EXIT_OK
        rows = [
            (
                s.run_id,
                s.workflow_id,
                s.status.value,
                _when(s.started_at),
                _seconds(s.duration_s),
                _seconds(s.waited_s) if s.waited_s else "-",
                _tokens(s),
                f"{s.cost:.4f}" if s.cost else "-",
                _questions(s) if s.pending_interrupts else "",
            )
            for s in found
        ]
        print_columns(
            ("RUN", "WORKFLOW", "STATUS", "STARTED", "DURATION", "WAITED", "TOKENS", "COST", "WAITING FOR"),
            rows,
        )
        if any(s.usage_estimated for s in found):
            out().print(
                "~ tokens estimated: the model server did not report them (flowloom show RUN says which)"
            )
        return EXIT_OK

    raise typer.Exit(with_service(body))


@runs_app.command("prune")
def prune(
    older_than: Annotated[
        float, typer.Option("--older-than", min=0, help="delete runs that ended more than this many days ago")
    ],
) -> None:
    """Delete ended runs (with their node runs and events) older than --older-than days;
    paused and running runs are kept."""

    async def body(service: Any) -> int:
        count = await service.prune("default", older_than)
        out().print(f"deleted {count} run(s) that ended more than {older_than:g} day(s) ago")
        return EXIT_OK

    raise typer.Exit(with_service(body))


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="the run to show")],
    node: Annotated[str | None, typer.Option("--node", help="only the node runs of this node id")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a run and its node runs: titles, status, attempts, durations, waiting time, tokens,
    cost, inputs, outputs, errors and agent rounds."""

    async def body(service: Any) -> int:
        summary = await service.get("default", run_id)
        titles = node_titles(await service.workflow_of("default", run_id))
        every = await service.node_runs("default", run_id)
        runs = [r for r in every if node is None or r.node_id == node]
        if node is not None and not runs:
            known = sorted({r.node_id for r in every})
            abort(
                "cannot show:",
                [
                    f"run {run_id} has no node run of node {node!r} (nodes that ran: "
                    f"{', '.join(known) or 'none'})"
                ],
            )
        estimated = summary.usage_estimated or any(r.usage is not None and r.usage.estimated for r in every)
        if as_json:
            write_json(
                {
                    "run": {
                        **summary.model_dump(mode="json"),
                        "duration_s": summary.duration_s,
                        "usage_estimated": estimated,
                    },
                    "node_runs": [
                        {**r.model_dump(mode="json", exclude={"pending"}), "title": titles.get(r.node_id)}
                        for r in runs
                    ],
                },
                indent=2,
            )
            return EXIT_OK
        _print_summary(summary, estimated)
        for record in runs:
            _print_node_run(record, titles)
        return EXIT_OK

    raise typer.Exit(with_service(body))


def _tokens(summary: Any) -> str:
    """A run's tokens for the list's column: ``~93`` when some count was estimated (the
    model server did not report it), so no one reads an estimate as a count."""
    total = str(summary.tokens_in + summary.tokens_out)
    return f"~{total}" if summary.usage_estimated else total


def _print_summary(summary: Any, estimated: bool = False) -> None:
    """The run's line; ``estimated``: some token count was estimated (the model server did
    not report it), said after the tokens so no one reads it as a count."""
    console = out()
    console.print(
        Text.assemble(
            ("run ", "bold"),
            summary.run_id,
            f"  workflow {summary.workflow_id}  ",
            (summary.status.value, "bold"),
        )
    )
    console.print(
        f"  started {_when(summary.started_at)}  duration {_seconds(summary.duration_s)}"
        + (f"  waited for a person {_seconds(summary.waited_s)}" if summary.waited_s else "")
        + f"  tokens {summary.tokens_in}+{summary.tokens_out}"
        + (" (estimated)" if estimated else "")
        + f"  cost {summary.cost:.4f}"
    )
    if summary.error:
        console.print(Text(f"  error: {summary.error.message}", style="red"))
    for interrupt in summary.pending_interrupts:
        payload = interrupt.payload
        asked = getattr(payload, "description", None) or getattr(payload, "question", None)
        console.print(
            Text(
                f"  waiting: {asked or interrupt.kind} (interrupt {interrupt.id})",
                style="magenta",
            )
        )


def _print_node_run(record: Any, titles: dict[str, str]) -> None:
    from schemas.node_records import agent_trace

    console = out()
    where = f"#{record.iteration}" if record.iteration is not None else ""
    took = (
        record.finished_at - record.started_at - record.waited_s
        if record.finished_at and record.started_at
        else None
    )
    usage = record.usage
    line = Text.assemble(
        ("• ", "cyan"),
        (named(record.node_id, titles) + where, "bold"),
        f" [{record.kind}] ",
        (record.status.value, "bold"),
        f"  attempts {record.attempts}  {_seconds(took)}",
    )
    if record.waited_s:
        line.append(f"  waited {_seconds(record.waited_s)}")
    if usage is not None and (usage.tokens_in or usage.tokens_out):
        line.append(
            f"  tokens {usage.tokens_in}+{usage.tokens_out}"
            + (" (estimated)" if usage.estimated else "")
            + f"  cost {usage.cost:.4f}"
        )
    console.print(line)
    if record.inputs:
        console.print(Text(f"    inputs: {_short(record.inputs)}", style="dim"))
    if record.outputs is not None:
        console.print(Text(f"    outputs: {_short(record.outputs)}"))
    if record.error is not None:
        console.print(Text(f"    error: {record.error.message}", style="red"))
    for step in agent_trace(record.data):
        console.print(Text(f"    {_round_line(step)}", style="dim"))
        for call in step.get("tools") or []:
            console.print(Text(f"      tool call: {_short(call)}", style="dim"))


def _round_line(step: AgentRound) -> str:
    """One agent round: its number, the reply's finish reason, tokens and what went wrong."""
    reply = step.get("response")
    usage = step.get("usage") or {}
    line = f"round {step.get('round', 0)}: {reply['finish_reason'] if reply else 'no reply'}"
    if usage:
        line += f"  tokens {usage.get('tokens_in', 0)}+{usage.get('tokens_out', 0)}"
    if reply and reply["text"]:
        line += f"  text: {_short(reply['text'], 120)}"
    error = step.get("error") or step.get("parse_error")
    if error:
        line += f"  error: {_short(error, 200)}"
    return line


def _short(value: Any, limit: int = 300) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


@app.command()
def watch(
    run_id: Annotated[str, typer.Argument(help="the run to follow")],
    after: Annotated[int, typer.Option("--after", min=0, help="show events after this sequence number")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Follow a run from any process: the events after --after that are stored, then new ones
    until the run ends or pauses (text deltas are only streamed to the process running it)."""

    async def body(service: Any) -> int:
        from pydantic import TypeAdapter

        from schemas.events import Event

        titles = node_titles(await service.workflow_of("default", run_id))
        view: Any = None
        if not as_json:
            from .common import terminal_view

            view = terminal_view(titles, endings=True)
        adapter = TypeAdapter(Event)
        async for event in service.watch("default", run_id, after):
            if as_json:
                write_json(event)
            else:
                view.show(adapter.validate_python(event))
        if view is not None:
            view.close()
        return EXIT_OK

    raise typer.Exit(with_service(body))
