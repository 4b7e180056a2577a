"""classify_question: the model picks a category; its id is the handle taken.

Protocols:

- **tool** (``mode: tool``, or ``auto`` with a model that has native tool calling):
  one function :data:`TOOL_NAME` whose ``category`` parameter is an enum of the
  category ids. With ``tool_choice`` support the call is forced
  (``{"type": "function", "function": {"name": ...}}``); without it the tool is
  offered and the prompt asks for it, and a plain-text reply is read with the prompt
  protocol.
- **prompt** (``mode: prompt``, or ``auto`` without native tools): the system
  prompt lists the categories and asks for ``{"category": "<id>"}`` only.

Reading the reply (never by substring - "billing" must not match "billing-dispute"):

1. From tool arguments or the first JSON object of the text (:mod:`nodes.llm.json_scan`),
   the string under ``category`` (also ``category_id`` / ``id``); with no JSON at
   all the whole reply is the answer (models often reply with the bare id).
2. It matches a category when its :func:`~schemas.nodes_llm.normalise_label` form
   equals that of the category's id, else of its name (case, whitespace,
   punctuation, quotes and backticks do not matter). Ids win over names; the config
   validator refuses categories that read alike, so a match is never ambiguous.
   Else, in an answer of at most :data:`MAX_PHRASE_WORDS` words, a category named
   as whole words (``Category: refund.``, ``**Refund request**``, ``It is billing.``)
   is the answer when it is the only one named and the answer does not negate or
   doubt it (:func:`read_label`); a hyphenated word is one word, so
   ``billing-dispute`` still names nothing.
3. Anything else takes the fallback category (``fallback: true``, else the last),
   with ``data.classify.fallback_reason`` one of: ``empty_reply``, ``no_tool_call``
   (a forced call did not come), ``malformed_reply`` (JSON that does not parse, or
   without a ``category`` string), ``ambiguous_reply`` (two or more categories
   named), ``no_match``. ``data.classify.raw`` keeps the raw reply (tool arguments or
   text). A fallback is never silent: it is also a ``node_warning`` event (code
   ``classify_fallback``, with the reason) and an entry of ``data.warnings``.
   Provider errors still fail the node.

Memory (``memory: true``): the result is stored under
:func:`engine.ports.node_memory_key` (tenant, workflow, node id, ``sys.chat_id``, slot
``classification``) in the run's node memory (``RunDeps.memory``; without one the
node keeps no memory), for ``memory_ttl`` seconds, and the
next turn's prompt shows it as context ("the previous question was classified as
..."). A store failure is recorded in ``data.classify.memory_error`` and does not
fail the classification: memory is a hint, not an input.

Sampling: temperature 0 unless configured (intent classification should be
deterministic); ``max_tokens`` the node's, else :data:`CLASSIFY_MAX_TOKENS` (about 50: the
answer is one id; see :func:`nodes.llm.chat.sampling`).

Protocol (``mode: auto``): one forced call is all this node needs, so a model whose
tool calls work only when forced (``capabilities.tools = "forced"``) uses native tools
here, forced; a model with free calls but no ``tool_choice`` gets the tool unforced;
a model without tools gets the JSON prompt protocol.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from typing import Any

from engine.catalog import NodeExecutor
from engine.context import NodeContext, NodeResult
from engine.errors import NodeFailed
from engine.ports import NodeMemory, node_memory_key
from schemas.node_records import ClassifyRecord
from schemas.nodes_llm import Category, ClassifyQuestionConfig, normalise_label

from .chat import (
    add_usage,
    history_as_text,
    model_spec,
    recent_turns,
    registry_of,
    render_text,
    resolve_history,
    sampling,
    stream_idle_timeout,
    warn,
)
from .json_scan import JsonNotFound, find_json

__all__ = [
    "CLASSIFY_MAX_TOKENS",
    "CLASSIFY_TEMPERATURE",
    "MAX_PHRASE_WORDS",
    "TOOL_NAME",
    "ClassifyQuestionNode",
    "Verdict",
    "read_answer",
    "read_label",
]

TOOL_NAME = "classify_question"
CLASSIFY_TEMPERATURE = 0.0
#: Output cap (tokens) unless the node sets ``max_tokens``: a call or a JSON object naming
#: one category id needs about 20; the rest is slack for a model that adds a few words.
CLASSIFY_MAX_TOKENS = 50
MEMORY_SLOT = "classification"
_ANSWER_KEYS = ("category", "category_id", "id")
#: Longest reply (in words) in which a named category is read as the answer.
MAX_PHRASE_WORDS = 12
_WORD = re.compile(r"\w+(?:[-_]\w+)*")
#: Words that turn "billing" into "not billing" / "maybe billing": such a reply is no answer.
_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "neither",
        "nor",
        "none",
        "isn't",
        "isnt",
        "maybe",
        "perhaps",
        "unsure",
        "unclear",
        "不",
        "不是",
        "非",
        "没有",
        "可能",
    }
)


class Verdict:
    """The outcome of reading a reply: a category, or why there is none."""

    __slots__ = ("category", "reason", "detail")

    def __init__(self, category: Category | None, reason: str | None = None, detail: str = "") -> None:
        self.category = category
        self.reason = reason
        self.detail = detail


def _match(categories: list[Category], answer: str) -> Category | None:
    wanted = normalise_label(answer)
    if not wanted:
        return None
    for c in categories:
        if normalise_label(c.id) == wanted:
            return c
    for c in categories:
        if normalise_label(c.name) == wanted:
            return c
    return None


def _words(text: str) -> list[str]:
    """Words of ``text`` (NFKC, case-folded); a hyphen or underscore inside a word keeps it one
    word, so ``billing-dispute`` never reads as ``billing``."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _forms(category: Category) -> list[tuple[str, ...]]:
    """The word sequences that name ``category``: its id and its name, as written, split at
    punctuation, and joined with ``-`` / ``_`` (``Billing issue`` also reads ``billing-issue``)."""
    forms: set[tuple[str, ...]] = set()
    for label in (category.id, category.name):
        for words in (_words(label), normalise_label(label).split()):
            if words:
                forms.update({tuple(words), ("-".join(words),), ("_".join(words),)})
    return sorted(forms, key=len, reverse=True)


