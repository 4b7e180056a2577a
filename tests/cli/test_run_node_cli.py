"""``flowloom run FILE --node ID --input REFERENCE=VALUE``: one node run on its own from
the command line - values by reference converted by their declared type, the node's
outputs printed, the run listed as single_node, values left out taken from the node's
last run, a missing value and an unknown node refused (exit 2) before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from api.cli import app
from tests.support.workflows import build, edge, node

runner = CliRunner()


def invoke(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def flow(tmp_path: Path) -> Path:
    doc = build([node("shout", "template", {"template": "{{ inputs.city | upper }}!"}, name="Shout"),
                 node("line", "template", {"template": "{{ shout.output }} x{{ inputs.times * 2 }}"}, name="Line"),
                 node("end", "end", {"outputs": [{"name": "line", "value": {"ref": "line.output"}}]})],
                [edge("start", "shout"), edge("shout", "line"), edge("line", "end")], id="cli-node",
                inputs=[{"name": "city", "type": "string"}, {"name": "times", "type": "number"}])
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_run_one_node_with_values_by_reference(tmp_path):
    path = flow(tmp_path)
    ran = invoke("run", path, "--node", "line", "--input", "shout.output=OSLO!", "--input", "times=3")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout) == {"output": "OSLO! x6"}, "the node's outputs, times read as a number"
    listed = invoke("runs", "--json")
    runs = json.loads(listed.stdout)
    assert [(r["kind"], r["node_id"], r["status"]) for r in runs] == [("single_node", "line", "succeeded")]


def test_values_left_out_come_from_the_last_run_and_a_missing_one_is_named(tmp_path):
    path = flow(tmp_path)
    missing = invoke("run", path, "--node", "line", "--input", "times=1")
    assert missing.exit_code == 2
    assert "shout.output: give it with --input shout.output=VALUE" in missing.stderr
    assert json.loads(invoke("runs", "--json").stdout) == [], "nothing was stored"

    full = invoke("run", path, "--input", "city=Lima", "--input", "times=1")
    assert full.exit_code == 0, full.stderr
    again = invoke("run", path, "--node", "line", "--input", "times=5")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {"output": "LIMA! x10"}, "shout.output came from the last full run"


def test_an_unknown_node_or_reference_is_refused(tmp_path):
    path = flow(tmp_path)
    unknown = invoke("run", path, "--node", "lien")
    assert unknown.exit_code == 2 and "did you mean 'line'" in unknown.stderr
    stray = invoke("run", path, "--node", "shout", "--input", "shout.output=x")
    assert stray.exit_code == 2 and "the node does not read it (it reads: inputs.city)" in stray.stderr
    bad = invoke("run", path, "--node", "line", "--input", "times=many", "--input", "shout.output=x")
    assert bad.exit_code == 2 and "--input inputs.times" in bad.stderr
