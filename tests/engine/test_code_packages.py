"""Packages for code nodes, the read side (engine/code_packages.py, schemas/code_imports.py):
which modules code imports, whether the active environment has them, the install
command, ``missing_package`` in validation and in a run, the declarations' rules
(nodes/sandbox/packages.py), and the mount of the environment in the real sandbox -
with environments the tests lay out themselves (the pip and npm installs are in
tests/nodes/test_sandbox_packages.py)."""

from __future__ import annotations

import pytest

from engine import RunDeps, run_workflow
from engine.code_packages import install_command, package_env, package_needs, requirement_name
from engine.settings import Settings
from engine.shapes import deployment_problems
from nodes import builtin_catalog
from nodes.sandbox.packages import Declared, merge_declarations, requirement_lines
from schemas.code_imports import third_party_imports
from tests.support.catalog import compile_workflow
from tests.support.packages import environment
from tests.support.workflows import build, chain_edges, node

GREET = "def hello(name):\n    return 'hello ' + name\n"


def settings(tmp_path, **kw) -> Settings:
    return Settings(home=tmp_path / "home", code_sandbox="bwrap", allow_unsandboxed_code=False, **kw)


def code_flow(language: str, code: str, outputs: dict[str, str]) -> dict:
    return build(
        [
            node(
                "code",
                "code",
                {
                    "language": language,
                    "code": code,
                    "inputs": [],
                    "outputs": [{"name": k, "type": v} for k, v in outputs.items()],
                },
            )
        ],
        chain_edges("start", "code"),
    )


@pytest.mark.parametrize(
    "language, code, modules",
    [
        (
            "python",
            "import json, os.path\nimport numpy as np\nfrom json_repair import loads\nfrom . import x\n",
            ["json_repair", "numpy"],
        ),
        ("python", "try:\n    import ujson as json\nexcept ImportError:\n    import json\n", []),
        (
            "python",
            "try:\n    import orjson\nexcept (ValueError, ModuleNotFoundError):\n    orjson = None\n",
            [],
        ),
        ("python", "try:\n    import pandas\nexcept ValueError:\n    pass\n", ["pandas"]),
        ("python", "def main(:\n  import numpy\n", []),
        (
            "javascript",
            "const _ = require('lodash/fp');\nconst fs = require('node:fs');\nconst u = require('./util');\n"
            "const s = require('@scope/pkg/sub');\nconst p = require('path');\n",
            ["./util", "@scope/pkg", "lodash"],
        ),
    ],
)
def test_the_modules_code_imports(language, code, modules):
    assert third_party_imports(language, code) == modules


def test_what_to_install_for_a_module():
    assert requirement_name("python", "json_repair") == "json-repair"
    assert requirement_name("python", "yaml") == "PyYAML"
    assert requirement_name("python", "sklearn") == "scikit-learn"
    assert requirement_name("javascript", "@scope/pkg") == "@scope/pkg"
    assert requirement_name("javascript", "./util") is None
    assert (
        install_command("python", ["json-repair", "numpy==2.1"])
        == "flowloom sandbox install json-repair numpy==2.1"
    )
    assert install_command("javascript", ["lodash"]) == "flowloom sandbox install --npm lodash"


def test_the_active_environment_is_looked_up_by_files(tmp_path):
    s = settings(tmp_path)
    assert package_env(s).root is None and not package_env(s).has("python", "helper")
    environment(s.home, {"helper": GREET}, {"@acme/slug": "exports.slug = (s) => s;"})
    env = package_env(s)
    assert env.has("python", "helper") and not env.has("python", "numpy") and not env.has("python", "os.path")
    assert env.has("javascript", "@acme/slug") and not env.has("javascript", "lodash")
    assert not env.has("javascript", "./helper")
    needs = package_needs(env, "python", "import helper, numpy\n")
    assert [(n.module, n.installed) for n in needs] == [("helper", True), ("numpy", False)]


def test_packages_installed_for_another_python_count_as_absent(tmp_path):
    s = settings(tmp_path)
    environment(s.home, {"helper": GREET}, built_for="2.7")
    env = package_env(s)
    assert env.python is None and not env.has("python", "helper")
    assert "installed for Python 2.7" in env.problem and "flowloom sandbox install" in env.problem


