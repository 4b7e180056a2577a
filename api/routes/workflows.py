"""``/v1/workflows``: saved workflows of the caller's tenant.

- ``POST /v1/workflows`` (the document; its ``id`` names the workflow, 409 when taken),
  ``GET /v1/workflows``, ``GET/PUT/DELETE /v1/workflows/{id}``: the draft. ``PUT`` takes
  ``{workflow, draft_version}``; a draft changed since is 409 with ``current_version``.
- ``POST /v1/workflows/validate`` (a document) and ``POST /v1/workflows/{id}/validate``
  (the draft): every compile problem, as ``flowloom validate --json`` prints them.
- ``POST /v1/workflows/scope`` (a document, a node id, a config field): what that node
  may reference there, for the variable picker - exactly what the compiler accepts.
- ``POST .../publish`` (compiled first: 422 with the problems), ``GET .../versions``,
  ``POST .../rollback`` (an old version published again as a new one).
- ``POST /v1/workflows/import`` (multipart ``file`` or JSON ``{source, ...}``; the
  converted workflow and the import report; ``?save=true`` saves it as a draft) and
  ``GET .../export`` (the draft, or ``?version=N``).
- ``POST .../runs``: run the published version (``?draft=true``: the draft), as
  ``POST /v1/runs`` answers; the run records the version it ran.

Who may do what: a key of the whole tenant does everything; a key scoped to an app
reads and runs (published version only) the workflow whose id is its app id, and gets
403 for changes to it. Another tenant's workflow, or another app's for an app key, is
404 exactly as one that does not exist.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response

from engine.compiler import check_workflow
from engine.errors import CompileError, Problem
from engine.ports import StalePublished, WorkflowNotFound, WorkflowRepo
from engine.ref_scope import reference_scope
from engine.shapes import deployment_problems, node_shapes, searched_datasets, system_reads, valid_nodes
from schemas.api import (
    MAX_NUMBER,
    ErrorBody,
    NodeScope,
    NodeScopeRequest,
    NodeShapeOut,
    RunDetail,
    ScopeEntryOut,
    WorkflowCreated,
    WorkflowDetail,
    WorkflowImport,
    WorkflowImported,
    WorkflowInputOut,
    WorkflowList,
    WorkflowOut,
    WorkflowProblems,
    WorkflowPublish,
    WorkflowRollback,
    WorkflowRunCreate,
    WorkflowUpdate,
    WorkflowVersionList,
    WorkflowVersionOut,
)
from schemas.env_vars import secret_names, strip_secret_values
from schemas.launch import Published
from schemas.records import WorkflowRecord

from ..auth import Caller, Principal, Service
from ..deployment import AppSettings, Knowledge, Workflows
from ..errors import ApiError, compile_message, parse_body
from ..limits import check_document, check_published
from ..run_context import RunStartContext
from ..run_route import RunStartRoute
from ..screened_router import ScreenedRouter
from .env_secrets import keep_secrets, unset_secret_warnings
from .runs import RUN_QUOTA_ANSWER, RUN_START_ANSWERS, link, run_document

__all__ = ["router", "run_router"]


Repo = Workflows
#: run starts tried when the published version changes under them (each one a publish that raced it)
_PUBLISH_RACES = 3
_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 409, 422)}
router = ScreenedRouter(prefix="/v1/workflows", tags=["workflows"], responses=_E)
#: The run route alone, included right after :data:`router` (so the OpenAPI document lists
#: it where it stood, last of the workflow routes): a run start is matched against one
#: route once the workflow routes are passed over, not against every one of them a second
#: time inside their router - route matching was a few per cent of a short run's CPU. Its
#: route takes the short way of a plain run start (:mod:`api.run_route`).
run_router = ScreenedRouter(
    prefix="/v1/workflows", tags=["workflows"], responses=_E, route_class=RunStartRoute
)

#: the body of a new draft: any document with a usable ``id`` (it need not compile yet)
_DOCUMENT_BODY = {
    "requestBody": {
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["id"],
                    "additionalProperties": True,
                    "properties": {
                        "id": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 200,
                            "pattern": "^[^/]*[^/\\s][^/]*$",
                            "description": "names the workflow (no `/`)",
                        },
                        "name": {"type": "string"},
                        "nodes": {"type": "array", "items": {"type": "object"}},
                        "edges": {"type": "array", "items": {"type": "object"}},
                    },
                }
            }
        }
    }
}
_SAVED = "$response.body#/id"
_PATH = "$request.path.workflow_id"
#: what a client does next with a workflow it saved or published (OpenAPI links)
_CREATED_LINKS = {
    "GetWorkflow": link("get_workflow_v1_workflows__workflow_id__get", "the draft", workflow_id=_SAVED),
    "ValidateWorkflow": link(
        "validate_workflow_v1_workflows__workflow_id__validate_post", "check the draft", workflow_id=_SAVED
    ),
    "UpdateWorkflow": {
        **link("update_workflow_v1_workflows__workflow_id__put", "replace the draft", workflow_id=_SAVED),
        "requestBody": {
            "workflow": "$response.body#/draft",
            "draft_version": "$response.body#/draft_version",
        },
    },
    "PublishWorkflow": link(
        "publish_workflow_v1_workflows__workflow_id__publish_post", "publish the draft", workflow_id=_SAVED
    ),
    "RunDraft": link(
        "run_workflow_v1_workflows__workflow_id__runs_post", "run the draft", workflow_id=_SAVED, draft=True
    ),
    "ExportWorkflow": link(
        "export_workflow_v1_workflows__workflow_id__export_get", "the draft as a file", workflow_id=_SAVED
    ),
    "DeleteWorkflow": link(
        "delete_workflow_v1_workflows__workflow_id__delete", "delete it", workflow_id=_SAVED
    ),
}
_PUBLISHED_LINKS = {
    "RunPublished": link(
        "run_workflow_v1_workflows__workflow_id__runs_post", "run the published version", workflow_id=_PATH
    ),
    "ListVersions": link(
        "list_versions_v1_workflows__workflow_id__versions_get", "the published versions", workflow_id=_PATH
    ),
    "Rollback": {
        **link(
            "rollback_workflow_v1_workflows__workflow_id__rollback_post",
            "publish it again",
            workflow_id=_PATH,
        ),
        "requestBody": {"version": "$response.body#/version"},
    },
    "ExportVersion": link(
        "export_workflow_v1_workflows__workflow_id__export_get",
        "the version as a file",
        workflow_id=_PATH,
        version="$response.body#/version",
    ),
}


def _detail(record: WorkflowRecord, model: type[WorkflowDetail] = WorkflowDetail) -> WorkflowDetail:
    return model(**record.model_dump(exclude={"tenant_id"}))


def _readable(caller: Principal, workflow_id: str) -> None:
    """An app key sees only its app's workflow. Raises WorkflowNotFound (404) otherwise."""
    if caller.app_id is not None and caller.app_id != workflow_id:
        raise WorkflowNotFound(f"no workflow {workflow_id!r}")


