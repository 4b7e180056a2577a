"""``/v1/model-providers``: the caller's tenant's own model providers, their models and
its default models (Dify's "Model providers" page; the operator's ``models.toml`` stays
beside them, see :mod:`nodes.llm.tenant_registry` for which name wins).

- ``GET /presets``: the kinds of server with their usual base URLs.
- ``GET ""`` (the providers and the defaults), ``POST ""`` (201), ``GET/PATCH/DELETE /{id}``.
- ``GET /{id}/upstream-models``: what the endpoint lists at ``{base_url}/models``.
- ``POST /{id}/models`` (201), ``PATCH/DELETE /{id}/models/{name}``: its models, with
  their limits, capabilities and pricing; ``POST /{id}/models/{name}/probe`` asks the
  endpoint what works (tool calls, JSON, usage in streams, context) and stores it.
- ``GET/PUT /defaults``: the tenant's default chat, embedding and rerank models.

Keys are write-only: no answer carries one (``api_key_set`` and ``api_key_masked``
only), errors have it cut out, and nothing here logs. A key scoped to an app may read;
changes need a key of the whole tenant (403). Another tenant's provider or model is
404, exactly like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from pydantic import ValidationError

from nodes.llm.model_registry import ModelRegistry, UnknownModel
from nodes.llm.provider_endpoints import (
    EndpointError,
    check_base_url,
    guarded_transport,
    list_endpoint_models,
    redact,
)
from nodes.llm.tenant_registry import RESERVED_NAMES, model_spec_of
from schemas.api import ErrorBody
from schemas.providers import (
    PRESETS,
    ModelDefaults,
    PresetList,
    ProbeOutcome,
    ProviderCreate,
    ProviderList,
    ProviderModelIn,
    ProviderModelOut,
    ProviderModelUpdate,
    ProviderOut,
    ProviderUpdate,
    UpstreamModel,
    UpstreamModels,
)
from workers.secret_box import SecretUnreadable
from workers.sql.providers import (
    KEEP,
    ModelRecord,
    ProviderConflict,
    ProviderNotFound,
    ProviderRecord,
    SqlProviderStore,
)

from ..auth import Caller, Principal
from ..composition import Deployment
from ..deployment import deployment
from ..errors import ApiError
from ..tenant_models import TenantModelSource

__all__ = ["router"]

_E: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 403, 404, 409, 422)}
router = APIRouter(prefix="/v1/model-providers", tags=["model providers"], responses=_E)

ProviderId = Annotated[str, Path(min_length=1, max_length=63, description="the provider's id")]
ModelName = Annotated[
    str, Path(min_length=1, max_length=200, description="the model's name (may hold / and :)")
]
_PRESETS = {p.id: p for p in PRESETS}


@dataclass(frozen=True, slots=True)
class Parts:
    """What these routes use of the deployment: the providers' store and the tenants' registries."""

    store: SqlProviderStore
    models: TenantModelSource

    @property
    def base(self) -> ModelRegistry:
        """The operator's registry."""
        return self.models.base


async def _parts(found: Annotated[Deployment, Depends(deployment)]) -> Parts:
    if (
        found.providers is None or found.tenant_models is None
    ):  # pragma: no cover - every API deployment has them
        raise ApiError(503, "unavailable", "model providers need the SQL store")
    return Parts(found.providers, found.tenant_models)


Found = Annotated[Parts, Depends(_parts)]


def _writer(caller: Principal) -> None:
    if caller.app_id is not None:
        raise ApiError(
            403,
            "forbidden",
            f"this key is scoped to app {caller.app_id!r}: model providers are "
            f"changed with a key of the whole tenant",
        )


def _not_found(exc: ProviderNotFound) -> ApiError:
    return ApiError(404, "not_found", str(exc))


