"""Packages in the code sandbox, installed for real: ``flowloom sandbox install`` runs pip
(from a local wheelhouse: tests have no network) and npm (a tarball packed here), then
code nodes import ``json_repair``, ``numpy`` (a C extension) and the npm package in the
real bubblewrap sandbox - where the network stays closed and nothing outside the
sandbox's temporary directories can be written, packages included. A failed install
changes nothing; ``sandbox list`` shows what is there.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from engine import RunDeps, run_workflow
from engine.code_packages import package_env
from engine.settings import Settings
from tests.nodes.test_code_node import Listener
from tests.support.catalog import compile_workflow
from tests.support.packages import flowloom, wheelhouse
from tests.support.workflows import build, chain_edges, node

pytestmark = pytest.mark.slow

NPM_PACKAGE = "flowloom-test-slug"


def _npm_tarball(where: Path) -> Path:
    """A real npm package, packed offline: ``slug(text)``."""
    source = where / "src"
    source.mkdir()
    (source / "package.json").write_text(
        json.dumps({"name": NPM_PACKAGE, "version": "1.2.3", "main": "index.js"})
    )
    (source / "index.js").write_text(
        "exports.slug = (s) => s.trim().toLowerCase().split(/\\s+/).join('-');\n"
    )
    subprocess.run(
        ["npm", "pack", "--pack-destination", str(where)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return where / f"{NPM_PACKAGE}-1.2.3.tgz"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A FLOWLOOM_HOME whose sandbox has json-repair, numpy and the npm package installed."""
    home = tmp_path_factory.mktemp("packages") / "home"
    tarball = _npm_tarball(tmp_path_factory.mktemp("npm"))
    done = flowloom(
        home,
        "sandbox",
        "install",
        "json-repair",
        "numpy",
        "--npm",
        str(tarball),
        "--find-links",
        str(wheelhouse()),
        "--no-index",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Successfully installed" in done.stderr and "installed into" in done.stderr
    return home


def settings(home: Path) -> Settings:
    return Settings(
        home=home, code_sandbox="bwrap", allow_unsandboxed_code=False, code_bwrap="bwrap", code_node="node"
    )


async def run_code(home: Path, language: str, code: str, outputs: dict[str, str], **inputs):
    doc = build(
        [
            node(
                "code",
                "code",
                {
                    "language": language,
                    "code": code,
                    "outputs": [{"name": k, "type": v} for k, v in outputs.items()],
                    "inputs": [{"name": k, "value": v} for k, v in inputs.items()],
                },
            )
        ],
        chain_edges("start", "code"),
    )
    state = await run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=settings(home)))
    run = state.node_runs["code"]
    assert state.status == "succeeded", (run.error, run.data.get("stderr"))
    assert run.data["sandbox"] == "bwrap"
    return run.outputs


async def test_json_repair_fixes_a_models_json_in_the_sandbox(home):
    code = (
        "import json_repair\n\ndef main(text):\n"
        "    return {'data': json_repair.loads(text), 'where': json_repair.__file__}\n"
    )
    out = await run_code(
        home,
        "python",
        code,
        {"data": "object", "where": "string"},
        text="Sure! ```json\n{'name': 'Ada', langs: [\"py\", \"js\",\n",
    )
    assert out["data"] == {"name": "Ada", "langs": ["py", "js"]}
    assert out["where"] == "/packages/python/json_repair/__init__.py"


async def test_numpy_and_its_c_extension_run_in_the_sandbox(home):
    code = (
        "import numpy as np\nfrom numpy._core import _multiarray_umath\n\ndef main(xs):\n"
        "    a = np.array(xs, dtype=float)\n"
        "    return {'mean': float(a.mean()), 'std': round(float(a.std()), 6),\n"
        "            'dot': float(np.linalg.norm(a) ** 2), 'ext': _multiarray_umath.__file__}\n"
    )
    out = await run_code(
        home,
        "python",
        code,
        {"mean": "number", "std": "number", "dot": "number", "ext": "string"},
        xs=[1, 2, 3, 4],
    )
    assert out["mean"] == 2.5 and out["std"] == 1.118034 and out["dot"] == 30.0
    assert out["ext"].startswith("/packages/python/numpy/_core/_multiarray_umath") and out["ext"].endswith(
        ".so"
    )


