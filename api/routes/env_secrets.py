"""``/v1/workflows/{id}/secrets``: the values of a workflow's secret environment variables.

- ``GET``: each secret the draft declares, whether a value is set and when; never a value.
- ``PUT`` ``{"values": {NAME: "value" | null}}``: set values (``null`` deletes one); the
  names must be secrets the draft declares (422 naming the others).

Values are stored encrypted per tenant and workflow id (:mod:`engine.environment`) and
read by each run when it executes, so setting one needs no publish: the published
version names the secret, the store holds its current value. Keys of the whole tenant
only (an app key gets 403 for its app's workflow, 404 for any other); another tenant's
workflow is 404.

:func:`keep_secrets` is what the workflow routes call when a saved document carries
secret values (the canvas sends a new value once, inside the draft): the values are
taken out of the document and stored here.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine.errors import Problem
from engine.ports import WorkflowNotFound
from schemas.api import ErrorBody
from schemas.api_env import SecretsOut, SecretStatus, SecretsUpdate
from schemas.env_vars import secret_names

from ..auth import Caller, Principal, Service
from ..deployment import Workflows
from ..errors import ApiError

__all__ = ["keep_secrets", "router", "unset_secret_warnings"]

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 422)}
router = APIRouter(prefix="/v1/workflows", tags=["workflows"], responses=_E)


def _tenant_key(caller: Principal, workflow_id: str) -> None:
    if caller.app_id is not None:
        if caller.app_id != workflow_id:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: secrets need a key of the whole tenant",
        )


def _store(service: Any) -> Any:
    if service.secrets is None:
        raise ApiError(503, "unavailable", "this deployment keeps no secrets")
    return service.secrets


async def _status(service: Any, tenant_id: str, workflow_id: str, draft: dict[str, Any]) -> SecretsOut:
    stored = await _store(service).secret_status(tenant_id, workflow_id)
    declared = secret_names(draft)
    rows = [SecretStatus(name=n, set=n in stored, declared=True, updated_at=stored.get(n)) for n in declared]
    rows += [
        SecretStatus(name=n, set=True, declared=False, updated_at=at)
        for n, at in sorted(stored.items())
        if n not in declared
    ]
    return SecretsOut(workflow_id=workflow_id, secrets=rows)


@router.get(
    "/{workflow_id}/secrets",
    response_model=SecretsOut,
    summary="Which secrets have a value (never the values)",
)
async def get_secrets(workflow_id: str, caller: Caller, repo: Workflows, service: Service) -> SecretsOut:
    """Each secret the draft declares, set or not."""
    _tenant_key(caller, workflow_id)
    draft = (await repo.get(caller.tenant_id, workflow_id)).draft
    return await _status(service, caller.tenant_id, workflow_id, draft)


@router.put("/{workflow_id}/secrets", response_model=SecretsOut, summary="Set or delete secret values")
async def put_secrets(
    workflow_id: str, body: SecretsUpdate, caller: Caller, repo: Workflows, service: Service
) -> SecretsOut:
    """Stores each value encrypted (``null``: deletes it); answers as ``GET``."""
    _tenant_key(caller, workflow_id)
    draft = (await repo.get(caller.tenant_id, workflow_id)).draft
    declared = set(secret_names(draft))
    unknown = sorted(n for n, v in body.values.items() if v is not None and n not in declared)
    if unknown:
        raise ApiError(
            422,
            "invalid_request",
            f"not secret environment variables of {workflow_id!r}: "
            f"{', '.join(unknown)} (declare them in the draft's environment first)",
        )
    await _store(service).set_secrets(caller.tenant_id, workflow_id, body.values)
    return await _status(service, caller.tenant_id, workflow_id, draft)


async def keep_secrets(service: Any, tenant_id: str, workflow_id: str, values: dict[str, str]) -> None:
    """Store the secret ``values`` a saved document carried (taken out of it with
    :func:`~schemas.env_vars.strip_secret_values`), once the document is saved."""
    if values:
        await _store(service).set_secrets(tenant_id, workflow_id, values)


async def unset_secret_warnings(service: Any, tenant_id: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A warning ``unset_secret`` for each secret ``doc`` declares that has no value for
    its workflow id in ``tenant_id`` (a run would fail at the node reading it); none
    when the document declares no secret (no query then)."""
    declared = secret_names(doc)
    if not declared or service.secrets is None or not isinstance(doc.get("id"), str):
        return []
    stored = await service.secrets.secret_status(tenant_id, doc["id"])
    return [
        Problem(
            "unset_secret",
            f"secret environment variable {name!r} has no value: set it in the "
            "Environment section (or PUT /v1/workflows/{id}/secrets)",
            path=f"environment[{i}]",
            severity="warning",
        ).to_dict()
        for i, name in (
            (i, v.get("name"))
            for i, v in enumerate(doc.get("environment") or [])
            if isinstance(v, dict) and v.get("type") == "secret"
        )
        if name in declared and name not in stored
    ]
