"""knowledge_retrieval: search the tenant's datasets for the question.

The node renders ``question`` (and resolves ``queries``, an array of extra phrasings such
as a query extension node's output), searches through ``ctx.deps.knowledge`` (the
run's :class:`~engine.knowledge.ports.KnowledgeSearch`, tenant ``ctx.state.tenant_id``)
and outputs ``chunks``, ``quote``, ``queries`` and ``usage`` (see
:class:`~schemas.nodes_knowledge.KnowledgeRetrievalConfig`). The search's usage
(embedding, rerank and relevance-pass tokens and their cost) counts in the node run's
usage like a model call's; ``data.retrieval`` keeps the passes, the notes and the hit
count, and each note is also a ``node_warning`` (``retrieval_degraded``) so a search
that fell back (no index, no vectors) is visible where the run is watched.

Errors (a failed node run naming the node and field): no knowledge service in this
deployment (``knowledge_unavailable``), a dataset id the tenant does not have
(``unknown_dataset``), a ``rerank.model`` that is not a rerank model or a ``rerank.llm``
that is not a chat model (``unknown_model``, naming that field, before any model call),
an embedding / rerank endpoint that failed (``embedding_failed``), ``queries`` that is
not an array of strings.
"""

from __future__ import annotations

from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.knowledge.ports import DatasetNotFound, EmbeddingError
from engine.knowledge.retrieval import InvalidRerank
from schemas.knowledge import SearchHit, SearchResult
from schemas.node_records import RelevancePass, RetrievalRecord
from schemas.nodes_knowledge import DatasetSearchOptions, KnowledgeRetrievalConfig
from schemas.run import Usage

from ..llm.chat import add_usage, render_text, warn

__all__ = ["KnowledgeRetrievalNode", "chunk_output", "search_datasets", "search_usage"]


def chunk_output(hit: SearchHit) -> dict[str, Any]:
    """One item of the ``chunks`` output (:data:`~schemas.nodes_knowledge.CHUNK_FIELDS`)."""
    return {
        "citation_id": hit.citation_id,
        "text": hit.text,
        "score": hit.score,
        "scores": dict(hit.scores),
        "dataset_id": hit.dataset_id,
        "document_id": hit.document_id,
        "chunk_id": hit.chunk_id,
        "source_name": hit.source_name,
        "position": hit.position,
        "heading_path": list(hit.heading_path),
        "metadata": dict(hit.metadata),
    }


def search_usage(result: SearchResult) -> Usage | None:
    """The search's model usage as a node usage record (None when it called no model).
    Embedding and rerank tokens count as input tokens; the relevance pass's in and out."""
    tokens_in = result.embedding_tokens + result.rerank_tokens + result.llm_tokens_in
    if not tokens_in and not result.llm_tokens_out and not result.cost:
        return None
    calls = (
        (1 if result.embedding_tokens else 0)
        + (1 if result.rerank_tokens else 0)
        + (1 if result.llm_tokens_in else 0)
    )
    return Usage(
        model=None, tokens_in=tokens_in, tokens_out=result.llm_tokens_out, cost=result.cost, calls=calls
    )


async def search_datasets(
    ctx: NodeContext,
    options: DatasetSearchOptions,
    query: str,
    queries: list[str] | None = None,
    *,
    field: str = "config.datasets",
) -> SearchResult:
    """Search with ``options`` for this run's tenant; the usage is added to the node run.

    ``field``: the path of the datasets (``config.datasets``) or of the options
    (``config.dataset_tools[0]``); rerank mistakes name the rerank field beside it.

    Raises:
        NodeFailed: no knowledge service, an unknown dataset, a rerank or relevance model
            of the wrong type, a failed embedding or rerank endpoint (the message names
            the node and the field).
    """
    knowledge = ctx.deps.knowledge
    if knowledge is None:
        raise NodeFailed(
            f"{field}: knowledge bases are not available in this deployment (no knowledge service is "
            "configured), so datasets cannot be searched",
            node_id=ctx.node_id,
            reason="knowledge_unavailable",
        )
    prefix = field[: -len("datasets")] if field.endswith(".datasets") else f"{field}."
    request = options.search_request(query, queries)
    rerank = request.rerank
    relevance_model = rerank.llm if rerank is not None else None
    if relevance_model:
        _check_relevance_model(ctx, relevance_model, f"{prefix}rerank.llm")
    if (
        rerank is not None and relevance_model
    ):  # run here, with the run's registry, cancel token and usage record
        request.rerank = rerank.model_copy(update={"llm": None}) if rerank.model else None
    try:
        result = await knowledge.search(ctx.state.tenant_id, request)
    except DatasetNotFound as exc:
        raise NodeFailed(
            f"{field}: {exc} (datasets searched: {', '.join(request.dataset_ids)})",
            node_id=ctx.node_id,
            reason="unknown_dataset",
        ) from None
    except InvalidRerank as exc:  # its message starts with the field under the options
        raise NodeFailed(f"{prefix}{exc}", node_id=ctx.node_id, reason="unknown_model") from None
    except EmbeddingError as exc:
        raise NodeFailed(
            f"{field}: the search could not embed or rerank the query: {exc}",
            node_id=ctx.node_id,
            reason="embedding_failed",
        ) from None
    usage = search_usage(result)
    if usage is not None:
        add_usage(ctx, usage)
    if relevance_model and result.hits:
        await _relevance_pass(ctx, relevance_model, query or (queries or [""])[0], result)
    return result


