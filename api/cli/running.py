"""``flowloom run``, ``resume``, ``recover`` and ``cancel``: executing runs through the
run service (durable: every node is checkpointed in the run store before the next).

When a node asks a person something, ``run`` and ``resume`` prompt on the terminal
(stderr) and read the answer from stdin, then continue; with ``--no-input``, or when
stdin ends, the run stays paused in the run store. The first Ctrl-C cancels the run
(it ends ``cancelled``, recorded), a second one stops waiting.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import signal
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from .common import (
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_RUN_FAILED,
    JsonFlag,
    JsonView,
    View,
    WorkflowFile,
    abort,
    app,
    end_start_up,
    err,
    is_stdin,
    named,
    node_titles,
    out,
    print_problems,
    settings,
    terminal_view,
)
from .deployment import refuse_what_is_missing
from .loading import load_workflow
from .questions import answer_hint, ask, refuse_without_answer, show_question

__all__ = ["cancel", "load_workflow", "recover", "resume", "run"]

NoInputFlag = Annotated[
    bool, typer.Option("--no-input", help="never prompt: leave the run paused on a question")
]
_EXIT_FOR_STATUS = {"succeeded": EXIT_OK, "cancelled": EXIT_INTERRUPTED, "paused": EXIT_PAUSED}


def _with_limits(
    doc: dict[str, Any], max_wall_time: float | None, max_node_executions: int | None
) -> dict[str, Any]:
    """A copy of ``doc`` whose ``limits`` carry the command-line overrides (``doc`` is untouched)."""
    overrides = {
        k: v
        for k, v in (("max_wall_time", max_wall_time), ("max_node_executions", max_node_executions))
        if v is not None
    }
    limits = doc.get("limits", {})
    if not overrides or not isinstance(limits, dict):
        return doc  # a malformed ``limits`` is reported by the compiler as it is
    doc = copy.deepcopy(doc)
    doc["limits"] = {**limits, **overrides}
    return doc


def compile_or_exit(doc: dict[str, Any] | None, problems: list[Any]) -> Any:
    """Compile ``doc`` with the built-in catalog; on errors print every problem and exit 2."""
    from engine.compiler import compile_workflow
    from engine.errors import CompileError
    from nodes import builtin_catalog
    from nodes.llm.model_registry import registry_for

    try:
        plan = (
            compile_workflow(doc, catalog=builtin_catalog(), models=registry_for(settings()))
            if doc is not None
            else None
        )
    except CompileError as exc:
        plan, problems = None, exc.problems
    if plan is None:
        err().print(Text("invalid workflow:", style="bold red"))
        print_problems(problems, err(), node_titles(doc))
        raise typer.Exit(EXIT_INVALID)
    print_problems(list(plan.warnings), err(), node_titles(doc))
    return plan


def _read_inputs_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (values taken as typed JSON, not converted)."""
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        abort("invalid inputs file:", [f"{path}: {exc}"])
    if not isinstance(values, dict):
        abort("invalid inputs file:", [f"{path}: expected a JSON object of input values"])
    return values


