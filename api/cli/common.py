"""Shared pieces of the ``flowloom`` command line: the Typer app, consoles, exit codes,
problem printing, event views and settings.

Imports here stay light (no SDKs, no database driver): ``flowloom --help`` and
``flowloom validate`` load only what they use; commands import the rest when they run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn, Protocol

import typer
from rich.console import Console
from rich.text import Text

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_PAUSED",
    "EXIT_RUN_FAILED",
    "JsonFlag",
    "JsonView",
    "TerminalView",
    "View",
    "WorkflowFile",
    "abort",
    "app",
    "end_start_up",
    "err",
    "is_stdin",
    "node_titles",
    "out",
    "print_problems",
    "read_source",
    "redis_unreachable",
    "settings",
    "source_label",
    "spare_the_exit_collections",
    "start_up",
    "SynonymGroup",
    "terminal_view",
    "write_json",
]

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: words other tools use for a command, and this CLI's command (where a group has it)
_SYNONYMS = {
    "delete": ("rm", "revoke", "reset"),
    "remove": ("rm", "revoke", "reset"),
    "del": ("rm", "revoke"),
    "ls": ("list",),
    "get": ("show",),
    "add": ("create", "set"),
    "new": ("create",),
    "query": ("search",),
}


class SynonymGroup(typer.core.TyperGroup):
    """A command group that answers an unknown command which is another tool's word for one
    of its own (``delete`` for ``rm``) with that command, as Click does for a typo: Click's
    own suggestion only finds spellings close to the word."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:  # Typer's own (vendored) Click UsageError: its message is rewritten
            word = args[0] if args and isinstance(args[0], str) else ""
            own = next((c for c in _SYNONYMS.get(word.lower(), ()) if c in self.commands), None)
            if (
                own is not None
                and word not in self.commands
                and isinstance(getattr(exc, "message", None), str)
            ):
                exc.message = f"No such command {word!r}. Did you mean {own!r}?"  # type: ignore[attr-defined]  # Click's UsageError, vendored untyped here
            raise


