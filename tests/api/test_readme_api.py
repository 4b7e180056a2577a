"""What the README says about the HTTP API holds, on SQLite and PostgreSQL: the error
codes it lists for ``/v1/chat/completions`` are the ones the endpoint answers, the
validate endpoints' answer is the shape it gives (its ``problems`` being what
``flowloom validate --json`` prints), and the import's ``source`` is the file's text."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.support.cli import FLOWLOOM

README = Path(__file__).resolve().parents[2] / "README.md"
BROKEN = {"id": "broken", "nodes": [{"id": "say", "type": "answer", "config": {"text": "hi"}}], "edges": []}


def _readme() -> str:
    return re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))


def _row(endpoint: str) -> str:
    """The API table's row of ``endpoint``."""
    return next(line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{endpoint}"))


async def test_the_chat_completions_errors_the_readme_lists_are_those_it_answers(api):
    text = _readme()
    errors = text[text.index("Errors are OpenAI's"):][:900]
    answered = [
        await api.client.post("/v1/chat/completions", json={"model": "", "messages": [{"role": "user", "content": "hi"}]},
                              headers=api.auth()),
        await api.client.post("/v1/chat/completions", json={"model": "x", "messages": []}, headers=api.auth("fl_nope")),
        await api.client.post("/v1/chat/completions", json={"model": "nosuch", "messages": [{"role": "user",
                                                                                               "content": "hi"}]},
                              headers=api.auth()),
        await api.client.post("/v1/chat/completions", json={"model": "x"}, headers=api.auth()),
        await api.client.post("/v1/chat/completions", content=b"x" * (api.settings.max_request_bytes + 1),
                              headers=api.auth()),
    ]
    for response in answered:
        code = response.json()["error"]["code"]
        assert f"{response.status_code} `{code}`" in errors or f"/ `{code}`" in errors, (response.status_code, code)
    assert "400 `model_required` (a key of the whole tenant with an empty `model`)" in errors


async def test_validate_answers_the_readme_shape_whose_problems_are_what_the_cli_prints(api, tmp_path):
    row = _row("POST /v1/workflows/validate")
    assert "`{valid, problems, inputs, nodes, system_reads}`" in row and "`problems`: the list `flowloom validate --json` prints" in row
    assert "as `flowloom validate --json` prints them" not in row
    answer = (await api.client.post("/v1/workflows/validate", json=BROKEN, headers=api.auth())).json()
    assert set(answer) == {"valid", "problems", "inputs", "nodes", "system_reads"}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(BROKEN), encoding="utf-8")
    env = {**os.environ, "FLOWLOOM_HOME": str(tmp_path / "home")}
    printed = subprocess.run([FLOWLOOM, "validate", "--json", str(path)], capture_output=True, text=True, env=env,
                             timeout=60)
    assert json.loads(printed.stdout) == answer["problems"] != []


def test_the_readme_says_the_import_source_is_the_file_text():
    row = _row("POST /v1/workflows/import")
    assert "`{source, model_map?, dataset_map?, allow_partial?, workflow_id?}` where `source` is the file's text" in row
