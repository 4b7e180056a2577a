"""Request and response bodies of the workflow routes of the HTTP API (``/v1/workflows``):
workflows and their versions, publishing, importing, the editor's checks and scopes.
Re-exported by :mod:`schemas.api`, whose rules (strict request numbers) they follow."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: the largest version or event number a request may name: the stores keep them in 32-bit
#: integer columns, so a larger number could name nothing and is refused as invalid (422)
MAX_NUMBER = 2**31 - 1

__all__ = [
    "MAX_NUMBER",
    "WorkflowOut",
    "WorkflowDetail",
    "WorkflowCreated",
    "WorkflowList",
    "WorkflowUpdate",
    "WorkflowInputOut",
    "NodeShapeOut",
    "ChatVariables",
    "NodeScopeRequest",
    "ScopeEntryOut",
    "NodeScope",
    "WorkflowProblems",
    "WorkflowPublish",
    "WorkflowRollback",
    "WorkflowVersionOut",
    "WorkflowVersionList",
    "WorkflowImport",
    "CodePackageOut",
    "WorkflowImported",
    "WorkflowRunCreate",
]


class WorkflowOut(BaseModel):
    """A saved workflow as lists show it (without its document)."""

    id: str
    name: str = ""
    draft_version: int
    published_version: int | None = Field(
        default=None, description="the version apps and keys run (None: none yet)"
    )
    created_at: float
    updated_at: float


class WorkflowDetail(WorkflowOut):
    """``GET /v1/workflows/{id}``: the workflow with its draft document."""

    draft: dict[str, Any]


class WorkflowCreated(WorkflowDetail):
    """201: the saved workflow (draft version 1)."""


class WorkflowList(BaseModel):
    """``GET /v1/workflows``: the tenant's workflows, by id."""

    workflows: list[WorkflowOut]


class WorkflowUpdate(BaseModel):
    """``PUT /v1/workflows/{id}``: the new draft and the draft version it was edited
    from; when the draft changed since, 409 with ``current_version``."""

    model_config = ConfigDict(extra="forbid")

    workflow: dict[str, Any] = Field(description="the draft document (its id must be the workflow's)")
    draft_version: int = Field(ge=1, le=MAX_NUMBER, strict=True)


class WorkflowInputOut(BaseModel):
    """A declared input of a workflow (what a run form asks for): ``type`` is ``string``,
    ``number``, ``boolean``, ``object`` or ``array``; ``default`` applies when the input is
    left out (a required input without a default must be given)."""

    name: str
    type: str = "string"
    required: bool = False
    default: Any = None
    description: str = ""

    @classmethod
    def of_document(cls, doc: dict[str, Any]) -> list[WorkflowInputOut]:
        """The document's well-formed inputs, in order (a malformed one is a validation
        problem, left out here rather than guessed)."""
        from .workflow import InputVar

        declared = doc.get("inputs")
        found = []
        for item in declared if isinstance(declared, list) else []:
            try:
                var = InputVar.model_validate(item)
            except ValueError:
                continue
            found.append(
                cls(
                    name=var.name,
                    type=var.type.value,
                    required=var.required,
                    default=var.default,
                    description=var.description,
                )
            )
        return found


class NodeShapeOut(BaseModel):
    """What a node offers downstream: its output ``handles`` in order (``error`` included
    under the error-branch strategy) and its ``outputs`` (name -> type name); ``outputs``
    is None when they follow from an invalid part of the document."""

    handles: list[str]
    outputs: dict[str, str] | None = None


class ChatVariables(BaseModel):
    """A chat's conversation variables (name -> value): ``GET``/``PUT
    /v1/chats/{id}/variables``. A ``PUT`` sets the names it gives and keeps the others;
    the next turn starts from them (a value that does not fit the workflow's declared
    type refuses that turn, 422 naming the variable)."""

    variables: dict[str, Any] = Field(default_factory=dict)


class NodeScopeRequest(BaseModel):
    """``POST /v1/workflows/scope``: a workflow document (saved or not, finished or not),
    one of its nodes, and the top-level config key being edited (body fields of a
    container, e.g. an iteration's ``collect``, see more than its other fields)."""

    workflow: dict[str, Any]
    node_id: str = Field(min_length=1)
    field: str | None = None


class ScopeEntryOut(BaseModel):
    """One reference the node may use: ``path`` is the text to store (``{"ref": path}`` or
    ``{{ path }}``); ``group``: ``inputs``/``vars``/``conversation``/``sys``/``node``."""

    path: str
    group: str
    node_id: str | None = None
    output: str | None = None
    type: str | None = None


class NodeScope(BaseModel):
    """What a node may reference: exactly what the compiler accepts in that field."""

    node_id: str
    field: str | None = None
    entries: list[ScopeEntryOut]