def _named(categories: list[Category], words: list[str]) -> list[tuple[Category, int, int]]:
    """Every ``(category, start, end)`` whose id or name occurs as whole words in ``words``,
    without the matches that lie inside a longer one (``refund request`` is not also ``refund``)."""
    spans: list[tuple[Category, int, int]] = []
    for c in categories:
        for form in _forms(c):
            n = len(form)
            spans += [(c, i, i + n) for i in range(len(words) - n + 1) if tuple(words[i : i + n]) == form]
    return [
        s
        for s in spans
        if not any(o[1] <= s[1] and s[2] <= o[2] and (o[2] - o[1]) > (s[2] - s[1]) for o in spans)
    ]


def read_label(categories: list[Category], answer: str) -> Verdict:
    """One answer text (a reply, or the string under ``category``) as a category.

    The whole answer equal to an id or a name (normalised: case, quotes, punctuation do
    not matter) is that category. Else a short answer (at most :data:`MAX_PHRASE_WORDS`
    words) that names exactly one category as whole words - ``Category: refund.``,
    ``**Refund request**``, ``It is billing.`` - is that category: models wrap their
    answer in a label or a sentence often enough that refusing it would send real
    questions down the fallback branch. Everything else falls back with a reason:
    ``ambiguous_reply`` when two categories are named (picking one would be a guess),
    ``no_match`` when none is, when the answer is longer (prose that mentions a category
    is not an answer), or when it negates (``not billing``).
    """
    found = _match(categories, answer)
    if found is not None:
        return Verdict(found)
    words = _words(answer)
    short = answer.strip()[:80]
    if len(words) > MAX_PHRASE_WORDS:
        return Verdict(
            None,
            "no_match",
            f"the reply is {len(words)} words and is not a category id or name "
            f"(a category is read from a reply of at most {MAX_PHRASE_WORDS} words)",
        )
    named = list(dict.fromkeys(c.id for c, _, _ in _named(categories, words)))
    if len(named) > 1:
        return Verdict(
            None, "ambiguous_reply", f"the reply {short!r} names {len(named)} categories: {', '.join(named)}"
        )
    if not named:
        return Verdict(None, "no_match", f"the reply {short!r} is not a category id or name")
    if _NEGATIONS.intersection(words):
        return Verdict(None, "no_match", f"the reply {short!r} names {named[0]!r} but negates or doubts it")
    return Verdict(next(c for c in categories if c.id == named[0]))


