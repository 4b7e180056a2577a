"""Shared helpers of the importer tests: where the corpus is, importing, running.

The corpus (real FastGPT templates and Dify DSL files, read-only test data) lives next
to the repository in ``../shared/corpus`` (``FLOWLOOM_IMPORT_CORPUS`` overrides it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine import RunDeps, run_workflow
from engine.environment import MemorySecrets
from nodes.importers import ImportResult
from schemas.run import RunState
from tests.support.catalog import compile_workflow, import_workflow
from workers.memory import FileNodeMemory

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("FLOWLOOM_IMPORT_CORPUS") or ROOT.parent / "shared" / "corpus")
FASTGPT = CORPUS / "fastgpt"
DIFY = CORPUS / "dify"

_MISSING = (f"corpus not found at {CORPUS}: the workplace lays shared/ beside the checkout "
            "(set FLOWLOOM_IMPORT_CORPUS to use another copy)")


#: Marks tests that read the corpus; a missing corpus fails them (tests/importers/conftest.py),
#: never a silent skip.
needs_corpus = pytest.mark.usefixtures("require_corpus")


def require_corpus_or_fail() -> None:
    """Fail the current test when the corpus is missing."""
    if not CORPUS.is_dir():
        pytest.fail(_MISSING)


def corpus_files() -> list[Path]:
    """Every importable file of the corpus (notes excluded).

    Raises:
        FileNotFoundError: no corpus (collection then fails loudly instead of skipping).
    """
    if not CORPUS.is_dir():
        raise FileNotFoundError(_MISSING)
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".json", ".yml", ".yaml"))


def load(path: Path, **kw: Any) -> ImportResult:
    return import_workflow(path.read_bytes(), **kw)


def load_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


async def run(result: ImportResult | dict[str, Any], inputs: dict[str, Any] | None = None, *, registry: Any = None,
              tmp_path: Path | None = None, settings: Any = None, knowledge: Any = None,
              secrets: dict[str, str] | None = None, **sys: Any) -> tuple[RunState, list[Any]]:
    """Compile the imported workflow (against ``registry``) and run it through the real engine
    (``knowledge``: the run's knowledge search, for imported knowledge-base searches;
    ``secrets``: values of its secret environment variables)."""
    doc = result.workflow if isinstance(result, ImportResult) else result
    events: list[Any] = []
    plan = compile_workflow(doc, models=registry, use_cache=False)
    deps: dict[str, Any] = {"on_event": events.append, "models": registry}
    if tmp_path is not None:
        deps["memory"] = FileNodeMemory(tmp_path / "memory")
    if settings is not None:
        deps["settings"] = settings
    if knowledge is not None:
        deps["knowledge"] = knowledge
    if secrets:
        store = MemorySecrets()
        await store.set_secrets("default", plan.workflow.id, secrets)
        deps["secrets"] = store
    state = await run_workflow(plan, inputs or {}, deps=RunDeps(**deps), **sys)
    return state, events


def statuses(state: RunState) -> dict[str, str]:
    """node id -> status of the latest run of each node."""
    return {nid: run.status.value for nid, run in state.node_runs.items()}


def answers(events: list[Any]) -> str:
    """The streamed answer text (answer channel) in order."""
    return "".join(e.text for e in events if e.type == "node_delta" and e.channel == "answer")