def _writable(caller: Principal, workflow_id: str | None = None) -> None:
    """Changes need a key of the whole tenant: 404 for another app's workflow, else 403."""
    if workflow_id is not None:
        _readable(caller, workflow_id)
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: changing workflows "
            f"needs a key of the whole tenant",
        )


#: ids a saved workflow cannot take: they name the actions under ``/v1/workflows/``, so a
#: workflow called so could be created but never read, replaced or deleted by its path
RESERVED_IDS = frozenset({"validate", "import", "scope"})


#: what a body that wraps the document (``{"workflow": {...}}``) is told by the routes
#: that take the document itself: the run and draft routes wrap it, so it is an easy slip
WRAPPED_HINT = (
    "this route takes the workflow document itself, not wrapped in `workflow` as "
    "POST /v1/runs and PUT /v1/workflows/{id} take it: send the value of `workflow`"
)


def _wrapped(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a run or draft body rather than a document."""
    return "nodes" not in doc and isinstance(doc.get("workflow"), dict)


def _document_id(doc: dict[str, Any]) -> str:
    """The document's id. Raises ApiError 422 when it has none usable (missing, empty,
    with ``/``, over 200 characters, or one of :data:`RESERVED_IDS`), or when the body
    wraps the document (:data:`WRAPPED_HINT`)."""
    if _wrapped(doc):
        raise ApiError(422, "invalid_workflow", WRAPPED_HINT)
    value = doc.get("id")
    if not isinstance(value, str) or not value.strip() or len(value) > 200 or "/" in value:
        raise ApiError(
            422,
            "invalid_workflow",
            "the workflow needs an `id` (a non-empty string without `/`, at most 200 characters)",
        )
    if value in RESERVED_IDS:
        raise ApiError(
            422,
            "invalid_workflow",
            f"id: {value!r} names an action of /v1/workflows "
            f"(POST /v1/workflows/{value}); choose another workflow id",
        )
    return value


def _problems(
    service: Any,
    doc: dict[str, Any],
    nodes: list[Any] | None = None,
    models: Any = None,
    datasets: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The compiler's problems of ``doc`` and what this deployment lacks for it, with
    ``models`` (the caller's tenant's, ``RunService.models_of``; default: the service's)
    and ``datasets`` (the tenant's datasets by id; None: not checked)."""
    models = models if models is not None else service.models
    problems = [
        *check_workflow(doc, catalog=service.catalog, models=models),
        *deployment_problems(
            doc,
            catalog=service.catalog,
            settings=service.settings,
            models=models,
            nodes=nodes,
            datasets=datasets,
        ),
    ]
    return [p.to_dict() for p in problems]


