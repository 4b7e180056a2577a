"""examples/research_agent.json from the CLI, and the CLI's prompt for agent interrupts."""

from __future__ import annotations

import io
import sys

from schemas.run import Interrupt


def test_cli_prompt_shows_the_agent_question_and_options(monkeypatch, capsys):
    from engine import cli

    monkeypatch.setattr(sys, "stdin", io.StringIO("2\n"))
    interrupt = Interrupt(id="i1", node_id="agent", node_run_id="run:agent", kind="ask",
                          payload={"question": "Which city?", "reason": "missing_input",
                                   "options": [{"id": "1", "label": "Paris"}, {"id": "2", "label": "Oslo"},
                                               {"id": "3", "label": "Tokyo"}]})
    assert cli._ask(interrupt) == "2"
    err = capsys.readouterr().err
    assert "Which city?" in err and "[1] Paris" in err and "[3] Tokyo" in err