def _gather_inputs(plan: Any, pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """Inputs from ``--inputs-file`` then ``--input NAME=VALUE`` (converted by declared type)."""
    from engine.runner import coerce_input

    values = _read_inputs_file(inputs_file) if inputs_file is not None else {}
    declared = {var.name: var for var in plan.workflow.inputs}
    errors: list[str] = []
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            errors.append(f"--input {pair!r}: expected NAME=VALUE")
        elif name not in declared:
            values[name] = text  # reported with the other input problems
        else:
            try:
                values[name] = coerce_input(declared[name], text)
            except ValueError as exc:
                errors.append(str(exc))
    if errors:
        abort("invalid input value(s):", errors)
    return values


# ------------------------------------------------------------------- driving


def _interrupts(summary: Any) -> list[Any]:
    from schemas.run import Interrupt

    return [
        Interrupt(id=i.id, node_id=i.node_id, node_run_id="", kind=i.kind, payload=i.payload)
        for i in summary.pending_interrupts
    ]


async def _stream(service: Any, run_id: str, after: int, view: View) -> int:
    """Follow the run after event ``after`` and show its events until it ends or pauses;
    Ctrl-C cancels the run through the service. Returns the last event's ``seq``."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    pending: list[asyncio.Task[Any]] = []

    def on_sigint() -> None:
        if pending:  # second Ctrl-C: stop waiting
            assert task is not None
            task.cancel()
        else:
            pending.append(
                loop.create_task(service.cancel("default", run_id, "interrupted by the user (SIGINT)"))
            )

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # no loop signal handlers here (not the main thread): Ctrl-C stops at once
    try:
        async with aclosing(service.follow("default", run_id, after)) as stream:
            async for event in stream:
                after = event.seq
                view.show(event)
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        await asyncio.gather(*pending, return_exceptions=True)
    return after


def inline() -> Any:
    """The placement of every CLI run: in this process."""
    from schemas.launch import Placement

    return Placement(execution="inline")


async def _drive(service: Any, ticket: Any, view: View, prompt: bool) -> Any:
    """Show the launched run's events (``ticket``: what ``RunService.launch`` returned);
    on a pause prompt (when allowed) and resume. Returns the run's final summary."""
    run_id, after = ticket.run_id, ticket.after_seq
    while True:
        after = await _stream(service, run_id, after, view)
        summary = await service.get("default", run_id)
        if summary.status.value != "paused" or not prompt:
            return summary
        resumed = await _answer(service, summary)
        if resumed is None:
            return summary
        after = resumed.after_seq


async def _answer(service: Any, summary: Any, answers: dict[str, Any] | None = None) -> Any:
    """Resume the paused run with ``answers``, or with answers asked on the terminal; an
    answer that fits no option or field is refused with the reason and asked again. The
    launch's ticket, or None when stdin ended (the run stays paused)."""
    from engine.frontdoor import InvalidAnswer
    from schemas.launch import ResumeRun

    while True:
        if answers is None:
            answers = {}
            for interrupt in _interrupts(summary):
                answer = await asyncio.to_thread(ask, interrupt)
                if answer is None:
                    return None
                answers[interrupt.id] = answer
        try:
            return await service.launch("default", ResumeRun(summary.run_id, answers=answers), inline())
        except InvalidAnswer as exc:
            for problem in exc.problems:
                err().print(Text(f"  {problem}", style="red"))
            answers = None


def report_end(summary: Any, show_questions: bool, titles: dict[str, str]) -> int:
    """On stderr: why the run failed (node and reason), that it was cancelled, or the
    pending questions and how to answer them. Returns the exit code."""
    status, error = summary.status.value, summary.error
    if status == "failed" and error is not None:
        where = f" at node {named(error.node_id, titles, quote=True)}" if error.node_id else ""
        err().print(Text.assemble((f"run failed{where}", "bold red"), f" ({error.reason}): {error.message}"))
    elif status == "cancelled":
        err().print(Text("run cancelled", style="bold yellow"))
    elif status == "paused":
        pending = _interrupts(summary)
        for interrupt in pending if show_questions else []:
            show_question(interrupt)
        ids = ", ".join(i.id for i in pending)
        which = f" --interrupt {pending[0].id}" if len(pending) > 1 else ""
        err().print(
            Text.assemble(
                ("run paused", "bold magenta"),
                f": {summary.run_id} waits for interrupt(s) "
                f"{ids}; continue with: flowloom resume {summary.run_id}{which} "
                f"{answer_hint(pending[0])}",
            )
        )
    return _EXIT_FOR_STATUS.get(status, EXIT_RUN_FAILED)


def log_to_home(home: Path) -> Path:
    """Send Flowloom's own log records (``flowloom.*``: an internal error's traceback) to
    ``home/flowloom.log`` instead of the terminal, where a command prints one plain line
    per problem and never a traceback; a record the file cannot take (a full disk) goes to
    stderr instead. Returns the log's path; installed once per process."""
    path = Path(home) / "flowloom.log"
    from engine.settings import private_directory  # on use: --help loads no engine

    private_directory(path.parent)
    logger = logging.getLogger("flowloom")
    if not any(getattr(h, "baseFilename", None) == str(path.resolve()) for h in logger.handlers):
        from api.logs import FallbackFileHandler

        handler = FallbackFileHandler(
            str(path)
        )  # created on the first record; stderr when it cannot be written
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
    return path


def with_service(body: Callable[[Any], Any], *, knowledge: bool = False) -> Any:
    """Open the run service from the settings, run ``body(service)`` (a coroutine), close it.

    ``knowledge``: ``service.knowledge`` is the knowledge service itself (the dataset
    commands); otherwise it opens on a run's first search only (``KnowledgeOnDemand``).

    Store and settings problems end the command with exit 2 and a message, never a
    traceback; Ctrl-C while waiting ends it with 130.
    """
    from api.composition import open_service
    from engine.errors import InvalidInputs, UnknownInterrupt
    from engine.ports import RunNotFound, RunOwned, StoreError
    from engine.service import RunNotResumable

    async def main() -> Any:
        # the command line's workflow tools read workflow files, not the server's saved workflows
        async with open_service(
            settings(), knowledge_on_demand=not knowledge, workflow_files=True
        ) as service:
            return await body(service)

    log_to_home(settings().home)
    end_start_up()

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        err().print(Text("interrupted", style="bold yellow"))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except InvalidInputs as exc:
        hint = ["give inputs with --input NAME=VALUE (repeatable) or --inputs-file FILE.json"]
        abort(
            "invalid inputs:", exc.problems + (hint if any("is required" in p for p in exc.problems) else [])
        )
    except RunOwned as exc:
        abort("run is owned by another process:", [str(exc)])
    except RunNotFound as exc:
        abort("no such run:", [str(exc), "list runs with: flowloom runs"])
    except (RunNotResumable, UnknownInterrupt) as exc:
        abort("cannot continue:", [str(exc)])
    except StoreError as exc:
        abort("run store problem:", [str(exc), "check FLOWLOOM_HOME / FLOWLOOM_DATABASE_URL"])


# ------------------------------------------------------------------ commands


@app.command()
def run(
    file: WorkflowFile,
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="NAME=VALUE",
            help="an input, converted by its declared type (repeatable)",
        ),
    ] = None,
    inputs_file: Annotated[
        Path | None,
        typer.Option(
            "--inputs-file", exists=True, dir_okay=False, help="JSON object of input values (--input wins)"
        ),
    ] = None,
    as_json: JsonFlag = False,
    max_wall_time: Annotated[
        float | None, typer.Option(help="override limits.max_wall_time (seconds)")
    ] = None,
    max_node_executions: Annotated[
        int | None, typer.Option(help="override limits.max_node_executions")
    ] = None,
    chat_id: Annotated[
        str | None,
        typer.Option(
            "--chat-id", help="conversation id (sys.chat_id); earlier turns of the chat become sys.history"
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            help="the user's message (sys.query, and the `query` input when the workflow declares one); "
            "in a chat with a paused run it answers its question",
        ),
    ] = None,
    no_input: NoInputFlag = False,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            metavar="ID",
            help="run only this node, with --input REFERENCE=VALUE for what it reads "
            "(start.query, inputs.city, ...); values it is not given come from its last "
            "run",
        ),
    ] = None,
) -> None:
    """Run FILE, streaming node progress and the answer (with --json: one event per line).

    The run is saved in the run store as it goes: `flowloom runs`, `show`, `cancel`.
    With --node ID only that node runs (a run of kind single_node), with the values given
    by reference or, for those left out, the ones its last run of this workflow read."""
    doc, problems = load_workflow(file, "run")
    if doc is not None:
        doc = _with_limits(doc, max_wall_time, max_node_executions)
    plan = compile_or_exit(doc, problems)
    assert doc is not None
    if node is not None:
        from .node_run import run_one_node

        raise typer.Exit(run_one_node(doc, plan, node, inputs or [], inputs_file, as_json, no_input))
    values = _gather_inputs(plan, inputs or [], inputs_file)
    titles = node_titles(doc)
    nodes = refuse_what_is_missing(doc, titles)
    if message is None and chat_id is None:
        _warn_without_message(doc, nodes, values)
    view: View = JsonView() if as_json else terminal_view(titles)
    # Workflows used as tools are looked up next to FILE too, wherever the command runs from.
    current = settings()
    if not current.workflow_path:
        here = Path.cwd() if is_stdin(file) else file.resolve().parent
        current.workflow_path = [here, Path("workflows"), Path("examples")]

    async def body(service: Any) -> int:
        from schemas.launch import StartRun

        # in a chat whose run waits for one answer, the message answers it (the run continues)
        ticket = await service.launch(
            "default", StartRun(doc, values, chat_id=chat_id, message=message), inline()
        )
        summary = await _drive(service, ticket, view, not no_input)
        view.close()
        return report_end(summary, no_input, titles)

    raise typer.Exit(with_service(body))


