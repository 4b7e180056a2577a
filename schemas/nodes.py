"""Node config models: one pydantic model per node kind.

Each config class declares, next to its fields, what the compiler and the canvas
need to know about the kind: its output handles (:meth:`NodeConfig.handles`), its
outputs and their types (:meth:`NodeConfig.outputs`) and its template fields
(:meth:`NodeConfig.templates`). Behaviour lives in ``nodes/<kind>.py``; which kinds
exist is decided by the node catalog that ``nodes/`` builds (one list of kinds), not
by these classes.

This module holds the base class and the kinds nearly every workflow has (``start``,
``end``, ``answer``, ``template``); the other plumbing kinds are in
:mod:`schemas.nodes_flow`, the LLM, agent, knowledge and code kinds in modules of their
own, each imported when a workflow uses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .types import VarType
from .values import InputBinding

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = [
    "AnswerConfig",
    "FormField",
    "EndConfig",
    "OUTPUT_NAME",
    "OutputBinding",
    "NodeConfig",
    "Requirement",
    "StartConfig",
    "TemplateConfig",
    "node_kind",
]


class Requirement(BaseModel):
    """A need of a node from its deployment: ``kind`` ``setting`` (the boolean operator
    setting ``name`` must be on), ``secret`` (the secret ``name`` must be set) or
    ``package`` (the module ``name`` of ``language`` must be installed in the code
    sandbox's package environment); ``path``: the config field that needs it; ``why``:
    the reason, for the message."""

    kind: Literal["setting", "secret", "package"]
    name: str
    path: str
    why: str
    language: Literal["python", "javascript"] | None = None


class NodeConfig(BaseModel):
    """Base of every node kind's config. Subclasses set ``kind`` via :func:`node_kind`."""

    # defer_build (inherited by every kind): a config's validator is built when a workflow
    # first uses the kind, so checking a 4-node workflow does not build twenty kinds.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""

    def handles(self) -> list[str]:
        """Output handles this node can take (the ``error`` handle is added by the node's error strategy)."""
        return ["out"]

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        """Output names and types; references to other names are compile errors."""
        return {}

    def templates(self) -> Iterator[tuple[str, str]]:
        """(field path, Jinja2 source) of every template field, for compile-time checks."""
        return iter(())

    def requirements(self) -> Iterator[Requirement]:
        """What this node needs from the deployment it runs on (an operator setting turned
        on, a secret set, a package installed), so validation can say so before a run
        fails on it."""
        return iter(())

    def ref_type(self, field: str) -> VarType | None:
        """Type expected for references found directly in ``field`` (None = any)."""
        return None

    def template_locals(self) -> set[str]:
        """Names bound by the node itself in its templates (e.g. template variables)."""
        return set()

    def template_local_refs(self, field: str) -> dict[str, str]:
        """Locals of the template in ``field`` that stand for a reference the node resolves
        itself (local name -> ``scope.name``, e.g. a chat prompt's ``question`` for
        ``sys.query``), so a reader asking what the node depends on counts a template
        that uses the local as reading that reference. Empty by default."""
        return {}

    def body_fields(self) -> set[str]:
        """Config fields resolved inside the node's own body scope (loop nodes): their
        references may read the node itself and its body nodes."""
        return set()

    def variable_targets(self) -> Iterator[tuple[str, str, str]]:
        """(field path, scope, name) of every variable the node sets (``vars`` or
        ``conversation``), so the compiler can say an undeclared one before a run fails."""
        return iter(())

    def body_outputs(self, workflow: Workflow) -> dict[str, VarType]:
        """What the node's body (and its own :meth:`body_fields`) reads of the node while
        it runs - an iteration's ``item`` and ``index``, a loop's variables - as opposed
        to :meth:`outputs`, which exist only once the node has finished and are read
        downstream of it. Empty for nodes without a body."""
        return {}

    def model_refs(self) -> Iterator[tuple[str, str]]:
        """(field path, model name) of every model this node calls; unknown names are compile errors."""
        return iter(())

    def dataset_refs(self) -> Iterator[tuple[str, str]]:
        """(field path, dataset id) of every dataset this node searches. Validation warns
        about an id the tenant has no dataset of (it may be made before a run; a run then
        fails at the search naming it)."""
        return iter(())

    def model_kind(self, path: str) -> str:
        """The registry type (``chat``, ``rerank``...) the model at ``path`` (a path of
        :meth:`model_refs`) must have: a model of another type is a compile error too.
        Every model field is a chat model's but a search's ``rerank.model`` (wherever
        the search options sit: a retrieval node, an agent's dataset tool)."""
        return "rerank" if path == "rerank.model" or path.endswith(".rerank.model") else "chat"

    def writes(self) -> str | None:
        """Why this configured node changes something outside the run (None: it does not, as
        far as its config says). Kinds whose catalog entry is not ``reads_only`` count as
        writing whatever this says."""
        return None


def node_kind(kind: str, title: str):
    """Class decorator naming the kind and display title a config class is for.

    It registers nothing: a kind exists when a node catalog lists it.
    """

    def name(cls: type[NodeConfig]) -> type[NodeConfig]:
        cls.kind, cls.title = kind, title
        return cls

    return name


# --------------------------------------------------------------------- start / end


@node_kind("start", "Start")
class StartConfig(NodeConfig):
    """Entry of the workflow: exposes the workflow's global inputs as its outputs."""

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {var.name: var.type for var in workflow.inputs}


#: An output name: any non-empty key a reference can spell - a quoted key holds anything
#: but its own quote (``x["it's"]``, ``x['say "hi"']``), so only a name with both quote
#: kinds is refused. Imported flows name outputs ``"1"``, ``结果``, ``a b``, ``$.items[*].url``.
OUTPUT_NAME = r"^(?:[^\"]+|[^']+)$"


class OutputBinding(InputBinding):
    """A binding whose name is an output name (:data:`OUTPUT_NAME`), not an identifier:
    the End node's outputs are read by key (``run.outputs["1"]``, ``{"ref": "end['1']"}``),
    never as template or code names."""

    name: str = Field(pattern=OUTPUT_NAME, description="output name (any key without both quote kinds)")


@node_kind("end", "End")
class EndConfig(NodeConfig):
    """Declares the workflow's outputs: each binding becomes an output of the run.

    Names are any keys (:data:`OUTPUT_NAME`): imported Dify/FastGPT flows name outputs
    ``"1"``, ``结果`` or ``total price``.
    """

    outputs_: list[OutputBinding] = Field(default_factory=list, alias="outputs")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {b.name: b.type or VarType.any for b in self.outputs_}

    def handles(self) -> list[str]:
        return []


@node_kind("answer", "Answer")
class AnswerConfig(NodeConfig):
    """Streams a rendered template to the user; the text is also the node's answer output."""

    text: str = Field(description="Jinja2 template")

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"answer": VarType.string}

    def templates(self) -> Iterator[tuple[str, str]]:
        yield "text", self.text


# ----------------------------------------------------------------------- template


@node_kind("template", "Template")
class TemplateConfig(NodeConfig):
    """Renders a sandboxed Jinja2 template; its variables are bound by name in the template."""

    template: str
    variables: list[InputBinding] = Field(default_factory=list)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"output": VarType.string}

    def templates(self) -> Iterator[tuple[str, str]]:
        yield "template", self.template

    def template_locals(self) -> set[str]:
        return {b.name for b in self.variables}


# --------------------------------------------------------------------- form field


# Here rather than in schemas.nodes_flow with the form_input kind: a run's interrupt events
# (schemas.events) carry form fields too, and a run need not create the other kinds' models.
class FormField(BaseModel):
    """A typed form field; ``enum`` restricts the accepted values."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    label: str = ""
    type: VarType = VarType.string
    required: bool = True
    default: object = None
    enum: list[object] | None = None
    description: str = ""
