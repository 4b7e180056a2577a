"""Response bodies of ``/v1/node-kinds``: the node kinds the editor offers, with their
labels and configuration shapes. Re-exported by :mod:`schemas.api`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "KindLabel",
    "NodeKindOut",
    "NodeKindList",
]


class KindLabel(BaseModel):
    """A node kind's title and description in one language, and the titles of its config
    fields in that language (property name -> title, for the names the kind's config
    schema uses at its root or in its ``$defs``; a name without one keeps its English
    title), and the labels of the enum values its selects offer (value -> label)."""

    title: str
    description: str
    fields: dict[str, str] = Field(
        default_factory=dict, description="config property name (root or $defs) -> its title in this language"
    )
    values: dict[str, str] = Field(
        default_factory=dict,
        description="enum value offered by the kind's config "
        "schema (root or $defs) -> its label in this language; the stored value stays "
        "the enum's own",
    )
    help: dict[str, str] = Field(
        default_factory=dict,
        description="a config field's English help (the first "
        "paragraph of its schema description, whitespace collapsed) -> its help in this "
        "language",
    )


class NodeKindOut(BaseModel):
    """A node kind of the engine's catalog, for the canvas palette and forms.

    ``config_schema`` is the JSON Schema of the kind's config. ``handles`` and
    ``outputs`` are those of the kind's default config: static for most kinds; for kinds
    whose handles or outputs follow from their config (an if/else's cases, a
    classifier's categories, an HTTP request's extracted fields, the start node's
    declared inputs) they show the default and ``config_dependent`` is true; None when
    the kind has no default config (required fields). Every node may also take the
    ``error`` handle, added by its error strategy."""

    kind: str
    title: str
    description: str
    category: str = ""
    icon: str = ""
    traits: dict[str, Any]
    config_schema: dict[str, Any]
    handles: list[str] | None = None
    outputs: dict[str, str] | None = None
    config_dependent: bool = True
    labels: dict[str, KindLabel] = Field(
        default_factory=dict,
        description="language tag (zh-CN...) -> title and "
        "description in that language; English is title/description",
    )


class NodeKindList(BaseModel):
    """``GET /v1/node-kinds``: every kind of the catalog, in palette order; ``models``:
    the names of the model registry that ``model`` fields accept; ``system_variables``:
    the ``sys`` names a reference may read (name -> type name); ``node_fields_schema``:
    the JSON Schema of the fields every node has besides its config (name, description,
    timeout, retries, error strategy, default output...); ``node_field_labels``: their
    titles per language; ``node_value_labels``: the labels of their enum values per
    language."""

    kinds: list[NodeKindOut]
    models: list[str] = Field(default_factory=list)
    system_variables: dict[str, str] = Field(default_factory=dict)
    node_fields_schema: dict[str, Any] = Field(default_factory=dict)
    node_field_labels: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="language tag (zh-CN...) -> title of each property name of "
        "node_fields_schema (root and $defs); English is the schema's own",
    )
    node_value_labels: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="language tag (zh-CN...) -> label of each enum value of "
        "node_fields_schema (error strategy...); English is the value itself",
    )
    embedding_models: list[str] = Field(
        default_factory=list,
        description="the registry's embedding models (what a dataset's embedding_model accepts)",
    )
    node_field_help: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="language tag (zh-CN...) -> English help of a field of "
        "node_fields_schema -> its help in that language",
    )
