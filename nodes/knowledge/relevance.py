"""The LLM relevance pass: a chat model keeps only the chunks relevant to a question
(as FastGPT's dataset tool selects chunks by LLM before answering).

:class:`LLMRelevanceJudge` implements the engine's
:class:`~engine.knowledge.ports.RelevanceJudge`: the chunks are shown numbered from 1,
the model answers a JSON array of the relevant numbers (read with
:mod:`nodes.llm.json_scan`, so prose or fences around it do not matter). A reply without
such an array keeps every chunk (the pass narrows, it must not empty a search because
a model rambled); numbers out of range are ignored. Temperature 0: the same chunks get
the same verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.knowledge.scope import TENANT_MODELS

from ..llm.json_scan import JsonNotFound, find_json

__all__ = ["LLMRelevanceJudge", "RELEVANCE_PROMPT"]

RELEVANCE_PROMPT = (
    "You select passages for answering a question. Below are numbered passages from a knowledge base.\n"
    "Reply with only a JSON array of the numbers of the passages that help answer the question, "
    "most helpful first, e.g. [2, 1]. Reply [] when none does."
)

#: Characters of each passage shown to the model (the pass judges relevance, not details).
PASSAGE_CHARS = 2000


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)


class LLMRelevanceJudge:
    """Asks a chat model of ``registry`` which passages are relevant (module docstring).
    ``cancel`` / ``node_id`` tie the calls to the node run that makes them."""

    def __init__(self, registry: Any, *, cancel: Any = None, node_id: str | None = None):
        self._registry, self.cancel, self.node_id = registry, cancel, node_id

    @property
    def registry(self) -> Any:
        """The registry of the tenant whose knowledge operation runs here
        (:data:`engine.knowledge.scope.TENANT_MODELS`), else the one given."""
        return TENANT_MODELS.get() or self._registry

    def model_problem(self, model: str) -> str | None:
        """None when ``model`` is a chat model of the registry, else why not: unknown, or
        its actual type (an embedding or rerank model), with the known chat models."""
        from .embeddings import model_problem

        return model_problem(self.registry, model, "chat")

    async def select(
        self, model: str, question: str, texts: Sequence[str]
    ) -> tuple[list[int], dict[str, Any]]:
        """``(indexes of the relevant texts, usage {"tokens_in", "tokens_out", "cost"})``.

        Raises:
            LLMError: the model call failed (a subclass naming the model and node).
        """
        from ..llm.call import LLMRequest, call_llm

        if not texts:
            return [], {"tokens_in": 0, "tokens_out": 0, "cost": 0.0}
        passages = "\n\n".join(
            f"<passage {i}>\n{text[:PASSAGE_CHARS]}\n</passage {i}>" for i, text in enumerate(texts, start=1)
        )
        spec = self.registry.get(model)
        request = LLMRequest(
            model,
            [
                {"role": "system", "content": RELEVANCE_PROMPT},
                {"role": "user", "content": f"{passages}\n\nQuestion: {question}"},
            ],
            temperature=0.0,
            max_tokens=min(256, spec.max_output_tokens),
        )
        response = await call_llm(request, registry=self.registry, cancel=self.cancel, node_id=self.node_id)
        usage = {
            "tokens_in": response.usage.tokens_in,
            "tokens_out": response.usage.tokens_out,
            "cost": response.usage.cost,
        }
        try:
            numbers = find_json(response.text, expect="array", accept=_numbers).value
        except JsonNotFound:
            return list(range(len(texts))), usage
        keep: list[int] = []
        for n in numbers:
            if 1 <= n <= len(texts) and n - 1 not in keep:
                keep.append(n - 1)
        return keep, usage
