"""examples/imported/repair_json_fastgpt.json and repair_json_dify.yml: a FastGPT and a Dify
flow whose Python code node repairs a model's JSON with ``json_repair``, through the real
CLI. Before the package is installed, ``flowloom import`` exits 2 naming the package and
the command that installs it; after ``flowloom sandbox install`` (pip, from the local
wheelhouse) the same files import and run in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.packages import flowloom, install_from_wheelhouse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "imported"
BROKEN = "Here it is: {'name': 'Ada', langs: [\"py\", \"js\","

pytestmark = pytest.mark.slow


def test_the_imported_examples_need_json_repair_then_import_and_run(tmp_path):
    home = tmp_path / "home"
    flows = {
        "repair_json_fastgpt.json": ["--message", BROKEN],
        "repair_json_dify.yml": ["--input", f"text={BROKEN}"],
    }
    for name in flows:
        refused = flowloom(home, "import", str(EXAMPLES / name), "-o", str(tmp_path / f"{name}.flow.json"))
        assert refused.returncode == 2, refused.stderr
        assert "error missing_package" in refused.stderr
        assert "the code imports 'json_repair', which is not installed in the code sandbox" in refused.stderr
        assert "install with: flowloom sandbox install json-repair" in refused.stderr
    installed = install_from_wheelhouse(home, "json-repair")
    assert installed.returncode == 0, installed.stderr[-2000:]
    for name, run_args in flows.items():
        out = tmp_path / f"{name}.flow.json"
        imported = flowloom(home, "import", str(EXAMPLES / name), "-o", str(out))
        assert imported.returncode == 0, imported.stderr
        assert "python json_repair (json-repair): installed" in imported.stderr
        ran = flowloom(home, "run", str(out), "--json", *run_args)
        assert ran.returncode == 0, ran.stderr + ran.stdout[-2000:]
        final = json.loads(ran.stdout.splitlines()[-1])
        assert final["type"] == "run_finished" and final["status"] == "succeeded", final
        pretty = final["answer"] if name.endswith(".json") else final["outputs"]["pretty"]
        assert json.loads(pretty) == {"name": "Ada", "langs": ["py", "js"]}
