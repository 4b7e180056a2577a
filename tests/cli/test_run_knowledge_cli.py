"""``flowloom run`` of a workflow that answers from a dataset: ``flowloom datasets create``
and ``datasets add --wait`` fill it (SQLite under FLOWLOOM_HOME, embeddings from the
scripted server), then the run's query extension -> knowledge retrieval -> chat answers
citing the document, in the ``--json`` events and in the terminal view's sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from tests.support.knowledge_files import EMBEDDING_MODEL, knowledge_models
from tests.support.openai_server import text_reply
from tests.support.policy_kb import POLICY, POLICY_FLOW
from tests.support.policy_kb import POLICY_QUESTION as QUESTION

runner = CliRunner()
KEY_ENV = "FLOWLOOM_CLI_TEST_KB_KEY"
ANSWER = "Within 14 days [1]."


@pytest.fixture
def filled(tmp_path, openai_server, monkeypatch) -> tuple[Path, Any]:
    """A registry (chat ``default``, embedding ``embed``) on the scripted server, dataset
    ``policies`` filled with the returns policy through the CLI, and the workflow file."""
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    models = knowledge_models(tmp_path / "models.toml", openai_server.base_url, KEY_ENV)
    monkeypatch.setenv("FLOWLOOM_MODELS", str(models))
    get_settings.cache_clear()
    made = runner.invoke(app, ["datasets", "create", "Policies", "--id", "policies",
                               "--embedding-model", EMBEDDING_MODEL, "--chunk-tokens", "40", "--overlap", "0"])
    assert made.exit_code == 0, made.output
    doc = tmp_path / "returns.md"
    doc.write_text(POLICY, encoding="utf-8")
    added = runner.invoke(app, ["datasets", "add", "policies", str(doc), "--wait"])
    assert added.exit_code == 0, added.output
    flow = tmp_path / "kbqa.json"
    flow.write_text(json.dumps(POLICY_FLOW), encoding="utf-8")
    return flow, openai_server


def test_run_answers_with_citations_in_the_events(filled):
    flow, server = filled
    server.script(text_reply('["refund card days"]'), text_reply(ANSWER))
    result = runner.invoke(app, ["run", str(flow), "-i", f"query={QUESTION}", "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    chat = next(e for e in events if e["type"] == "node_finished" and e["node_id"] == "chat")
    [citation] = chat["outputs"]["citations"]
    assert citation["citation_id"] == "1" and citation["source_name"] == "returns.md"
    assert "14 days" in citation["text"]
    kr = next(e for e in events if e["type"] == "node_finished" and e["node_id"] == "kr")
    assert kr["outputs"]["chunks"][0]["source_name"] == "returns.md"
    assert events[-1]["type"] == "run_finished" and events[-1]["answer"] == ANSWER


def test_run_terminal_view_lists_the_answers_sources(filled):
    flow, server = filled
    server.script(text_reply('["refund card days"]'), text_reply(ANSWER))
    result = runner.invoke(app, ["run", str(flow), "-i", f"query={QUESTION}"])
    assert result.exit_code == 0, result.output
    assert "sources: [1] returns.md" in result.stderr
    assert ANSWER in result.stdout


def test_run_refuses_a_dataset_that_does_not_exist_before_any_model_is_called(tmp_path, openai_server,
                                                                               monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    monkeypatch.setenv("FLOWLOOM_MODELS", str(knowledge_models(tmp_path / "models.toml", openai_server.base_url,
                                                               KEY_ENV)))
    get_settings.cache_clear()
    flow = tmp_path / "kbqa.json"
    flow.write_text(json.dumps(POLICY_FLOW), encoding="utf-8")
    result = runner.invoke(app, ["run", str(flow), "-i", f"query={QUESTION}"])
    assert result.exit_code == 2, result.output
    assert "unknown_dataset" in result.stderr and "flowloom datasets create NAME --id policies" in result.stderr
    assert openai_server.requests == []  # refused before the query extension's model call
    # Made but empty: the run starts, and is told its searches find nothing.
    made = runner.invoke(app, ["datasets", "create", "Policies", "--id", "policies"])
    assert made.exit_code == 0, made.output
    openai_server.script(text_reply('["refund"]'), text_reply("No sources."))
    empty = runner.invoke(app, ["run", str(flow), "-i", f"query={QUESTION}"])
    assert empty.exit_code == 0, empty.output
    assert "dataset 'policies' has no documents yet" in empty.stderr
