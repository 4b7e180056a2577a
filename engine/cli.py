"""The ``flowloom`` command line: check, run and describe workflow files.

Commands:

- ``flowloom validate FILE [--json]``: every compile problem, or a one-line summary.
- ``flowloom run FILE --input NAME=VALUE ... [--json]``: run and stream progress; with
  ``--json`` stdout carries exactly one JSON event per line and nothing else.
- ``flowloom resume RUN_ID --answer TEXT [--interrupt ID]``: continue a paused run
  (saved in the run store) from any process.
- ``flowloom schema``: the JSON Schema of the workflow format.
- ``flowloom import FILE [-o OUT] [--allow-partial] [--model SRC=NAME]``: convert a FastGPT
  workflow (JSON) or a Dify DSL (YAML) into a Flowloom workflow (:mod:`engine.importers`).

When a node asks a person something (an interrupt), ``run`` and ``resume`` prompt on
the terminal (stderr) and read the answer from stdin, then continue; with
``--no-input``, or when stdin ends, the run stays paused in the run store
(:mod:`workers.run_store`: local files, or Redis with ``FLOWLOOM_REDIS_URL``).

Exit codes: 0 success; 1 the run failed; 2 invalid workflow, inputs or usage;
3 paused, waiting for an answer; 130 interrupted (Ctrl-C cancels the run through its
:class:`~engine.CancelToken`).
Run failures are events and messages, never tracebacks.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import sys
from contextlib import aclosing
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional, Protocol

import typer
from pydantic import ValidationError
from redis.exceptions import RedisError
from rich.console import Console
from rich.text import Text

from schemas.run import Interrupt, RunState
from schemas.types import RunStatus
from schemas.workflow import workflow_json_schema

from .compiler import CompiledPlan, check_workflow, compile_workflow
from .context import CancelToken
from .errors import CompileError, FlowloomError, InvalidInputs, Problem, UnknownInterrupt
from .runner import coerce_input, new_run_state, stream_workflow
from workers.run_store import RunNotFound, default_run_store

from .workflow_store import WORKFLOW_PATH_ENV

__all__ = ["app", "main"]

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_EXIT_FOR_STATUS = {RunStatus.succeeded: EXIT_OK, RunStatus.cancelled: EXIT_INTERRUPTED, RunStatus.paused: EXIT_PAUSED}

app = typer.Typer(
    name="flowloom",
    help="Validate and run Flowloom workflow files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

WorkflowFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="workflow JSON file")]
JsonFlag = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]


def _out() -> Console:
    return Console(soft_wrap=True, highlight=False)


def _err() -> Console:
    return Console(stderr=True, soft_wrap=True, highlight=False)


def _abort(title: str, lines: list[str]) -> NoReturn:
    """Print ``title`` and ``lines`` on stderr, then exit 2."""
    console = _err()
    console.print(Text(title, style="bold red"))
    for line in lines:
        console.print(Text(f"  - {line}"))
    raise typer.Exit(EXIT_INVALID)


def _write_json(value: Any, indent: int | None = None) -> None:
    sys.stdout.write(json.dumps(value, indent=indent) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------- documents


def _load(path: Path) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The workflow document in ``path``, or the problem that prevents reading it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: JSON or UTF-8 decoding
        return None, [Problem("invalid_document", f"cannot read {path} as JSON: {exc}")]
    if not isinstance(doc, dict):
        return None, [Problem("invalid_document", "a workflow must be a JSON object")]
    return doc, []


def _problem_text(problem: Problem) -> Text:
    """One problem on one line: severity, code, node, edge, field path, message."""
    style = "red" if problem.severity == "error" else "yellow"
    text = Text.assemble(("  " + problem.severity, style), " ", (problem.code, "bold"))
    for label, value in (("node", problem.node_id), ("edge", problem.edge_id), ("path", problem.path)):
        if value:
            text.append(f"  {label}={value}")
    return text.append(f"  {problem.message}")


def _print_problems(problems: list[Problem], console: Console) -> None:
    """Errors first, then warnings, each group under its own heading."""
    for severity, heading in (("error", "error(s)"), ("warning", "warning(s)")):
        group = [p for p in problems if p.severity == severity]
        if group:
            console.print(Text(f"{len(group)} {heading}:", style="bold"))
            for problem in group:
                console.print(_problem_text(problem))


def _with_limits(doc: dict[str, Any], max_wall_time: float | None, max_node_executions: int | None) -> dict[str, Any]:
    """A copy of ``doc`` whose ``limits`` carry the command-line overrides (``doc`` is untouched)."""
    overrides = {k: v for k, v in (("max_wall_time", max_wall_time), ("max_node_executions", max_node_executions))
                 if v is not None}
    limits = doc.get("limits", {})
    if not overrides or not isinstance(limits, dict):
        return doc  # a malformed ``limits`` is reported by the compiler as it is
    doc = copy.deepcopy(doc)
    doc["limits"] = {**limits, **overrides}
    return doc


def _compile_or_exit(doc: dict[str, Any] | None, problems: list[Problem]) -> CompiledPlan:
    """Compile ``doc``; on errors print every problem on stderr and exit 2. Warnings go to stderr."""
    try:
        plan = compile_workflow(doc) if doc is not None else None
    except CompileError as exc:
        plan, problems = None, exc.problems
    if plan is None:
        _err().print(Text("invalid workflow:", style="bold red"))
        _print_problems(problems, _err())
        raise typer.Exit(EXIT_INVALID)
    _print_problems(list(plan.warnings), _err())
    return plan


# -------------------------------------------------------------------- inputs


def _read_inputs_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (values taken as typed JSON, not converted)."""
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        _abort("invalid inputs file:", [f"{path}: {exc}"])
    if not isinstance(values, dict):
        _abort("invalid inputs file:", [f"{path}: expected a JSON object of input values"])
    return values


