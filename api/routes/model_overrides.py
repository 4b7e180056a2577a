"""``/v1/model-capabilities/{name}``: a model's limits and capabilities as the caller's
tenant's runs see them, and the tenant's overrides of them.

- ``GET``: the effective ``max_context``, ``max_output_tokens`` and ``capabilities``
  (the operator's registry, the tenant's providers, then the tenant's override), the
  override itself (``{}`` when none) and the values it applies to (``registry``). Any
  key of the tenant.
- ``PUT``: set the tenant's override (a :class:`~nodes.llm.model_overrides.ModelOverride`:
  only the keys given change; it replaces the tenant's previous override of that model).
  An override that makes the model invalid (an output cap not below the context) is 422.
- ``DELETE``: drop it (204; 404 when there was none).

Changes need an admin key of the whole tenant (403 otherwise). They apply to the
tenant's runs only: another tenant keeps the operator's values (the operator changes
those for everyone in the override file, ``flowloom models probe NAME --write``). A
model the tenant cannot name is 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from nodes.llm.model_overrides import ModelOverride
from nodes.llm.model_registry import Capabilities, ModelConfigError, ModelRegistry, ModelSpec, UnknownModel
from schemas.api import ErrorBody

from ..auth import Admin, Caller, Principal
from ..composition import Deployment
from ..deployment import deployment
from ..errors import ApiError
from ..model_overrides import OverriddenModelSource

__all__ = ["ModelCapabilities", "ModelLimits", "router"]

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 422)}
# not under /v1/models: that is the OpenAI model list, whose "models" are published apps
router = APIRouter(prefix="/v1/model-capabilities", tags=["model capabilities"], responses=_E)

ModelName = Annotated[
    str, Path(min_length=1, max_length=200, description="a chat model's name (may hold / and :)")
]


class ModelLimits(BaseModel):
    """A model's context window and output cap (tokens), and its capabilities."""

    model_config = ConfigDict(frozen=True)

    max_context: int
    max_output_tokens: int
    capabilities: Capabilities


class ModelCapabilities(ModelLimits):
    """What the tenant's runs use for ``model``; ``override``: the tenant's override (the
    keys it sets, ``{}`` when none); ``registry``: the values before it."""

    model: str
    override: dict[str, Any] = Field(default_factory=dict)
    registry: ModelLimits


def _source(found: Deployment) -> OverriddenModelSource:
    source = found.tenant_models
    if not isinstance(source, OverriddenModelSource):  # pragma: no cover - every API deployment has it
        raise ApiError(503, "unavailable", "model overrides need the SQL store")
    return source


async def _found(found: Annotated[Deployment, Depends(deployment)]) -> Deployment:
    _source(found)
    return found


Found = Annotated[Deployment, Depends(_found)]


def _chat_model(registry: ModelRegistry, name: str) -> ModelSpec:
    try:
        return registry.get(name)
    except UnknownModel as exc:
        raise ApiError(404, "not_found", str(exc)) from None


def _limits(spec: ModelSpec) -> ModelLimits:
    return ModelLimits(
        max_context=spec.max_context, max_output_tokens=spec.max_output_tokens, capabilities=spec.capabilities
    )


async def _answer(found: Deployment, tenant_id: str, name: str) -> ModelCapabilities:
    source = _source(found)
    before = _chat_model(await source.unoverridden(tenant_id), name)
    effective = _chat_model(await source.models_for(tenant_id), name)
    override = (await source.overrides.overrides(tenant_id)).get(name, {})
    return ModelCapabilities(
        model=name, override=override, registry=_limits(before), **_limits(effective).model_dump()
    )


def _whole_tenant(caller: Principal) -> None:
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: model overrides are "
            f"changed with an admin key of the whole tenant",
        )


@router.get(
    "/{name:path}",
    response_model=ModelCapabilities,
    summary="A model's limits and capabilities as the tenant's runs see them",
)
async def get_capabilities(name: ModelName, caller: Caller, found: Found) -> ModelCapabilities:
    return await _answer(found, caller.tenant_id, name)


@router.put(
    "/{name:path}",
    response_model=ModelCapabilities,
    summary="Set the tenant's override of a model's limits and capabilities",
)
async def set_capabilities(
    name: ModelName, body: ModelOverride, caller: Admin, found: Found
) -> ModelCapabilities:
    _whole_tenant(caller)
    source = _source(found)
    spec = _chat_model(await source.unoverridden(caller.tenant_id), name)
    try:
        body.apply(spec)
    except ModelConfigError as exc:
        raise ApiError(422, "invalid_request", str(exc)) from None
    await source.overrides.set_override(caller.tenant_id, name, body.table())
    source.forget(caller.tenant_id)
    return await _answer(found, caller.tenant_id, name)


@router.delete(
    "/{name:path}", status_code=204, response_class=Response, summary="Drop the tenant's override of a model"
)
async def delete_capabilities(name: ModelName, caller: Admin, found: Found) -> Response:
    _whole_tenant(caller)
    source = _source(found)
    if not await source.overrides.delete_override(caller.tenant_id, name):
        raise ApiError(404, "not_found", f"the tenant has no override of model {name!r}")
    source.forget(caller.tenant_id)
    return Response(status_code=204)
