"""The OpenAPI document checked in for the canvas (``web/src/api/openapi.json``, from
which ``npm run gen:api`` generates its TypeScript types) is the one the app serves: a
change of the API that is not regenerated fails here, so the canvas's types never drift.
The document describes the run event stream too (``RunEvent``, a union told apart by
``type``), which the canvas reads with those types."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from engine.settings import Settings
from schemas.events import Event

from .conftest import open_api

SNAPSHOT = Path(__file__).resolve().parents[2] / "web" / "src" / "api" / "openapi.json"
REGENERATE = "PYTHONPATH=$PWD npm --prefix web run gen:api"


def _differences(served: object, kept: object, path: str = "") -> list[str]:
    """Where two JSON values differ (paths, at most a few), for a readable failure."""
    if isinstance(served, dict) and isinstance(kept, dict):
        out: list[str] = []
        for key in sorted(set(served) | set(kept)):
            if key not in kept:
                out.append(f"{path}/{key}: served, not in the file")
            elif key not in served:
                out.append(f"{path}/{key}: in the file, not served")
            else:
                out += _differences(served[key], kept[key], f"{path}/{key}")
        return out
    return [] if served == kept else [f"{path}: differs"]


async def test_the_checked_in_openapi_document_is_the_one_the_app_serves(tmp_path):
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'x.db'}")
    async with open_api(settings) as api:
        served = (await api.client.get("/openapi.json")).json()
    kept = json.loads(SNAPSHOT.read_text())
    where = _differences(served, kept)
    assert not where, f"web/src/api/openapi.json is stale; regenerate it with {REGENERATE}:\n" + "\n".join(where[:20])


def test_the_document_types_every_run_event_and_the_event_routes_name_them():
    document = json.loads(SNAPSHOT.read_text())
    schemas = document["components"]["schemas"]
    union = schemas["RunEvent"]
    members = typing.get_args(typing.get_args(Event)[0])
    types = {member.model_fields["type"].default for member in members}
    assert set(union["discriminator"]["mapping"]) == types
    assert {ref["$ref"].rsplit("/", 1)[-1] for ref in union["oneOf"]} == {member.__name__ for member in members}
    node_events = [m.__name__ for m in members if "node_id" in m.model_fields]
    assert all("attempt" in schemas[name]["required"] for name in node_events), "attempt is on every node event"
    assert schemas["NodeFinished"]["properties"]["error"]["anyOf"][0] == {"$ref": "#/components/schemas/NodeError"}
    assert schemas["RunPaused"]["properties"]["interrupts"]["items"] == {"$ref": "#/components/schemas/Interrupt"}
    for path in ("/v1/runs/{run_id}/events", "/v1/runs"):
        operation = document["paths"][path]["get" if path.endswith("events") else "post"]
        item = operation["responses"]["200"]["content"]["text/event-stream"]["itemSchema"]
        frames = item["properties"]["data"]["contentSchema"]["anyOf"]
        assert {"$ref": "#/components/schemas/RunEvent"} in frames
    for name in ("RunStreamMeta", "RunStreamDone", "NodeData", "AgentRecord", "AgentRound", "BodyRun"):
        assert name in schemas, name
    assert schemas["NodeRunOut"]["properties"]["data"]["$ref"] == "#/components/schemas/NodeData"