def _warn_without_message(doc: dict[str, Any], nodes: list[Any], values: dict[str, Any]) -> None:
    """A warning on stderr when ``doc`` is a chat flow (it reads the user's message,
    ``sys.query``) and the run was given no message: its model nodes would be asked an
    empty question, and be paid for it. ``nodes``: the document's valid nodes."""
    from engine.shapes import system_reads
    from nodes import builtin_catalog

    if "query" in values or "query" not in system_reads(doc, catalog=builtin_catalog(), nodes=nodes):
        return
    err().print(
        Text(
            "warning: this workflow reads the user's message (sys.query) and none was given, so it "
            'runs with an empty one: pass --message "..."',
            style="yellow",
        )
    )


async def _answer_once(service: Any, summary: Any, answers: dict[str, Any]) -> Any:
    """Resume with ``answers``; when they fit no option or field, say why and return None
    (the run stays paused)."""
    from engine.frontdoor import InvalidAnswer
    from schemas.launch import ResumeRun

    try:
        return await service.launch("default", ResumeRun(summary.run_id, answers=answers), inline())
    except InvalidAnswer as exc:
        err().print(Text("answer refused:", style="bold red"))
        for problem in exc.problems:
            err().print(Text(f"  {problem}", style="red"))
        return None


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="id of a paused run, or of a run whose process died")],
    answer: Annotated[
        str | None,
        typer.Option(
            "--answer",
            "-a",
            help="the answer to a paused run's question: an option id or label, or a JSON object for a form",
        ),
    ] = None,
    interrupt: Annotated[
        str | None,
        typer.Option(
            "--interrupt", help="which pending interrupt to answer (needed when several are pending)"
        ),
    ] = None,
    as_json: JsonFlag = False,
    no_input: NoInputFlag = False,
) -> None:
    """Continue a run from the run store: a paused run with --answer, or a run whose
    process died (killed, crashed) from its last checkpoint."""
    view_holder: list[View] = []

    async def body(service: Any) -> int:
        from engine.service import bind_single_answer

        summary = await service.get("default", run_id)
        titles = node_titles(await service.workflow_of("default", run_id))
        view = JsonView() if as_json else terminal_view(titles)
        view_holder.append(view)
        if summary.status.value == "paused":
            if answer is None:
                refuse_without_answer(run_id, _interrupts(summary))
            answers = bind_single_answer(summary, answer, interrupt)
            ticket = (
                await _answer(service, summary, answers)
                if not no_input
                else await _answer_once(service, summary, answers)
            )
            if ticket is None:  # refused, and no prompting: the run still waits
                view.close()
                return report_end(summary, True, titles)
        elif summary.status.value in ("running", "pending"):
            from schemas.launch import ContinueRun

            ticket = await service.launch("default", ContinueRun(run_id), inline())
        else:
            abort("cannot resume:", [f"run {run_id} has already ended ({summary.status.value})"])
        final = await _drive(service, ticket, view, not no_input)
        view.close()
        return report_end(final, no_input, titles)

    raise typer.Exit(with_service(body))


