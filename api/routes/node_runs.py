"""``/v1/workflows/{id}/nodes/{node_id}/run``: one node of the draft run on its own (a
builder's "run this step").

- ``GET``: what the node reads (reference keys such as ``start.query``, with their
  types and whether they have a default) and its last run among the workflow's runs
  (status, outputs, error, duration, and the values its references had there).
- ``POST`` ``{inputs: {key: value}, from_last}``: a new run of the draft that executes
  only that node, through the engine's normal path (sandbox, limits, model calls, usage
  counted and admitted under the quotas as any run), listed in the history as kind
  ``single_node``; answered once it ended with the node's run (outputs or error). A
  reference the node reads that got no value is 422 naming it; an unknown node 404.

Both need a key of the whole tenant (they work on the draft), as running the draft does.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine.single_node import MissingNodeInputs, NodeRunRefused, read_references
from schemas.api import (
    ErrorBody,
    NodeLastRun,
    NodeReadOut,
    NodeRunCreate,
    NodeRunInfo,
    NodeRunOut,
    SingleNodeRunOut,
)
from schemas.launch import RunNode

from ..auth import Caller, Principal, Service
from ..deployment import AppSettings, Workflows
from ..errors import ApiError
from ..limits import check_document

__all__ = ["router"]

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 422)}
router = APIRouter(prefix="/v1/workflows", tags=["workflows"], responses=_E)


async def _draft(caller: Principal, repo: Any, workflow_id: str) -> dict[str, Any]:
    """The caller's draft of ``workflow_id``. Raises WorkflowNotFound (404), ApiError 403 for an app key."""
    if caller.app_id is not None:
        if caller.app_id != workflow_id:
            from engine.ports import WorkflowNotFound

            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        raise ApiError(403, "forbidden", "running one node of the draft needs a key of the whole tenant")
    return (await repo.get(caller.tenant_id, workflow_id)).draft


@router.get(
    "/{workflow_id}/nodes/{node_id}/run",
    response_model=NodeRunInfo,
    summary="What a node reads, and its last run",
)
async def node_run_info(
    workflow_id: str, node_id: str, caller: Caller, repo: Workflows, service: Service
) -> NodeRunInfo:
    """The references the node reads in the draft and its last run (None when it never
    ran). 404 for an unknown node (with a close name), 422 when the draft does not compile."""
    doc = await _draft(caller, repo, workflow_id)
    try:
        reads = read_references(service.compile(doc), node_id)
        last = await service.last_node_run(caller.tenant_id, workflow_id, node_id, doc)
    except NodeRunRefused as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    return NodeRunInfo(
        node_id=node_id,
        reads=[NodeReadOut(**ref.to_dict()) for ref in reads],
        last=None
        if last is None
        else NodeLastRun(run_id=last.run_id, node_run=NodeRunOut.of(last.node_run), values=last.values),
    )


@router.post(
    "/{workflow_id}/nodes/{node_id}/run",
    response_model=SingleNodeRunOut,
    summary="Run one node of the draft on its own",
    responses={429: {"model": ErrorBody, "description": "a quota is used up (`Retry-After`)"}},
)
async def run_node(
    workflow_id: str,
    node_id: str,
    body: NodeRunCreate,
    caller: Caller,
    repo: Workflows,
    service: Service,
    settings: AppSettings,
) -> SingleNodeRunOut:
    """Run the node alone with ``inputs`` (module docstring); answers once it ended."""
    doc = await _draft(caller, repo, workflow_id)
    check_document(doc, settings)
    try:
        ticket = await service.launch(
            caller.tenant_id,
            RunNode(doc, node_id, body.inputs, from_last=body.from_last, workflow_version="draft"),
        )
    except NodeRunRefused as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    except MissingNodeInputs as exc:
        raise ApiError(
            422, "invalid_inputs", str(exc), problems=[f"{key}: no value given" for key in exc.missing]
        ) from None
    async for _event in service.follow(caller.tenant_id, ticket.run_id):
        pass
    summary, _state, node_runs = await service.detail(caller.tenant_id, ticket.run_id)
    run = next((r for r in node_runs if r.node_id == node_id and not r.data.get("given")), None)
    return SingleNodeRunOut(
        run_id=ticket.run_id,
        node_id=node_id,
        status=summary.status,
        node_run=NodeRunOut.of(run) if run is not None else None,
        error=summary.error,
        duration_s=summary.duration_s,
        tokens_in=summary.tokens_in,
        tokens_out=summary.tokens_out,
        cost=summary.cost,
    )
