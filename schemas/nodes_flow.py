"""Config models of the branching, looping, variable, HTTP, interactive and placeholder
node kinds (``if_else``, ``iteration``, ``loop``, ``loop_break``, ``variable_update``,
``variable_aggregator``, ``http_request``, ``user_select``, ``form_input``,
``unsupported``).

Apart from :mod:`schemas.nodes` (the base class, ``start``, ``end``, ``answer`` and
``template``; it re-exports every name here on first use) and named by import path in
the node catalog, so checking or running a workflow without these kinds does not create
their seventeen classes. Behaviour lives in ``nodes/<kind>.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .nodes import OUTPUT_NAME, FormField, NodeConfig, node_kind
from .nodes_jsonpath import jsonpath_expression, jsonpath_many
from .types import Ref, VarType
from .values import InputBinding, Value

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = [
    "Case",
    "Condition",
    "ConditionOp",
    "FormInputConfig",
    "HttpBody",
    "HttpRequestConfig",
    "IfElseConfig",
    "IterationConfig",
    "LoopBreakConfig",
    "LoopConfig",
    "LoopUpdate",
    "ORDER_OPS",
    "SelectOption",
    "UNARY_OPS",
    "UnsupportedConfig",
    "jsonpath_expression",
    "jsonpath_many",
    "UserSelectConfig",
    "VariableAggregatorConfig",
    "VariableUpdate",
    "VariableUpdateConfig",
]


# ------------------------------------------------------------------------ if-else


class ConditionOp(StrEnum):
    """Comparison operators of an if-else condition."""

    equals = "equals"
    not_equals = "not_equals"
    contains = "contains"
    not_contains = "not_contains"
    starts_with = "starts_with"
    ends_with = "ends_with"
    empty = "empty"
    not_empty = "not_empty"
    gt = "gt"
    gte = "gte"
    lt = "lt"
    lte = "lte"
    regex = "regex"
    in_list = "in"
    not_in_list = "not_in"


#: Operators that take no right-hand operand.
UNARY_OPS = frozenset({ConditionOp.empty, ConditionOp.not_empty})
#: Operators that need numbers on both sides.
ORDER_OPS = frozenset({ConditionOp.gt, ConditionOp.gte, ConditionOp.lt, ConditionOp.lte})


class Condition(BaseModel):
    """``left <operator> right``. ``left`` and ``right`` are literals or references.

    Values keep their types: with ``type`` unset, ``5`` equals ``5`` but not ``"5"``
    and an ordering operator on a non-number is a run error. With ``type`` set, both
    operands are converted to it first by the documented rules of
    :func:`nodes.if_else.coerce` (explicit, deterministic coercion).
    """

    model_config = ConfigDict(extra="forbid")

    left: Value
    operator: ConditionOp
    right: Value = None
    type: VarType | None = Field(
        default=None, description="coerce both operands to this type before comparing"
    )

    def ref_type(self, field: str) -> VarType | None:
        if self.type is not None:
            return None  # explicit coercion accepts any source type
        return VarType.number if self.operator in ORDER_OPS else None

    @model_validator(mode="after")
    def _check_operands(self) -> Condition:
        if self.operator not in UNARY_OPS and self.right is None:
            raise ValueError(f"operator {self.operator.value!r} needs a right operand")
        if self.operator in (ConditionOp.in_list, ConditionOp.not_in_list) and not isinstance(
            self.right, (list, Ref)
        ):
            raise ValueError(
                f"operator {self.operator.value!r} needs a list (or a reference to one) as right operand"
            )
        self._check_literals()
        return self

    def _check_literals(self) -> None:
        """Literal operands the operator can never accept are refused when the workflow is
        compiled, not when the branch first runs (a ``gt`` against the text ``"5"``
        would otherwise fail only on the day that branch is reached).

        Without ``type``: ordering operators need number literals. With ``type:
        number``: text literals must read as numbers. ``regex``: a literal pattern must
        compile.
        """
        op = self.operator.value
        for side, operand in (("left", self.left), ("right", self.right)):
            if (
                isinstance(operand, Ref)
                or operand is None
                or (side == "right" and self.operator in UNARY_OPS)
            ):
                continue
            number = isinstance(operand, (int, float)) and not isinstance(operand, bool)
            if self.type is None and self.operator in ORDER_OPS and not number:
                shown = (
                    f"the text {operand!r}"
                    if isinstance(operand, str)
                    else f"{type(operand).__name__} {operand!r}"
                )
                raise ValueError(
                    f"operator {op!r} compares numbers, but the {side} operand is {shown}: write it as "
                    'a number (5, not "5") or set type to number to convert it'
                )
            if self.type is VarType.number and isinstance(operand, str) and not _reads_as_number(operand):
                raise ValueError(f"the {side} operand {operand!r} is not a number, but type is number")
        if self.operator is ConditionOp.regex and isinstance(self.right, str):
            import re as stdlib_re  # imported here: only conditions with a literal pattern need it

            try:
                stdlib_re.compile(self.right)
            except stdlib_re.error as exc:
                raise ValueError(
                    f"the right operand {self.right!r} is not a valid regular expression: {exc}"
                ) from None


def _reads_as_number(text: str) -> bool:
    """True when ``text`` converts to a finite number (the if-else ``type: number`` rule)."""
    try:
        value = float(text.strip())
    except ValueError:
        return False
    return value == value and value not in (float("inf"), float("-inf"))


class Case(BaseModel):
    """One branch of an if-else: its ``id`` is the output handle taken when it matches."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    logic: Literal["and", "or"] = "and"
    conditions: list[Condition] = Field(min_length=1)


