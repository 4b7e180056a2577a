"""Imported code nodes that import packages: checked against the code sandbox's package
environment. Not installed: the node does not convert (``missing_package``, naming the
package and the install command; a failing placeholder with ``allow_partial``).
Installed: it converts and runs. The result lists every package the code imports, with
the commands for the missing ones - in the importer, the API's answer and its 422.

Environments here are laid out by the test (tests/support/packages.py); the real pip
install and the examples are in tests/nodes/test_sandbox_packages.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.code_packages import package_env
from engine.settings import Settings
from nodes.importers import ImportFailed
from tests.support.packages import environment

from . import dify_docs as dd
from . import fastgpt_docs as fd
from .helpers import load, run
from .test_fidelity_code import code_node, save

HELPER = "def shout(text):\n    return text.upper() + '!'\n"
PY = "import json\nimport shouting\nimport json_repair\n\ndef main(text):\n    return {'out': shouting.shout(text)}\n"


def fastgpt_flow() -> dict:
    code = code_node(
        "c", PY, [fd.inp("text", "hi")], [fd.out("out", value_type="string", kind="dynamic")], "py"
    )
    return fd.wrap([fd.start(), code], [fd.edge("start", "c")])


def dify_flow() -> dict:
    return dd.app(
        [
            dd.node("start", "start", variables=[]),
            dd.node(
                "c",
                "code",
                code_language="javascript",
                variables=[],
                code="const s = require('shouting-js');\nfunction main() { return {out: s.shout('hi')} }",
                outputs={"out": {"type": "string"}},
            ),
            dd.node("end", "end", outputs=[{"variable": "r", "value_selector": ["c", "out"]}]),
        ],
        [dd.edge("start", "c"), dd.edge("c", "end")],
    )


def test_a_package_not_installed_fails_the_import_naming_the_command(tmp_path):
    home = tmp_path / "home"
    environment(home, {"shouting": HELPER})
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, fastgpt_flow()), packages=package_env(Settings(home=home)))
    errors = [i for i in failed.value.report if i.severity == "error"]
    assert [(i.code, i.node_id) for i in errors] == [("missing_package", "c")]
    assert errors[0].message.startswith(
        "the code imports 'json_repair', which is not installed in the code sandbox"
    )
    assert errors[0].message.endswith("install with `flowloom sandbox install json-repair`")
    assert failed.value.packages == [
        {
            "language": "python",
            "module": "json_repair",
            "requirement": "json-repair",
            "installed": False,
            "nodes": ["c"],
        },
        {
            "language": "python",
            "module": "shouting",
            "requirement": "shouting",
            "installed": True,
            "nodes": ["c"],
        },
    ]
    assert failed.value.install_commands == ["flowloom sandbox install json-repair"]
    partial = load(
        save(tmp_path, fastgpt_flow()), packages=package_env(Settings(home=home)), allow_partial=True
    )
    assert next(n for n in partial.workflow["nodes"] if n["id"] == "c")["type"] == "unsupported"
    assert partial.install_commands == ["flowloom sandbox install json-repair"]


async def test_once_installed_the_node_converts_and_runs(tmp_path):
    home = tmp_path / "home"
    environment(home, {"shouting": HELPER, "json_repair": "loads = None\n"})
    settings = Settings(home=home, code_sandbox="bwrap", allow_unsandboxed_code=False)
    result = load(save(tmp_path, fastgpt_flow()), packages=package_env(settings))
    assert not result.errors and result.install_commands == []
    assert [p["installed"] for p in result.packages] == [True, True]
    state, _events = await run(result, tmp_path=tmp_path, settings=settings)
    assert state.status == "succeeded", {k: v.error for k, v in state.node_runs.items()}
    assert state.node_runs["c"].outputs == {"out": "HI!"}


async def test_dify_javascript_packages_come_from_node_modules(tmp_path):
    home = tmp_path / "home"
    settings = Settings(home=home, code_sandbox="bwrap", allow_unsandboxed_code=False)
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, dify_flow()), packages=package_env(settings))
    assert failed.value.install_commands == ["flowloom sandbox install --npm shouting-js"]
    assert "flowloom sandbox install --npm shouting-js" in str(failed.value)
    environment(home, npm={"shouting-js": "exports.shout = (t) => t.toUpperCase() + '!';"})
    result = load(save(tmp_path, dify_flow()), packages=package_env(settings))
    state, _events = await run(result, tmp_path=tmp_path, settings=settings)
    assert state.status == "succeeded", {k: v.error for k, v in state.node_runs.items()}
    assert state.outputs == {"r": "HI!"}


def test_without_an_environment_only_the_standard_library_counts(tmp_path: Path):
    with pytest.raises(ImportFailed) as failed:
        load(save(tmp_path, fastgpt_flow()))
    assert failed.value.install_commands == ["flowloom sandbox install json-repair shouting"]