def _from_object(categories: list[Category], value: dict[str, Any]) -> Verdict:
    answer = next((value[k] for k in _ANSWER_KEYS if isinstance(value.get(k), str)), None)
    if answer is None:
        return Verdict(
            None, "malformed_reply", f"the JSON has no string 'category' (keys: {sorted(value)[:10]})"
        )
    return read_label(categories, answer)


def read_answer(categories: list[Category], text: str) -> Verdict:
    """Read a text reply of the prompt protocol (rules 1-3 of the module docstring)."""
    if not text.strip():
        return Verdict(None, "empty_reply", "the model replied with nothing")
    try:
        match = find_json(text, expect="object")
    except JsonNotFound as exc:
        if exc.reason in ("invalid_json", "unclosed"):
            return Verdict(None, "malformed_reply", exc.hint(text))
        return read_label(categories, text)  # a bare id or name, maybe quoted, fenced or in a short phrase
    return _from_object(categories, match.value)


def _read_arguments(categories: list[Category], arguments: str) -> Verdict:
    try:
        value = json.loads(arguments)
    except ValueError:
        try:
            value = find_json(arguments, expect="object").value
        except JsonNotFound as exc:
            return Verdict(None, "malformed_reply", f"tool arguments are not JSON: {exc.hint(arguments)}")
    if not isinstance(value, dict):
        return Verdict(
            None, "malformed_reply", f"tool arguments must be an object, got {type(value).__name__}"
        )
    return _from_object(categories, value)


