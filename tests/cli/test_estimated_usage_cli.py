"""``flowloom show`` says when token counts are estimates: a chat node whose model server
reported no usage shows its tokens as ``(estimated)``, the completion count clamped to the
node's ``max_tokens``, in the text view and in ``--json``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings
from tests.support.chat_flow import chat_flow
from tests.support.knowledge_files import knowledge_models
from tests.support.openai_server import text_reply

runner = CliRunner()
KEY_ENV = "FLOWLOOM_CLI_TEST_CHAT_KEY"


@pytest.fixture
def scripted_models(tmp_path, openai_server, monkeypatch) -> Any:
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    path = knowledge_models(tmp_path / "models.toml", openai_server.base_url, KEY_ENV, embedding=False, rerank=False)
    monkeypatch.setenv("FLOWLOOM_MODELS", str(path))
    get_settings.cache_clear()
    return openai_server


def test_show_marks_estimated_usage_clamped_to_the_cap(scripted_models, tmp_path):
    doc = chat_flow(max_tokens=30)
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    scripted_models.script(text_reply("many words here " * 40, usage=None))
    ran = runner.invoke(app, ["run", str(path), "-i", "query=talk", "--json"])
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    shown = json.loads(runner.invoke(app, ["show", run_id, "--json"]).stdout)
    assert shown["run"]["usage_estimated"] is True and shown["run"]["tokens_out"] == 30
    reply = next(r for r in shown["node_runs"] if r["node_id"] == "reply")
    assert reply["usage"]["estimated"] is True and reply["usage"]["tokens_out"] == 30
    text = runner.invoke(app, ["show", run_id]).stdout
    assert text.count("(estimated)") == 2, text


def test_runs_list_marks_estimated_tokens_and_says_what_the_mark_means(scripted_models, tmp_path):
    doc = chat_flow(max_tokens=30)
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    scripted_models.script(text_reply("counted", usage=(10, 2)), text_reply("never counted " * 20, usage=None))
    ids = []
    for query in ("counted", "guessed"):
        ran = runner.invoke(app, ["run", str(path), "-i", f"query={query}", "--json"])
        assert ran.exit_code == 0, ran.output
        ids.append(json.loads(ran.stdout.splitlines()[0])["run_id"])
    listed = {r["run_id"]: r for r in json.loads(runner.invoke(app, ["runs", "--json"]).stdout)}
    assert (listed[ids[0]]["usage_estimated"], listed[ids[1]]["usage_estimated"]) == (False, True)
    text = runner.invoke(app, ["runs"]).stdout
    rows = {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0] in ids}
    assert " 12 " in rows[ids[0]] and "~" not in rows[ids[0]], text
    assert f"~{listed[ids[1]]['tokens_in'] + listed[ids[1]]['tokens_out']}" in rows[ids[1]], text
    assert "~ tokens estimated" in text, text