@node_kind("if_else", "If / else")
class IfElseConfig(NodeConfig):
    """Checks the cases in order and takes the branch of the first one that matches; when none
    matches, the Else branch.

    Handles: each case's ``id``, then ``else`` (editors read this paragraph for the handles
    a configured node has).
    """

    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_case_ids(self) -> IfElseConfig:
        ids = [c.id for c in self.cases]
        dupes = sorted({i for i in ids if ids.count(i) > 1} | ({"else"} & set(ids)))
        if dupes:
            raise ValueError(f"case ids must be unique and not 'else': {dupes}")
        return self

    def handles(self) -> list[str]:
        return [c.id for c in self.cases] + ["else"]

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"case": VarType.string}


# ------------------------------------------------------------------- HTTP request

_HTTP_OUTPUTS = {
    "status_code": VarType.number,
    "headers": VarType.object,
    "body": VarType.string,
    "json": VarType.any,
}


class HttpBody(BaseModel):
    """Request body. ``json`` may hold references at any depth; strings in ``form`` and ``raw`` are templates."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["none", "json", "form", "raw"] = "none"
    json_: Value = Field(default=None, alias="json")
    form: dict[str, str] = Field(default_factory=dict)
    raw: str = ""
    content_type: str | None = None


@node_kind("http_request", "HTTP request")
class HttpRequestConfig(NodeConfig):
    """Makes an HTTP request; the URL, headers, query values, form and raw body are templates.

    Targets resolving to loopback/private/link-local/metadata addresses are refused
    unless allowed by the ``FLOWLOOM_HTTP_ALLOW`` setting (see :mod:`nodes.http.guard`).

    ``outputs`` adds outputs read from the parsed response by JSONPath (name -> path,
    e.g. ``{"urls": "$.images[*].url", "first": "$.data.items[0].title"}``), evaluated
    with jsonpath-ng over the ``json`` output (else the body parsed as JSON): a path that
    may select several values (:func:`jsonpath_many`) gives the list of its matches, any
    other path its first match; nothing matched (or no JSON body) gives null. That is
    what FastGPT's HTTP node gives for its custom outputs. A path that does not parse is a
    validation error naming the output.
    """

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    query: dict[str, str] = Field(default_factory=dict)
    body: HttpBody = Field(default_factory=HttpBody)
    timeout: float = Field(default=30.0, gt=0, le=600, description="seconds, per request")
    max_response_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    follow_redirects: bool = True
    raise_for_status: bool = Field(default=False, description="treat a 4xx/5xx status as a node error")
    outputs_: dict[str, str] = Field(
        default_factory=dict, alias="outputs", description="output name -> JSONPath over the parsed response"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _check_outputs(self) -> HttpRequestConfig:
        for name, path in self.outputs_.items():
            if name in _HTTP_OUTPUTS:
                raise ValueError(
                    f"outputs.{name}: {name!r} is a built-in output of the HTTP node; choose another name"
                )
            if not re.fullmatch(OUTPUT_NAME, name):
                raise ValueError(
                    f"outputs: name {name!r} holds both quote kinds, which a reference cannot spell"
                )
            try:
                jsonpath_expression(path)
            except ValueError as exc:
                raise ValueError(f"outputs.{name}: {exc}") from None
        return self

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        extra = {
            name: VarType.array if jsonpath_many(path) else VarType.any
            for name, path in self.outputs_.items()
        }
        return {**_HTTP_OUTPUTS, **extra}

    def writes(self) -> str | None:
        """An HTTP request with a method other than GET/HEAD/OPTIONS has side effects."""
        return None if self.method in ("GET", "HEAD", "OPTIONS") else f"sends an HTTP {self.method}"

    def templates(self) -> Iterator[tuple[str, str]]:
        yield "url", self.url
        for key, val in self.headers.items():
            yield f"headers.{key}", val
        for key, val in self.query.items():
            yield f"query.{key}", val
        for key, val in self.body.form.items():
            yield f"body.form.{key}", val
        if self.body.raw:
            yield "body.raw", self.body.raw


# -------------------------------------------------------------------- variables


class VariableUpdate(BaseModel):
    """One update of a run variable (``NAME``, declared in ``workflow.variables``) or of a
    conversation variable (``conversation.NAME``, declared in
    ``workflow.conversation_variables``, kept by the chat after a successful turn)."""

    model_config = ConfigDict(extra="forbid")

    variable: str = Field(description="run variable NAME, or conversation.NAME")
    operation: Literal["set", "append", "extend", "add", "clear"] = "set"
    value: Value = None

    def target(self) -> tuple[str, str]:
        """``("conversation", NAME)`` for ``conversation.NAME``, else ``("vars", NAME)``
        (``vars.NAME`` and a plain ``NAME`` both name a run variable)."""
        head, dot, rest = self.variable.partition(".")
        if dot and head in ("conversation", "vars"):
            return head, rest
        return "vars", self.variable


@node_kind("variable_update", "Variable update")
class VariableUpdateConfig(NodeConfig):
    """Sets run variables (vars.NAME) and conversation variables (conversation.NAME) and
    outputs the new value of each updated variable (keyed as the update names it).

    Ordering: a reader sees the update only when it is downstream of this node.
    """

    updates: list[VariableUpdate] = Field(min_length=1)

    def variable_targets(self) -> Iterator[tuple[str, str, str]]:
        for i, u in enumerate(self.updates):
            yield (f"updates[{i}].variable", *u.target())

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        declared = {
            "vars": {v.name: v.type for v in workflow.variables},
            "conversation": {v.name: v.type for v in workflow.conversation_variables},
        }
        out: dict[str, VarType] = {}
        for u in self.updates:
            scope, name = u.target()
            out[u.variable] = declared[scope].get(name, VarType.any)
        return out


@node_kind("variable_aggregator", "Variable aggregator")
class VariableAggregatorConfig(NodeConfig):
    """Outputs the first non-empty value among its references (for branches meeting again).

    Empty means null, ``""``, ``[]`` or ``{}``; ``0`` and ``false`` are values.
    """

    type: VarType = VarType.any
    refs: list[Ref] = Field(min_length=1)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"output": self.type}

    def ref_type(self, field: str) -> VarType | None:
        return self.type if field == "refs" and self.type is not VarType.any else None


# -------------------------------------------------------------------- interactive


class SelectOption(BaseModel):
    """One choice of a user select; its ``id`` is the output handle taken when chosen."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    label: str


