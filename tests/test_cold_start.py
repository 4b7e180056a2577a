"""Import discipline of the command line: each command loads what it uses and nothing more.

Start-up time is what a ``flowloom`` command costs before it does anything, and most of
it is imports (``bench/startup.py`` measures it; timing is never asserted in tests, it
is too noisy). What is asserted here is the cause: after a command ran in a fresh
interpreter, the heavy packages it does not use are absent from ``sys.modules``.

- ``flowloom validate``: compiles (pydantic, networkx, jinja2, the settings) but needs
  no HTTP stack, no SDK, no database, no queue and no run-time models; for a workflow
  without LLM, agent, code or knowledge nodes, none of those kinds' config models either
  (the catalog names them by import path).
- ``flowloom run`` on a database already at the newest migration: the SQLite store and
  the engine, but not Alembic (nor Mako and Pygments behind it), not PostgreSQL's
  dialect, not the HTTP server, and no SDK for a workflow without LLM nodes.
- ``flowloom --help``: the command-line framework only.

``main`` imports only the module of the invoked command (all of them for ``--help`` or
an unknown name), hands Typer only that command, pauses the cyclic GC while a command
starts (ended before a run), and freezes what is alive as the process exits (the
interpreter's shutdown collections then skip it): what the user sees must not change.

Also here: the head revision the store reads without Alembic matches Alembic's, so an
up-to-date database is recognized and an older one is still upgraded.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Runs the CLI in-process with the given arguments, then prints the loaded modules
#: (as JSON, on the last line of stdout) and the exit code.
PROBE = r"""
import gc, json, sys
import api.cli
sys.argv = ["flowloom", *json.loads(sys.argv[1])]
code = 0
try:
    api.cli.main()
except SystemExit as exc:
    code = exc.code or 0
sys.stdout.flush()
print("\n" + json.dumps({"code": code, "modules": sorted(sys.modules), "gc_enabled": gc.isenabled(),
                        "frozen": gc.get_freeze_count()}))
"""

#: Not needed by any of the three commands checked here (the HTTP server, the SDKs, the
#: queue, the MCP client, Redis).
NEVER = ("fastapi", "starlette", "uvicorn", "openai", "httpx", "redis", "rq", "mcp", "multipart")
#: Alembic and what it pulls in (its templates and their highlighting).
MIGRATIONS = ("alembic", "mako", "pygments")
#: The run-time side of the engine and its records: a run needs them, a check does not.
RUN_TIME = ("engine.runner", "engine.scheduler", "engine.context", "engine.service", "engine.ports",
            "schemas.events", "schemas.run", "schemas.records")
#: The config models of the kinds that call models, tools or code, and the knowledge
#: models behind them: built only when a workflow has such a node.
MODEL_KINDS = ("schemas.nodes_llm", "schemas.nodes_agent", "schemas.nodes_agent_tools", "schemas.nodes_knowledge",
               "schemas.nodes_code", "schemas.knowledge", "schemas.knowledge_search", "schemas.nodes_llm_base")
#: The config models of the plumbing kinds other than start, end, answer and template.
FLOW_KINDS = ("schemas.nodes_flow",)
#: The stores.
KNOWLEDGE = ("workers.knowledge", "sqlean", "sqlite_vec", "usearch", "numpy", "engine.knowledge.service")
STORAGE = ("sqlalchemy", "sqlmodel", "aiosqlite", "asyncpg", "workers")


def _report(*args: str) -> dict:
    """``{code, modules, gc_enabled, frozen}`` and ``output`` after ``flowloom ARGS`` ran in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True,
                            cwd=ROOT, env=os.environ.copy(), timeout=120)
    assert result.stdout.strip(), result.stderr
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "output": result.stdout + result.stderr}


def _loaded_after(*args: str) -> tuple[int, set[str], str]:
    """(exit code, loaded module names, output) of ``flowloom ARGS`` in a fresh interpreter."""
    report = _report(*args)
    return report["code"], set(report["modules"]), report["output"]


