"""unsupported: the placeholder an importer leaves for a node it could not convert.

Config: :class:`~schemas.nodes_flow.UnsupportedConfig`. It always fails - a partial import
(``flowloom import --allow-partial``) never pretends to do the original node's work.
"""

from __future__ import annotations

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from schemas.nodes_flow import UnsupportedConfig

__all__ = ["UnsupportedNode"]


class UnsupportedNode(NodeExecutor[UnsupportedConfig], kind="unsupported"):
    """Raises :class:`~engine.errors.NodeFailed` (reason ``unsupported_node``) naming the original node."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg = self.config
        raise NodeFailed(
            f"node {ctx.node_id!r} is a placeholder for an imported {cfg.original_type!r} node that was not "
            f"converted: {cfg.reason}",
            node_id=ctx.node_id,
            reason="unsupported_node",
        )
