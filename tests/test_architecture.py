"""The direction of dependencies: schemas <- engine <- nodes, workers, api <- drivers.

The engine defines the contracts (node protocol, catalog, storage ports) and must run
with nothing of ``nodes``, ``workers`` or ``api`` loaded; and every module imports on
its own in a fresh interpreter (no module relies on another being imported first).
"""

from __future__ import annotations

import json
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


#: Run in one interpreter: load the third-party libraries the project imports (so each
#: child's work is the project's own imports), then import each project module named on
#: stdin first, in a forked child with none of the project loaded, two children at a
#: time; print one JSON line per module: ``[module, exit code, the end of its traceback]``
#: (exit code -9 and "timed out" for a child that took over two minutes: a hang is a fault).
IMPORT_EACH_FIRST = r"""
import ast, importlib, json, os, pathlib, signal, sys, tempfile, time, traceback
root, packages = pathlib.Path.cwd(), set(sys.argv[1:])
third_party = set()
for package in packages:
    for path in (root / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            third_party.update(n for n in names if n.split(".")[0] not in packages)
for name in sorted(third_party):
    try:
        importlib.import_module(name)
    except Exception:
        pass  # an optional library: the child meets it as the module does
assert not [m for m in sys.modules if m.split(".")[0] in packages], "a library imported the project"
todo, running, out = sys.stdin.read().split(), {}, pathlib.Path(tempfile.mkdtemp())
def start(module):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            importlib.import_module(module)
        except BaseException:
            code = 1
            (out / module).write_text(traceback.format_exc()[-2000:])
        os._exit(code)
    running[pid] = (module, time.monotonic() + 120)
while todo or running:
    while todo and len(running) < 2:
        start(todo.pop(0))
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
        for late, (module, deadline) in list(running.items()):
            if time.monotonic() > deadline:
                os.kill(late, signal.SIGKILL)
                os.waitpid(late, 0)
                del running[late]
                print(json.dumps([module, -9, "timed out"]), flush=True)
        time.sleep(0.01)
        continue
    module, _ = running.pop(pid)
    err = out / module
    print(json.dumps([module, os.waitstatus_to_exitcode(status), err.read_text() if err.exists() else ""]), flush=True)
"""


@pytest.mark.timeout(480)  # ~250 imports in forked children: well under a minute on a quiet 2-core machine
def test_every_module_imports_first_in_a_fresh_interpreter():
    """No import cycle hides behind an order that happens to work: every module of the
    five packages imports with nothing of the project loaded before it."""
    modules = _modules()
    assert len(modules) > 40
    result = subprocess.run([sys.executable, "-c", IMPORT_EACH_FIRST, *PACKAGES], input="\n".join(modules),
                            capture_output=True, text=True, cwd=ROOT, timeout=420)
    assert result.returncode == 0, result.stderr[-4000:]
    outcomes = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(m for m, _code, _err in outcomes) == sorted(modules), "every module was tried"
    failures = [(m, err) for m, code, err in outcomes if code != 0]
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


#: the longest a module may grow: past it, a module holds more than one concern and is
#: split by concern (the style the project keeps)
MAX_MODULE_LINES = 800


def test_no_module_is_over_the_line_cap():
    roots = [ROOT / name for name in (*PACKAGES, "tests", "bench")]
    long = sorted(
        f"{path.relative_to(ROOT)}: {lines} lines"
        for root in roots
        for path in root.rglob("*.py")
        if "migrations" not in path.parts
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    )
    assert not long, f"split these by concern (at most {MAX_MODULE_LINES} lines a module):\n" + "\n".join(long)
