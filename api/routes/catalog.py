"""``GET /v1/node-kinds``: every node kind of the app's catalog (the engine's
``NodeCatalog`` that compiles the workflows), for the canvas palette and forms.

Generated from the catalog, never listed here: title and description from the config
class, category, icon and traits from the ``KindSpec``, the config JSON Schema from
``NodeCatalog.config_schema``, the labels in other languages from ``KindSpec.labels``
with the field titles (``nodes.catalog.FIELD_LABELS``) of the property names the
kind's schema uses and the labels (``nodes.catalog.VALUE_LABELS``) of its enum values.
Handles and outputs are those of the kind's default config (``config_dependent`` tells
whether a configured node may differ); a kind without a default config (required
fields) has ``handles``/``outputs`` None.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError

from engine.catalog import KindSpec, NodeCatalog
from nodes.catalog import FIELD_HELP, FIELD_LABELS, VALUE_LABELS
from nodes.help_zh import help_key
from schemas.api import ErrorBody, KindLabel, NodeKindList, NodeKindOut
from schemas.types import SYS_VARIABLES
from schemas.workflow import NodeBase, Workflow

from ..auth import Caller, Service

__all__ = [
    "enum_values",
    "help_keys",
    "node_field_help",
    "node_field_labels",
    "node_fields_schema",
    "node_kinds",
    "node_value_labels",
    "property_names",
    "router",
]

router = APIRouter(prefix="/v1/node-kinds", tags=["catalog"], responses={401: {"model": ErrorBody}})


def _overrides(config: type, name: str) -> bool:
    """True when ``config`` defines ``name`` itself rather than inheriting the base's."""
    from schemas.nodes import NodeConfig

    return getattr(config, name) is not getattr(NodeConfig, name)


def _defaults(spec: KindSpec) -> tuple[list[str] | None, dict[str, str] | None]:
    """Handles and outputs of the kind's default config (None, None without one)."""
    try:
        config = spec.config()
    except ValidationError:
        return None, None
    try:
        outputs = {name: str(t) for name, t in config.outputs(Workflow(id="catalog")).items()}
    except Exception:
        outputs = None
    return list(config.handles()), outputs


def _trait_map(spec: KindSpec) -> dict[str, Any]:
    return {
        "entry": spec.entry,
        "container": spec.container,
        "interactive": spec.interactive,
        "collects": spec.collects,
        "streams": spec.streams,
        "inside": sorted(spec.inside),
        "reads_only": spec.reads_only,
    }


@functools.cache
def node_fields_schema() -> dict[str, Any]:
    """JSON Schema of the fields every node has besides ``id``, ``type`` and ``config``
    (the execution policy and canvas fields), from the node model itself."""
    schema = NodeBase.model_json_schema()
    props = {k: v for k, v in schema.get("properties", {}).items() if k not in ("id", "type", "config")}
    defs = {k: v for k, v in schema.get("$defs", {}).items() if k != "NodeConfig"}
    return {**schema, "$defs": defs, "properties": props, "required": []}


@functools.cache
def node_field_labels() -> dict[str, dict[str, str]]:
    """Per language, the titles of the property names of :func:`node_fields_schema`."""
    names = property_names(node_fields_schema())
    return {lang: _used(titles, names) for lang, titles in FIELD_LABELS.items()}


@functools.cache
def node_field_help() -> dict[str, dict[str, str]]:
    """Per language, the help of the fields of :func:`node_fields_schema` (English help -> help)."""
    keys = help_keys(node_fields_schema())
    return {lang: _used(texts, keys) for lang, texts in FIELD_HELP.items()}


@functools.cache
def node_value_labels() -> dict[str, dict[str, str]]:
    """Per language, the labels of the enum values of :func:`node_fields_schema`."""
    values = enum_values(node_fields_schema())
    return {lang: _used(labels, values) for lang, labels in VALUE_LABELS.items()}