def test_validation_names_a_missing_package_with_the_install_command(tmp_path):
    s = settings(tmp_path)
    doc = code_flow("python", "import json_repair\nimport helper\n\ndef main():\n    return {}\n", {})
    environment(s.home, {"helper": GREET})
    problems = deployment_problems(doc, catalog=builtin_catalog(), settings=s)
    assert [(p.code, p.severity, p.node_id, p.path) for p in problems] == [
        ("missing_package", "warning", "code", "config.code")
    ]
    assert problems[0].message == (
        "the code imports 'json_repair', which is not installed in the code sandbox (it offers only the Python "
        "standard library and what the operator installs): install with `flowloom sandbox install json-repair`"
    )
    environment(s.home, {"helper": GREET, "json_repair": "loads = None\n"}, name="second")
    assert deployment_problems(doc, catalog=builtin_catalog(), settings=s) == []


async def test_a_run_fails_the_node_at_once_naming_the_package(tmp_path):
    s = settings(tmp_path)
    plan = compile_workflow(
        code_flow("javascript", "const _ = require('lodash');\nfunction main() { return {} }", {})
    )
    state = await run_workflow(plan, {}, deps=RunDeps(settings=s))
    run = state.node_runs["code"]
    assert state.status == "failed" and run.error.reason == "missing_package"
    assert "install with `flowloom sandbox install --npm lodash`" in run.error.message
    assert "pid" not in run.data  # nothing was started


async def test_installed_modules_are_mounted_read_only_in_the_sandbox(tmp_path):
    s = settings(tmp_path)
    root = environment(
        s.home, {"helper": GREET}, {"@acme/slug": "exports.slug = (s) => s.toLowerCase().replace(/ /g, '-');"}
    )
    py = (
        "import helper, os\n\ndef main():\n    try:\n        open('/packages/python/helper/x.py', 'w')\n"
        "        wrote = 'WROTE'\n    except OSError as exc:\n        wrote = exc.strerror\n"
        "    return {'text': helper.hello('sandbox'), 'where': helper.__file__, 'wrote': wrote}\n"
    )
    state = await run_workflow(
        compile_workflow(code_flow("python", py, {"text": "string", "where": "string", "wrote": "string"})),
        {},
        deps=RunDeps(settings=s),
    )
    run = state.node_runs["code"]
    assert state.status == "succeeded", run.error
    assert run.data["sandbox"] == "bwrap"
    assert run.outputs == {
        "text": "hello sandbox",
        "where": "/packages/python/helper/__init__.py",
        "wrote": "Read-only file system",
    }
    js = (
        "const {slug} = require('@acme/slug');\nconst fs = require('fs');\nfunction main() {\n"
        "  let wrote; try { fs.writeFileSync('/packages/node_modules/x', 'x'); wrote = 'WROTE'; } catch (e) { wrote = e.code; }\n"
        "  return {text: slug('Hello Sandbox'), wrote};\n}\n"
    )
    state = await run_workflow(
        compile_workflow(code_flow("javascript", js, {"text": "string", "wrote": "string"})),
        {},
        deps=RunDeps(settings=s),
    )
    assert state.status == "succeeded", state.node_runs["code"].error
    assert state.node_runs["code"].outputs == {"text": "hello-sandbox", "wrote": "EROFS"}
    assert sorted(p.name for p in (root / "python" / "helper").iterdir()) == ["__init__.py"]
    assert not (root / "node_modules" / "x").exists()


def test_declarations_merge_by_project_and_refuse_what_cannot_be_copied():
    merged = merge_declarations(
        Declared(["numpy", "json-repair>=0.30"], ["lodash@4"]),
        ["NumPy==2.1", "jieba"],
        ["lodash@4.17.21", "@acme/slug", "./local.tgz"],
    )
    assert merged.python == ["NumPy==2.1", "json-repair>=0.30", "jieba"]
    assert merged.npm == ["lodash@4.17.21", "@acme/slug", "./local.tgz"]
    assert requirement_lines("# pinned\njson-repair==0.40  # the model's JSON\n\nnumpy\n", "req.txt") == [
        "json-repair==0.40",
        "numpy",
    ]
    with pytest.raises(ValueError, match=r"req.txt, line 2: '-e \./lib' is an editable install"):
        requirement_lines("numpy\n-e ./lib\n", "req.txt")
    with pytest.raises(ValueError, match="line 1: '-r other.txt' is a nested requirements file"):
        requirement_lines("-r other.txt\n", "req.txt")