app = typer.Typer(
    name="flowloom",
    help="Validate, run and manage Flowloom workflows and their runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)

# Not ``exists=True``: typer turns the value into a Path before its check, so ``-``
# would be refused; a missing file is reported when it is read (exit 2, like Click's check).
WorkflowFile = Annotated[
    Path,
    typer.Argument(dir_okay=False, allow_dash=True, help="workflow JSON file, or - to read it from stdin"),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("flowloom")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown (not installed)"
        sys.stdout.write(f"flowloom {number}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Validate, run and manage Flowloom workflows and their runs."""


#: Commands whose start-up runs with the cyclic GC paused (:func:`start_up`): short ones,
#: and those whose real work goes through ``with_service`` (which ends the pause first). Not
#: ``serve``, ``worker`` or ``mcp``: they start their own long-lived work.
START_UP_PAUSED = frozenset(
    {
        "validate",
        "import",
        "schema",
        "run",
        "resume",
        "recover",
        "cancel",
        "rerun",
        "runs",
        "show",
        "watch",
        "keys",
        "quotas",
    }
)
_paused: list[bool] = []  # one entry while a start-up pause is on


@contextlib.contextmanager
def entry_points_read_once(active: bool) -> Iterator[None]:
    """While active, ``importlib.metadata.entry_points`` reads the installed packages'
    entry points once and answers every later call from that read.

    networkx reads them twice when it is imported (its backends) and pydantic once more
    when it builds its first model (its plugins); each read opens the metadata of every
    installed distribution, about a sixth of ``validate``'s CPU in a 260-package
    environment. A short command installs nothing while it runs, so one read serves all
    three; long-lived commands (``serve``, ``worker``) keep the library's own behaviour.
    The original function is back when the block ends."""
    if not active:
        yield
        return
    import importlib.metadata as metadata

    original = metadata.entry_points
    read: list[Any] = []

    def entry_points(**params: Any) -> Any:
        if not read:
            read.append(original())
        return read[0].select(**params) if params else read[0]

    metadata.entry_points = entry_points
    try:
        yield
    finally:
        metadata.entry_points = original


@contextlib.contextmanager
def start_up(command: str | None) -> Iterator[None]:
    """The start-up of a command in a process of its own (``main``): the cyclic GC is
    paused while it imports its modules, for commands in :data:`START_UP_PAUSED`.

    Importing pydantic, networkx, SQLAlchemy and the schemas creates hundreds of
    thousands of long-lived objects; with the GC on, each 25 % of heap growth costs a
    full collection over all of them (about 15 % of ``validate``'s and ``run``'s CPU).
    The pause ends with :func:`end_start_up` (``with_service`` calls it before a run starts)
    or when the command returns; nothing else changes.

    When the command returns, what the pause created moves to the oldest generation
    unexamined (``gc.freeze`` then ``gc.unfreeze``, when nothing was frozen before):
    re-enabled as they were, the hundreds of thousands of objects would all sit in the
    youngest generation and the next allocation would collect over every one of them,
    right before the process exits.
    """
    active = command in START_UP_PAUSED and gc.isenabled() and not _paused
    if active:
        gc.disable()
        _paused.append(True)
    try:
        with entry_points_read_once(command in START_UP_PAUSED):
            yield
    finally:
        if active and _paused:  # not ended by end_start_up: the command is over
            _paused.clear()
            if gc.get_freeze_count() == 0:  # unfreeze would release what someone else froze
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def spare_the_exit_collections() -> None:
    """Freeze every live object (``gc.freeze``) as a command-line process exits (``main``
    registers this with :mod:`atexit`, and atexit functions run before the interpreter's
    own shutdown).

    Shutting down, the interpreter collects cyclic garbage over every tracked object -
    all the classes, functions and schemas the imports made - once more as it clears the
    modules: about a fifth of ``flowloom validate``'s CPU, spent on objects that die with
    the process anyway. Frozen objects are not examined. Only cyclic garbage left at exit
    goes uncollected, whose finalizers Python never promises to run at exit; files and
    handlers are flushed by their own exit hooks (``logging.shutdown``, the standard streams).
    """
    gc.freeze()


def end_start_up() -> None:
    """End the start-up pause of the GC before a command's real work (a run, a server):
    what was imported is frozen (``gc.freeze``: kept out of later collections, as modules
    and classes live as long as the process) and the GC is on again. No-op without a pause."""
    if _paused:
        _paused.clear()
        gc.freeze()
        gc.enable()


def is_stdin(path: Path) -> bool:
    """True for ``-``: the workflow comes from stdin (``cat flow.json | flowloom run -``)."""
    return str(path) == "-"


def source_label(path: Path) -> str:
    """How messages name the workflow file (``<stdin>`` for ``-``)."""
    return "<stdin>" if is_stdin(path) else str(path)


def read_source(path: Path) -> bytes:
    """The bytes of ``path``, or of stdin for ``-`` (read once, to the end).

    Raises:
        OSError: the file cannot be read.
    """
    if is_stdin(path):
        return sys.stdin.buffer.read()
    return path.read_bytes()


def out() -> Console:
    """The console for results (stdout)."""
    return Console(soft_wrap=True, highlight=False)


def err() -> Console:
    """The console for progress, questions and errors (stderr)."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def abort(title: str, lines: list[str]) -> NoReturn:
    """Print ``title`` and ``lines`` on stderr, then exit 2."""
    console = err()
    console.print(Text(title, style="bold red"))
    for line in lines:
        console.print(Text(f"  - {line}"))
    raise typer.Exit(EXIT_INVALID)


def redis_unreachable(url: str, exc: BaseException) -> NoReturn:
    """One line on stderr naming the Redis URL (password masked) and why, then exit 2: an
    unreachable Redis is a deployment problem to fix, not a bug."""
    from workers.redis_bus import mask_redis_url

    err().print(
        Text(
            f"Redis at {mask_redis_url(url)} is unreachable ({exc}); start it or fix FLOWLOOM_REDIS_URL",
            style="bold red",
        )
    )
    raise typer.Exit(EXIT_INVALID)


def write_json(value: Any, indent: int | None = None) -> None:
    """One JSON document on stdout. A reader that went away (``| head -1``) is not an
    error of the command: what is left is not written (stdout goes to the null device),
    and the command ends as it would have (a run still finishes, with its own exit code)."""
    try:
        sys.stdout.write(json.dumps(value, indent=indent, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush finds no pipe either
        os.close(devnull)


def settings() -> Any:
    """The process settings (``FLOWLOOM_*``); a bad value exits 2 naming the variable (see ``main``)."""
    from engine.settings import get_settings

    return get_settings()


def node_titles(doc: dict[str, Any] | None) -> dict[str, str]:
    """node id -> its title (``name``), for the nodes that have one."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    return {
        n["id"]: n["name"]
        for n in nodes or []
        if isinstance(n, dict) and n.get("name") and isinstance(n.get("id"), str)
    }


def print_columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Rows as plain aligned columns on stdout, never cut: ids must stay copyable at any
    terminal width and in a pipe (a long last column simply runs on)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for index, row in enumerate((header, *rows)):
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        sys.stdout.write(
            ("\033[1m" + line + "\033[0m" if index == 0 and sys.stdout.isatty() else line) + "\n"
        )
    sys.stdout.flush()


def named(node_id: str | None, titles: dict[str, str], quote: bool = False) -> str:
    """``title (id)`` when the node has a title, else the id (quoted with ``quote``):
    imported flows have opaque ids, so people need the title to know the node."""
    if not node_id:
        return ""
    title = titles.get(node_id)
    shown = repr(node_id) if quote else node_id
    return f"{title} ({shown})" if title and title != node_id else shown


def _problem_text(problem: Any, titles: dict[str, str] | None = None) -> Text:
    """One problem on one line: severity, code, node, edge, field path, message."""
    style = "red" if problem.severity == "error" else "yellow"
    text = Text.assemble(("  " + problem.severity, style), " ", (problem.code, "bold"))
    node = named(problem.node_id, titles or {})
    for label, value in (("node", node), ("edge", problem.edge_id), ("path", problem.path)):
        if value:
            text.append(f"  {label}={value}")
    return text.append(f"  {problem.message}")


def print_problems(problems: list[Any], console: Console, titles: dict[str, str] | None = None) -> None:
    """Errors first, then warnings, each group under its own heading."""
    for severity, heading in (("error", "error(s)"), ("warning", "warning(s)")):
        group = [p for p in problems if p.severity == severity]
        if group:
            console.print(Text(f"{len(group)} {heading}:", style="bold"))
            for problem in group:
                console.print(_problem_text(problem, titles))


class View(Protocol):
    """Shows a run's events as they come."""

    def show(self, event: Any) -> None: ...

    def close(self) -> None: ...


class JsonView:
    """``--json``: one event per line on stdout, nothing else."""

    def show(self, event: Any) -> None:
        write_json(event.model_dump(mode="json"))

    def close(self) -> None:
        """Nothing to finish: the last event was the last line."""


class TerminalView:
    """A line per node event, answer text streamed as it arrives, then the outputs."""

    _STATUS_MARK = {
        "succeeded": ("✓", "green"),
        "failed": ("✗", "red"),
        "skipped": ("-", "dim"),
        "cancelled": ("!", "yellow"),
    }

    def __init__(
        self,
        console: Console,
        titles: dict[str, str] | None = None,
        results: Any = None,
        *,
        endings: bool = False,
    ) -> None:
        """``console``: where progress goes. ``results``: a text stream that gets only the
        final answer (unless it is just the End outputs' streamed text) and the outputs (JSON), for ``flowloom run ... > out.txt``; None:
        everything goes to ``console``, answer text streamed as it arrives. ``endings``:
        also print the line of a failed or cancelled run (``flowloom watch``; the commands
        that drive a run say how it ended from its summary instead, with what to do next)."""
        self.console = console
        self.titles = titles or {}
        self.results = results
        self.endings = endings
        self._event: Any = None  # the event being shown
        self._mid_line = False  # streamed text left the cursor mid-line
        self._streaming: str | None = None  # the node run whose text left it there
        self._streaming_done = False  # that node run has finished (its tail may still come)
        self._held: list[Text] = []  # progress lines held while that line is open
        # End nodes stream their outputs as answer text too; ``results`` gets the outputs
        # as JSON, so it writes the answer only when another node said something
        self._end_nodes: set[str] = set()
        self._spoken = False

    def show(self, event: Any) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            self._event = event
            handler(event)

    def close(self) -> None:
        self._newline()

    def _newline(self) -> None:
        """End the open answer line, then show the progress lines held while it was open."""
        if self._mid_line:
            self.console.print()
            self._mid_line = False
        self._streaming, self._streaming_done = None, False
        held, self._held = self._held, []
        for text in held:
            self.console.print(text)

    def _line(self, *parts: str | tuple[str, str]) -> None:
        """A progress line. While a node's streamed answer line is open, node lines are
        held until that line ends: printed there they would cut a sentence in two
        (``... (case: `` / four progress lines / ``invalid)``). That holds for the
        streaming node's own lines too, since an answer's tail (the part after a
        ``{{ inputs.x }}``) follows its ``node_finished``; once it has finished, the next
        line about another node run ends the open line, as do the run's lines."""
        text = Text.assemble(*parts)
        node_run = getattr(self._event, "node_run_id", None)
        if self._mid_line and node_run is not None:
            own = node_run == self._streaming
            if own or not self._streaming_done:
                if own and getattr(self._event, "type", None) == "node_finished":
                    self._streaming_done = True
                self._held.append(text)
                return
        self._newline()
        self.console.print(text)

    def _on_run_started(self, event: Any) -> None:
        self._line(("run ", "bold"), event.run_id, f"  workflow {event.workflow_id}")

    def _name(self, event: Any) -> str:
        """``title (node)`` or ``title (node#3)`` for round/item 3 of a loop."""
        iteration = getattr(event, "iteration", None)
        node = event.node_id if iteration is None else f"{event.node_id}#{iteration}"
        title = self.titles.get(event.node_id)
        return f"{title} ({node})" if title and title != event.node_id else node

    def _on_node_started(self, event: Any) -> None:
        attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
        self._line(("  ▶ ", "cyan"), (self._name(event), "bold"), f" [{event.kind}] started{attempt}")

    def _on_node_delta(self, event: Any) -> None:
        if event.channel == "answer":
            if event.output is not None:
                self._end_nodes.add(event.node_id)
            elif event.node_id not in self._end_nodes:  # not the line break between two End outputs
                self._spoken = True
        style = "dim italic" if event.channel == "reasoning" else ""
        whole, newline, rest = event.text.rpartition("\n")
        if newline:  # the open line ends here: what was held follows it, then the rest
            self.console.print(Text(whole + newline, style=style), end="")
            self._mid_line = False
            self._newline()
        if rest:
            self.console.print(Text(rest, style=style), end="")
            if event.node_run_id != self._streaming:
                self._streaming, self._streaming_done = event.node_run_id, False
            self._mid_line = True

    def _on_node_finished(self, event: Any) -> None:
        status = str(event.status)
        mark, style = self._STATUS_MARK.get(status, ("?", ""))
        detail = f"  {event.error.message}" if event.error else ""
        timing = "" if status == "skipped" else f" in {event.elapsed_ms:.1f} ms"
        self._line(
            (f"  {mark} ", style),
            (self._name(event), "bold"),
            f" [{event.kind}] ",
            (status, style),
            timing + detail,
        )
        # a chat answer's sources (QuotePiece dicts), once: not again where an end node
        # hands them on as the run's outputs
        answered = status == "succeeded" and str(event.kind) != "end"
        citations = (event.outputs or {}).get("citations") if answered else None
        if isinstance(citations, list) and citations:
            sources = "; ".join(
                f"[{c.get('citation_id')}] {c.get('source_name') or c.get('document_id') or '?'}"
                for c in citations
                if isinstance(c, dict)
            )
            self._line(("    sources: ", "dim"), sources)

    def _on_node_warning(self, event: Any) -> None:
        self._line(
            ("  ⚠ ", "yellow"),
            (self._name(event), "bold"),
            f" [{event.kind}] ",
            (event.code, "yellow"),
            f": {event.message}",
        )

    def _on_interrupt(self, event: Any) -> None:
        self._line(("  ? ", "magenta"), (self._name(event), "bold"), f" [{event.kind}] waiting for an answer")

    def _on_run_paused(self, event: Any) -> None:
        self._line(("run paused", "bold magenta"), f": {len(event.interrupts)} question(s) waiting")

    def _on_run_failed(self, event: Any) -> None:
        if self.endings:
            node_id = event.error.node_id
            where = f" at node {named(node_id, self.titles, quote=True)}" if node_id else ""
            self._line((f"run failed{where}", "bold red"), f" ({event.reason}): {event.error.message}")

    def _on_run_cancelled(self, event: Any) -> None:
        if self.endings:
            # the engine's reasons already read "run cancelled: stopped by ..."
            reason = event.reason.removeprefix("run cancelled").lstrip(": ")
            self._line(
                ("run cancelled", "bold yellow"), f": {reason}" if reason and reason != "cancelled" else ""
            )

    def _on_run_finished(self, event: Any) -> None:
        self._line(("run succeeded", "bold green"), f" in {event.elapsed_ms:.1f} ms")
        if self.results is not None:
            if event.answer and (self._spoken or not self._end_nodes or not event.outputs):
                self.results.write(event.answer + ("" if event.answer.endswith("\n") else "\n"))
            if event.outputs:
                self.results.write(
                    json.dumps(event.outputs, indent=2, ensure_ascii=False, default=str) + "\n"
                )
            self.results.flush()
            return
        if event.outputs:
            self.console.print(Text("outputs:", style="bold"))
            self.console.print_json(data=event.outputs)


def terminal_view(titles: dict[str, str] | None = None, *, endings: bool = False) -> TerminalView:
    """The view of ``flowloom run`` without ``--json``: everything on stdout when it is a
    terminal; otherwise progress on stderr and only the answer and the outputs on
    stdout, so ``flowloom run FLOW > out.txt`` captures the result and nothing else.
    ``endings``: as :class:`TerminalView`."""
    if sys.stdout.isatty():
        return TerminalView(out(), titles, endings=endings)
    return TerminalView(err(), titles, results=sys.stdout, endings=endings)
