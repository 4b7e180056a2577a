"""examples/knowledge_qa.json through the real CLI, as its README row says: a full-text
dataset ``handbook`` made and filled from examples/knowledge/handbook.md with
``flowloom datasets``, then ``flowloom run`` with the model aimed at the scripted server
(FLOWLOOM_LLM_*): the answer cites the handbook passage it used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from nodes.llm.model_registry import get_registry
from tests.support.openai_server import text_reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "knowledge_qa.json"
HANDBOOK = ROOT / "examples" / "knowledge" / "handbook.md"
runner = CliRunner()


@pytest.fixture
def handbook(openai_server, monkeypatch):
    monkeypatch.delenv("FLOWLOOM_MODELS", raising=False)
    monkeypatch.setenv("FLOWLOOM_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("FLOWLOOM_LLM_API_KEY", "sk-example-test")
    monkeypatch.setenv("FLOWLOOM_LLM_MODEL", "scripted-upstream")
    get_settings.cache_clear()
    # the bundled registry reads FLOWLOOM_LLM_* when it loads: one loaded earlier in this
    # process (without them) must not be reused, nor this one after the test
    get_registry.cache_clear()
    try:
        made = runner.invoke(app, ["datasets", "create", "Handbook", "--id", "handbook"])
        assert made.exit_code == 0, made.output
        added = runner.invoke(app, ["datasets", "add", "handbook", str(HANDBOOK), "--wait"])
        assert added.exit_code == 0, added.output
        yield openai_server
    finally:
        get_registry.cache_clear()


def test_the_example_answers_from_the_handbook_with_a_citation(handbook):
    handbook.script(text_reply('["expense claim refund days", "receipts travel costs"]'),
                    text_reply("Within 14 days of an approved claim [1]."))
    result = runner.invoke(app, ["run", str(EXAMPLE), "-i", "query=How fast are travel expenses paid back?",
                                 "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    search = next(e for e in events if e["type"] == "node_finished" and e["node_id"] == "search")
    assert "Travel expenses are paid back within 14 days" in search["outputs"]["chunks"][0]["text"]
    assert search["outputs"]["queries"][0] == "How fast are travel expenses paid back?"
    reply = next(e for e in events if e["type"] == "node_finished" and e["node_id"] == "reply")
    assert reply["outputs"]["citations"][0]["source_name"] == "handbook.md"
    assert "14 days" in reply["outputs"]["citations"][0]["text"]
    prompt = handbook.bodies[1]["messages"][0]["content"]
    assert "[1] source: handbook.md" in prompt and "square brackets" in prompt
    # a full-text search of a full-text dataset, as the README's steps make it: nothing
    # degraded, so the run warns of nothing (a hybrid search of it would)
    assert [e for e in events if e["type"] == "node_warning"] == []
    assert events[-1]["answer"] == "Within 14 days of an approved claim [1]."
    # the end node hands API callers the answer with its sources
    outputs = events[-1]["outputs"]
    assert outputs["answer"] == "Within 14 days of an approved claim [1]."
    assert outputs["citations"][0]["source_name"] == "handbook.md"


def test_the_terminal_view_lists_the_sources_once(handbook):
    handbook.script(text_reply('["expense claim refund days"]'), text_reply("Within 14 days [1]."))
    result = runner.invoke(app, ["run", str(EXAMPLE), "-i", "query=How fast are travel expenses paid back?"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("sources: [1] handbook.md") == 1, result.stderr
