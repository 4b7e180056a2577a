"""Fixtures for the agent loop tests: a hand-made NodeContext over the scripted server's
registry (the kernel needs no workflow), and helpers to script tool calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from engine.context import CancelToken, NodeContext, RunDeps
from schemas.run import NodeRun, RunState
from tests.support.openai_server import (  # noqa: F401
    Finish,
    Reply,
    Text,
    ToolDelta,
    Usage,
    openai_server,
    scripted_registry,
)


def make_ctx(registry: Any, *, node_id: str = "agent", events: list[Any] | None = None,
             cancel: CancelToken | None = None) -> NodeContext:
    """A NodeContext for kernel tests: node ``node_id``, an empty run state, ``registry`` as models."""
    sink = events if events is not None else []

    def emit(cls: Any, **fields: Any) -> None:
        sink.append(cls(seq=len(sink) + 1, run_id="run", ts=0.0, **fields))

    node = SimpleNamespace(id=node_id, type="agent_test", description="")
    state = RunState(run_id="run", workflow_id="wf", workflow_hash="h")
    run = NodeRun(id=f"run:{node_id}", node_id=node_id, kind="agent_test")
    state.node_runs[node_id] = run
    return NodeContext(node, None, state, RunDeps(models=registry, on_event=sink.append), cancel or CancelToken(),  # type: ignore[arg-type]
                       run, emit, None, None)


@pytest.fixture
def ctx_factory(scripted_registry) -> Callable[..., NodeContext]:
    return lambda **kw: make_ctx(scripted_registry, **kw)


def calls_reply(*calls: tuple[str, str, Any], text: str = "", usage: tuple[int, int] = (20, 10)) -> Reply:
    """One reply asking for ``calls`` ``(id, name, arguments)``; arguments: dict (JSON-encoded) or raw str."""
    steps: list[Any] = [Text(text)] if text else []
    for i, (cid, name, args) in enumerate(calls):
        raw = args if isinstance(args, str) else json.dumps(args)
        steps.append(ToolDelta(i, cid, name, raw))
    steps += [Finish("tool_calls"), Usage(*usage)]
    return Reply(steps)


def answer_reply(answer: str, *, usage: tuple[int, int] = (30, 5), finish: str = "stop") -> Reply:
    return Reply([Text(answer), Finish(finish), Usage(*usage)])
