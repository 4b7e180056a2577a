"""The workflow format: global inputs, run variables, nodes, edges and run limits.

A node is ``{id, type, name, position, config, <execution policy>}``; ``config`` is
validated by the config class the node catalog gives for the node's ``type`` (a
discriminated union on ``type``, built per catalog). ``flowloom schema`` prints
:func:`workflow_json_schema` for the built-in catalog.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import StrEnum
from types import GenericAlias
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    TypeAdapter,
    create_model,
    model_validator,
)

from .env_vars import EnvVar
from .nodes import NodeConfig
from .types import VarType, value_matches

__all__ = [
    "ConversationVar",
    "Edge",
    "ErrorStrategy",
    "InputVar",
    "NodeBase",
    "Note",
    "Position",
    "RunLimits",
    "Workflow",
    "node_model",
    "workflow_json_schema",
]

_ID = r"^[A-Za-z0-9_\-]+$"  # workflow ids: they name files (``<id>.json``)


def _printable_id(value: str) -> str:
    """Node and edge ids: any printable text (spaces and letters of any script included,
    since builders name things in their language); no control characters, not empty,
    no leading or trailing spaces. The length cap is the operator's ``max_id_length``
    (checked by the compiler, which names the cap)."""
    if not value or not value.isprintable() or value != value.strip():
        raise ValueError("an id must be printable text without control characters or surrounding spaces")
    return value


NodeIdText = Annotated[str, AfterValidator(_printable_id)]


class InputVar(BaseModel):
    """A global input (``inputs.NAME``) or a run variable (``vars.NAME``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: VarType = VarType.string
    required: bool = False
    default: Any = None
    description: str = ""


class ConversationVar(BaseModel):
    """A conversation variable (``conversation.NAME``): kept per chat across its turns.

    Each turn starts from the value the chat holds (``default`` in a new chat, or in a
    run outside any chat); ``variable_update`` nodes change it (``conversation.NAME``);
    the chat keeps the turn's final values when the turn succeeds. A person may edit
    a chat's values between turns (``PUT /v1/chats/{id}/variables``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: VarType = VarType.string
    default: Any = None
    description: str = ""

    @model_validator(mode="after")
    def _default_fits(self) -> ConversationVar:
        if not value_matches(self.default, self.type):
            raise ValueError(
                f"default of conversation variable {self.name!r} must be {self.type.value}, "
                f"got {type(self.default).__name__}"
            )
        return self


class Position(BaseModel):
    """Canvas position in pixels."""

    model_config = ConfigDict(frozen=True)  # immutable: nodes without a position share _ORIGIN

    x: float = 0.0
    y: float = 0.0


#: The position of a node that has none: one shared instance, not one model per node
#: (a factory returning it costs a fraction of building a model, at every node validated).
_ORIGIN = Position()


def _origin() -> Position:
    return _ORIGIN


class Edge(BaseModel):
    """A connection from ``source``'s output handle ``sourceHandle`` to ``target``."""

    model_config = ConfigDict(extra="forbid")

    id: NodeIdText
    source: str
    sourceHandle: str = "out"
    target: str
    targetHandle: str = "in"


class ErrorStrategy(StrEnum):
    """What a node failure does (after its retries), like Dify's "error strategy".

    - ``fail``: the run fails, naming the node.
    - ``error_branch``: the node takes its ``error`` handle; its output is ``{"error": {"type", "message"}}``.
    - ``default_output``: the node succeeds with ``default_output`` on its ``default_handle``.
    """

    fail = "fail"
    error_branch = "error_branch"
    default_output = "default_output"


class NodeBase(BaseModel):
    """Fields every node has: identity, canvas position and execution policy."""

    model_config = ConfigDict(extra="forbid")

    id: NodeIdText
    type: str
    name: str = ""
    description: str = ""
    position: Position = Field(default_factory=_origin)
    timeout: float | None = Field(default=None, gt=0, description="seconds per attempt")
    max_retries: int = Field(default=0, ge=0, le=10)
    retry_interval: float = Field(default=1.0, ge=0, le=600, description="seconds between attempts")
    error_strategy: ErrorStrategy = ErrorStrategy.fail
    default_output: dict[str, Any] | None = None
    default_handle: str | None = Field(
        default=None, description="handle taken with default_output (default: first)"
    )
    parent: str | None = Field(
        default=None, description="id of the loop/iteration node whose body holds this node"
    )
    max_iterations: int | None = Field(
        default=None,
        ge=1,
        description="round limit when this node is the entry of a loop drawn with a back-edge",
    )
    config: NodeConfig

    def handles(self) -> list[str]:
        """All output handles, including ``error`` under the error-branch strategy."""
        handles = self.config.handles()
        return handles + ["error"] if self.error_strategy is ErrorStrategy.error_branch else handles

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        """Declared outputs, plus ``error`` under the error-branch strategy."""
        outs = self.config.outputs(workflow)
        if self.error_strategy is ErrorStrategy.error_branch:
            outs = {**outs, "error": VarType.object}
        return outs


@functools.cache
def node_model(config_cls: type[NodeConfig], kind: str | None = None) -> type[NodeBase]:
    """The pydantic model of a node whose ``type`` is ``kind`` (default: ``config_cls.kind``)
    and whose ``config`` is ``config_cls``."""
    kind = kind or config_cls.kind
    try:
        config_cls()
        # An empty object, validated as the config: the default is built inside the
        # validator, with no Python-level model constructor call per node.
        config_field: Any = (config_cls, Field(default_factory=dict, validate_default=True))
    except Exception:
        config_field = (config_cls, ...)
    kind_type: Any = Literal[kind]  # a type made at run time, from the value of kind
    return create_model(
        f"{config_cls.__name__.removesuffix('Config')}Node",
        __base__=NodeBase,
        __doc__=config_cls.__doc__,
        type=(kind_type, ...),
        config=config_field,
    )


def _node_union(configs: Mapping[str, type[NodeConfig]]) -> Any:
    models = tuple(node_model(cls, kind) for kind, cls in configs.items())
    if len(models) == 1:
        return models[0]
    # a union built at run time: only typing.Union takes a tuple of members
    return Annotated[Union[models], Field(discriminator="type")]  # noqa: UP007 - only Union takes a tuple


class Note(BaseModel):
    """A sticky note on the canvas: text for the people who read the workflow; the engine
    ignores it. ``position``/``width``/``height`` in pixels."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID)
    text: str = Field(default="", max_length=20_000)
    position: Position = Field(default_factory=Position)
    width: float = Field(default=240.0, gt=0, le=10_000)
    height: float = Field(default=160.0, gt=0, le=10_000)
    color: str = Field(
        default="", max_length=32, description="a CSS colour name or #rrggbb; empty: the default"
    )


class RunLimits(BaseModel):
    """Per-run limits; hitting one fails the run with an explicit reason."""

    model_config = ConfigDict(extra="forbid")

    max_node_executions: int = Field(
        default=10_000, ge=1, description="node attempts per run, retries included"
    )
    max_wall_time: float = Field(default=3600.0, gt=0, description="seconds from run start")
    max_concurrency: int | None = Field(
        default=None, ge=1, description="nodes running at once (None: unlimited)"
    )
    max_loop_iterations: int = Field(default=1000, ge=1, description="rounds/items of any one loop, per run")


class Workflow(BaseModel):
    """A workflow document (see README "Workflow format")."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID)
    name: str = ""
    version: int | str = 1
    description: str = ""
    inputs: list[InputVar] = Field(default_factory=list)
    variables: list[InputVar] = Field(
        default_factory=list, description="run variables, set by variable_update"
    )
    conversation_variables: list[ConversationVar] = Field(
        default_factory=list,
        description="conversation variables: kept per chat across turns, set by variable_update",
    )
    environment: list[EnvVar] = Field(
        default_factory=list,
        description="environment variables (env.NAME): settings and secrets (schemas.env_vars)",
    )
    nodes: list[SerializeAsAny[NodeBase]] = Field(
        default_factory=list, description="validated per kind by the node catalog (the compiler), not here"
    )
    edges: list[Edge] = Field(default_factory=list)
    limits: RunLimits = Field(default_factory=RunLimits)
    notes: list[Note] = Field(default_factory=list, description="sticky notes of the canvas (not executed)")


def workflow_json_schema(configs: Mapping[str, type[NodeConfig]]) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of workflows whose nodes are of the kinds in ``configs``
    (kind -> config class), for the canvas and importers."""
    # list[...] of a union built at run time (a type checker would read list[...] as a type)
    nodes_field: Any = (GenericAlias(list, (_node_union(configs),)), Field(default_factory=list))
    current = create_model("Workflow", __base__=Workflow, __doc__=Workflow.__doc__, nodes=nodes_field)
    return TypeAdapter(current).json_schema(by_alias=True)
