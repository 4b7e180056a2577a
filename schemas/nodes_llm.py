"""Config models of the LLM node kinds: chat, classify_question, extract_fields, query_extension.

Behaviour lives in ``nodes/llm/chat.py``, ``nodes/llm/classify.py``, ``nodes/llm/extract.py`` and
``nodes/llm/query_extension.py``; this module declares what the compiler checks:

- ``model``: a model name of the registry (:meth:`NodeConfig.model_refs`), so an
  unknown model is a compile error (``unknown_model``), not a run-time surprise.
- text fields (system prompt, user prompt, question) are Jinja2 templates or a
  structured reference ``{"ref": "node.output"}`` to a string.
- ``temperature`` / ``max_tokens``: None means "the kind's documented default",
  never "whatever the provider does" - every request carries both explicitly
  (left unset, the temperature silently falls back to the provider's default, often 1.0,
  and max_tokens to a limit that truncates replies, which then look like parse failures).
- ``history``: how many past turns (a user message and the replies after it) of
  ``history_source`` (default ``sys.history``) go into the prompt, oldest dropped.
- ``stream_idle_timeout``: seconds a streamed reply may stay silent before the call
  fails as stalled; None: the model registry's value for the model (the model's, else
  its provider's, else 60). The node's ``timeout`` bounds it: a stall can never outlive
  the attempt it belongs to.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .nodes import node_kind
from .nodes_llm_base import LLMNodeConfig, TextValue
from .types import VarType
from .values import Value

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = [
    "Category",
    "ChatConfig",
    "ClassifyQuestionConfig",
    "ExtractField",
    "ExtractFieldsConfig",
    "LLMNodeConfig",
    "PromptTurn",
    "QueryExtensionConfig",
    "TextValue",
    "normalise_label",
]


_QUOTES = "`'\"‘’“”「」『』«»"


def normalise_label(text: str) -> str:
    """Normal form used to compare a model's answer with a category or a query.

    NFKC, case-folded; every punctuation character (Unicode category ``P*``), quote
    and backtick becomes a space; whitespace runs collapse to one space; ends are
    stripped. ``"  `Billing-Issue`. "`` and ``"billing issue"`` are equal; ``"billing"``
    and ``"billing issue"`` are not (no substring matching anywhere).
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    chars = [" " if (ch in _QUOTES or unicodedata.category(ch).startswith("P")) else ch for ch in text]
    return re.sub(r"\s+", " ", "".join(chars)).strip()


# --------------------------------------------------------------------------- chat


class PromptTurn(BaseModel):
    """A fixed message of the prompt (a few-shot example): ``role`` and ``text`` (Jinja2,
    rendered like the system prompt). Part of the prompt, not of the conversation: never
    dropped to fit the context, never added to the ``history`` output."""

    # defer_build: built on first use (a workflow without these nodes pays nothing)
    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Literal["user", "assistant"]
    text: str = Field(description="Jinja2 template")


