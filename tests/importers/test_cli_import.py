"""``flowloom import``: the report, exit codes, --allow-partial, --model, and the README's
Quick start (its first command sets up and serves the canvas; its command-line example
imports a real Dify flow from examples/ and runs it, no model, no network)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from typer.testing import CliRunner

from api.cli import app

from .helpers import FASTGPT, ROOT, needs_corpus

runner = CliRunner()
FLOWLOOM = [sys.executable, "-m", "api.cli"]
EXAMPLE = ROOT / "examples" / "imported" / "dual_switch_variable_aggregator_workflow.yml"


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def readme_quick_start_commands() -> list[str]:
    """The commands of the README's Quick start, in order (one per ```bash block)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.+?)\n```", quick, re.S)]


def test_readme_main_command_sets_up_and_serves_the_canvas():
    # What serve does with it (the examples saved, the canvas served) is tested with the
    # real server in tests/cli/test_serve_examples.py and tests/web/.
    main = readme_quick_start_commands()[0]
    assert main.split(" && ") == ["python3 -m pip install -e .", "npm --prefix web ci", "npm --prefix web run build",
                                  "flowloom serve"]


def test_readme_command_line_example_imports_a_real_flow_and_runs_it(tmp_path):
    imported, ran = readme_quick_start_commands()[1].split(" && ")
    assert imported.startswith("flowloom import examples/imported/") and ran.startswith("flowloom run ")
    out = str(tmp_path / "switches.json")
    imported, ran = imported.replace("/tmp/switches.json", out), ran.replace("/tmp/switches.json", out)
    first = subprocess.run([*FLOWLOOM, *imported.split()[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert "imported dify workflow" in first.stderr and "variable_aggregator" in first.stderr
    second = subprocess.run([*FLOWLOOM, *ran.split()[1:], "--json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["outputs"] == {"group1": "switch 1 on", "group2": "switch 2 off"}


def test_the_example_is_the_unmodified_dify_fixture():
    text = EXAMPLE.read_text(encoding="utf-8")
    assert text.startswith("app:\n") and "variable-aggregator" in text
    assert "langgenius/dify" in (EXAMPLE.parent / "SOURCES.md").read_text(encoding="utf-8")


@needs_corpus
def test_unsupported_nodes_fail_the_import_listing_every_problem(tmp_path):
    out = tmp_path / "cq.json"
    result = invoke("import", FASTGPT / "CQ_template.json", "-o", out)
    assert result.exit_code == 2
    assert "cannot import" in result.stderr and "(fastgpt)" in result.stderr
    assert "unmapped_dataset  node=MNMMMIjjWyMU (datasetSearchNode)" in result.stderr
    assert "--allow-partial" in result.stderr and "--dataset SOURCE=ID" in result.stderr
    assert not out.exists()


@needs_corpus
def test_allow_partial_writes_a_workflow_that_validates(tmp_path):
    out = tmp_path / "cq.json"
    result = invoke("import", FASTGPT / "CQ_template.json", "-o", out, "--allow-partial")
    assert result.exit_code == 0, result.stderr
    assert "1 unsupported placeholder(s) fail when run" in result.stderr
    assert "MNMMMIjjWyMU" in result.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["id"] == "CQ_template"
    assert invoke("validate", out).exit_code == 0


@needs_corpus
def test_model_mapping_and_stdout():
    failed = invoke("import", FASTGPT / "TranslateRobot_template.json")
    assert failed.exit_code == 2 and "unknown_model" in failed.stderr and "claude-3-5-sonnet-20240620" in failed.stderr
    result = invoke("import", FASTGPT / "TranslateRobot_template.json", "--model",
                    "claude-3-5-sonnet-20240620=gpt-4o", "--id", "translate")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["id"] == "translate"
    assert [n["config"]["model"] for n in doc["nodes"] if n["type"] == "chat"] == ["gpt-4o"]


def test_bad_arguments_and_files(tmp_path):
    assert invoke("import", EXAMPLE, "--model", "nothing").exit_code == 2
    junk = tmp_path / "junk.txt"
    junk.write_text("just: [text", encoding="utf-8")
    result = invoke("import", junk)
    assert result.exit_code == 2 and "invalid_source" in result.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}), encoding="utf-8")
    result = invoke("import", other)
    assert result.exit_code == 2 and "not a FastGPT workflow" in result.stderr


@needs_corpus
def test_catch_all_model_mapping_to_an_unknown_name_names_it():
    proc = subprocess.run([sys.executable, "-m", "api.cli", "import", str(FASTGPT / "TranslateRobot_template.json"), "--model", "*=nosuch"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--model '*=nosuch' names 'nosuch', which is not in the model registry" in proc.stderr


@needs_corpus
def test_dataset_flag_maps_the_search_nodes_datasets(tmp_path):
    out = tmp_path / "cq.json"
    result = invoke("import", FASTGPT / "CQ_template.json", "-o", out, "--dataset", "*=handbook")
    assert result.exit_code == 0, result.stderr
    search = next(n for n in json.loads(out.read_text())["nodes"] if n["id"] == "MNMMMIjjWyMU")
    assert search["type"] == "knowledge_retrieval" and search["config"]["datasets"] == ["handbook"]
    bad = invoke("import", FASTGPT / "CQ_template.json", "--dataset", "handbook")
    assert bad.exit_code == 2 and "invalid --dataset" in bad.stderr and "SOURCE=ID" in bad.stderr


@needs_corpus
def test_the_import_report_says_where_each_dataset_went_and_warns_of_a_mapping_that_matches_none(tmp_path):
    out = tmp_path / "cq.json"
    result = invoke("import", FASTGPT / "CQ_template.json", "-o", out, "--dataset", "*=doesnotexist",
                    "--dataset", "foo=emb2")
    assert result.exit_code == 0, result.stderr
    assert "datasets:\n  (no dataset selected) -> doesnotexist\n" in result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if "unmatched_dataset" in line]
    assert "'foo'" in warning and "emb2" not in json.loads(out.read_text()).__repr__()


@needs_corpus
def test_a_mapped_dataset_the_store_lacks_is_warned_with_the_closest_id_and_no_store_is_made_to_check(tmp_path):
    import os
    from pathlib import Path

    home = Path(os.environ["FLOWLOOM_HOME"])
    args = ("import", FASTGPT / "CQ_template.json", "-o", tmp_path / "cq.json", "--dataset", "*=ofice-sem")
    fresh = invoke(*args)
    assert fresh.exit_code == 0 and "unknown_dataset" not in fresh.stderr, fresh.stderr
    assert "each must exist when the workflow runs" in fresh.stderr and not list(home.glob("*.db"))
    assert invoke("datasets", "create", "Office", "--id", "office-sem").exit_code == 0
    typo = invoke(*args)
    assert typo.exit_code == 0, typo.stderr
    (warning,) = [line for line in typo.stderr.splitlines() if "unknown_dataset" in line]
    assert "'ofice-sem'" in warning and "did you mean 'office-sem'?" in warning and "--dataset '*=office-sem'" in warning
    assert "flowloom datasets create NAME --id ofice-sem" in warning
    right = invoke(*args[:-1], "*=office-sem")
    assert right.exit_code == 0 and "unknown_dataset" not in right.stderr, right.stderr
