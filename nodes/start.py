"""start / end / answer: the entry, the declared outputs and the streamed answer."""

from __future__ import annotations

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from schemas.nodes import AnswerConfig, EndConfig, StartConfig

__all__ = ["AnswerNode", "EndNode", "StartNode"]


class StartNode(NodeExecutor[StartConfig], kind="start"):
    """Outputs the run's global inputs (already validated by ``new_run_state``)."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        outputs = dict(ctx.state.inputs)
        ctx.node_run.inputs.update(outputs)
        return NodeResult(outputs)


class EndNode(NodeExecutor[EndConfig], kind="end"):
    """Resolves its bindings into the workflow's outputs (``run.outputs``)."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        return NodeResult(ctx.bind(self.config.outputs_), handles=())


class AnswerNode(NodeExecutor[AnswerConfig], kind="answer"):
    """Renders its template into ``answer``. The engine's answer stream sends it to the
    user (engine/answers.py: the template's parts as soon as they are known, LLM tokens
    live), so the node itself sends nothing."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        return NodeResult({"answer": ctx.render(self.config.text, field="config.text")})
