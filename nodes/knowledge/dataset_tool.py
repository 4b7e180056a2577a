"""The agents' dataset tool: a search of the tenant's datasets the model calls with a query.

The model fills ``{"query": "..."}``; the tool searches with the tool's options
(:class:`~schemas.nodes_agent.DatasetTool`, the knowledge retrieval node's options),
runs the relevance pass when ``relevance_model`` is set, and answers the numbered quote
with sources (the loop truncates and fences it like every tool result: it is data, not
instructions). No chunk found is an answer too ("nothing found"), not an error. The
search's usage is added to the node run's usage and its cost is the tool's cost; the
trace keeps the chunks' citation ids, chunk ids and scores. A search that cannot run
(no knowledge service, an unknown dataset, a failed embedding endpoint) is a failed
tool call the model is told about, naming ``config.dataset_tools[i]``.
"""

from __future__ import annotations

from typing import Any

from engine.context import NodeContext
from engine.errors import NodeFailed
from schemas.knowledge import RerankSettings
from schemas.nodes_agent import DatasetTool

from ..agent.loop_types import ToolCallContext, ToolOutcome, ToolSpec
from .retrieval_node import search_datasets

__all__ = ["NOTHING_FOUND", "dataset_tool_spec"]

NOTHING_FOUND = "No passages of the knowledge base match this query."

_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look up, as a full question or keywords"}
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _options(tool: DatasetTool) -> DatasetTool:
    """The tool's search options with the relevance pass as the request's ``rerank.llm``."""
    if not tool.relevance_model:
        return tool
    rerank = (tool.rerank or RerankSettings()).model_copy(update={"llm": tool.relevance_model})
    return tool.model_copy(update={"rerank": rerank})


def dataset_tool_spec(
    ctx: NodeContext, tool: DatasetTool, index: int, default_timeout: float | None
) -> ToolSpec:
    """The :class:`ToolSpec` of ``tool`` (module docstring), risk ``read``."""
    options = _options(tool)
    field = f"config.dataset_tools[{index}]"

    async def run(args: dict[str, Any], call: ToolCallContext) -> ToolOutcome:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolOutcome(f"{tool.name}: query must be a non-empty string", is_error=True)
        before = ctx.node_run.usage.cost if ctx.node_run.usage is not None else 0.0
        try:
            result = await search_datasets(ctx, options, query.strip(), field=field)
        except NodeFailed as exc:  # reported to the model like any failed tool (and kept in the trace)
            return ToolOutcome(f"{tool.name}: {exc}", is_error=True, data={"reason": exc.reason})
        cost = (ctx.node_run.usage.cost if ctx.node_run.usage is not None else 0.0) - before
        data = {
            "query": query.strip(),
            "notes": result.notes,
            "hits": [
                {
                    "citation_id": h.citation_id,
                    "chunk_id": h.chunk_id,
                    "score": h.score,
                    "source_name": h.source_name,
                }
                for h in result.hits
            ],
        }
        return ToolOutcome(result.quote or NOTHING_FOUND, cost=cost, data=data)

    description = tool.description or (
        f"Search the knowledge base ({', '.join(tool.datasets)}) for passages "
        "relevant to a query; returns numbered passages with their sources."
    )
    return ToolSpec(
        tool.name,
        description,
        _PARAMETERS,
        run,
        risk="read",
        timeout=tool.timeout or default_timeout,
        meta={"kind": "dataset", "datasets": list(tool.datasets)},
    )
