"""What a knowledge search is asked: the datasets, the query, the recall mode and how
hybrid results merge, metadata filters and reranking.

Apart from :mod:`schemas.knowledge` (which re-exports every name here) because the node
configs that take search options - the knowledge retrieval node and the agents' dataset
tool (:mod:`schemas.nodes_knowledge`) - need only these: validating a workflow with an
agent then does not create the dataset, document, chunk and result models as well
(about 2.5 % of ``flowloom validate``'s instructions for such a workflow).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FusionMode", "MetadataFilter", "RerankSettings", "SearchMode", "SearchRequest"]


class SearchMode(StrEnum):
    semantic = "semantic"
    full_text = "full_text"
    hybrid = "hybrid"


class FusionMode(StrEnum):
    """How hybrid search merges its recall lists: reciprocal rank fusion (FastGPT) or a
    weighted sum of normalised scores (Dify)."""

    rrf = "rrf"
    weighted = "weighted"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetadataFilter(_Model):
    """One condition on a document's metadata; a search's filters all hold (AND)."""

    field: str = Field(min_length=1, max_length=64)
    op: Literal["eq", "ne", "in", "contains", "gt", "gte", "lt", "lte", "exists"] = "eq"
    value: Any = None


class RerankSettings(_Model):
    """Reorder the merged hits: with a rerank ``model`` of the registry (an OpenAI-,
    Jina- or Cohere-style ``/v1/rerank`` endpoint), or ``llm``: a chat model that keeps
    only the chunks relevant to the question."""

    model: str | None = Field(default=None, max_length=200)
    llm: str | None = Field(default=None, max_length=200, description="chat model of the relevance pass")
    top_n: int | None = Field(default=None, ge=1, le=200)


class SearchRequest(_Model):
    """A search over one or more datasets of a tenant. ``queries``: several phrasings
    (the query extension node's output) searched together, merged, duplicates removed."""

    dataset_ids: list[str] = Field(min_length=1, max_length=32)
    query: str = Field(default="", max_length=20_000)
    queries: list[str] = Field(default_factory=list, max_length=32)
    mode: SearchMode = SearchMode.hybrid
    fusion: FusionMode = FusionMode.rrf
    semantic_weight: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="weighted fusion: the semantic share (full text gets the rest)",
    )
    top_k: int = Field(default=5, ge=1, le=200)
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    max_quote_tokens: int = Field(
        default=3000, ge=0, le=200_000, description="the quotes' token budget; 0: none"
    )
    rerank: RerankSettings | None = None
    filters: list[MetadataFilter] = Field(default_factory=list, max_length=32)

    def all_queries(self) -> list[str]:
        """The distinct non-empty queries, the main one first."""
        seen: list[str] = []
        for q in [self.query, *self.queries]:
            q = (q or "").strip()
            if q and q not in seen:
                seen.append(q)
        return seen