async def _tenant_datasets(knowledge: Any, tenant_id: str, nodes: list[Any]) -> dict[str, Any] | None:
    """The tenant's datasets by id when ``nodes`` search any (None: nothing to check); the
    datasets themselves, since validation also reads their embedding model."""
    if not searched_datasets(nodes):
        return None
    return {d.id: d for d in await knowledge.list_datasets(tenant_id)}


def _valid(problems: list[dict[str, Any]]) -> bool:
    return not any(p["severity"] == "error" for p in problems)


async def _validate(service: Any, knowledge: Any, doc: dict[str, Any], tenant_id: str) -> WorkflowProblems:
    """The validate answer for ``doc`` in tenant ``tenant_id`` (its models and datasets):
    its problems, declared inputs, node shapes and the ``sys`` variables it reads (its
    nodes validated once for all of them)."""
    nodes = valid_nodes(doc, service.catalog)
    models = await service.models_of(tenant_id)
    problems = _problems(service, doc, nodes, models, await _tenant_datasets(knowledge, tenant_id, nodes))
    shapes = node_shapes(doc, catalog=service.catalog, nodes=nodes)
    return WorkflowProblems(
        valid=_valid(problems),
        problems=problems,
        inputs=WorkflowInputOut.of_document(doc),
        nodes={nid: NodeShapeOut(handles=s.handles, outputs=s.outputs) for nid, s in shapes.items()},
        system_reads=system_reads(doc, catalog=service.catalog, nodes=nodes),
    )


# ---------------------------------------------------------------------- drafts


@router.post(
    "",
    status_code=201,
    response_model=WorkflowCreated,
    summary="Save a new workflow (its draft)",
    openapi_extra=_DOCUMENT_BODY,
    responses={201: {"links": _CREATED_LINKS}},
)
async def create_workflow(
    doc: dict[str, Any], caller: Caller, repo: Repo, settings: AppSettings, service: Service
) -> WorkflowDetail:
    """The document becomes the draft (version 1) of the workflow named by its ``id``;
    it need not compile yet (``validate`` says what is wrong), but must be within the
    size caps (422 naming the path). 409 when the id is taken."""
    _writable(caller)
    check_document(doc, settings)
    doc, secrets = strip_secret_values(doc)
    created = await repo.create(caller.tenant_id, {**doc, "id": _document_id(doc)})
    await keep_secrets(service, caller.tenant_id, created.id, secrets)
    return _detail(created, WorkflowCreated)


@router.get("", response_model=WorkflowList, summary="List the tenant's workflows")
async def list_workflows(caller: Caller, repo: Repo) -> WorkflowList:
    """By id, without documents (an app key sees its app's workflow only)."""
    found = await repo.list(caller.tenant_id, caller.app_id)
    return WorkflowList(
        workflows=[WorkflowOut(**r.model_dump(exclude={"tenant_id", "draft"})) for r in found]
    )