def _present(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The names of ``packages`` loaded (a package counts when any of its modules is)."""
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


def test_validate_loads_the_compiler_but_no_server_sdk_store_or_run_time_model():
    report = _report("validate", "examples/hello.json")
    code, modules, output = report["code"], set(report["modules"]), report["output"]
    assert code == 0, output
    assert report["gc_enabled"] is True and report["frozen"] == 0  # the pause ended with the command
    assert "valid workflow 'hello'" in output
    assert {"engine.compiler", "nodes.catalog", "networkx"} <= modules  # it did compile
    assert _present(modules, NEVER + MIGRATIONS + STORAGE + RUN_TIME + MODEL_KINDS + FLOW_KINDS) == []
    assert "nodes.llm.model_probe" not in modules  # probing an endpoint is a command of its own


def test_validating_an_agent_loads_its_config_models_but_not_the_other_kinds_or_the_dataset_models():
    code, modules, output = _loaded_after("validate", "examples/research_agent.json")
    assert code == 0, output
    assert {"schemas.nodes_agent", "schemas.nodes_llm_base", "schemas.knowledge_search"} <= modules
    # the chat/classify/extract configs, the dataset/document/chunk models, the other plumbing kinds
    assert _present(modules, ("schemas.nodes_llm", "schemas.knowledge", "schemas.nodes_code") + FLOW_KINDS) == []


def test_validate_builds_the_config_validators_of_the_kinds_the_workflow_uses_only():
    """Config models are built on first use (``defer_build``): the LLM and agent kinds
    stay unbuilt while a plain workflow is checked, and build when one is used."""
    probe = r"""
import json, sys
from engine.compiler import check_workflow
from nodes import builtin_catalog
from schemas.nodes import TemplateConfig
from schemas.nodes_agent import AgentConfig
from schemas.nodes_llm import ChatConfig
doc = json.load(open("examples/hello.json"))
assert check_workflow(doc, catalog=builtin_catalog(), models=None) == []
before = {c.__name__: c.__pydantic_complete__ for c in (TemplateConfig, ChatConfig, AgentConfig)}
AgentConfig.model_json_schema()
print(json.dumps([before, AgentConfig.__pydantic_complete__]))
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    before, agent_after = json.loads(result.stdout)
    assert before == {"TemplateConfig": True, "ChatConfig": False, "AgentConfig": False}
    assert agent_after is True


def test_help_loads_the_command_line_framework_only():
    code, modules, output = _loaded_after("--help")
    assert code == 0, output
    assert "validate" in output
    assert _present(modules, NEVER + MIGRATIONS + STORAGE + ("networkx", "jinja2", "engine", "nodes", "schemas")) == []


def test_run_on_an_up_to_date_database_skips_alembic():
    first_code, first, output = _loaded_after("run", "examples/hello.json", "--input", "name=Ada")
    assert first_code == 0, output
    assert "alembic" in first  # a new database: the migrations ran
    report = _report("run", "examples/hello.json", "--input", "name=Ada")
    code, modules, output = report["code"], set(report["modules"]), report["output"]
    assert code == 0, output
    # the start-up pause of the GC ended before the run: imports frozen, collection on again
    assert report["gc_enabled"] is True and report["frozen"] > 0
    assert "Hello, Ada!" in output
    assert {"workers.sql.store", "engine.scheduler"} <= modules  # it did run, durably
    assert _present(modules, NEVER + MIGRATIONS + ("sqlalchemy.dialects.postgresql", "asyncpg", "psycopg")) == []
    # the store's tables are Core tables: no pydantic model nor ORM mapper is built for them
    assert "sqlmodel" not in modules
    assert "workers.sql.quotas" not in modules  # the HTTP API's admission and knowledge's usage only
    # a workflow without a knowledge search opens no knowledge store (its SQLite library,
    # numpy and the HNSW index load on a run's first search)
    assert _present(modules, KNOWLEDGE) == []
    assert _present(modules, MODEL_KINDS) == []  # a workflow of plumbing nodes builds no LLM or agent model
    assert _present(modules, FLOW_KINDS) == []  # nor the models of the plumbing kinds it does not use


def test_the_head_read_without_alembic_is_alembics_head():
    from workers.sql.migrate import declared_head, head_revision

    assert declared_head() == head_revision()


def test_a_database_behind_the_head_is_still_upgraded_when_the_store_opens(tmp_path):
    from workers.sql import SqlStore, current_revision, default_database_url, head_revision, upgrade

    url = default_database_url(tmp_path)
    revisions = sorted(p.name.split("_")[0] for p in (ROOT / "workers/sql/migrations/versions").glob("*.py"))
    older = revisions[-2]

    async def scenario() -> tuple[str | None, str | None]:
        await upgrade(url, older)
        before = await current_revision(url)
        store = await SqlStore.open(url)
        await store.close()
        return before, await current_revision(url)

    before, after = asyncio.run(scenario())
    assert (before, after) == (older, head_revision())


@pytest.mark.parametrize("files,expected", [
    ({"a.py": 'revision = "a"\ndown_revision = None\n', "b.py": 'revision: str = "b"\ndown_revision: str | None = "a"\n'},
     "b"),
    ({"a.py": 'revision = "a"\ndown_revision = None\n', "b.py": 'revision = "b"\ndown_revision = "a"\n',
      "c.py": 'revision = "c"\ndown_revision = "a"\n'}, None),  # two heads
    ({"a.py": 'revision = "a"\ndown_revision = None\n', "b.py": 'revision = "b"\ndown_revision = None\n',
      "m.py": 'revision = "m"\ndown_revision = ("a", "b")\n'}, None),  # a merge revision
    ({"a.py": 'revision = make_id()\ndown_revision = None\n'}, None),  # not a literal
    ({}, None),
])
def test_the_head_reader_leaves_any_unusual_shape_to_alembic(tmp_path, monkeypatch, files, expected):
    """A shape the reader does not understand gives None, and the store then asks Alembic:
    reading the head wrong could skip a migration, reading nothing only costs time."""
    from workers.sql import migrate

    (tmp_path / "versions").mkdir()
    for name, text in files.items():
        (tmp_path / "versions" / name).write_text(f'"""A revision."""\n\n{text}', encoding="utf-8")
    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", tmp_path)
    migrate.declared_head.cache_clear()
    try:
        assert migrate.declared_head() == expected
    finally:
        migrate.declared_head.cache_clear()


@pytest.mark.parametrize("argv", [["validate", "examples/hello.json"], ["validate"], ["validate", "--help"],
                                  ["runs", "prune", "--help"], ["valdate", "x"], ["--help"], ["keys", "--bogus"],
                                  ["import", "--help"]])
def test_main_answers_like_the_full_app(argv, capsys, monkeypatch):
    """``main`` hands Typer only the command the first argument names (the others are not
    built); what the user sees, and the exit code, are the full app's."""
    import api.cli

    def outcome(entry) -> tuple[object, str, str]:
        monkeypatch.setattr(sys, "argv", ["flowloom", *argv])
        try:
            entry()
            code: object = 0
        except SystemExit as exc:
            code = exc.code or 0
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    monkeypatch.chdir(ROOT)
    commands, groups = list(api.cli.app.registered_commands), list(api.cli.app.registered_groups)
    frozen = gc.get_freeze_count()
    assert outcome(api.cli.main) == outcome(api.cli.app)
    assert (api.cli.app.registered_commands, api.cli.app.registered_groups) == (commands, groups)
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # the GC pause of start-up ended, nothing frozen


def test_the_command_table_names_the_module_of_every_command():
    """``main`` imports only the module :data:`api.cli.COMMAND_MODULE` names for the first
    argument: every command and group the modules register is in it, with its module."""
    probe = r"""
import json
import api.cli
app = api.cli.app
registered = {api.cli._command_name(c): c.callback.__module__ for c in app.registered_commands}
registered.update({api.cli._group_name(g): g.typer_instance.registered_commands[0].callback.__module__
                   for g in app.registered_groups})
print(json.dumps([registered, api.cli.COMMAND_MODULE, list(api.cli.COMMAND_MODULES)]))
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    registered, table, modules = json.loads(result.stdout)
    assert {name: f"api.cli.{module}" for name, module in table.items()} == registered
    assert set(table.values()) == set(modules)


def test_validate_imports_no_other_command_module():
    code, modules, output = _loaded_after("validate", "examples/hello.json")
    assert code == 0, output
    assert sorted(m for m in modules if m.startswith("api.cli.")) == ["api.cli.common", "api.cli.files",
                                                                       "api.cli.loading"]


def test_a_command_process_freezes_what_is_alive_before_the_interpreter_shuts_down():
    """``main`` registers ``gc.freeze`` with atexit: the interpreter's shutdown collections
    then examine nothing of what the imports made. In the process only: nothing is frozen
    when ``main`` returns (a caller in-process keeps its GC as it was)."""
    probe = r"""
import atexit, gc, sys
atexit.register(lambda: print("at exit, frozen:", gc.get_freeze_count()))  # runs after main's (LIFO)
import api.cli
sys.argv = ["flowloom", "validate", "examples/hello.json"]
try:
    api.cli.main()
except SystemExit:
    pass
print("after main, frozen:", gc.get_freeze_count(), "enabled:", gc.isenabled())
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "after main, frozen: 0 enabled: True" in lines
    frozen_at_exit = int(lines[-1].removeprefix("at exit, frozen: "))
    assert frozen_at_exit > 10_000  # the modules' objects (about 100 000 for validate); without it, 0
