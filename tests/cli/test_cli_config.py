"""The command line's settings, files and output channels: settings that do not parse,
``.env``, Dify/FastGPT files given to ``run``/``validate``, the ``flowloom run`` line
after an import and where each imported model went, ``-`` for stdin, ``--version``,
progress on stderr when stdout is not a terminal.

Subprocess tests call ``python -m api.cli`` with their own ``FLOWLOOM_HOME``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.importers import dify_docs, fastgpt_docs
from tests.support.workflows import build, edge, node

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DIFY_EXAMPLE = EXAMPLES / "imported" / "dual_switch_variable_aggregator_workflow.yml"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI process: its own home, no FLOWLOOM_* or provider keys
    inherited from the machine."""
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith("FLOWLOOM_") and not k.endswith(("_API_KEY", "_BASE_URL"))}
    return {**kept, "FLOWLOOM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}


def cli(env: dict[str, str], *args: str, cwd: Path | None = None, stdin: str | None = None,
        **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**env, **extra}, cwd=cwd or ROOT, input=stdin)


def assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    """No traceback and no pydantic phrasing reached the person."""
    text = proc.stdout + proc.stderr
    for phrase in ("Traceback", "Input should", "Value error,", "validation error for"):
        assert phrase not in text, text


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize("name, value, words", [
    ("FLOWLOOM_REDIS_URL", "http://localhost:6379", "must start with redis://, rediss:// or unix://"),
    ("FLOWLOOM_DATABASE_URL", "mysql://u:hunter2@db/x", "must be a sqlite:///PATH or postgresql://"),
    ("FLOWLOOM_DATABASE_URL", "flowloom.db", "must be a sqlite:///PATH or postgresql://"),
    ("FLOWLOOM_LEASE_TTL", "abc", "must be a number (got 'abc')"),
    ("FLOWLOOM_LEASE_TTL", "0", "must be greater than 0"),
    ("FLOWLOOM_CODE_SANDBOX", "docker", "must be 'bwrap' or 'none' (got 'docker')"),
    ("FLOWLOOM_ALLOW_UNSANDBOXED_CODE", "maybe", "must be true or false"),
    ("FLOWLOOM_LLM_BASE_URL_OVERRIDE", "localhost:11434", "must be an http:// or https:// URL"),
])
def test_a_setting_that_does_not_parse_exits_2_naming_it(env, name, value, words):
    proc = cli(env, "runs", **{name: value})
    assert proc.returncode == 2, proc.stderr
    assert "invalid setting:" in proc.stderr and f"{name}: {words}" in proc.stderr
    assert "hunter2" not in proc.stderr, "a database password is never echoed"
    assert_clean(proc)


def test_a_bad_setting_stops_validate_and_run_too(env):
    for command in (["validate", str(EXAMPLES / "hello.json")], ["run", str(EXAMPLES / "hello.json"), "-i", "name=A"]):
        proc = cli(env, *command, FLOWLOOM_REDIS_URL="localhost")
        assert proc.returncode == 2 and "FLOWLOOM_REDIS_URL" in proc.stderr
        assert_clean(proc)


def test_settings_are_read_from_dot_env_in_the_working_directory(env, tmp_path):
    (tmp_path / ".env").write_text("FLOWLOOM_LEASE_TTL=abc\n")
    proc = cli(env, "runs", cwd=tmp_path)
    assert proc.returncode == 2 and "FLOWLOOM_LEASE_TTL: must be a number" in proc.stderr


def test_the_real_environment_wins_over_dot_env(env, tmp_path):
    (tmp_path / ".env").write_text("FLOWLOOM_LEASE_TTL=abc\n")
    assert cli(env, "runs", cwd=tmp_path, FLOWLOOM_LEASE_TTL="5").returncode == 0


def test_provider_keys_in_dot_env_reach_the_model_registry(tmp_path, monkeypatch):
    from engine.settings import Settings
    from nodes.llm.model_registry import registry_for

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("FLOWLOOM_LLM_BASE_URL_OVERRIDE", raising=False)
    monkeypatch.chdir(tmp_path)
    before = registry_for(Settings())  # a registry cached before the .env existed
    (tmp_path / ".env").write_text("DEEPSEEK_API_KEY=sk-from-dotenv\nFLOWLOOM_MODELS=\n")
    registry = registry_for(Settings())
    assert registry is not before, "another .env is another registry"
    assert registry.api_key(registry.get("deepseek-chat")) == "sk-from-dotenv"
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-env")
    assert registry.api_key(registry.get("deepseek-chat")) == "sk-from-env", "the environment wins, read live"