@router.post("/validate", response_model=WorkflowProblems, summary="Validate an unsaved document")
async def validate_document(
    doc: dict[str, Any], caller: Caller, service: Service, knowledge: Knowledge
) -> WorkflowProblems:
    """Every compile problem of the document (errors and warnings), and a warning for
    each secret it declares that has no value for its workflow id. A body that wraps the
    document in ``workflow`` gets that said in the problem of its ``workflow`` field."""
    answer = await _validate(service, knowledge, doc, caller.tenant_id)
    if _wrapped(doc):
        for problem in answer.problems:
            if problem["path"] == "workflow":
                problem["message"] = f"{problem['message']}; {WRAPPED_HINT}"
    return await _with_secrets(answer, service, caller, doc)


async def _with_secrets(
    answer: WorkflowProblems, service: Any, caller: Principal, doc: dict[str, Any]
) -> WorkflowProblems:
    answer.problems += await unset_secret_warnings(service, caller.tenant_id, doc)
    return answer


@router.post("/scope", response_model=NodeScope, summary="What a node may reference")
async def node_scope(
    body: NodeScopeRequest, _caller: Caller, service: Service, settings: AppSettings
) -> NodeScope:
    """The references node ``node_id`` may use in config field ``field``: inputs, run and
    conversation variables, system variables and the outputs of the nodes it may read,
    decided by the compiler's own reference rule. 422 when the document's top level is
    invalid or it has no such node."""
    check_document(body.workflow, settings)
    try:
        entries = reference_scope(body.workflow, body.node_id, catalog=service.catalog, field=body.field)
    except CompileError as exc:
        raise ApiError(
            422,
            "invalid_workflow",
            "; ".join(p.message for p in exc.problems) or "invalid workflow",
            problems=[p.to_dict() for p in exc.problems],
        ) from None
    return NodeScope(
        node_id=body.node_id,
        field=body.field,
        entries=[
            ScopeEntryOut(path=e.path, group=e.group, node_id=e.node_id, output=e.output, type=e.type)
            for e in entries
        ],
    )


@router.put("/validate", include_in_schema=False)
@router.put("/import", include_in_schema=False)
@router.put("/scope", include_in_schema=False)
async def put_on_an_action(request: Request) -> Response:
    """405: ``/validate``, ``/import`` and ``/scope`` are actions (``POST``), not workflows to replace;
    without this the path would read as ``PUT /v1/workflows/{workflow_id}`` of a workflow
    called ``validate`` and answer about a body it was never meant to take."""
    action = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    does = {
        "validate": "validates an unsaved document",
        "import": "converts a workflow file",
        "scope": "answers what a node may reference",
    }.get(action, "is an action")
    raise ApiError(
        405,
        "method_not_allowed",
        f"PUT is not allowed on /v1/workflows/{action}: POST {does}; a saved "
        "workflow's draft is replaced with PUT /v1/workflows/{id}",
        headers={"Allow": "POST"},
    )


@router.get("/{workflow_id}", response_model=WorkflowDetail, summary="A workflow with its draft")
async def get_workflow(workflow_id: str, caller: Caller, repo: Repo) -> WorkflowDetail:
    """The draft, its version, and the published version (None: none yet)."""
    _readable(caller, workflow_id)
    return _detail(await repo.get(caller.tenant_id, workflow_id))


@router.put("/{workflow_id}", response_model=WorkflowDetail, summary="Replace the draft")
async def update_workflow(
    workflow_id: str,
    body: WorkflowUpdate,
    caller: Caller,
    repo: Repo,
    settings: AppSettings,
    service: Service,
) -> WorkflowDetail:
    """The new draft when ``draft_version`` is still the draft's version (it goes up by
    one); else 409 ``{"error", "current_version"}``. The document's id must stay; the
    document must be within the size caps (422 naming the path)."""
    _writable(caller, workflow_id)
    check_document(body.workflow, settings)
    if body.workflow.get("id", workflow_id) != workflow_id:
        raise ApiError(
            422, "invalid_workflow", f"the document's id must be {workflow_id!r} (ids do not change)"
        )
    doc, secrets = strip_secret_values({**body.workflow, "id": workflow_id})
    updated = await repo.update_draft(caller.tenant_id, workflow_id, doc, body.draft_version)
    await keep_secrets(service, caller.tenant_id, workflow_id, secrets)
    return _detail(updated)