def _used(labels: dict[str, str], keys: list[str]) -> dict[str, str]:
    """The entries of ``labels`` for ``keys`` (a schema's property names or enum values), in their order."""
    return {key: labels[key] for key in keys if key in labels}


def enum_values(schema: Any) -> list[str]:
    """The string values of every ``enum`` in a JSON Schema (root, ``$defs``, nested
    ``anyOf``...), each once, in schema order: what the config form's selects offer.
    A property *named* ``enum`` (a user's list of allowed values) is a schema, not a
    list, and is walked like any other."""
    found: dict[str, None] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            values = node.get("enum")
            if isinstance(values, list):
                found.update(dict.fromkeys(v for v in values if isinstance(v, str)))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(schema)
    return list(found)


def property_names(schema: dict[str, Any]) -> list[str]:
    """The property names of a config JSON Schema: its root's, then each ``$defs``
    entry's (the nested objects the config form shows: cases, categories, tools...),
    each once, in schema order."""
    names: dict[str, None] = {}
    for part in (schema, *schema.get("$defs", {}).values()):
        names.update(dict.fromkeys(part.get("properties", {})))
    return list(names)


def help_keys(schema: dict[str, Any]) -> list[str]:
    """The English help of every property of a config JSON Schema (root and ``$defs``)
    and of every ``$defs`` entry (a field without a description shows its schema's), as the
    config form shows it (``nodes.help_zh.help_key``), each once."""
    keys: dict[str, None] = {}
    for part in (schema, *schema.get("$defs", {}).values()):
        if part is not schema and isinstance(
            part.get("description"), str
        ):  # shown for a field without its own
            keys[help_key(part["description"])] = None
        for prop in part.get("properties", {}).values():
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                keys[help_key(prop["description"])] = None
    return list(keys)


def _labels(spec: KindSpec, schema: dict[str, Any]) -> dict[str, KindLabel]:
    """The kind's labels per language, each with the field titles and enum value labels
    its schema uses."""
    names = property_names(schema)
    values = enum_values(schema)
    helps = help_keys(schema)
    out = {}
    for lang, title, text in spec.labels:
        out[lang] = KindLabel(
            title=title,
            description=text,
            fields=_used(FIELD_LABELS.get(lang, {}), names),
            values=_used(VALUE_LABELS.get(lang, {}), values),
            help=_used(FIELD_HELP.get(lang, {}), helps),
        )
    return out


def node_kinds(catalog: NodeCatalog) -> list[NodeKindOut]:
    """One entry per kind of ``catalog``, in catalog (palette) order."""
    out = []
    for kind in catalog:
        spec = catalog[kind]
        handles, outputs = _defaults(spec)
        fields = [name for name, field in spec.config.model_fields.items() if field.is_required()]
        dependent = bool(fields) or _overrides(spec.config, "handles") or _overrides(spec.config, "outputs")
        schema = catalog.config_schema(kind)
        out.append(
            NodeKindOut(
                kind=kind,
                title=spec.title,
                description=spec.description,
                category=spec.category,
                icon=spec.icon,
                traits=_trait_map(spec),
                config_schema=schema,
                handles=handles,
                outputs=outputs,
                config_dependent=dependent,
                labels=_labels(spec, schema),
            )
        )
    return out


@router.get("", response_model=NodeKindList, summary="Every node kind with its config schema")
async def list_node_kinds(caller: Caller, service: Service) -> NodeKindList:
    """The kinds of the catalog workflows are compiled with (the same for every tenant),
    and the chat models the caller's tenant may name (its own providers' and the operator's)."""
    found = await service.models_of(caller.tenant_id)
    models = found.names() if found is not None else []
    return NodeKindList(
        kinds=node_kinds(service.catalog),
        models=sorted(models),
        system_variables={name: str(t) for name, t in SYS_VARIABLES.items()},
        node_fields_schema=node_fields_schema(),
        node_field_labels=node_field_labels(),
        node_value_labels=node_value_labels(),
        node_field_help=node_field_help(),
        embedding_models=sorted(found.names("embedding")) if found is not None else [],
    )