# ------------------------------------------------------- Dify / FastGPT files


def test_run_on_a_dify_file_says_what_it_is_and_how_to_import_it(env):
    proc = cli(env, "run", str(DIFY_EXAMPLE))
    assert proc.returncode == 2
    assert "is a Dify DSL (app export), not a Flowloom workflow" in proc.stderr
    assert f"flowloom import {DIFY_EXAMPLE} -o dual_switch_variable_aggregator_workflow.json" in proc.stderr
    assert_clean(proc)


def test_validate_json_reports_a_fastgpt_file_as_foreign_format(env, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(fastgpt_docs.llm_kinds()), encoding="utf-8")
    proc = cli(env, "validate", str(path), "--json")
    assert proc.returncode == 2
    (problem,) = json.loads(proc.stdout)
    assert problem["code"] == "foreign_format"
    assert "is a FastGPT workflow export" in problem["message"]
    assert f"flowloom import {path} -o export.flowloom.json" in problem["message"], "never the export's own name"


def test_import_refuses_to_write_over_the_file_it_imports(env, tmp_path):
    path = tmp_path / "export.json"
    source = json.dumps(fastgpt_docs.llm_kinds())
    path.write_text(source, encoding="utf-8")
    proc = cli(env, "import", str(path), "-o", str(tmp_path / "." / "export.json"), "--allow-partial")
    assert proc.returncode == 2 and "is the file being imported" in proc.stderr and "-o export.flowloom.json" in proc.stderr
    assert path.read_text(encoding="utf-8") == source, "the export is kept as it was"
    assert_clean(proc)


def test_a_dify_file_on_stdin_names_stdin(env):
    proc = cli(env, "validate", "-", stdin=DIFY_EXAMPLE.read_text(encoding="utf-8"))
    assert proc.returncode == 2 and "<stdin> is a Dify DSL" in proc.stdout + proc.stderr
    assert "flowloom import - -o flow.json" in proc.stdout + proc.stderr


