"""Config of the ``knowledge_retrieval`` node kind and the search options it shares with
the agents' dataset tool.

Behaviour lives in ``nodes/knowledge/retrieval_node.py`` (the node) and
``engine/knowledge/retrieval.py`` (the ranking). What the compiler checks here: the
query template, the references (``query`` a string, ``queries`` an array), the rerank
and relevance models (registry names).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from .knowledge_search import FusionMode, MetadataFilter, RerankSettings, SearchMode, SearchRequest
from .nodes import NodeConfig, node_kind
from .nodes_llm_base import TextValue
from .types import Ref, VarType

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = ["CHUNK_FIELDS", "DatasetSearchOptions", "KnowledgeRetrievalConfig"]

#: The keys of each item of a retrieval node's ``chunks`` output.
CHUNK_FIELDS = (
    "citation_id",
    "text",
    "score",
    "scores",
    "dataset_id",
    "document_id",
    "chunk_id",
    "source_name",
    "position",
    "heading_path",
    "metadata",
)

_DATASET_ID = r"^[A-Za-z0-9_.-]+$"


class DatasetSearchOptions(BaseModel):
    """Which datasets to search and how (see :class:`~schemas.knowledge_search.SearchRequest`
    for each option's meaning). Shared by the retrieval node and the dataset tool."""

    model_config = ConfigDict(extra="forbid")

    datasets: list[str] = Field(
        min_length=1, max_length=32, description="ids of the tenant's datasets to search"
    )
    mode: SearchMode = SearchMode.hybrid
    fusion: FusionMode = Field(
        default=FusionMode.rrf,
        description="hybrid merge: reciprocal rank fusion or weighted normalised scores",
    )
    semantic_weight: float = Field(
        default=0.5, ge=0.0, le=1.0, description="weighted fusion: the semantic share"
    )
    top_k: int = Field(default=5, ge=1, le=200, description="most chunks returned")
    score_threshold: float = Field(
        default=0.0, ge=0.0, le=1.0, description="minimum semantic similarity (or rerank / weighted score)"
    )
    max_quote_tokens: int = Field(
        default=3000, ge=0, le=200_000, description="token budget of the quote; 0: none"
    )
    rerank: RerankSettings | None = Field(
        default=None, description="a rerank model and/or an LLM relevance pass"
    )
    filters: list[MetadataFilter] = Field(
        default_factory=list, max_length=32, description="conditions on document metadata (all must hold)"
    )

    def search_request(self, query: str, queries: list[str] | None = None) -> SearchRequest:
        """The store-level request for ``query`` (and extra phrasings ``queries``)."""
        return SearchRequest(
            dataset_ids=list(dict.fromkeys(self.datasets)),
            query=query,
            queries=queries or [],
            mode=self.mode,
            fusion=self.fusion,
            semantic_weight=self.semantic_weight,
            top_k=self.top_k,
            score_threshold=self.score_threshold,
            max_quote_tokens=self.max_quote_tokens,
            rerank=self.rerank,
            filters=self.filters,
        )

    def search_dataset_refs(self, prefix: str = "") -> Iterator[tuple[str, str]]:
        for i, dataset_id in enumerate(self.datasets):
            yield f"{prefix}datasets[{i}]", dataset_id

    def search_model_refs(self, prefix: str = "") -> Iterator[tuple[str, str]]:
        if self.rerank is not None and self.rerank.model:
            yield f"{prefix}rerank.model", self.rerank.model
        if self.rerank is not None and self.rerank.llm:
            yield f"{prefix}rerank.llm", self.rerank.llm


@node_kind("knowledge_retrieval", "Knowledge retrieval")
class KnowledgeRetrievalConfig(NodeConfig, DatasetSearchOptions):
    """Searches the tenant's datasets for the question and returns the best chunks.

    ``question``: the query (template or reference to a string). ``queries``: optional
    reference to an array of strings (e.g. a query extension node's ``queries``),
    searched together with ``question``, merged, duplicates removed.

    Outputs: ``chunks`` (best first; each ``citation_id``, ``text``, ``score``,
    ``dataset_id``, ``document_id``, ``chunk_id``, ``source_name``, ``position``,
    ``heading_path``, ``metadata``), ``quote`` (the chunks as numbered text with their
    sources, what a chat node's ``quote`` takes), ``queries`` (those searched) and
    ``usage`` (embedding, rerank and relevance-pass tokens and cost).
    """

    question: TextValue = Field(default="{{ sys.query }}", description="the question: template or reference")
    queries: Ref | None = Field(
        default=None, description="reference to an array of extra queries (e.g. a query extension's queries)"
    )

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            "chunks": VarType.array,
            "quote": VarType.string,
            "queries": VarType.array,
            "usage": VarType.object,
        }

    def templates(self) -> Iterator[tuple[str, str]]:
        if isinstance(self.question, str) and self.question:
            yield "question", self.question

    def ref_type(self, field: str) -> VarType | None:
        return {"question": VarType.string, "queries": VarType.array}.get(field)

    def model_refs(self) -> Iterator[tuple[str, str]]:
        yield from self.search_model_refs()

    def dataset_refs(self) -> Iterator[tuple[str, str]]:
        yield from self.search_dataset_refs()