def _gather_inputs(plan: CompiledPlan, pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """Inputs from ``--inputs-file`` then ``--input NAME=VALUE`` (converted by declared type)."""
    values = _read_inputs_file(inputs_file) if inputs_file is not None else {}
    declared = {var.name: var for var in plan.workflow.inputs}
    errors: list[str] = []
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            errors.append(f"--input {pair!r}: expected NAME=VALUE")
        elif name not in declared:
            values[name] = text  # reported with the other input problems below
        else:
            try:
                values[name] = coerce_input(declared[name], text)
            except ValueError as exc:
                errors.append(str(exc))
    if errors:
        _abort("invalid input value(s):", errors)
    return values


def _prepare_state(plan: CompiledPlan, values: dict[str, Any], chat_id: str | None, message: str | None) -> RunState:
    """A fresh run state; every input problem (unknown, missing, wrong type) ends with exit 2."""
    try:
        return new_run_state(plan, values, chat_id=chat_id, query=message)
    except InvalidInputs as exc:
        _abort("invalid inputs:", exc.problems)


# --------------------------------------------------------------------- views


class _View(Protocol):
    def show(self, event: Any) -> None: ...

    def close(self) -> None: ...


class _JsonView:
    """``--json``: one event per line on stdout, nothing else."""

    def show(self, event: Any) -> None:
        _write_json(event.model_dump(mode="json"))

    def close(self) -> None:
        """Nothing to finish: the last event was the last line."""


class _TerminalView:
    """A line per node event, answer text streamed as it arrives, then the outputs."""

    _STATUS_MARK = {"succeeded": ("✓", "green"), "failed": ("✗", "red"), "skipped": ("-", "dim"),
                    "cancelled": ("!", "yellow")}

    def __init__(self, console: Console) -> None:
        self.console = console
        self._mid_line = False  # streamed text left the cursor mid-line

    def show(self, event: Any) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def close(self) -> None:
        self._newline()

    def _newline(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def _line(self, *parts: str | tuple[str, str]) -> None:
        self._newline()
        self.console.print(Text.assemble(*parts))

    def _on_run_started(self, event: Any) -> None:
        self._line(("run ", "bold"), event.run_id, f"  workflow {event.workflow_id}")

    @staticmethod
    def _name(event: Any) -> str:
        """``node`` or ``node#3`` for round/item 3 of a loop."""
        return event.node_id if event.iteration is None else f"{event.node_id}#{event.iteration}"

    def _on_node_started(self, event: Any) -> None:
        attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
        self._line(("  ▶ ", "cyan"), (self._name(event), "bold"), f" [{event.kind}] started{attempt}")

    def _on_node_delta(self, event: Any) -> None:
        self.console.print(Text(event.text, style="dim italic" if event.channel == "reasoning" else ""), end="")
        self._mid_line = not event.text.endswith("\n")

    def _on_node_finished(self, event: Any) -> None:
        status = str(event.status)
        mark, style = self._STATUS_MARK.get(status, ("?", ""))
        detail = f"  {event.error.get('message', '')}" if event.error else ""
        timing = "" if status == "skipped" else f" in {event.elapsed_ms:.1f} ms"
        self._line((f"  {mark} ", style), (self._name(event), "bold"), f" [{event.kind}] ", (status, style),
                   timing + detail)

    def _on_interrupt(self, event: Any) -> None:
        self._line(("  ? ", "magenta"), (event.node_id, "bold"), f" [{event.kind}] waiting for an answer")

    def _on_run_paused(self, event: Any) -> None:
        self._line(("run paused", "bold magenta"), f": {len(event.interrupts)} question(s) waiting")

    def _on_run_finished(self, event: Any) -> None:
        self._line(("run succeeded", "bold green"), f" in {event.elapsed_ms:.1f} ms")
        if event.outputs:
            self.console.print(Text("outputs:", style="bold"))
            self.console.print_json(data=event.outputs)


# ------------------------------------------------------------------- running


def _on_sigint(token: CancelToken, task: asyncio.Task[Any]) -> None:
    """First Ctrl-C cancels the run (it ends with ``run_cancelled``); a second one stops waiting."""
    if token.cancelled:
        task.cancel()
    else:
        token.cancel("interrupted by the user (SIGINT)")


def _read_line(prompt: str) -> str | None:
    """Show ``prompt`` on stderr and read one line from stdin; None at end of input."""
    _err().print(Text(prompt, style="bold magenta"), end="")
    line = sys.stdin.readline()
    return None if line == "" else line.rstrip("\n")


def _show_question(interrupt: Interrupt, with_choices: bool = True) -> None:
    """Print an interrupt's question on stderr: text, why the last answer was refused, choices."""
    payload = interrupt.payload
    console = _err()
    if payload.get("description"):
        console.print(Text(str(payload["description"]), style="bold"))
    if payload.get("question"):  # agent interrupts (ask, confirm) carry a question
        console.print(Text(str(payload["question"]), style="bold"))
    for key in ("error", "errors"):
        if payload.get(key):
            console.print(Text(f"  {payload[key]}", style="red"))
    if with_choices:
        for option in payload.get("options", []):
            console.print(Text(f"  [{option['id']}] {option['label']}"))
        for field in payload.get("fields", []):
            hint = f" one of {field['enum']}" if field.get("enum") else ""
            console.print(Text(f"  {field['name']} ({field['type']}){hint}"))


def _answer_hint(interrupt: Interrupt) -> str:
    """How to write the answer to ``interrupt`` on the command line."""
    fields = [f["name"] for f in interrupt.payload.get("fields", [])]
    if interrupt.kind == "form_input" and fields:
        return "--answer '{" + ", ".join(f'"{name}": ...' for name in fields) + "}'"
    options = [o["id"] for o in interrupt.payload.get("options", [])]
    if options:
        return f"--answer {options[0]}  (one of: {', '.join(options)}, or a label)"
    if interrupt.kind == "confirm":
        return "--answer approve  (or reject)"
    return "--answer TEXT"


def _ask(interrupt: Interrupt) -> Any | None:
    """Prompt for one interrupt's answer; None when stdin has ended (the run stays paused)."""
    payload = interrupt.payload
    console = _err()
    _show_question(interrupt, with_choices=False)
    if interrupt.kind == "form_input":
        answer: dict[str, Any] = {}
        for field in payload.get("fields", []):
            hint = f" {field['enum']}" if field.get("enum") else ""
            line = _read_line(f"  {field.get('label') or field['name']} ({field['type']}){hint}: ")
            if line is None:
                return None
            answer[field["name"]] = line
        return answer
    for option in payload.get("options", []):
        console.print(Text(f"  [{option['id']}] {option['label']}"))
    return _read_line("answer: ")


async def _drive(plan: CompiledPlan, state: RunState, doc: dict[str, Any], view: _View,
                 answers: dict[str, Any] | None, prompt: bool) -> str | None:
    """Stream the run into ``view``; on a pause save it and, when allowed, prompt and go on.

    Returns why the run could not be saved in the run store, or None.
    """
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    token = CancelToken()
    try:
        loop.add_signal_handler(signal.SIGINT, _on_sigint, token, task)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # no loop signal handlers here (Windows, not the main thread): Ctrl-C stops at once
    store = default_run_store()
    try:
        while True:
            async with aclosing(stream_workflow(plan, state, answers=answers, cancel=token)) as events:
                async for event in events:
                    view.show(event)
            try:
                await store.save(state, doc)
            except Exception as exc:  # noqa: BLE001 - any store failure is reported, the run result stays
                return f"could not save run {state.run_id} in the run store ({store.describe()}): " \
                       f"{type(exc).__name__}: {exc}"
            if state.status is not RunStatus.paused or not prompt:
                return None
            answers = {}
            for interrupt in list(state.interrupts.values()):
                answer = await asyncio.to_thread(_ask, interrupt)
                if answer is None:
                    return None
                answers[interrupt.id] = answer
    finally:
        try:
            await store.close()
        except Exception:  # noqa: BLE001 - closing a broken connection must not mask the run's result
            pass


def _report_end(state: RunState, show_questions: bool) -> None:
    """On stderr: why the run failed (node id and reason), that it was cancelled, or the
    pending questions and how to answer them."""
    error = state.error
    if state.status is RunStatus.failed and error is not None:
        where = f" at node {error.node_id!r}" if error.node_id else ""
        _err().print(Text.assemble((f"run failed{where}", "bold red"), f" ({error.reason}): {error.message}"))
    elif state.status is RunStatus.cancelled:
        _err().print(Text("run cancelled", style="bold yellow"))
    elif state.status is RunStatus.paused:
        pending = list(state.interrupts.values())
        for interrupt in pending if show_questions else []:
            _show_question(interrupt)
        ids = ", ".join(state.interrupts)
        which = f" --interrupt {pending[0].id}" if len(pending) > 1 else ""
        _err().print(Text.assemble(("run paused", "bold magenta"), f": {state.run_id} waits for interrupt(s) {ids}; "
                                   f"continue with: flowloom resume {state.run_id}{which} {_answer_hint(pending[0])}"))


def _execute(plan: CompiledPlan, state: RunState, doc: dict[str, Any], view: _View,
             answers: dict[str, Any] | None = None, prompt: bool = True) -> int:
    """Run (or continue) to the end, a pause, or Ctrl-C; return the exit code."""
    try:
        store_error = asyncio.run(_drive(plan, state, doc, view, answers, prompt))
    except (KeyboardInterrupt, asyncio.CancelledError):
        view.close()
        _err().print(Text("interrupted", style="bold yellow"))
        return EXIT_INTERRUPTED
    except UnknownInterrupt as exc:
        view.close()
        _abort("cannot resume:", [str(exc)])
    view.close()
    _report_end(state, show_questions=not prompt)
    if store_error is not None:
        _err().print(Text(f"run store: {store_error}", style="bold red"))
        if state.status is RunStatus.paused:
            _err().print(Text("the paused run was not saved, so it cannot be resumed; check FLOWLOOM_HOME / "
                              "FLOWLOOM_REDIS_URL", style="red"))
            return EXIT_RUN_FAILED
    return _EXIT_FOR_STATUS.get(state.status, EXIT_RUN_FAILED)


def _load_saved(run_id: str) -> tuple[RunState, dict[str, Any]]:
    """A saved run and its workflow from the run store; exit 2 when unknown."""
    async def load() -> tuple[RunState, dict[str, Any]]:
        store = default_run_store()
        try:
            return await store.load(run_id)
        finally:
            await store.close()
    try:
        return asyncio.run(load())
    except RunNotFound as exc:
        _abort("cannot resume:", [str(exc)])
    except Exception as exc:  # noqa: BLE001 - a broken store (bad URL, unreachable Redis, unreadable files)
        _abort("cannot read the run store:", [f"{type(exc).__name__}: {exc}",
                                              "check FLOWLOOM_HOME / FLOWLOOM_REDIS_URL"])


def _bind_answer(state: RunState, answer: str, interrupt_id: str | None) -> dict[str, Any]:
    """``{interrupt id: answer}`` for ``--answer``; the interrupt is the only one pending or ``--interrupt``."""
    pending = list(state.interrupts)
    if interrupt_id is None:
        if len(pending) != 1:
            _abort("cannot resume:", [f"run {state.run_id} has {len(pending)} pending interrupts "
                                      f"({', '.join(pending) or 'none'}); name one with --interrupt ID"])
        interrupt_id = pending[0]
    return {interrupt_id: answer}


def _chat_resume(chat_id: str, message: str) -> tuple[RunState, dict[str, Any], dict[str, Any]] | None:
    """The chat's paused run answered by ``message`` (FastGPT: the next message answers), or None."""
    async def find() -> str | None:
        store = default_run_store()
        try:
            return await store.paused_run_for_chat(chat_id)
        finally:
            await store.close()
    try:
        run_id = asyncio.run(find())
    except Exception as exc:  # noqa: BLE001 - a broken store (bad URL, unreachable Redis, unreadable files)
        _abort("cannot read the run store:", [f"{type(exc).__name__}: {exc}",
                                              "check FLOWLOOM_HOME / FLOWLOOM_REDIS_URL"])
    if run_id is None:
        return None
    state, doc = _load_saved(run_id)
    if len(state.interrupts) != 1:
        return None
    return state, doc, _bind_answer(state, message, None)


# ------------------------------------------------------------------ commands


def _summary(file: Path, doc: dict[str, Any], warnings: int) -> Text:
    """``FILE: valid workflow 'id' (N nodes, M edges)`` for a workflow without errors."""
    counts = f"{len(doc.get('nodes', []))} nodes, {len(doc.get('edges', []))} edges"
    counts += f", {warnings} warning(s)" if warnings else ""
    return Text.assemble((f"{file}: valid", "bold green"), f" workflow {doc.get('id')!r} ({counts})")


@app.command()
def validate(file: WorkflowFile, as_json: JsonFlag = False) -> None:
    """Compile FILE and list every problem; exit 2 when there are errors (warnings do not fail)."""
    doc, problems = _load(file)
    if doc is not None:
        problems = check_workflow(doc)
    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        _write_json([p.to_dict() for p in problems], indent=2)
    else:
        _print_problems(problems, _out())
        if doc is not None and not errors:
            _out().print(_summary(file, doc, len(problems)))
    if errors:
        raise typer.Exit(EXIT_INVALID)


NoInputFlag = Annotated[bool, typer.Option("--no-input", help="never prompt: leave the run paused on a question")]


@app.command()
def run(
    file: WorkflowFile,
    inputs: Annotated[Optional[list[str]], typer.Option(
        "--input", "-i", metavar="NAME=VALUE", help="an input, converted by its declared type (repeatable)")] = None,
    inputs_file: Annotated[Optional[Path], typer.Option(
        "--inputs-file", exists=True, dir_okay=False, help="JSON object of input values (--input wins)")] = None,
    as_json: JsonFlag = False,
    max_wall_time: Annotated[Optional[float], typer.Option(help="override limits.max_wall_time (seconds)")] = None,
    max_node_executions: Annotated[Optional[int], typer.Option(help="override limits.max_node_executions")] = None,
    chat_id: Annotated[Optional[str], typer.Option("--chat-id", help="conversation id (sys.chat_id)")] = None,
    message: Annotated[Optional[str], typer.Option(
        "--message", help="the user's message (sys.query, and the `query` input when the workflow declares one); "
                          "in a chat with a paused run it answers its question")] = None,
    no_input: NoInputFlag = False,
) -> None:
    """Run FILE, streaming node progress and the answer (with --json: one event per line)."""
    view: _View = _JsonView() if as_json else _TerminalView(_out())
    # Workflows used as tools are looked up next to FILE too, wherever the command runs from.
    os.environ.setdefault(WORKFLOW_PATH_ENV, os.pathsep.join([str(file.resolve().parent), "workflows", "examples"]))
    if chat_id and message is not None:
        waiting = _chat_resume(chat_id, message)
        if waiting is not None:
            state, doc, answers = waiting
            plan = _compile_or_exit(doc, [])
            raise typer.Exit(_execute(plan, state, doc, view, answers, prompt=not no_input))
    doc, problems = _load(file)
    if doc is not None:
        doc = _with_limits(doc, max_wall_time, max_node_executions)
    plan = _compile_or_exit(doc, problems)
    assert doc is not None
    values = _gather_inputs(plan, inputs or [], inputs_file)
    if message is not None and "query" not in values and any(v.name == "query" for v in plan.workflow.inputs):
        values["query"] = message  # a chat flow's question input is the user's message
    state = _prepare_state(plan, values, chat_id, message)
    raise typer.Exit(_execute(plan, state, doc, view, prompt=not no_input))


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="id of a paused run (printed when it paused)")],
    answer: Annotated[str, typer.Option("--answer", "-a", help="the answer: an option id or label, or a JSON "
                                        "object for a form")],
    interrupt: Annotated[Optional[str], typer.Option("--interrupt", help="which pending interrupt to answer "
                                                     "(needed when several are pending)")] = None,
    as_json: JsonFlag = False,
    no_input: NoInputFlag = False,
) -> None:
    """Continue a paused run saved in the run store, answering its pending question."""
    state, doc = _load_saved(run_id)
    if state.status is not RunStatus.paused:
        _abort("cannot resume:", [f"run {run_id} is {state.status.value}, not paused"])
    plan = _compile_or_exit(doc, [])
    answers = _bind_answer(state, answer, interrupt)
    view: _View = _JsonView() if as_json else _TerminalView(_out())
    raise typer.Exit(_execute(plan, state, doc, view, answers, prompt=not no_input))


