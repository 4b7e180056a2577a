"""``flowloom run``, ``resume`` and ``rerun`` refusing before anything runs: a model whose
API key this deployment lacks (exit 2, nothing stored), a paused run resumed without an
answer (one message), a misspelt ``--from`` node (a close name suggested).

The typer app runs in-process (``CliRunner``) on the test's own ``FLOWLOOM_HOME``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from engine.settings import get_settings

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "FLOWLOOM_TEST_RUN_CLOUD_KEY"

runner = CliRunner()


def invoke(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def cloud_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry whose only model needs a key in KEY_ENV, which is not set; its endpoint is
    a closed loopback port, so a run that started anyway would fail at the chat node."""
    path = tmp_path / "models.toml"
    path.write_text(f'''
[providers.cloud]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "{KEY_ENV}"

[models.cloud-model]
provider = "cloud"
max_context = 8192
max_output_tokens = 512
''', encoding="utf-8")
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv("FLOWLOOM_MODELS", str(path))
    get_settings.cache_clear()


def chat_flow(tmp_path: Path) -> Path:
    doc = {"id": "chatty", "name": "Chatty", "nodes": [
        {"id": "start", "type": "start"},
        {"id": "greet", "type": "template", "config": {"template": "hello"}},
        {"id": "chat", "name": "Ask the model", "type": "chat", "config": {"model": "cloud-model"}},
        {"id": "say", "type": "answer", "config": {"text": "{{ chat.answer }}"}}],
        "edges": [{"id": "e0", "source": "start", "target": "greet"},
                  {"id": "e1", "source": "greet", "target": "chat"},
                  {"id": "e2", "source": "chat", "target": "say"}]}
    path = tmp_path / "chatty.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def stored_runs() -> list[dict[str, Any]]:
    listed = invoke("runs", "--json")
    assert listed.exit_code == 0, listed.output
    return json.loads(listed.stdout)


def test_run_of_a_model_without_its_key_refuses_before_starting(cloud_models, tmp_path):
    result = invoke("run", chat_flow(tmp_path), "--message", "hi")
    assert result.exit_code == 2, result.output
    assert "missing_api_key" in result.stderr and KEY_ENV in result.stderr
    assert "node=Ask the model (chat)" in result.stderr and "path=config.model" in result.stderr
    assert "nothing was run" in result.stderr
    assert result.stdout == ""
    assert stored_runs() == [], "no run was started"
    assert "Traceback" not in result.output


def test_the_same_run_goes_once_the_key_is_set(cloud_models, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    get_settings.cache_clear()
    result = invoke("run", chat_flow(tmp_path), "--message", "hi")
    # it starts and reaches the model, whose endpoint is closed: a run failure, not a refusal
    assert result.exit_code == 1, result.output
    assert "run failed at node Ask the model ('chat')" in result.stderr
    assert [run["status"] for run in stored_runs()] == ["failed"]


def _paused_run() -> str:
    result = invoke("run", ROOT / "examples" / "order_confirm.json", "--input", "item=tea", "--no-input")
    assert result.exit_code == 3, result.output
    match = re.search(r"run paused: (\S+) waits", result.stderr)
    assert match, result.stderr
    return match.group(1)


def test_resume_of_a_paused_run_without_an_answer_says_so_once():
    run_id = _paused_run()
    result = invoke("resume", run_id)
    assert result.exit_code == 2, result.output
    assert "Order 1 x tea?" in result.stderr and "[confirm] Confirm" in result.stderr, "the question is shown"
    assert "continue with" not in result.stderr, "no pause report telling to run what was just refused"
    assert result.stderr.count(f"flowloom resume {run_id}") == 1, result.stderr
    assert "cannot resume without an answer" in result.stderr
    assert f"answer it with: flowloom resume {run_id} --answer confirm" in result.stderr
    assert [run["status"] for run in stored_runs()] == ["paused"], "the run is untouched"


def test_rerun_from_a_misspelt_node_suggests_the_close_one():
    ran = invoke("run", ROOT / "examples" / "hello.json", "--input", "name=Ada")
    assert ran.exit_code == 0, ran.output
    [past] = stored_runs()
    result = invoke("rerun", past["run_id"], "--from", "gret")
    assert result.exit_code == 2, result.output
    assert "no node 'gret' in the workflow; did you mean 'greet'?" in result.stderr
    assert len(stored_runs()) == 1, "no new run"


def test_run_of_a_name_that_is_no_file_suggests_the_file_or_the_saved_workflow(tmp_path, monkeypatch):
    """`flowloom run hello` (a workflow's id, not a path) is told the file meant: an
    example, a `<name>.json` here; a workflow saved in the store is told where it runs."""
    import asyncio

    from api.composition import open_service
    from api.examples import EXAMPLES_DIR
    from workers.sql.workflows import SqlWorkflowStore

    monkeypatch.chdir(tmp_path)
    result = invoke("run", "hello")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"cannot read hello: no such file; did you mean `flowloom run {EXAMPLES_DIR / 'hello.json'}`?" in result.stderr
    (tmp_path / "mine.json").write_text("{}", encoding="utf-8")
    assert "cannot read mine: no such file; did you mean `flowloom validate mine.json`?" in invoke("validate", "mine").output

    nowhere = invoke("run", "saved_flow")
    assert "cannot read saved_flow: no such file (give the path of a workflow JSON file)" in nowhere.stderr
    assert not (Path(get_settings().home) / "flowloom.db").exists(), "a hint creates no database"

    async def save() -> None:
        async with open_service(get_settings()) as service:
            doc = {"id": "saved_flow", "name": "Saved", "nodes": [{"id": "start", "type": "start"}], "edges": []}
            await SqlWorkflowStore(service.stores.runs).create("default", doc)

    asyncio.run(save())
    saved = invoke("run", "saved_flow")
    assert saved.exit_code == 2
    assert ("'saved_flow' is a workflow saved in the store (tenant default), which runs in the server: "
            "the canvas of `flowloom serve`, or POST /v1/workflows/saved_flow/runs") in saved.stderr