@node_kind("chat", "LLM chat")
class ChatConfig(LLMNodeConfig):
    """One model call: system prompt, history, an optional knowledge quote and the user's message.

    The system prompt is the model's default prompt, this node's
    ``system_prompt`` and the quote prompt joined by ``"\\n\\n===---===---===\\n\\n"``;
    the quote goes into the user message when ``quote_role`` is ``user`` or the
    quote template uses ``{{ question }}``, else into the system prompt.

    Templates may use ``quote`` (the formatted knowledge text) and ``question`` (the
    rendered user prompt; in ``user_prompt`` itself, ``sys.query``).

    The request is: the system prompt, the ``examples`` (fixed user/assistant turns, e.g.
    few-shot examples), the last ``history`` turns of ``history_source``, the user
    message - Dify's order for a prompt with examples and memory.

    ``quote`` may reference a knowledge retrieval node's ``chunks`` or ``quote``: its items
    are numbered ``[n]`` and the default templates ask the model to cite them.

    Outputs: ``answer``, ``reasoning``, ``history`` (the source history plus this
    turn), ``usage`` (tokens, cost, latency) and ``citations`` (the quote items the
    answer cites, else all quote items given).
    """

    history: int = Field(
        default=6, ge=0, le=100, description="past turns of history_source put in the prompt"
    )
    system_prompt: str = Field(default="", description="Jinja2 template")
    examples: list[PromptTurn] = Field(
        default_factory=list, description="fixed turns after the system prompt, before the history"
    )
    user_prompt: TextValue = Field(
        default="{{ sys.query }}", description="the user's message: template or reference"
    )
    quote: Value = Field(
        default=None,
        description="knowledge text: string, array of strings or of {content|q/a|text}, "
        "or a retrieval node's chunks / quote",
    )
    quote_role: Literal["system", "user"] = "system"
    quote_template: str | None = Field(
        default=None, description="Jinja2 with quote/question; None: built-in per role"
    )
    stream: bool = Field(default=True, description="stream answer deltas as node_delta (channel answer)")
    stream_reasoning: bool = Field(default=True, description="stream reasoning deltas (channel reasoning)")

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            "answer": VarType.string,
            "reasoning": VarType.string,
            "history": VarType.array,
            "usage": VarType.object,
            "citations": VarType.array,
        }

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from self._text_templates("system_prompt", "user_prompt", "quote_template")
        for index, turn in enumerate(self.examples):
            if turn.text:
                yield f"examples[{index}].text", turn.text

    def template_locals(self) -> set[str]:
        return {"quote", "question"}

    def template_local_refs(self, field: str) -> dict[str, str]:
        # In user_prompt, question is the user's message itself; elsewhere it is the
        # rendered user_prompt, whose own reads count where they are written.
        return {"question": "sys.query"} if field == "user_prompt" else {}


# ----------------------------------------------------------------------- classify


class Category(BaseModel):
    """A class of question. ``id`` is stable (the output handle and what the model answers)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    name: str = Field(min_length=1, description="label shown to the model")
    description: str = ""
    fallback: bool = Field(
        default=False, description="taken when the reply matches no category (default: the last)"
    )


@node_kind("classify_question", "Question classifier")
class ClassifyQuestionConfig(LLMNodeConfig):
    """Routes the graph by the category the model picks.

    Each category id is an output handle; exactly one is taken. A reply that
    matches no category goes to the fallback category (``fallback: true``, else
    the last) and the node run's ``data.classify`` records why.

    ``mode``: ``auto`` uses native tool calling when the model supports it, else
    the JSON prompt protocol; ``tool`` / ``prompt`` force one.
    ``memory``: keep the last classification per chat (chat id + node id) and show
    it to the model next turn; it expires after ``memory_ttl`` seconds.
    """

    history: int = Field(default=4, ge=0, le=100, description="past turns shown to the model as context")
    question: TextValue = Field(default="{{ sys.query }}", description="template or reference")
    instructions: str = Field(default="", description="extra background for the model (Jinja2 template)")
    categories: list[Category] = Field(min_length=2)
    mode: Literal["auto", "tool", "prompt"] = "auto"
    memory: bool = True
    memory_ttl: float | None = Field(default=7 * 24 * 3600.0, gt=0, description="seconds; None: no expiry")

    @model_validator(mode="after")
    def _check_categories(self) -> ClassifyQuestionConfig:
        ids = [c.id for c in self.categories]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"category ids must be unique: {dupes}")
        if "error" in ids:
            raise ValueError("'error' is reserved for the error branch; rename that category")
        fallbacks = [c.id for c in self.categories if c.fallback]
        if len(fallbacks) > 1:
            raise ValueError(f"only one category may be the fallback, got {fallbacks}")
        # The model answers with an id or a name; two categories that read the same
        # would make the answer ambiguous, so refuse them up front.
        seen: dict[str, str] = {}
        for c in self.categories:
            for form in {normalise_label(c.id), normalise_label(c.name)}:
                if form in seen and seen[form] != c.id:
                    raise ValueError(f"categories {seen[form]!r} and {c.id!r} both read as {form!r}")
                seen[form] = c.id
        return self

    @property
    def fallback_category(self) -> Category:
        """The category flagged ``fallback``, else the last one."""
        return next((c for c in self.categories if c.fallback), self.categories[-1])

    def handles(self) -> list[str]:
        return [c.id for c in self.categories]

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"category": VarType.string, "category_name": VarType.string, "usage": VarType.object}

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from self._text_templates("question", "instructions")


# ------------------------------------------------------------------------ extract

_RESERVED_FIELDS = frozenset({"fields", "success", "usage"})


class ExtractField(BaseModel):
    """One field to extract. ``enum`` (string/number/boolean only) lists the allowed values."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: Literal["string", "number", "boolean", "object", "array"] = "string"
    description: str = ""
    required: bool = False
    enum: list[str | int | float | bool] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _check_enum(self) -> ExtractField:
        if self.enum is None:
            return self
        if self.type in ("object", "array"):
            raise ValueError(f"field {self.name!r}: enum applies to string, number and boolean fields only")
        check = {
            "string": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
        }[self.type]
        bad = [v for v in self.enum if not check(v)]
        if bad:
            raise ValueError(f"field {self.name!r}: enum values {bad!r} are not {self.type}")
        return self

    def json_schema(self) -> dict[str, Any]:
        """This field as a JSON Schema property."""
        schema: dict[str, Any] = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        return schema