@router.delete("/{workflow_id}", status_code=204, summary="Delete a workflow and its versions")
async def delete_workflow(workflow_id: str, caller: Caller, repo: Repo, service: Service) -> Response:
    """Its runs stay (with their own retention); its secret values go."""
    _writable(caller, workflow_id)
    await repo.delete(caller.tenant_id, workflow_id)
    if service.secrets is not None:  # a workflow made again under this id starts with no secrets
        await service.secrets.delete_secrets(caller.tenant_id, workflow_id)
    return Response(status_code=204)


@router.post("/{workflow_id}/validate", response_model=WorkflowProblems, summary="Validate the draft")
async def validate_workflow(
    workflow_id: str, caller: Caller, repo: Repo, service: Service, knowledge: Knowledge
) -> WorkflowProblems:
    """Every compile problem of the draft, as ``flowloom validate --json`` prints them."""
    _readable(caller, workflow_id)
    draft = (await repo.get(caller.tenant_id, workflow_id)).draft
    return await _with_secrets(
        await _validate(service, knowledge, draft, caller.tenant_id), service, caller, draft
    )


# -------------------------------------------------------------------- versions


def _version_out(version: Any, published: int | None) -> WorkflowVersionOut:
    return WorkflowVersionOut(
        version=version.version,
        doc_hash=version.doc_hash,
        note=version.note,
        created_at=version.created_at,
        published=version.version == published,
    )


async def _publish(
    repo: WorkflowRepo, service: Any, caller: Principal, workflow_id: str, doc: dict[str, Any], note: str
) -> WorkflowVersionOut:
    """Compile ``doc`` (422 with every problem when it has errors), then publish it."""
    problems = _problems(service, doc, models=await service.models_of(caller.tenant_id))
    if not _valid(problems):
        errors = [Problem(**p) for p in problems if p["severity"] == "error"]
        raise ApiError(422, "invalid_workflow", compile_message(errors), problems=problems)
    version = await repo.publish(caller.tenant_id, workflow_id, doc, note)
    return _version_out(version, version.version)


@router.post(
    "/{workflow_id}/publish",
    status_code=201,
    response_model=WorkflowVersionOut,
    summary="Publish the draft as a new version",
    responses={201: {"links": _PUBLISHED_LINKS}},
)
async def publish_workflow(
    workflow_id: str, body: WorkflowPublish, caller: Caller, repo: Repo, service: Service
) -> WorkflowVersionOut:
    """The draft, compiled, becomes version n+1 and what apps and keys run."""
    _writable(caller, workflow_id)
    record = await repo.get(caller.tenant_id, workflow_id)
    return await _publish(repo, service, caller, workflow_id, record.draft, body.note)


@router.get("/{workflow_id}/versions", response_model=WorkflowVersionList, summary="Published versions")
async def list_versions(workflow_id: str, caller: Caller, repo: Repo) -> WorkflowVersionList:
    """Oldest first; ``published`` marks the one that runs."""
    _readable(caller, workflow_id)
    record = await repo.get(caller.tenant_id, workflow_id)
    found = await repo.versions(caller.tenant_id, workflow_id)
    return WorkflowVersionList(
        versions=[_version_out(v, record.published_version) for v in found],
        published_version=record.published_version,
    )


@router.post(
    "/{workflow_id}/rollback",
    status_code=201,
    response_model=WorkflowVersionOut,
    summary="Publish an earlier version again",
)
async def rollback_workflow(
    workflow_id: str, body: WorkflowRollback, caller: Caller, repo: Repo, service: Service
) -> WorkflowVersionOut:
    """Version ``version``'s document becomes a new version (the draft is unchanged)."""
    _writable(caller, workflow_id)
    old = await repo.get_version(caller.tenant_id, workflow_id, body.version)
    note = body.note if body.note is not None else f"rollback to version {body.version}"
    return await _publish(repo, service, caller, workflow_id, old.doc or {}, note)