@app.command()
def recover(
    run_id: Annotated[
        str | None, typer.Argument(help="the run to continue (default: list the runs that can be)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Continue a run whose process died from its last checkpoint; without RUN_ID, list
    the runs that are running or pending with no live owner."""
    if run_id is not None:
        resume(run_id, None, None, as_json, True)

    async def body(service: Any) -> int:
        found = await service.recoverable("default")
        if as_json:
            from .common import write_json

            write_json([s.model_dump(mode="json") for s in found])
        elif not found:
            out().print("no run needs recovering")
        for summary in [] if as_json else found:
            out().print(
                Text.assemble(
                    (summary.run_id, "bold"),
                    f"  {summary.workflow_id}  {summary.status.value}  "
                    f"continue with: flowloom resume {summary.run_id}",
                )
            )
        return EXIT_OK

    raise typer.Exit(with_service(body))


@app.command()
def cancel(
    run_id: Annotated[str, typer.Argument(help="the run to stop")],
    wait: Annotated[float, typer.Option(help="seconds to wait for a running run to end")] = 5.0,
) -> None:
    """Stop a run from any process: a running run ends `cancelled` within about a second
    (its running nodes are recorded as cancelled); a paused or pending run ends at once."""

    async def body(service: Any) -> int:
        summary = await service.cancel("default", run_id, "cancelled with flowloom cancel")
        deadline = asyncio.get_running_loop().time() + wait
        while summary.status.value not in ("cancelled", "succeeded", "failed"):
            if asyncio.get_running_loop().time() > deadline:
                err().print(
                    Text(f"cancel requested; run {run_id} is still {summary.status.value}", style="yellow")
                )
                return EXIT_RUN_FAILED
            await asyncio.sleep(0.1)
            summary = await service.get("default", run_id)
        style = "bold yellow" if summary.status.value == "cancelled" else "bold"
        out().print(Text.assemble((f"run {run_id} {summary.status.value}", style)))
        return EXIT_OK

    raise typer.Exit(with_service(body))