class ClassifyQuestionNode(NodeExecutor[ClassifyQuestionConfig], kind="classify_question"):
    """Classifies the question; takes the chosen category's handle (module docstring)."""

    def _tool(self) -> dict[str, Any]:
        cats = self.config.categories
        return {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": "Record the category of the user's question.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "category": {
                            "type": "string",
                            "enum": [c.id for c in cats],
                            "description": "; ".join(f"{c.id}: {c.name}" for c in cats),
                        }
                    },
                    "required": ["category"],
                },
            },
        }

    def _system_prompt(
        self, instructions: str, history: str, previous: dict[str, Any] | None, protocol: str
    ) -> str:
        lines = [
            "Classify the user's question into exactly one of these categories (id | name | description):"
        ]
        for c in self.config.categories:
            lines.append(f"- {c.id} | {c.name}" + (f" | {c.description}" if c.description else ""))
        if instructions.strip():
            lines += ["", "Background:", instructions.strip()]
        if history:
            lines += [
                "",
                "Conversation so far (context only; classify the new question):",
                "<history>",
                history,
                "</history>",
            ]
        if previous:
            lines += [
                "",
                f"The previous question in this conversation was classified as "
                f"{previous.get('name', previous['category'])!r} (id {previous['category']}). "
                "Use it only to resolve follow-ups; the new question may belong elsewhere.",
            ]
        lines.append("")
        if protocol == "tool":
            lines.append(f"Call the function {TOOL_NAME} with the id of the category.")
        else:
            lines.append(
                'Reply with only a JSON object {"category": "<id>"} using one of the ids above, '
                "and nothing else."
            )
        return "\n".join(lines)

    async def _recall(self, store: NodeMemory, key: str, record: ClassifyRecord) -> dict[str, Any] | None:
        try:
            previous = await store.get(key)
        except Exception as exc:
            record["memory_error"] = f"read: {type(exc).__name__}: {exc}"
            return None
        ids = {c.id for c in self.config.categories}
        if isinstance(previous, dict) and previous.get("category") in ids:
            return previous
        return None  # absent, expired, or left by an older version of the categories

    async def _remember(
        self, store: NodeMemory, key: str, value: dict[str, Any], record: ClassifyRecord
    ) -> None:
        try:
            await store.set(key, value, ttl=self.config.memory_ttl)
        except Exception as exc:
            record["memory_error"] = f"write: {type(exc).__name__}: {exc}"

    async def run(self, ctx: NodeContext) -> NodeResult:
        cfg = self.config
        spec = model_spec(ctx, cfg.model)
        protocol, forced = self._protocol(ctx, spec.capabilities)
        question = render_text(ctx, cfg.question, "question")
        record: ClassifyRecord = {"protocol": protocol, "tool_choice_forced": forced}
        state = ctx.state
        key = node_memory_key(
            state.tenant_id,
            state.workflow_id,
            ctx.node_id,
            str(state.sys.get("chat_id") or state.run_id),
            MEMORY_SLOT,
        )
        store = ctx.deps.memory if cfg.memory else None  # no store configured: no memory, nothing fails
        previous = await self._recall(store, key, record) if store is not None else None
        record["previous"] = previous["category"] if previous else None

        response = await self._ask(ctx, spec, question, previous, protocol, forced)
        usage = add_usage(ctx, response.usage)
        verdict = self._verdict(response, protocol, forced, record)
        chosen = verdict.category or cfg.fallback_category
        record.update(
            {"category": chosen.id, "fallback_reason": verdict.reason, "detail": verdict.detail or None}
        )
        ctx.node_run.data["classify"] = record
        if verdict.category is None:
            warn(
                ctx,
                "classify_fallback",
                f"node {ctx.node_id!r} took the fallback category {chosen.id!r}: "
                f"{verdict.reason} ({verdict.detail})",
                reason=verdict.reason,
                category=chosen.id,
                detail=verdict.detail,
                raw=str(record.get("raw", ""))[:500],
            )
        if store is not None:
            remembered: dict[str, Any] = {"category": chosen.id, "name": chosen.name, "question": question}
            remembered |= {"fallback": verdict.category is None, "at": time.time()}
            await self._remember(store, key, remembered, record)
        return NodeResult(
            {"category": chosen.id, "category_name": chosen.name, "usage": usage.model_dump()},
            handles=(chosen.id,),
        )

    def _protocol(self, ctx: NodeContext, caps: Any) -> tuple[str, bool]:
        """(``tool`` or ``prompt``, whether the tool call is forced) for the model's
        capabilities. Raises NodeFailed naming ``config.mode`` when mode ``tool`` asks a
        model without native tool calls."""
        mode = self.config.mode
        # One forced call is all this node needs: a model that only calls tools when
        # forced counts as native here, one that calls them freely too.
        native = caps.forced_tool_calls or caps.free_tool_calls
        if mode == "tool" and not native:
            raise NodeFailed(
                f"config.mode: model {self.config.model!r} has no native tool calling; use mode 'auto' or 'prompt'",
                node_id=ctx.node_id,
            )
        protocol = "tool" if mode == "tool" or (mode == "auto" and native) else "prompt"
        return protocol, protocol == "tool" and caps.forced_tool_calls

    async def _ask(
        self,
        ctx: NodeContext,
        spec: Any,
        question: str,
        previous: dict[str, Any] | None,
        protocol: str,
        forced: bool,
    ) -> Any:
        """The model's reply to the classification prompt (an ``LLMResponse``)."""
        from .call import LLMRequest, call_llm

        cfg = self.config
        instructions = ctx.render(cfg.instructions, field="config.instructions") if cfg.instructions else ""
        history = history_as_text(recent_turns(resolve_history(ctx, cfg), cfg.history))
        temperature, max_tokens = sampling(cfg, spec, CLASSIFY_TEMPERATURE, CLASSIFY_MAX_TOKENS)
        messages = [
            {"role": "system", "content": self._system_prompt(instructions, history, previous, protocol)},
            {"role": "user", "content": question},
        ]
        request = LLMRequest(
            cfg.model,
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=[self._tool()] if protocol == "tool" else None,
            tool_choice={"type": "function", "function": {"name": TOOL_NAME}} if forced else None,
        )
        return await call_llm(
            request,
            registry=registry_of(ctx),
            cancel=ctx.cancel,
            node_id=ctx.node_id,
            idle_timeout=stream_idle_timeout(ctx, spec),
        )

    def _verdict(self, response: Any, protocol: str, forced: bool, record: ClassifyRecord) -> Verdict:
        """The category the reply names (or why none), its raw text kept in ``record``."""
        calls = [c for c in response.tool_calls if c.name == TOOL_NAME]
        if protocol == "tool" and calls:
            record["raw"] = calls[0].arguments
            return _read_arguments(self.config.categories, calls[0].arguments)
        record["raw"] = response.text
        if forced:
            other = [c.name for c in response.tool_calls]
            return Verdict(
                None,
                "no_tool_call",
                f"tool_choice required {TOOL_NAME}; got "
                + (f"calls to {other}" if other else "no tool call"),
            )
        return read_answer(self.config.categories, response.text)