async def test_an_npm_package_is_required_from_node_modules(home):
    code = (
        f"const {{slug}} = require('{NPM_PACKAGE}');\n"
        "function main({title}) { return {slug: slug(title), where: require.resolve('"
        + NPM_PACKAGE
        + "')}; }\n"
    )
    out = await run_code(
        home, "javascript", code, {"slug": "string", "where": "string"}, title=" Hello Sandbox "
    )
    assert out == {"slug": "hello-sandbox", "where": f"/packages/node_modules/{NPM_PACKAGE}/index.js"}


async def test_with_packages_the_sandbox_still_blocks_the_network_and_writes(home):
    env_dir = package_env(settings(home)).root
    assert env_dir is not None
    before = sorted(str(p.relative_to(env_dir)) for p in env_dir.rglob("*"))
    targets = [
        "/packages/python/numpy/evil.py",
        "/packages/python/sitecustomize.py",
        "/packages/node_modules/evil.js",
        str(env_dir / "python" / "evil.py"),
        str(home / "evil"),
        "/usr/evil",
    ]
    code = (
        "import socket, numpy, json_repair\n\n"
        "def main(port, targets):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=2).close()\n"
        "        net = 'connected'\n"
        "    except OSError as exc:\n"
        "        net = type(exc).__name__\n"
        "    wrote = {}\n"
        "    for path in targets:\n"
        "        try:\n"
        "            with open(path, 'w') as f:\n"
        "                f.write('x')\n"
        "            wrote[path] = 'WROTE'\n"
        "        except OSError as exc:\n"
        "            wrote[path] = exc.strerror\n"
        "    with open('/tmp/scratch', 'w') as f:\n"
        "        f.write(str(numpy.arange(3).sum()))\n"
        "    return {'net': net, 'wrote': wrote, 'scratch': open('/tmp/scratch').read()}\n"
    )
    listener = Listener()
    try:
        out = await run_code(
            home,
            "python",
            code,
            {"net": "string", "wrote": "object", "scratch": "string"},
            port=listener.port,
            targets=targets,
        )
        await asyncio.sleep(0.3)
        assert listener.accepted == 0
    finally:
        listener.close()
    assert out["net"] == "PermissionError" and out["scratch"] == "3"
    assert all(result != "WROTE" for result in out["wrote"].values()), out["wrote"]
    assert out["wrote"]["/packages/python/numpy/evil.py"] == "Read-only file system"
    assert sorted(str(p.relative_to(env_dir)) for p in env_dir.rglob("*")) == before
    assert not (home / "evil").exists()


def test_sandbox_list_shows_what_is_installed(home):
    listed = flowloom(home, "sandbox", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert [p["name"] for p in report["python"]] == ["json_repair", "numpy"]
    assert report["npm"] == [{"name": NPM_PACKAGE, "version": "1.2.3"}]
    assert report["declared"]["python"] == ["json-repair", "numpy"]
    assert report["pending"] == {"python": [], "npm": []} and report["problem"] is None
    text = flowloom(home, "sandbox", "list")
    assert "numpy 2." in text.stdout and f"{NPM_PACKAGE} 1.2.3" in text.stdout


def test_a_failed_install_changes_nothing(home):
    active = package_env(settings(home)).root
    declared = (home / "sandbox" / "requirements.txt").read_text()
    failed = flowloom(
        home,
        "sandbox",
        "install",
        "flowloom-no-such-project",
        "--find-links",
        str(wheelhouse()),
        "--no-index",
    )
    assert failed.returncode == 2
    assert "install failed (the sandbox's packages are unchanged)" in failed.stderr
    assert "flowloom-no-such-project" in failed.stderr  # pip's own words name it
    assert package_env(settings(home)).root == active
    assert (home / "sandbox" / "requirements.txt").read_text() == declared
    assert sorted(p.name for p in (home / "sandbox" / "envs").iterdir()) == [active.name]
