"""``flowloom validate`` reports an empty required field the way the API does: an error
naming the node and the field, and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from api.cli import app
from tests.support.workflows import build, chain_edges, node


def test_validate_fails_on_an_answer_with_empty_text(tmp_path: Path) -> None:
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(build([node("answer", "answer", {"text": ""})], chain_edges("start", "answer"))))
    result = CliRunner().invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 2, result.output
    assert [(p["code"], p["node_id"], p["path"], p["message"]) for p in json.loads(result.stdout)] == [
        ("empty_required", "answer", "config.text", "text is required and empty")]
