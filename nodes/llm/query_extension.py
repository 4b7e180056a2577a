"""query_extension: one question -> up to ``count`` search queries.

The model sees the last ``history`` turns as context (so "how much is it?" after a
turn about the Pro plan becomes "Pro plan price") and is asked for a JSON array of
``count - 1`` alternative queries. Reading the reply:

- the first JSON array of strings in the text (or an object with a ``queries``
  array) - :mod:`nodes.llm.json_scan`, so fences and prose, even prose with its own
  brackets, do not matter; non-string items are dropped and counted;
- ``queries`` = the original question first, then the model's queries, skipping
  blanks and duplicates (compared by :func:`~schemas.nodes_llm.normalise_label`:
  case, spacing, punctuation and quotes ignored), capped at ``count``.

A reply with no such array gives ``[question]``; ``data.query_extension`` records
the reason (``empty``, ``no_json``, ``invalid_json``, ``unclosed``, ``not_accepted``),
a position hint and the raw reply. Provider errors still fail the node.

Sampling: temperature 0.1 unless configured (a little variety in wording, stable
meaning); ``max_tokens`` the node's, else about 300 (:func:`query_extension_max_tokens`).
"""

from __future__ import annotations

from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from schemas.node_records import QueryExtensionRecord
from schemas.nodes_llm import QueryExtensionConfig, normalise_label

from .chat import (
    add_usage,
    history_as_text,
    model_spec,
    recent_turns,
    registry_of,
    render_text,
    resolve_history,
    sampling,
)
from .json_scan import JsonNotFound, find_json

__all__ = [
    "QUERY_EXTENSION_TEMPERATURE",
    "QueryExtensionNode",
    "dedupe_queries",
    "query_extension_max_tokens",
]

QUERY_EXTENSION_TEMPERATURE = 0.1
#: Output tokens per query asked for (:func:`query_extension_max_tokens`).
QUERY_TOKENS = 30
#: The least output cap: the default ``count`` (10) asks for 9 queries, about 300 tokens.
QUERY_EXTENSION_MAX_TOKENS = 300


def query_extension_max_tokens(count: int) -> int:
    """The output cap unless the node sets ``max_tokens``: :data:`QUERY_TOKENS` per query
    asked for, at least :data:`QUERY_EXTENSION_MAX_TOKENS` (a model that never stops
    cannot generate for minutes; the model's own maximum still bounds it)."""
    return max(QUERY_EXTENSION_MAX_TOKENS, QUERY_TOKENS * count)


def _query_list(value: Any) -> list[Any] | None:
    if isinstance(value, dict):
        value = value.get("queries")
    return value if isinstance(value, list) else None


def _accept(value: Any) -> bool:
    # An array of strings (or {"queries": [...]}) - "[1]" in "(see [1])" is not one.
    items = _query_list(value)
    return items is not None and (items == [] or any(isinstance(x, str) for x in items))


def dedupe_queries(question: str, candidates: list[str], count: int) -> list[str]:
    """``question`` first, then ``candidates`` without blanks or normalised duplicates, at most ``count``."""
    out: list[str] = []
    seen: set[str] = set()
    for text in [question, *candidates]:
        text = text.strip()
        if not text:
            continue
        key = normalise_label(text) or text  # a query of punctuation only still dedupes by itself
        if key in seen:
            continue
        seen.add(key)
        out.append(text)
        if len(out) >= count:
            break
    return out


class QueryExtensionNode(NodeExecutor[QueryExtensionConfig], kind="query_extension"):
    """Expands the question into search queries (module docstring)."""

    def _system_prompt(self, instructions: str, history: str) -> str:
        extra = self.config.count - 1
        lines = [
            "You write search queries for a knowledge base.",
            f"Rewrite the user's question into up to {extra} different search queries that together find "
            "everything needed to answer it: resolve pronouns and references from the conversation, "
            "use synonyms and more specific or more general wording, keep the original language.",
            "Do not answer the question.",
        ]
        if instructions.strip():
            lines += ["", instructions.strip()]
        if history:
            lines += ["", "Conversation so far:", "<history>", history, "</history>"]
        lines += ["", 'Reply with only a JSON array of strings, e.g. ["query one", "query two"].']
        return "\n".join(lines)

    async def run(self, ctx: NodeContext) -> NodeResult:
        from .call import LLMRequest, call_llm
        from .chat import stream_idle_timeout

        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        question = render_text(ctx, cfg.question, "question").strip()
        record: QueryExtensionRecord = {}
        if cfg.count == 1 or not question:
            # Nothing to ask the model: one query is the question itself (or nothing to extend).
            record["skipped"] = "count is 1" if question else "empty question"
            ctx.node_run.data["query_extension"] = record
            return NodeResult({"queries": [question] if question else [], "usage": None})
        instructions = ctx.render(cfg.instructions, field="config.instructions") if cfg.instructions else ""
        history = history_as_text(recent_turns(resolve_history(ctx, cfg), cfg.history))
        temperature, max_tokens = sampling(
            cfg, spec, QUERY_EXTENSION_TEMPERATURE, query_extension_max_tokens(cfg.count)
        )
        request = LLMRequest(
            cfg.model,
            [
                {"role": "system", "content": self._system_prompt(instructions, history)},
                {"role": "user", "content": question},
            ],
            temperature=temperature,
            max_tokens=max_tokens,
        )
        response = await call_llm(
            request,
            registry=registry_of(ctx),
            cancel=ctx.cancel,
            node_id=ctx.node_id,
            idle_timeout=stream_idle_timeout(ctx, spec),
        )
        usage = add_usage(ctx, response.usage)
        raw = response.text
        record["raw"] = raw
        candidates: list[str] = []
        try:
            items = _query_list(find_json(raw, accept=_accept).value) or []
            candidates = [x for x in items if isinstance(x, str)]
            if len(candidates) != len(items):
                record["dropped_items"] = len(items) - len(candidates)
        except JsonNotFound as exc:
            record.update({"reason": exc.reason, "detail": exc.hint(raw)})
        queries = dedupe_queries(question, candidates, cfg.count)
        record["from_model"] = len(queries) - 1
        ctx.node_run.data["query_extension"] = record
        return NodeResult({"queries": queries, "usage": usage.model_dump()})
