"""Writes the HTTP API's OpenAPI document (``create_app().openapi()``) to a file, for
the web canvas's generated TypeScript types (``npm run gen:api``).

Usage: ``python web/scripts/dump_openapi.py OUT.json``. Nothing is started: building
the document needs no store, so no database is opened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for `api`

from api.app import create_app  # noqa: E402


def hoist_local_defs(doc: dict[str, Any]) -> dict[str, Any]:
    """Move ``$defs`` nested in inline schemas (request bodies given as
    ``Model.model_json_schema()``) into ``components/schemas`` and point their
    ``#/$defs/X`` references there: in an OpenAPI document a ``$ref`` is read from the
    document's root, so the nested form does not resolve in code generators.

    Raises ValueError when a hoisted definition differs from a component of the same
    name (the types would silently merge otherwise).
    """
    components = doc.setdefault("components", {}).setdefault("schemas", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            for name, schema in (node.pop("$defs", None) or {}).items():
                schema = walk(schema)
                if name in components and components[name] != schema:
                    raise ValueError(f"nested schema {name!r} differs from the component of that name")
                components[name] = schema
            return {k: (v.replace("#/$defs/", "#/components/schemas/") if k == "$ref" else walk(v))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(doc)


def main(out: str) -> None:
    """Dump the document, keys sorted so regenerating it gives a stable diff."""
    doc = hoist_local_defs(create_app().openapi())
    Path(out).write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "src/api/openapi.json")