class WorkflowProblems(BaseModel):
    """``POST .../validate``: every compile problem (errors and warnings), as
    ``flowloom validate --json`` prints them; ``valid`` when none is an error; ``inputs``:
    the declared inputs, for a run form; ``nodes``: node id -> its handles and outputs,
    for every node whose own fields are valid (an editor offers edges and references
    from these even while other parts of the document are wrong); ``system_reads``: the
    ``sys`` names those nodes read (a run form asks for a message only when ``query`` is
    one)."""

    valid: bool
    problems: list[dict[str, Any]]
    inputs: list[WorkflowInputOut] = Field(default_factory=list)
    nodes: dict[str, NodeShapeOut] = Field(default_factory=dict)
    system_reads: list[str] = Field(
        default_factory=list,
        description="the sys variables the valid nodes read, sorted (query, history, chat_id...), config "
        "defaults included: a client shows a message box only for workflows that read sys.query, "
        "and treats one that reads query or history as a chat flow",
    )


class WorkflowPublish(BaseModel):
    """``POST /v1/workflows/{id}/publish``: publish the draft with a note."""

    model_config = ConfigDict(extra="forbid")

    note: str = Field(default="", max_length=2000)


class WorkflowRollback(BaseModel):
    """``POST /v1/workflows/{id}/rollback``: publish version ``version`` again, as a new version."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=MAX_NUMBER, strict=True)
    note: str | None = Field(default=None, max_length=2000)


class WorkflowVersionOut(BaseModel):
    """A published version (immutable)."""

    version: int
    doc_hash: str
    note: str = ""
    created_at: float
    published: bool = Field(default=False, description="the version apps and keys run now")


class WorkflowVersionList(BaseModel):
    """``GET /v1/workflows/{id}/versions``: oldest first."""

    versions: list[WorkflowVersionOut]
    published_version: int | None = None


class WorkflowImport(BaseModel):
    """``POST /v1/workflows/import`` as JSON: the file's text (FastGPT workflow JSON,
    Dify DSL YAML or a Flowloom workflow). ``model_map``: source model name -> registry
    model (``"*"`` for every unknown one); ``allow_partial``: replace what cannot be
    converted by failing placeholders instead of refusing; ``workflow_id``: the id of
    the result (default: a Flowloom document keeps its own, others take their name)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1)
    model_map: dict[str, str] = Field(default_factory=dict)
    dataset_map: dict[str, str] = Field(
        default_factory=dict,
        description="source dataset id -> dataset id of this "
        'tenant ("*" for every unmapped one and for searches with none selected)',
    )
    allow_partial: bool = Field(default=False, strict=True)
    workflow_id: str | None = Field(default=None, min_length=1, max_length=200)
    secrets: dict[str, str] = Field(
        default_factory=dict,
        max_length=200,
        description="values of the secret "
        "environment variables the file declares, stored encrypted with ?save=true",
    )


class CodePackageOut(BaseModel):
    """A package code nodes of an imported flow import: ``module`` as the code imports it
    (``json_repair``, ``lodash``), ``requirement`` what installs it (``json-repair``; null
    for a JavaScript file path, which nothing installs), ``installed`` in the code sandbox's
    package environment, and the source ``nodes`` that import it."""

    language: Literal["python", "javascript"]
    module: str
    requirement: str | None
    installed: bool
    nodes: list[str]


class WorkflowImported(BaseModel):
    """The converted workflow and the import report (``ImportIssue`` per node,
    reference or setting not carried over as it was); ``saved`` with ``?save=true``."""

    workflow: dict[str, Any]
    report: list[dict[str, Any]]
    source_format: str
    partial: bool = Field(description="some nodes became failing `unsupported` placeholders")
    models: dict[str, str] = Field(default_factory=dict, description="source model -> registry model used")
    datasets: dict[str, str] = Field(
        default_factory=dict, description="source dataset id -> dataset id searched"
    )
    saved: WorkflowDetail | None = None
    secrets_needed: list[str] = Field(
        default_factory=list,
        description="secret environment variables the workflow "
        "declares: their values are not in any file; give them as `secrets`",
    )
    packages: list[CodePackageOut] = Field(
        default_factory=list,
        description="every package the code nodes import, and whether the code sandbox has it installed",
    )
    install_commands: list[str] = Field(
        default_factory=list,
        description="the operator's commands that install the packages not installed "
        "(`flowloom sandbox install ...`); until then those code nodes do not convert",
    )


class WorkflowRunCreate(BaseModel):
    """``POST /v1/workflows/{id}/runs``: as ``POST /v1/runs`` without the document (the
    published version runs; ``?draft=true`` runs the draft, for keys of the whole tenant)."""

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict)
    response_mode: Literal["blocking", "streaming", "async"] = "blocking"
    chat_id: str | None = Field(default=None, min_length=1, max_length=200)
    message: str | None = None