def _check_relevance_model(ctx: NodeContext, model: str, path: str) -> None:
    """NodeFailed (``unknown_model`` at ``path``) unless ``model`` is a chat model of the
    run's registry: checked before the search spends an embedding call."""
    from ..llm.chat import registry_of
    from .relevance import LLMRelevanceJudge

    problem = LLMRelevanceJudge(registry_of(ctx)).model_problem(model)
    if problem:
        raise NodeFailed(f"{path}: {problem}", node_id=ctx.node_id, reason="unknown_model")


async def _relevance_pass(ctx: NodeContext, model: str, question: str, result: SearchResult) -> None:
    """Keep the hits a chat model judges relevant (:class:`~nodes.knowledge.relevance.LLMRelevanceJudge`),
    in their order; citation ids and the quote are made again for those kept."""
    from engine.knowledge.retrieval import MAX_JUDGE_CANDIDATES, format_quote

    from ..llm.chat import registry_of
    from .relevance import LLMRelevanceJudge

    judge = LLMRelevanceJudge(registry_of(ctx), cancel=ctx.cancel, node_id=ctx.node_id)
    candidates = result.hits[:MAX_JUDGE_CANDIDATES]
    keep, usage = await judge.select(model, question, [h.text for h in candidates])
    add_usage(
        ctx,
        Usage(
            model=model,
            tokens_in=int(usage["tokens_in"]),
            tokens_out=int(usage["tokens_out"]),
            cost=float(usage["cost"]),
            calls=1,
        ),
    )
    kept = [h for i, h in enumerate(candidates) if i in set(keep)]
    ctx.node_run.data.setdefault("relevance", []).append(
        RelevancePass(model=model, kept=len(kept), of=len(result.hits))
    )
    for n, hit in enumerate(kept, start=1):
        hit.citation_id = str(n)
    result.hits, result.quote = kept, format_quote(kept)


def _queries(ctx: NodeContext, cfg: KnowledgeRetrievalConfig) -> list[str]:
    if cfg.queries is None:
        return []
    value = ctx.resolve(cfg.queries, record_as="queries")
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
        raise NodeFailed(
            f"config.queries: {cfg.queries.ref} must be an array of strings, got {type(value).__name__}",
            node_id=ctx.node_id,
        )
    return value


class KnowledgeRetrievalNode(NodeExecutor[KnowledgeRetrievalConfig], kind="knowledge_retrieval"):
    """Searches datasets for the question (module docstring)."""

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg = self.config
        query = render_text(ctx, cfg.question, "question").strip()
        queries = _queries(ctx, cfg)
        result = await search_datasets(ctx, cfg, query, queries)
        ctx.node_run.data["retrieval"] = RetrievalRecord(
            passes=result.passes, notes=result.notes, hits=len(result.hits), mode=result.mode.value
        )
        for note in result.notes:
            warn(ctx, "retrieval_degraded", note)
        usage = ctx.node_run.usage
        return NodeResult(
            {
                "chunks": [chunk_output(h) for h in result.hits],
                "quote": result.quote,
                "queries": result.queries,
                "usage": usage.model_dump() if usage is not None else None,
            }
        )
