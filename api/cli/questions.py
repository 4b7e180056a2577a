"""Questions to a person on the terminal: show an interrupt, prompt for its answer, and
say how to answer it later with ``flowloom resume``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

from rich.text import Text

from .common import abort, err

if TYPE_CHECKING:  # annotations only: importing schemas builds every pydantic model (not needed by --help)
    from schemas.events import Interrupt

__all__ = ["answer_hint", "ask", "refuse_without_answer", "show_question"]


def _read_line(prompt: str) -> str | None:
    """Show ``prompt`` on stderr and read one line from stdin; None at end of input."""
    err().print(Text(prompt, style="bold magenta"), end="")
    line = sys.stdin.readline()
    return None if line == "" else line.rstrip("\n")


def _question(interrupt: Interrupt) -> tuple[str, list[str], list[Any], list[Any]]:
    """The text shown, the lines saying why the last answer was refused, the options
    (``id``/``label``) and the form fields of ``interrupt``, by its payload's kind."""
    payload = interrupt.payload
    options = list(getattr(payload, "options", []))
    fields = list(getattr(payload, "fields", []))
    text = str(getattr(payload, "description", "") or getattr(payload, "question", ""))
    errors = getattr(payload, "errors", None) or []
    error = getattr(payload, "error", None)
    return text, [*errors, *([error] if error else [])], options, fields


def show_question(interrupt: Interrupt, with_choices: bool = True) -> None:
    """Print an interrupt's question on stderr: text, why the last answer was refused, choices."""
    text, refused, options, fields = _question(interrupt)
    console = err()
    if text:
        console.print(Text(text, style="bold"))
    for line in refused:
        console.print(Text(f"  {line}", style="red"))
    if with_choices:
        for option in options:
            console.print(Text(f"  [{option.id}] {option.label}"))
        for field in fields:
            hint = f" one of {field.enum}" if field.enum else ""
            console.print(Text(f"  {field.name} ({field.type.value}){hint}"))


def answer_hint(interrupt: Interrupt) -> str:
    """How to write the answer to ``interrupt`` on the command line."""
    _text, _refused, options, fields = _question(interrupt)
    if interrupt.kind == "form_input" and fields:
        return "--answer '{" + ", ".join(f'"{field.name}": ...' for field in fields) + "}'"
    if options:
        ids = [option.id for option in options]
        return f"--answer {ids[0]}  (one of: {', '.join(ids)}, or a label)"
    if interrupt.kind == "confirm":
        return "--answer approve  (or reject)"
    return "--answer TEXT"


def ask(interrupt: Interrupt) -> Any | None:
    """Prompt for one interrupt's answer; None when stdin has ended (the run stays paused)."""
    _text, _refused, options, fields = _question(interrupt)
    console = err()
    show_question(interrupt, with_choices=False)
    if interrupt.kind == "form_input":
        answer: dict[str, Any] = {}
        for field in fields:
            hint = f" {field.enum}" if field.enum else ""
            line = _read_line(f"  {field.label or field.name} ({field.type.value}){hint}: ")
            if line is None:
                return None
            answer[field.name] = line
        return answer
    for option in options:
        console.print(Text(f"  [{option.id}] {option.label}"))
    return _read_line("answer: ")


def refuse_without_answer(run_id: str, pending: list[Interrupt]) -> NoReturn:
    """``flowloom resume RUN_ID`` of a paused run without ``--answer``: the questions, then
    one message saying the answer is missing and the command that gives it; exit 2.

    Not the pause report of ``run`` ("continue with: ...") followed by a refusal: read
    together, the two told the reader to run the very command that was just refused.
    """
    for interrupt in pending:
        show_question(interrupt)
    which = f" --interrupt {pending[0].id}" if len(pending) > 1 else ""
    hint = answer_hint(pending[0]) if pending else "--answer TEXT"
    abort(
        "cannot resume without an answer:",
        [f"run {run_id} is paused on a question; answer it with: flowloom resume {run_id}{which} {hint}"],
    )