@router.get(
    "/{workflow_id}/export",
    summary="The draft or a version as a workflow file",
    responses={200: {"content": {"application/json": {"schema": {"type": "object"}}}}},
)
async def export_workflow(
    workflow_id: str,
    caller: Caller,
    repo: Repo,
    version: Annotated[int | None, Query(ge=1, le=MAX_NUMBER)] = None,
) -> JSONResponse:
    """The document (importable again as it is), as an attachment ``<id>.json``. A
    secret environment variable is listed by name with an empty value (its type is the
    marker that a value must be set after import); values never leave the store."""
    _readable(caller, workflow_id)
    if version is None:
        doc = (await repo.get(caller.tenant_id, workflow_id)).draft
    else:
        doc = (await repo.get_version(caller.tenant_id, workflow_id, version)).doc or {}
    doc, _values = strip_secret_values(doc, blank="")  # documents hold none; a file never does
    return JSONResponse(doc, headers={"Content-Disposition": f'attachment; filename="{workflow_id}.json"'})


# ---------------------------------------------------------------------- import

_IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": WorkflowImport.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "FastGPT JSON, Dify YAML or Flowloom JSON",
                        },
                        "model_map": {
                            "type": "string",
                            "description": "JSON object: source model -> registry model",
                        },
                        "dataset_map": {
                            "type": "string",
                            "description": "JSON object: source dataset id -> dataset id",
                        },
                        "secrets": {
                            "type": "string",
                            "description": "JSON object: secret name -> value (stored encrypted with ?save=true)",
                        },
                        "allow_partial": {"type": "boolean"},
                        "workflow_id": {"type": "string"},
                    },
                }
            },
        },
    }
}


async def _import_request(request: Request) -> tuple[WorkflowImport, bytes | str, str | None]:
    """The import parameters, the file's content and its name (for the default id).
    Raises ApiError 422 for a body that is neither form."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form()
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise ApiError(422, "invalid_request", "send the file in the form field `file`")
        try:
            params = WorkflowImport(
                source="-",
                model_map=_form_object(form, "model_map", {"gpt-4o": "default"}),
                dataset_map=_form_object(form, "dataset_map", {"*": "my-dataset"}),
                secrets=_form_object(form, "secrets", {"API_KEY": "..."}),
                allow_partial=str(form.get("allow_partial", "")).lower() in ("1", "true", "on"),
                workflow_id=form.get("workflow_id") or None,
            )
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"invalid import options: {exc}") from None
        return params, await upload.read(), upload.filename
    params = parse_body(
        await request.body(),
        WorkflowImport,
        'send `{"source": "<the file\'s text>"}` as JSON or the file as multipart `file`: ',
    )
    return params, params.source, None


async def _mapped_datasets(knowledge: Any, tenant_id: str, dataset_map: dict[str, str]) -> set[str] | None:
    """The tenant's dataset ids when the import maps datasets (None: nothing to check)."""
    return {d.id for d in await knowledge.list_datasets(tenant_id)} if dataset_map else None


