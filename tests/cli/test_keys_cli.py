"""``flowloom keys``: ``revoke`` takes a key as ``keys list`` shows it, its ID or its KEY
column (``fl_<prefix>_...``), and says which column to use when nothing matches."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from api.cli import app

runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _make(name: str) -> dict[str, Any]:
    made = invoke("keys", "create", "--name", name, "--json")
    assert made.exit_code == 0, made.stderr
    return json.loads(made.stdout)


def test_revoke_takes_the_key_column_of_keys_list_as_well_as_the_id():
    first, second, third, kept = _make("one"), _make("two"), _make("three"), _make("kept")
    shown = invoke("keys", "list").stdout
    prefix = first["key"]["prefix"]
    assert f"fl_{prefix}_..." in shown  # what a person copies from the list
    for given, record in ((f"fl_{prefix}_...", first), (f"fl_{second['key']['prefix']}", second),
                          (third["secret"], third)):
        revoked = invoke("keys", "revoke", given)
        assert revoked.exit_code == 0, revoked.stderr
        assert f"API key {record['key']['id']} revoked" in revoked.stdout
    states = {k["name"]: k["revoked_at"] for k in json.loads(invoke("keys", "list", "--json").stdout)}
    assert states["kept"] is None and all(states[n] for n in ("one", "two", "three"))
    assert invoke("keys", "revoke", kept["key"]["id"]).exit_code == 0


def test_revoking_an_unknown_key_says_which_columns_name_a_key():
    _make("one")
    missing = invoke("keys", "revoke", "fl_zzzzzzzz")
    assert missing.exit_code == 2
    assert "no API key fl_zzzzzzzz for tenant 'default'" in missing.stderr
    assert "give its ID or KEY as `flowloom keys list` shows them" in missing.stderr
