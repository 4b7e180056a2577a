"""What every node kind that calls a model shares: :class:`LLMNodeConfig` (the model,
sampling, history and stream-stall fields) and :data:`TextValue` (a template or a
reference to a string).

Apart from :mod:`schemas.nodes_llm` (which re-exports both, and whose module docstring
says what each field means) because the agent kinds (:mod:`schemas.nodes_agent`) and the
knowledge retrieval node build on them: validating a workflow with an agent then does
not create the chat, classify, extract and query-extension config models as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from .nodes import NodeConfig
from .types import Ref, VarType

__all__ = ["LLMNodeConfig", "TextValue"]


def _text_or_ref(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"ref"} and isinstance(value["ref"], str):
        return Ref(ref=value["ref"])
    return value


#: A Jinja2 template string, or ``{"ref": "..."}`` to a string value.
TextValue = Annotated[str | Ref, BeforeValidator(_text_or_ref)]


class LLMNodeConfig(NodeConfig):
    """Fields shared by every node that calls a model."""

    model: str = Field(min_length=1, description="model name in the model registry")
    temperature: float | None = Field(default=None, ge=0, le=2, description="None: the kind's default")
    max_tokens: int | None = Field(
        default=None, gt=0, description="output token cap; None: the model's max_output_tokens"
    )
    history: int = Field(
        default=0, ge=0, le=100, description="past turns of history_source put in the prompt"
    )
    history_source: Ref = Field(
        default_factory=lambda: Ref(ref="sys.history"),
        description="array of {role, content} messages, oldest first",
    )
    stream_idle_timeout: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="seconds a streamed reply may stay silent; None: the "
        "model's (registry); bounded by the node's timeout",
    )

    def model_refs(self) -> Iterator[tuple[str, str]]:
        yield "model", self.model

    def ref_type(self, field: str) -> VarType | None:
        if field == "history_source":
            return VarType.array
        if field in ("question", "user_prompt", "text"):
            return VarType.string
        return None

    def _text_templates(self, *names: str) -> Iterator[tuple[str, str]]:
        for name in names:
            value = getattr(self, name)
            if isinstance(value, str) and value:
                yield name, value