@node_kind("user_select", "User select")
class UserSelectConfig(NodeConfig):
    """Pauses the run with a question and options; the branch of the option the person picks is
    taken.

    The answer may be the option id or its label (case, spacing and surrounding quotes
    ignored); anything else asks again with an error.
    """

    description: str = Field(description="Jinja2 template shown to the person")
    options: list[SelectOption] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> UserSelectConfig:
        ids = [o.id for o in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"option ids must be unique: {ids}")
        return self

    def handles(self) -> list[str]:
        return [o.id for o in self.options]

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"selected": VarType.string, "label": VarType.string}

    def templates(self) -> Iterator[tuple[str, str]]:
        yield "description", self.description


@node_kind("form_input", "Form input")
class FormInputConfig(NodeConfig):
    """Pauses the run with a form; outputs each field, and all of them together as form.

    Answers are validated (required, type with :func:`nodes.if_else.coerce`, enum);
    an invalid answer asks again listing the errors.
    """

    description: str = Field(default="", description="Jinja2 template shown above the form")
    fields: list[FormField] = Field(min_length=1)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {**{f.name: f.type for f in self.fields}, "form": VarType.object}

    def templates(self) -> Iterator[tuple[str, str]]:
        if self.description:
            yield "description", self.description


# -------------------------------------------------------------------------- loops


