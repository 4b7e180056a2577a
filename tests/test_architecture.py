"""The direction of dependencies: schemas <- engine <- nodes, workers, api <- drivers.

The engine defines the contracts (node protocol, catalog, storage ports) and must run
with nothing of ``nodes``, ``workers`` or ``api`` loaded; and every module imports on
its own in a fresh interpreter (no module relies on another being imported first).
"""

from __future__ import annotations

import concurrent.futures
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "engine", "nodes", "workers", "api")

ENGINE_ONLY = r"""
import sys
from typing import Any

import engine
from engine import KindSpec, NodeCatalog, NodeExecutor, NodeResult, run_workflow, compile_workflow
from schemas.nodes import AnswerConfig, StartConfig, TemplateConfig

class Start(NodeExecutor[StartConfig]):
    async def run(self, ctx: Any) -> NodeResult:
        return NodeResult(dict(ctx.state.inputs))

class Template(NodeExecutor[TemplateConfig]):
    async def run(self, ctx: Any) -> NodeResult:
        return NodeResult({"output": ctx.render(self.config.template)})

class Answer(NodeExecutor[AnswerConfig]):
    async def run(self, ctx: Any) -> NodeResult:
        return NodeResult({"answer": ctx.render(self.config.text, field="text")})

catalog = NodeCatalog.of(KindSpec("start", StartConfig, Start, entry=True),
                         KindSpec("template", TemplateConfig, Template),
                         KindSpec("answer", AnswerConfig, Answer, collects="answer"))
doc = {"id": "wf", "inputs": [{"name": "name"}], "nodes": [
    {"id": "start", "type": "start"},
    {"id": "t", "type": "template", "config": {"template": "Hello {{ inputs.name }}"}},
    {"id": "a", "type": "answer", "config": {"text": "{{ t.output }}!"}}],
    "edges": [{"id": "e1", "source": "start", "target": "t"}, {"id": "e2", "source": "t", "target": "a"}]}
plan = compile_workflow(doc, catalog=catalog)
import asyncio
state = asyncio.run(run_workflow(plan, {"name": "Ada"}))
assert state.answer == "Hello Ada!", state.answer
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("nodes", "workers", "api"))
print(loaded)
"""


def test_the_engine_compiles_and_runs_with_no_module_of_nodes_workers_or_api_loaded():
    result = subprocess.run([sys.executable, "-c", ENGINE_ONLY], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"the engine loaded {result.stdout.strip()}"


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        if not (ROOT / package / "__init__.py").exists():
            continue
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if ".migrations." in info.name or info.name.endswith((".migrations", ".__main__")):
                continue  # Alembic scripts run inside Alembic's environment, not imported
            names.append(info.name)
    return names


def _import_alone(module: str) -> tuple[str, int, str]:
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=ROOT)
    return module, result.returncode, result.stderr[-2000:]


@pytest.mark.timeout(480)  # one interpreter per module (~170 of them) on a 2-core machine
def test_every_module_imports_first_in_a_fresh_interpreter():
    modules = _modules()
    assert len(modules) > 40
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        failures = [(m, err) for m, code, err in pool.map(_import_alone, modules) if code != 0]
    assert not failures, "\n\n".join(f"{m}:\n{err}" for m, err in failures)


@pytest.mark.parametrize("package,forbidden", [("engine", ("nodes", "workers", "api")), ("schemas", ("engine", "nodes", "workers", "api")),
                                                ("nodes", ("workers", "api")), ("workers", ("nodes", "api"))])
def test_no_module_imports_against_the_direction(package, forbidden):
    """Statically: no import statement (deferred ones included) points up the layers."""
    import ast

    offenders = []
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] in forbidden]
    assert not offenders, "\n".join(offenders)


#: A citation of a design document ("seed 000 §3.1", "seed 001", "issue 5"): readers of the
#: code and of the JSON Schema have neither, so rules are said in words instead.
DESIGN_CITATION = re.compile(r"seed 0|seeds? [0-9]{3}|[Ii]ssue [0-9]|§")


def test_no_code_or_schema_text_cites_a_design_document():
    import json

    from nodes import builtin_catalog

    offenders = []
    for package in ("engine", "nodes", "schemas", "workers", "api", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DESIGN_CITATION.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    schema = json.dumps(builtin_catalog().json_schema(), ensure_ascii=False)
    assert [m.group(0) for m in DESIGN_CITATION.finditer(schema)] == []