@node_kind("extract_fields", "Field extractor")
class ExtractFieldsConfig(LLMNodeConfig):
    """Extracts typed fields from text.

    Outputs every field by name (null when missing or invalid), ``fields`` (the
    valid values as one object) and ``success`` (every required field present and
    valid). ``mode``: ``auto`` prefers structured output, then tool calling, then
    the JSON prompt protocol; ``structured`` / ``tool`` / ``prompt`` force one.
    """

    text: TextValue = Field(
        default="{{ sys.query }}", description="text to extract from: template or reference"
    )
    instructions: str = Field(default="", description="extra guidance for the model (Jinja2 template)")
    fields: list[ExtractField] = Field(min_length=1)
    mode: Literal["auto", "structured", "tool", "prompt"] = "auto"

    @model_validator(mode="after")
    def _check_fields(self) -> ExtractFieldsConfig:
        names = [f.name for f in self.fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"field names must be unique: {dupes}")
        reserved = sorted(set(names) & _RESERVED_FIELDS)
        if reserved:
            raise ValueError(f"field names {reserved} are reserved for the node's own outputs")
        return self

    def json_schema(self) -> dict[str, Any]:
        """The fields as one JSON Schema object (sent to the model)."""
        return {
            "type": "object",
            "properties": {f.name: f.json_schema() for f in self.fields},
            "required": [f.name for f in self.fields if f.required],
            "additionalProperties": False,
        }

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        outs: dict[str, VarType] = {f.name: VarType(f.type) for f in self.fields}
        outs.update({"fields": VarType.object, "success": VarType.boolean, "usage": VarType.object})
        return outs

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from self._text_templates("text", "instructions")


# ---------------------------------------------------------------- query extension


@node_kind("query_extension", "Query extension")
class QueryExtensionConfig(LLMNodeConfig):
    """Rewrites the question into several search queries (up to the count you set).

    The chat history is the context that resolves "it"/"that one"; output
    ``queries`` starts with the original question, has no duplicates (compared by
    :func:`normalise_label`) and at most ``count`` entries.
    """

    history: int = Field(default=6, ge=0, le=100, description="past turns used to resolve the question")
    question: TextValue = Field(default="{{ sys.query }}", description="template or reference")
    instructions: str = Field(default="", description="extra guidance for the model (Jinja2 template)")
    count: int = Field(default=10, ge=1, le=50)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"queries": VarType.array, "usage": VarType.object}

    def templates(self) -> Iterator[tuple[str, str]]:
        yield from self._text_templates("question", "instructions")