def _model_out(record: ModelRecord, base: ModelRegistry) -> ProviderModelOut:
    try:
        spec = model_spec_of(record.name, record.provider_id, record.spec)
        fields: dict[str, Any] = {
            "model": spec.model,
            "type": spec.type,
            "max_context": spec.max_context,
            "max_output_tokens": spec.max_output_tokens,
            "dimension": spec.dimension,
            "capabilities": spec.capabilities.model_dump(mode="json"),
            "pricing": spec.pricing.model_dump(mode="json"),
        }
    except (ValidationError, TypeError):  # stored before the fields changed: shown as stored
        raw = record.spec
        fields = {
            "model": str(raw.get("model") or record.name),
            "type": raw.get("type", "chat"),
            "max_context": int(raw.get("max_context") or 1),
            "max_output_tokens": int(raw.get("max_output_tokens") or 0),
            "dimension": raw.get("dimension"),
            "capabilities": dict(raw.get("capabilities") or {}),
            "pricing": dict(raw.get("pricing") or {}),
        }
    return ProviderModelOut(
        name=record.name,
        provider_id=record.provider_id,
        shadows_registry=base.has(record.name, None),
        **fields,
    )


def _out(record: ProviderRecord, base: ModelRegistry) -> ProviderOut:
    return ProviderOut(
        id=record.id,
        name=record.name,
        preset=record.preset,
        base_url=record.base_url,
        api_key_set=record.api_key_set,
        api_key_masked=record.api_key_masked,
        models=[_model_out(m, base) for m in record.models],
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


async def _checked_url(found: Parts, url: str) -> str:
    problem = await check_base_url(url, found.models.guard)
    if problem is not None:
        raise ApiError(
            422,
            "invalid_request",
            f"base_url: {problem}",
            problems=[{"loc": ["body", "base_url"], "message": problem, "code": "invalid_base_url"}],
        )
    return url.rstrip("/")


def _spec_problem(field: str, message: str) -> ApiError:
    return ApiError(
        422,
        "invalid_request",
        f"{field}: {message}",
        problems=[{"loc": ["body", field], "message": message, "code": "invalid_model"}],
    )


def _validated(name: str, provider_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` when it makes a valid registry model, else 422 naming the first problem."""
    try:
        model_spec_of(name, provider_id, spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "model"
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise _spec_problem(where, message.removeprefix(f"{where}: ")) from None
    return spec


# --------------------------------------------------------------------- presets and defaults


@router.get("/presets", response_model=PresetList, summary="The kinds of OpenAI-compatible server")
async def list_presets(caller: Caller) -> PresetList:
    """Each preset's usual base URL and whether it needs a key."""
    return PresetList(presets=list(PRESETS))


@router.get("/defaults", response_model=ModelDefaults, summary="The tenant's default models")
async def get_defaults(caller: Caller, found: Found) -> ModelDefaults:
    """The default chat, embedding and rerank models (None: not chosen)."""
    return ModelDefaults(**await found.store.defaults(caller.tenant_id))


@router.put("/defaults", response_model=ModelDefaults, summary="Choose the tenant's default models")
async def set_defaults(body: ModelDefaults, caller: Caller, found: Found) -> ModelDefaults:
    """Each field: a model of that type (the tenant's or the operator's), or null to
    clear it. The default chat model is what ``model: default`` calls in the tenant's runs."""
    _writer(caller)
    models = await found.models.models_for(caller.tenant_id)
    chosen = body.model_dump()
    for kind, name in chosen.items():
        if name is None:
            continue
        if name == "default":
            raise _spec_problem(kind, "choose a model by its own name (default is the name the choice gives)")
        try:
            models.get(name, kind)
        except UnknownModel as exc:
            raise _spec_problem(kind, str(exc)) from None
    saved = await found.store.set_defaults(caller.tenant_id, chosen)
    found.models.forget(caller.tenant_id)
    return ModelDefaults(**saved)


# ---------------------------------------------------------------------------- providers


@router.get("", response_model=ProviderList, summary="List the tenant's model providers")
async def list_providers(caller: Caller, found: Found) -> ProviderList:
    """By id, each with its models, and the tenant's default models."""
    records = await found.store.list_providers(caller.tenant_id)
    defaults = await found.store.defaults(caller.tenant_id)
    return ProviderList(providers=[_out(r, found.base) for r in records], defaults=ModelDefaults(**defaults))


@router.post("", status_code=201, response_model=ProviderOut, summary="Add a model provider")
async def create_provider(body: ProviderCreate, caller: Caller, found: Found) -> ProviderOut:
    """A new OpenAI-compatible endpoint of the tenant; ``base_url`` defaults to the preset's."""
    _writer(caller)
    preset = _PRESETS[body.preset]
    url = await _checked_url(found, body.base_url or preset.base_url)
    store = found.store
    provider_id = body.id or await store.free_id(caller.tenant_id, preset.id.replace("_", "-"))
    key = body.api_key.get_secret_value().strip() if body.api_key is not None else None
    try:
        record = await store.create_provider(
            caller.tenant_id,
            provider_id,
            name=body.name or preset.label,
            preset=body.preset,
            base_url=url,
            api_key=key or None,
        )
    except ProviderConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    found.models.forget(caller.tenant_id)
    return _out(record, found.base)


@router.get("/{provider_id}", response_model=ProviderOut, summary="Get a model provider")
async def get_provider(provider_id: ProviderId, caller: Caller, found: Found) -> ProviderOut:
    """The provider and its models (never its key)."""
    try:
        return _out(await found.store.get_provider(caller.tenant_id, provider_id), found.base)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None


@router.patch("/{provider_id}", response_model=ProviderOut, summary="Change a model provider")
async def update_provider(
    provider_id: ProviderId, body: ProviderUpdate, caller: Caller, found: Found
) -> ProviderOut:
    """Its name, base URL or key (``api_key: ""`` removes the key)."""
    _writer(caller)
    url = await _checked_url(found, body.base_url) if body.base_url is not None else None
    key: Any = KEEP if body.api_key is None else (body.api_key.get_secret_value().strip() or None)
    try:
        record = await found.store.update_provider(
            caller.tenant_id, provider_id, name=body.name, base_url=url, api_key=key
        )
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    found.models.forget(caller.tenant_id)
    return _out(record, found.base)


@router.delete("/{provider_id}", status_code=204, response_class=Response, summary="Delete a model provider")
async def delete_provider(provider_id: ProviderId, caller: Caller, found: Found) -> Response:
    """The provider, its models and the defaults naming them."""
    _writer(caller)
    try:
        await found.store.delete_provider(caller.tenant_id, provider_id)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    found.models.forget(caller.tenant_id)
    return Response(status_code=204)


@router.get(
    "/{provider_id}/upstream-models",
    response_model=UpstreamModels,
    responses={502: {"model": ErrorBody, "description": "the endpoint could not be listed"}},
    summary="The models the endpoint lists",
)
async def upstream_models(provider_id: ProviderId, caller: Caller, found: Found) -> UpstreamModels:
    """``GET {base_url}/models`` with the provider's key; ``added`` marks those the tenant has."""
    store = found.store
    try:
        record = await store.get_provider(caller.tenant_id, provider_id)
        key = await store.provider_key(caller.tenant_id, provider_id)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    except SecretUnreadable as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    try:
        listed = await list_endpoint_models(record.base_url, key, found.models.guard)
    except EndpointError as exc:
        raise ApiError(502, "bad_gateway", str(exc)) from None
    have = {str(m.spec.get("model") or m.name) for m in record.models}
    return UpstreamModels(
        models=[UpstreamModel(id=m["id"], owned_by=m["owned_by"], added=m["id"] in have) for m in listed]
    )


# ------------------------------------------------------------------------------- models


def _new_spec(body: ProviderModelIn) -> dict[str, Any]:
    cap = body.max_output_tokens
    if cap is None:
        cap = min(4096, body.max_context // 2) if body.type == "chat" else 0
    spec: dict[str, Any] = {
        "model": body.model or body.name,
        "type": body.type,
        "max_context": body.max_context,
        "max_output_tokens": cap,
        "capabilities": body.capabilities,
        "pricing": body.pricing,
    }
    if body.dimension is not None:
        spec["dimension"] = body.dimension
    return spec


@router.post("/{provider_id}/models", status_code=201, response_model=ProviderModelOut, summary="Add a model")
async def add_model(
    provider_id: ProviderId, body: ProviderModelIn, caller: Caller, found: Found
) -> ProviderModelOut:
    """A model of the provider under ``name`` (unique in the tenant; ``default`` is reserved)."""
    _writer(caller)
    if body.name in RESERVED_NAMES:
        raise _spec_problem("name", f"{body.name!r} is reserved: it names the tenant's default chat model")
    spec = _validated(body.name, provider_id, _new_spec(body))
    try:
        record = await found.store.add_model(caller.tenant_id, provider_id, body.name, spec)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    except ProviderConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    found.models.forget(caller.tenant_id)
    return _model_out(record, found.base)


@router.post(
    "/{provider_id}/models/{name:path}/probe",
    response_model=ProbeOutcome,
    responses={502: {"model": ErrorBody, "description": "the endpoint could not be probed"}},
    summary="Probe what a chat model really does",
)
async def probe(provider_id: ProviderId, name: ModelName, caller: Caller, found: Found) -> ProbeOutcome:
    """Ask the endpoint for a free and a forced tool call, JSON mode, a JSON schema,
    usage in streams and its context length (a few short requests), then store what
    works as the model's capabilities (a check that could not tell keeps the stored
    value) and the context the server told. 422 for an embedding or rerank model."""
    from nodes.llm.model_probe import ProbeFailed, ProbeTarget, probe_model

    _writer(caller)
    store = found.store
    try:
        provider = await store.get_provider(caller.tenant_id, provider_id)
        current = await store.get_model(caller.tenant_id, provider_id, name)
        key = await store.provider_key(caller.tenant_id, provider_id)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    except SecretUnreadable as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    try:
        spec = model_spec_of(name, provider_id, current.spec)
    except (ValidationError, TypeError):
        raise _spec_problem(
            "name",
            f"model {name!r} is stored with fields this version does not read; delete it and add it again",
        ) from None
    if spec.type != "chat":
        raise _spec_problem(
            "name",
            f"model {name!r} is {'an' if spec.type == 'embedding' else 'a'} {spec.type} "
            "model; only chat models are probed",
        )
    target = ProbeTarget(base_url=provider.base_url, model=spec.model, api_key=key, name=name)
    try:
        report = await probe_model(target, transport=guarded_transport(found.models.guard))
    except ProbeFailed as exc:
        raise ApiError(502, "bad_gateway", redact(str(exc), key)) from None
    stored = dict(current.spec)
    stored["capabilities"] = report.capabilities(spec.capabilities).model_dump(mode="json")
    if report.context_length:
        stored["max_context"] = report.context_length
        if spec.max_output_tokens >= report.context_length:
            stored["max_output_tokens"] = max(1, report.context_length // 2)
    record = await store.replace_model(
        caller.tenant_id, provider_id, name, _validated(name, provider_id, stored)
    )
    found.models.forget(caller.tenant_id)
    return ProbeOutcome(
        model=_model_out(record, found.base), report=_redacted(report.model_dump(mode="json"), key)
    )


def _redacted(value: Any, key: str | None) -> Any:
    """``value`` (JSON) with ``key`` cut out of every string (a server may echo it in a detail)."""
    if isinstance(value, str):
        return redact(value, key)
    if isinstance(value, dict):
        return {k: _redacted(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, key) for v in value]
    return value


@router.patch("/{provider_id}/models/{name:path}", response_model=ProviderModelOut, summary="Change a model")
async def update_model(
    provider_id: ProviderId, name: ModelName, body: ProviderModelUpdate, caller: Caller, found: Found
) -> ProviderModelOut:
    """Its upstream id, limits, capabilities (merged over the stored ones) or pricing."""
    _writer(caller)
    store = found.store
    try:
        current = await store.get_model(caller.tenant_id, provider_id, name)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    spec = dict(current.spec)
    changes = body.model_dump(exclude_unset=True)
    if "capabilities" in changes:
        given = changes.pop("capabilities") or {}
        if given.get("tools") == "forced" and "tool_choice" not in given:
            given = {
                **given,
                "tool_choice": True,
            }  # a call is forced through tool_choice: asking for one turns it on
        spec["capabilities"] = {**dict(spec.get("capabilities") or {}), **given}
    spec.update({k: v for k, v in changes.items() if v is not None or k == "dimension"})
    record = await store.replace_model(
        caller.tenant_id, provider_id, name, _validated(name, provider_id, spec)
    )
    found.models.forget(caller.tenant_id)
    return _model_out(record, found.base)


@router.delete(
    "/{provider_id}/models/{name:path}", status_code=204, response_class=Response, summary="Delete a model"
)
async def delete_model(provider_id: ProviderId, name: ModelName, caller: Caller, found: Found) -> Response:
    """The model and a default naming it."""
    _writer(caller)
    try:
        await found.store.delete_model(caller.tenant_id, provider_id, name)
    except ProviderNotFound as exc:
        raise _not_found(exc) from None
    found.models.forget(caller.tenant_id)
    return Response(status_code=204)