@node_kind("iteration", "Iteration")
class IterationConfig(NodeConfig):
    """Runs its body (the nodes inside it) once per item of a list.

    Inside the body, ``THIS.item`` and ``THIS.index`` read the current item and its
    index; ``collect`` (resolved in the item's scope after its body ran) is that
    item's result. Items run in order, ``concurrency`` at a time; each item has its
    own scope, so no node output leaks from one item into the next.

    ``item_error``: ``fail`` - the first failing item fails the node (then the node's
    error strategy applies); ``continue`` - the item's result is null and its status
    failed; ``skip`` - the item is left out of ``results``.
    """

    items: Value
    collect: Value
    concurrency: int = Field(default=1, ge=1, le=32)
    item_error: Literal["fail", "continue", "skip"] = "fail"
    max_iterations: int | None = Field(
        default=None, ge=1, description="most items accepted (also limited per run)"
    )

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"results": VarType.array, "statuses": VarType.array, "count": VarType.number}

    def body_outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {"item": VarType.any, "index": VarType.number}

    def ref_type(self, field: str) -> VarType | None:
        return VarType.array if field == "items" else None

    def body_fields(self) -> set[str]:
        return {"collect"}


class LoopUpdate(BaseModel):
    """After each round: ``variable`` = ``value`` (resolved in the round's scope)."""

    model_config = ConfigDict(extra="forbid")

    variable: str
    value: Value


@node_kind("loop", "Loop")
class LoopConfig(NodeConfig):
    """Repeats its body until its break condition holds, a Loop break node runs, or the iteration
    limit is reached.

    ``variables`` are the loop variables with their initial values; inside the body
    ``THIS.<name>`` and ``THIS.index`` read them. After each round the ``update``
    values (which may reference the round's nodes) become the next values.
    ``break_when`` is checked before every round (``logic`` combines the conditions);
    reaching ``max_iterations`` rounds fails the node with reason ``max_iterations``.
    Outputs: every loop variable's final value and ``rounds``.
    """

    variables: list[InputBinding] = Field(default_factory=list)
    update: list[LoopUpdate] = Field(default_factory=list)
    break_when: list[Condition] = Field(default_factory=list)
    logic: Literal["and", "or"] = "and"
    max_iterations: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _check_names(self) -> LoopConfig:
        names = [v.name for v in self.variables]
        reserved = sorted({"index", "rounds"} & set(names))
        if reserved:
            raise ValueError(f"loop variables cannot be named {reserved}")
        unknown = sorted({u.variable for u in self.update} - set(names))
        if unknown:
            raise ValueError(f"update names undeclared loop variables {unknown}; declare them in variables")
        return self

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            **{v.name: v.type or VarType.any for v in self.variables},
            "rounds": VarType.number,
            "index": VarType.number,
        }

    def body_outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return {
            **{v.name: v.type or VarType.any for v in self.variables},
            "index": VarType.number,
            "rounds": VarType.number,
        }

    def body_fields(self) -> set[str]:
        return {"update", "break_when"}


@node_kind("loop_break", "Loop break")
class LoopBreakConfig(NodeConfig):
    """Inside a loop body: when it runs, the loop ends after the current round."""

    def handles(self) -> list[str]:
        return []


# -------------------------------------------------------------------- unsupported


@node_kind("unsupported", "Unsupported (imported)")
class UnsupportedConfig(NodeConfig):
    """Placeholder for a node an importer could not convert (flowloom import --allow-partial).

    It keeps the original node's place in the graph: ``outputs`` and ``handles`` are
    the outputs other nodes read and the handles edges leave from, so the workflow
    compiles. Running it always fails, naming the original node kind and the reason.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    original_type: str = Field(
        min_length=1, description="the node kind in the source file, e.g. datasetSearchNode"
    )
    reason: str = Field(min_length=1, description="why it was not converted")
    outputs_: dict[str, VarType] = Field(default_factory=dict, alias="outputs")
    handles_: list[str] = Field(default_factory=lambda: ["out"], alias="handles")

    def handles(self) -> list[str]:
        return list(self.handles_)

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        return dict(self.outputs_)