def _form_object(form: Any, field: str, example: dict[str, str]) -> dict[str, Any]:
    """The JSON object in form field ``field`` (absent or empty: ``{}``).

    Raises:
        ValueError: naming the field, the form it takes (``example``) and what was sent:
            the CLI's ``SOURCE=ID`` form is what people send first, and a JSON decoder's
            "Expecting value: line 1 column 1" names neither."""
    text = str(form.get(field) or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise ValueError(
            f"{field}: must be a JSON object such as {json.dumps(example)} (got {shown!r})"
        ) from None
    return value


def _default_id(data: bytes | str, filename: str | None) -> str | None:
    """A Flowloom document keeps its id; another format takes the uploaded file's name."""
    from nodes.importers import ImportFailed, detect_format, parse_source, unwrap_download

    try:
        if filename is None or detect_format(unwrap_download(parse_source(data))) == "flowloom":
            return None
    except ImportFailed:
        return None
    return PurePath(filename).stem or None


@router.post(
    "/import",
    response_model=WorkflowImported,
    openapi_extra=_IMPORT_BODY,
    summary="Convert a FastGPT / Dify / Flowloom file (optionally save it)",
)
async def import_file(
    request: Request, caller: Caller, repo: Repo, service: Service, knowledge: Knowledge, save: bool = False
) -> WorkflowImported:
    """The converted workflow and its import report; 422 with the report as ``problems``
    when it cannot be converted (see ``allow_partial``). Nothing in the file is run.
    A ``dataset_map`` target the caller's tenant has no dataset of is reported
    (``unknown_dataset`` warning, naming the closest id it has).
    ``?save=true`` saves the result as a new draft (409 when its id is taken).
    ``packages`` lists what the code nodes import, installed in the code sandbox or not,
    and ``install_commands`` the operator's commands for the rest (a code node needing a
    package not installed does not convert: ``missing_package``)."""
    from engine.code_packages import package_env
    from nodes.importers import API_MODEL_HINTS, ImportFailed, import_workflow

    if save:
        _writable(caller)
    params, data, filename = await _import_request(request)
    try:
        result = import_workflow(
            data,
            catalog=service.catalog,
            models=await service.models_of(caller.tenant_id),
            allow_partial=params.allow_partial,
            model_map=params.model_map,
            workflow_id=params.workflow_id or _default_id(data, filename),
            hints=API_MODEL_HINTS,
            dataset_map=params.dataset_map,
            packages=package_env(service.settings),
            datasets=await _mapped_datasets(knowledge, caller.tenant_id, params.dataset_map),
        )
    except ImportFailed as exc:
        install = "; ".join(exc.install_commands)
        raise ApiError(
            422,
            "invalid_import",
            f"the file cannot be imported ({exc.source_format or 'unknown format'})"
            + (f"; its code needs packages the operator must install first: {install}" if install else ""),
            problems=[i.to_dict() for i in exc.report],
        ) from None
    workflow, _values = strip_secret_values(result.workflow)
    saved = None
    if save:
        created = await repo.create(caller.tenant_id, {**workflow, "id": _document_id(workflow)})
        await keep_secrets(
            service,
            caller.tenant_id,
            created.id,
            {k: v for k, v in params.secrets.items() if k in secret_names(workflow) and v},
        )
        saved = _detail(created)
    return WorkflowImported(
        workflow=workflow,
        report=[i.to_dict() for i in result.report],
        source_format=result.source_format,
        partial=result.partial,
        models=result.models,
        datasets=result.datasets,
        saved=saved,
        secrets_needed=secret_names(workflow),
        packages=result.packages,
        install_commands=result.install_commands,
    )


# ------------------------------------------------------------------------ runs


@run_router.post(
    "/{workflow_id}/runs",
    response_model=RunDetail,
    summary="Run the published version (or the draft)",
    responses={**RUN_START_ANSWERS, **RUN_QUOTA_ANSWER},
)
async def run_workflow(
    workflow_id: str,
    body: WorkflowRunCreate,
    context: RunStartContext,
    draft: Annotated[bool, Query(description="run the draft (keys of the whole tenant)")] = False,
) -> Response:
    """As ``POST /v1/runs`` with the saved document: the published version (409 when
    none is), or with ``?draft=true`` the draft. The run records ``workflow_version``
    (the version number, or ``draft``)."""
    caller, repo, service, settings = context.caller, context.workflows, context.service, context.settings
    placement, heartbeat_s = context.placement, context.heartbeat_s
    _readable(caller, workflow_id)
    if draft:
        record = await repo.get(caller.tenant_id, workflow_id)
        if caller.app_id is not None:
            raise ApiError(
                403,
                "forbidden",
                "running a draft needs a key of the whole tenant; app keys run the published version",
            )
        return await run_document(
            record.draft,
            body,
            caller=caller,
            service=service,
            settings=settings,
            placement=placement,
            heartbeat_s=heartbeat_s,
            workflow_version="draft",
        )
    for _attempt in range(_PUBLISH_RACES):
        # The version may come from memory: the run is created only while it is still the
        # published one, else nothing is stored and it is read again.
        if (found := await repo.published(caller.tenant_id, workflow_id, cached=True)) is None:
            raise ApiError(
                409,
                "conflict",
                f"workflow {workflow_id!r} has no published version: publish it, or "
                f"run the draft with ?draft=true",
            )
        try:
            return await run_document(
                found.doc or {},
                body,
                caller=caller,
                service=service,
                settings=settings,
                placement=placement,
                heartbeat_s=heartbeat_s,
                workflow_version=str(found.version),
                published=Published(workflow_id, found.version, found.doc_hash),
                checked=check_published(found.doc or {}, found.doc_hash, settings),
            )
        except StalePublished:
            continue
    raise ApiError(
        409, "conflict", f"workflow {workflow_id!r} was published again while the run started; retry"
    )
