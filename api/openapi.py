"""The OpenAPI document the app serves (``/openapi.json``), complete for code generators.

FastAPI documents the request and response models of the routes. Two things are added:

- The run event stream. Its frames are not a response model (the body is
  ``text/event-stream``), so their schemas are added to ``components/schemas`` here:
  ``RunEvent`` (every run event, one ``oneOf`` told apart by ``type``), ``RunStreamMeta``
  (the first frame) and ``RunStreamDone`` (the last), with the models they name. The
  event routes' ``itemSchema`` points at them (:data:`RUN_SSE_CONTENT`). The web canvas's
  TypeScript types are generated from this document (``npm run gen:api``), so the
  canvas reads events with the server's own types.
- ``$defs`` nested in inline schemas (request bodies given as
  ``Model.model_json_schema()``) move into ``components/schemas``: in an OpenAPI document
  a ``$ref`` is read from the document's root, so the nested form does not resolve.

The document is built once per app; ``web/src/api/openapi.json`` is this document as
written by ``web/scripts/dump_openapi.py``, and a test fails when the two differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

__all__ = ["RUN_SSE_CONTENT", "SSE_CONTENT", "complete_document", "install_openapi", "stream_schemas"]

_REF = "#/components/schemas/{model}"

#: a stream of server-sent events: ``schema`` is the whole body, ``itemSchema`` one event
#: (``event``: the type; ``id``: the run event's ``seq``; ``data``: one JSON object)
SSE_CONTENT: dict[str, Any] = {
    "text/event-stream": {
        "schema": {"type": "string"},
        "itemSchema": {
            "type": "object",
            "required": ["data"],
            "properties": {
                "event": {"type": "string"},
                "id": {"type": "string"},
                "data": {"type": "string", "contentMediaType": "application/json"},
            },
        },
    }
}

#: a run's event stream: ``meta`` first, then the run's events (``event``: the event's
#: ``type``, ``id``: its ``seq``), then ``done``, or ``error`` when the stream breaks
RUN_SSE_CONTENT: dict[str, Any] = {
    "text/event-stream": {
        "schema": {"type": "string"},
        "itemSchema": {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "description": "`meta`, a run event's `type`, `done` or `error`"},
                "id": {"type": "string", "description": "the run event's `seq` (none on the other frames)"},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    # anyOf, not oneOf: the frame's ``event`` tells the four apart; their
                    # payloads may fit more than one (a run event has a ``run_id`` as meta does)
                    "contentSchema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/RunStreamMeta"},
                            {"$ref": "#/components/schemas/RunEvent"},
                            {"$ref": "#/components/schemas/RunStreamDone"},
                            {"$ref": "#/components/schemas/ErrorBody"},
                        ]
                    },
                },
            },
        },
    }
}


def stream_schemas() -> dict[str, dict[str, Any]]:
    """The component schemas of the run event stream: ``RunEvent``, ``RunStreamMeta``,
    ``RunStreamDone`` and every model they name (as serialized: every field present)."""
    from schemas.events import RunStreamDone, RunStreamMeta, event_adapter

    out: dict[str, dict[str, Any]] = {}
    for name, adapter in (
        ("RunEvent", event_adapter()),
        ("RunStreamMeta", TypeAdapter(RunStreamMeta)),
        ("RunStreamDone", TypeAdapter(RunStreamDone)),
    ):
        schema = adapter.json_schema(mode="serialization", ref_template=_REF)
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    return out


def _shape(schema: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two schemas of one name apart: their fields, values and variants (FastAPI
    and pydantic write the same model with small differences, such as ``default: null``)."""
    return (
        sorted(schema.get("properties", {})),
        schema.get("enum"),
        schema.get("type"),
        len(schema.get("oneOf", [])),
    )


def _merge(components: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    """Add ``schema`` as component ``name`` (the one there is kept when it is the same
    model); another model of the same name is a bug (two types would silently merge in
    the generated code), so it raises ValueError."""
    if name in components:
        if _shape(components[name]) != _shape(schema):
            raise ValueError(f"OpenAPI component {name!r} has two different schemas")
        return
    components[name] = schema


def _hoist(node: Any, components: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        for name, schema in (node.pop("$defs", None) or {}).items():
            _merge(components, name, _hoist(schema, components))
        return {
            key: (
                value.replace("#/$defs/", "#/components/schemas/")
                if key == "$ref"
                else _hoist(value, components)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hoist(value, components) for value in node]
    return node


def complete_document(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the event stream's schemas and nested ``$defs`` in ``components``.

    Raises:
        ValueError: two different schemas share a component name.
    """
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in stream_schemas().items():
        _merge(components, name, schema)
    return _hoist(doc, components)


def install_openapi(app: Any) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) answer the completed document."""
    base: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete_document(base())
        return app.openapi_schema

    app.openapi = openapi
