"""Fixtures for the LLM node tests: the scripted OpenAI server, its registry, a memory
store and ``llm_run`` - compile a workflow against that registry and run it through
the real engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import nodes.llm.chat
import nodes.llm.classify
import nodes.llm.extract
import nodes.llm.query_extension  # noqa: F401
from engine import RunDeps, run_workflow
from schemas.run import RunState
from tests.support.catalog import compile_workflow
from tests.support.openai_server import openai_server, scripted_registry  # noqa: F401  (fixtures)
from workers.memory import FileNodeMemory

LLMRun = Callable[..., Awaitable[tuple[RunState, list[Any]]]]


@pytest.fixture
def node_memory(tmp_path) -> FileNodeMemory:
    """An embedded store in the test's temporary directory."""
    return FileNodeMemory(tmp_path / "memory")


@pytest.fixture
def llm_run(scripted_registry, node_memory) -> LLMRun:
    """``await llm_run(doc, inputs, memory=..., **sys)`` -> (final state, events)."""

    async def run(doc: dict[str, Any], inputs: dict[str, Any] | None = None, *, memory: Any = None,
                  catalog: Any = None, **sys: Any) -> tuple[RunState, list[Any]]:
        events: list[Any] = []
        plan = compile_workflow(doc, models=scripted_registry, catalog=catalog)
        deps = RunDeps(on_event=events.append, models=scripted_registry,
                       memory=memory if memory is not None else node_memory)
        state = await run_workflow(plan, inputs or {}, deps=deps, **sys)
        return state, events

    return run