def _issue_text(issue: Any) -> Text:
    """One import finding on one line: severity, code, source node (kind), message."""
    style = "red" if issue.severity == "error" else "yellow"
    text = Text.assemble(("  " + issue.severity, style), " ", (issue.code, "bold"))
    if issue.node_id:
        kind = f" ({issue.source_type})" if issue.source_type else ""
        renamed = f" -> {issue.flowloom_id}" if issue.flowloom_id else ""
        text.append(f"  node={issue.node_id}{kind}{renamed}")
    return text.append(f"  {issue.message}")


def _print_issues(issues: list[Any], console: Console, *, imported: bool = False) -> None:
    """Errors (not converted; in a partial import: replaced) first, then warnings."""
    not_converted = "not converted (replaced by failing placeholders or fallbacks)" if imported else "not converted"
    for severity, heading in (("error", not_converted), ("warning", "converted with differences")):
        group = [i for i in issues if i.severity == severity]
        if group:
            console.print(Text(f"{len(group)} {heading}:", style="bold"))
            for issue in group:
                console.print(_issue_text(issue))


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="FastGPT workflow JSON or Dify DSL YAML")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", dir_okay=False,
                                                   help="write the Flowloom workflow here (default: stdout)")] = None,
    allow_partial: Annotated[bool, typer.Option(
        "--allow-partial", help="replace what cannot be converted by failing 'unsupported' placeholders "
        "(and unknown models by 'default') instead of failing")] = False,
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", "-m", metavar="SOURCE=NAME", help="use registry model NAME for the file's model SOURCE "
        "(repeatable; '*=NAME' for every unknown model)")] = None,
    workflow_id: Annotated[Optional[str], typer.Option("--id", help="id of the imported workflow")] = None,
) -> None:
    """Convert FILE (FastGPT JSON or Dify YAML) into a Flowloom workflow; print what was not converted.

    Exit 2 listing every problem when something cannot be converted (unless
    --allow-partial) or the result would not compile. Nothing in FILE is executed.
    """
    from .importers import ImportFailed, import_workflow

    mapping: dict[str, str] = {}
    for pair in model or []:
        source, sep, target = pair.partition("=")
        if not sep or not source.strip() or not target.strip():
            _abort("invalid --model:", [f"{pair!r}: expected SOURCE=NAME"])
        mapping[source.strip()] = target.strip()
    try:
        data = file.read_bytes()
    except OSError as exc:
        _abort("cannot import:", [f"{file}: {exc}"])
    try:
        result = import_workflow(data, allow_partial=allow_partial, model_map=mapping,
                                 workflow_id=workflow_id or file.stem)
    except ImportFailed as exc:
        console = _err()
        fmt = f" ({exc.source_format})" if exc.source_format else ""
        console.print(Text(f"cannot import {file}{fmt}:", style="bold red"))
        _print_issues(exc.report, console)
        if any(i.severity == "error" and i.code != "invalid_source" for i in exc.report) and not allow_partial:
            console.print(Text("use --allow-partial to import anyway with failing placeholders, and --model "
                               "SOURCE=NAME for unknown models", style="dim"))
        raise typer.Exit(EXIT_INVALID) from None
    text = json.dumps(result.workflow, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            _abort("cannot write the workflow:", [f"{output}: {exc}"])
    console = _err()
    _print_issues(result.report, console, imported=True)
    wf = result.workflow
    placeholders = sum(1 for n in wf["nodes"] if n.get("type") == "unsupported")
    where = f" -> {output}" if output is not None else ""
    summary = Text.assemble((f"{file}: imported", "bold green"), f" {result.source_format} workflow {wf['id']!r} "
                            f"({len(wf['nodes'])} nodes, {len(wf['edges'])} edges){where}")
    if placeholders:
        summary.append(f"; {placeholders} unsupported placeholder(s) fail when run", style="yellow")
    console.print(summary)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the workflow format."""
    _write_json(workflow_json_schema(), indent=2)


def main() -> None:
    """Console entry point: :data:`app`, with configuration problems (a bad ``FLOWLOOM_*``
    setting, an unreadable model registry, an unreachable store) reported as messages
    with exit code 2 instead of tracebacks."""
    try:
        app()
    except ValidationError as exc:  # a FLOWLOOM_* environment setting
        _config_error("invalid setting:", [
            f"FLOWLOOM_{'_'.join(str(part) for part in err['loc']).upper()}: {err['msg']}" for err in exc.errors()])
    except (FlowloomError, OSError, RedisError) as exc:
        _config_error("configuration problem:", [f"{type(exc).__name__}: {exc}"])


def _config_error(title: str, lines: list[str]) -> NoReturn:
    console = _err()
    console.print(Text(title, style="bold red"))
    for line in lines:
        console.print(Text(f"  - {line}"))
    raise SystemExit(EXIT_INVALID)


if __name__ == "__main__":  # pragma: no cover
    main()
