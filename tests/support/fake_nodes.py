"""Test-only node kinds: a probe that can sleep, fail a number of times, or take a handle.

Added to the built-in catalog in :data:`tests.support.catalog.TEST_CATALOG`, so they
run through the real compiler and scheduler.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import Field

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from schemas.nodes import NodeConfig, node_kind
from schemas.types import VarType
from schemas.values import Value

__all__ = ["CALLS", "ProbeConfig", "ProbeNode"]

#: node id -> number of attempts started, across runs (reset by tests)
CALLS: dict[str, int] = {}

@node_kind("probe", "Test probe")
class ProbeConfig(NodeConfig):
    """sleep (s, asyncio) / block (s, time.sleep in a thread) / fail_times / value / handles."""

    sleep: float = 0.0
    block: float = 0.0
    fail_times: int = 0
    value: Value = None
    handles_: list[str] = Field(default_factory=lambda: ["out"], alias="handles")
    take: list[str] | None = None
    error: str = "probe failure"
    swallow_cancel: bool = False

    def handles(self) -> list[str]:
        return list(self.handles_)

    def outputs(self, workflow: Any) -> dict[str, VarType]:
        return {"value": VarType.any, "attempt": VarType.number}



class ProbeNode(NodeExecutor[ProbeConfig], kind="probe"):
    async def run(self, ctx: NodeContext) -> NodeResult:
        CALLS[ctx.node_id] = CALLS.get(ctx.node_id, 0) + 1
        cfg = self.config
        if cfg.sleep:
            if cfg.swallow_cancel:
                try:
                    await asyncio.sleep(cfg.sleep)
                except Exception:
                    pass
            else:
                await asyncio.sleep(cfg.sleep)
        if cfg.block:
            await ctx.run_blocking(time.sleep, cfg.block)
        if ctx.node_run.attempts <= cfg.fail_times:
            raise NodeFailed(f"{cfg.error} (attempt {ctx.node_run.attempts})", node_id=ctx.node_id)
        value = ctx.resolve(cfg.value, record_as="value")
        return NodeResult({"value": value, "attempt": ctx.node_run.attempts},
                          handles=tuple(cfg.take if cfg.take is not None else cfg.handles_[:1]))
