"""Writes the HTTP API's OpenAPI document (``create_app().openapi()``, completed by
:mod:`api.openapi`) to a file, for the web canvas's generated TypeScript types
(``npm run gen:api``); ``tests/api/test_openapi_snapshot.py`` fails when the file and the
served document differ.

Usage: ``python web/scripts/dump_openapi.py OUT.json``. Nothing is started: building
the document needs no store, so no database is opened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for `api`

from api.app import create_app


def document_text() -> str:
    """The document as the file holds it: keys sorted, so regenerating gives a stable diff."""
    return json.dumps(create_app().openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(out: str) -> None:
    Path(out).write_text(document_text())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "src/api/openapi.json")