def test_an_ordinary_bad_json_file_is_still_invalid_document(env, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{ not json", encoding="utf-8")
    proc = cli(env, "validate", str(path))
    assert proc.returncode == 2 and "invalid_document" in proc.stdout and "cannot read" in proc.stdout


# ------------------------------------------------------------------ import


def test_import_prints_the_run_line_with_the_required_inputs_and_it_runs(env, tmp_path):
    out = tmp_path / "switches.json"
    proc = cli(env, "import", str(DIFY_EXAMPLE), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.split("run it with: ")[1].splitlines()[0]
    assert line == f"flowloom run {out} --input switch1=... --input switch2=..."
    args = shlex.split(line.replace("switch1=...", "switch1=1").replace("switch2=...", "switch2=0"))[2:]
    ran = cli(env, "run", *args)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"group1": "switch 1 on", "group2": "switch 2 off"}


def test_import_to_stdout_suggests_piping_into_run_dash(env):
    proc = cli(env, "import", str(DIFY_EXAMPLE))
    assert proc.returncode == 0
    assert f"run it with: flowloom import {DIFY_EXAMPLE} | flowloom run - --input switch1=..." in proc.stderr


def test_import_of_a_chat_flow_asks_for_message_and_reports_models(env, tmp_path):
    source = tmp_path / "support.yml"
    source.write_text(yaml.safe_dump(dify_docs.support_chat(), allow_unicode=True), encoding="utf-8")
    out = tmp_path / "support.json"
    proc = cli(env, "import", str(source), "-o", str(out), "--allow-partial")
    assert proc.returncode == 0, proc.stderr
    assert "--message '...'" in proc.stderr.split("run it with: ")[1]
    assert "models:" in proc.stderr
    assert ("'gpt-4o-mini' -> gpt-4o-mini (provider openai, upstream 'gpt-4o-mini' at https://api.openai.com/v1, "
            "URL set by OPENAI_BASE_URL; key in OPENAI_API_KEY)") in proc.stderr
    assert "FLOWLOOM_LLM_BASE_URL_OVERRIDE" in proc.stderr


def test_import_report_follows_the_base_url_override(env, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(fastgpt_docs.llm_kinds()), encoding="utf-8")
    proc = cli(env, "import", str(path), "-o", str(tmp_path / "out.json"), "--allow-partial",
               FLOWLOOM_LLM_BASE_URL_OVERRIDE="http://127.0.0.1:11434/v1")
    assert proc.returncode == 0, proc.stderr
    assert ("at http://127.0.0.1:11434/v1, URL set by FLOWLOOM_LLM_BASE_URL_OVERRIDE; key in FLOWLOOM_LLM_API_KEY "
            "(optional))") in proc.stderr


def test_run_command_lists_required_inputs_and_message():
    from api.cli.files import run_command

    wf = {"inputs": [{"name": "city", "required": True}, {"name": "note"}, {"name": "query", "required": True},
                     {"name": "two words", "required": True}]}
    assert run_command(wf, Path("f.json")) == "flowloom run f.json --input city=... --input 'two words=...' --message '...'"
    assert run_command({"nodes": [{"config": {"text": "{{ sys.query }}"}}]}, Path("f.json")) == \
        "flowloom run f.json --message '...'"
    assert run_command({}, None, "flowloom import a.yml") == "flowloom import a.yml | flowloom run -"


# ------------------------------------------------------- stdin, version, output


def test_validate_and_run_read_the_workflow_from_stdin(env):
    text = (EXAMPLES / "hello.json").read_text(encoding="utf-8")
    checked = cli(env, "validate", "-", stdin=text)
    assert checked.returncode == 0 and "<stdin>: valid workflow 'hello'" in checked.stdout
    ran = cli(env, "run", "-", "--input", "name=Ada", stdin=text)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Hello, Ada! Welcome to Flowloom.\n")


def test_a_missing_file_is_exit_2_not_a_usage_traceback(env):
    proc = cli(env, "run", "/nonexistent/flow.json")
    assert proc.returncode == 2 and "cannot read /nonexistent/flow.json" in proc.stderr
    assert_clean(proc)


def test_version(env):
    proc = cli(env, "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("flowloom ")
    assert proc.stdout.split()[1][0].isdigit() or "unknown" in proc.stdout


def test_redirected_run_captures_only_the_answer_and_outputs(env):
    proc = cli(env, "run", str(EXAMPLES / "hello.json"), "--input", "name=Ada")
    assert proc.returncode == 0, proc.stderr
    answer, _, outputs = proc.stdout.partition("\n")
    assert answer == "Hello, Ada! Welcome to Flowloom."
    assert json.loads(outputs) == {"greeting": "Hello, Ada! Welcome to Flowloom."}
    assert "run succeeded" in proc.stderr and "[template]" in proc.stderr


def test_redirected_failed_run_leaves_stdout_empty(env, tmp_path):
    doc = build([node("boom", "template", {"template": "{{ inputs.x | int // 0 }}"})], [edge("start", "boom")],
                inputs=[{"name": "x", "type": "string"}])
    path = tmp_path / "boom.json"
    path.write_text(json.dumps(doc))
    proc = cli(env, "run", str(path), "-i", "x=1")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "run failed at node 'boom'" in proc.stderr
    assert_clean(proc)


def test_terminal_view_on_a_terminal_keeps_everything_on_one_console():
    from io import StringIO

    from rich.console import Console

    from api.cli.common import TerminalView
    from schemas.events import RunFinished

    buffer = StringIO()
    view = TerminalView(Console(file=buffer, force_terminal=False), {})
    view.show(RunFinished(run_id="r", seq=1, ts=0.0, outputs={"a": 1}, answer="hi"))
    assert "run succeeded" in buffer.getvalue() and "outputs:" in buffer.getvalue()
    results = StringIO()
    view = TerminalView(Console(file=StringIO()), {}, results=results)
    view.show(RunFinished(run_id="r", seq=1, ts=0.0, outputs={"a": 1}, answer="hi"))
    assert results.getvalue() == 'hi\n{\n  "a": 1\n}\n'


def test_import_to_a_device_suggests_piping_into_run_dash_not_running_the_device():
    from typer.testing import CliRunner

    from api.cli import app

    result = CliRunner().invoke(app, ["import", str(DIFY_EXAMPLE), "-o", os.devnull])
    assert result.exit_code == 0, result.stderr
    line = result.stderr.split("run it with: ")[1].splitlines()[0]
    assert line == f"flowloom import {DIFY_EXAMPLE} | flowloom run - --input switch1=... --input switch2=...", line
