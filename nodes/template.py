"""template: renders a sandboxed Jinja2 template (see :mod:`engine.references`)."""

from __future__ import annotations

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from schemas.nodes import TemplateConfig

__all__ = ["TemplateNode"]


class TemplateNode(NodeExecutor[TemplateConfig], kind="template"):
    """Binds ``variables`` by name, then renders ``template``; output ``output`` (string)."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        values = ctx.bind(self.config.variables)
        return NodeResult({"output": ctx.render(self.config.template, field="config.template", extra=values)})
