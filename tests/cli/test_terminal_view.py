"""The terminal view of a run (``flowloom run`` without ``--json``): progress lines of other
nodes never cut a streamed answer line; they follow it once it ends."""

from __future__ import annotations

import io

from rich.console import Console

from api.cli.common import TerminalView
from schemas.events import NodeDelta, NodeFinished, NodeStarted, RunFinished, RunStarted
from schemas.types import NodeRunStatus


def view() -> tuple[TerminalView, io.StringIO]:
    sink = io.StringIO()
    return TerminalView(Console(file=sink, width=200, soft_wrap=True, highlight=False)), sink


class Events:
    """Events of one run, numbered in order."""

    def __init__(self) -> None:
        self.seq = 0

    def _base(self) -> dict:
        self.seq += 1
        return {"seq": self.seq, "run_id": "r1", "ts": 0.0}

    def started(self, node: str) -> NodeStarted:
        return NodeStarted(**self._base(), node_id=node, node_run_id=f"r1:{node}:1", kind="template")

    def finished(self, node: str) -> NodeFinished:
        return NodeFinished(**self._base(), node_id=node, node_run_id=f"r1:{node}:1", kind="template",
                            status=NodeRunStatus.succeeded, elapsed_ms=1.0)

    def delta(self, node: str, text: str) -> NodeDelta:
        return NodeDelta(**self._base(), node_id=node, node_run_id=f"r1:{node}:1", text=text)


def test_progress_of_a_parallel_branch_waits_for_the_answer_line_to_end():
    events, (terminal, sink) = Events(), view()
    for event in (RunStarted(**events._base(), workflow_id="wf", inputs={}), events.started("say"),
                  events.delta("say", "Routed to the invalid branch (case: "),
                  events.started("audit"), events.finished("audit"), events.started("log"), events.finished("log"),
                  events.delta("say", "invalid)\nSecond line "), events.started("late"),
                  events.delta("say", "ends here."), events.finished("say"), events.finished("late")):
        terminal.show(event)
    terminal.close()
    lines = sink.getvalue().splitlines()
    assert "Routed to the invalid branch (case: invalid)" in lines, lines
    answer = lines.index("Routed to the invalid branch (case: invalid)")
    # the held lines follow the answer line, in their order
    assert [line.strip() for line in lines[answer + 1:answer + 5]] == [
        "▶ audit [template] started", "✓ audit [template] succeeded in 1.0 ms",
        "▶ log [template] started", "✓ log [template] succeeded in 1.0 ms"]
    assert "Second line ends here." in lines, lines
    after = lines[lines.index("Second line ends here.") + 1:]
    assert [line.strip() for line in after] == [
        "▶ late [template] started", "✓ say [template] succeeded in 1.0 ms", "✓ late [template] succeeded in 1.0 ms"]


def test_the_run_ending_ends_the_open_line_and_shows_what_was_held():
    events, (terminal, sink) = Events(), view()
    for event in (events.started("say"), events.delta("say", "no newline at the end"), events.started("other"),
                  RunFinished(**events._base(), outputs={}, elapsed_ms=2.0)):
        terminal.show(event)
    terminal.close()
    assert [line.strip() for line in sink.getvalue().splitlines()] == [
        "▶ say [template] started", "no newline at the end", "▶ other [template] started",
        "run succeeded in 2.0 ms"]


def test_an_answer_tail_after_its_own_node_finished_stays_on_its_line():
    """An answer node streams its text up to ``{{ inputs.item }}`` as its references resolve,
    and the rest (the tail) after its own ``node_finished``: its own lines wait too."""
    events, (terminal, sink) = Events(), view()
    for event in (events.delta("placed", "Order placed: "), events.started("final"), events.finished("final"),
                  events.delta("placed", "2"), events.delta("placed", " x "), events.started("placed"),
                  events.finished("placed"), events.delta("placed", "tea."), events.started("finish"),
                  events.finished("finish"), RunFinished(**events._base(), outputs={}, elapsed_ms=2.0)):
        terminal.show(event)
    terminal.close()
    assert [line.strip() for line in sink.getvalue().splitlines()] == [
        "Order placed: 2 x tea.",
        "▶ final [template] started", "✓ final [template] succeeded in 1.0 ms",
        "▶ placed [template] started", "✓ placed [template] succeeded in 1.0 ms",
        "▶ finish [template] started", "✓ finish [template] succeeded in 1.0 ms",
        "run succeeded in 2.0 ms"]
