"""The short way of a plain run start (:mod:`api.run_route`): both run routes take it for
the request FastAPI would take as sent, and every request - plain or not - gets the same
status and body from an app with the short way as from one with FastAPI's handler alone."""

from __future__ import annotations

import re
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

import api.run_route as run_route
from api.routes.runs import router as runs_router
from api.routes.workflows import run_router
from api.run_route import RunStartRoute, short_way_for
from engine.settings import Settings

from .conftest import open_api

_DOC = {
    "id": "greeter",
    "name": "greeter",
    "inputs": [{"name": "name", "type": "string", "required": False, "default": "Ada"}],
    "nodes": [
        {"id": "start", "type": "start"},
        {
            "id": "greet",
            "type": "template",
            "config": {
                "template": "Hello, {{ who }}!",
                "variables": [{"name": "who", "value": {"ref": "inputs.name"}, "type": "string"}],
            },
        },
        {"id": "say", "type": "answer", "config": {"text": "{{ greet.output }}"}},
    ],
    "edges": [
        {"id": "e1", "source": "start", "target": "greet"},
        {"id": "e2", "source": "greet", "target": "say"},
    ],
}
_BROKEN = {**_DOC, "edges": [{"id": "e1", "source": "start", "target": "nowhere"}]}
_JSON = {"Content-Type": "application/json"}
_VOLATILE = {
    "run_id",
    "id",
    "created_at",
    "started_at",
    "finished_at",
    "duration_s",
    "waited_s",
    "lease_until",
}
_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _steady(value: Any) -> Any:
    """``value`` with the fields that differ between two runs of one request (ids, times) masked."""
    if isinstance(value, dict):
        return {k: "*" if k in _VOLATILE else _steady(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    if isinstance(value, str):
        return _ID.sub("<id>", value)
    return value


def test_both_run_routes_have_the_short_way() -> None:
    starts = [r for r in [*runs_router.routes, *run_router.routes] if isinstance(r, RunStartRoute)]
    assert sorted(r.path for r in starts) == ["/v1/runs", "/v1/workflows/{workflow_id}/runs"]
    assert all(short_way_for(r) is not None for r in starts)


def test_none_when_fastapi_does_not_say_how_it_builds_a_handler(monkeypatch) -> None:
    import fastapi.routing

    route = next(r for r in run_router.routes if isinstance(r, RunStartRoute))
    assert run_route._effective(route) is route
    monkeypatch.delattr(fastapi.routing, "_effective_route_context_var")
    assert run_route._effective(route) is None


def test_a_route_of_another_shape_has_none() -> None:
    from fastapi import APIRouter, Header

    router = APIRouter(route_class=RunStartRoute)

    @router.post("/things/{thing_id}")
    async def thing(thing_id: str, x_thing: str = Header()) -> dict[str, str]:
        return {"thing": thing_id}

    assert short_way_for(router.routes[0]) is None


async def _requests(
    key: str, other: str, app_key: str
) -> list[tuple[str, str, dict[str, str], bytes | None]]:
    """``(method, url, headers, body)``: plain starts (the short way) and the requests it
    hands to FastAPI: a query, another content type, bodies that are not JSON or do not
    validate, missing and wrong keys (alone and with a bad body), a bad placement header,
    an unknown workflow, a document that does not compile, an app key, another tenant."""
    import json

    auth = {"Authorization": f"Bearer {key}", **_JSON}

    def body(value: Any) -> bytes:
        return json.dumps(value).encode()

    wf = "/v1/workflows/greeter/runs"
    return [
        ("POST", wf, auth, body({"inputs": {"name": "Bo"}, "response_mode": "blocking"})),
        ("POST", wf, auth, body({})),
        ("POST", wf, auth, body({"response_mode": "async"})),
        ("POST", wf, auth, body({"response_mode": "streaming"})),
        ("POST", wf + "?draft=true", auth, body({"response_mode": "blocking"})),
        ("POST", wf + "?draft=nope", auth, body({})),
        ("POST", wf, {**auth, "Content-Type": "application/json; charset=utf-8"}, body({})),
        ("POST", wf, {**auth, "Content-Type": "text/plain"}, body({})),
        ("POST", wf, auth, b"{not json"),
        ("POST", wf, auth, b""),
        ("POST", wf, auth, body([1, 2])),
        ("POST", wf, auth, body({"response_mode": "later"})),
        ("POST", wf, auth, body({"inputs": {"name": 3}})),
        ("POST", wf, auth, body({"surprise": True})),
        ("POST", wf, _JSON, body({})),
        ("POST", wf, {"Authorization": "Bearer fl_nope0000_wrongwrongwrong", **_JSON}, body({})),
        ("POST", wf, {"Authorization": "Bearer fl_nope0000_wrongwrongwrong", **_JSON}, body({"x": 1})),
        ("POST", wf, {"Authorization": "Basic abc", **_JSON}, body({})),
        ("POST", wf, _JSON, b"{not json"),
        ("POST", wf, {**auth, "X-Flowloom-Execution": "elsewhere"}, body({})),
        ("POST", wf, {**auth, "X-Flowloom-Execution": "inline"}, body({})),
        ("POST", "/v1/workflows/nobody/runs", auth, body({})),
        ("POST", wf, {"Authorization": f"Bearer {other}", **_JSON}, body({})),
        ("POST", wf, {"Authorization": f"Bearer {app_key}", **_JSON}, body({})),
        ("POST", "/v1/runs", auth, body({"workflow": _DOC, "inputs": {"name": "Cy"}})),
        ("POST", "/v1/runs", auth, body({"workflow": _BROKEN})),
        ("POST", "/v1/runs", auth, body({"workflow": _DOC, "response_mode": "async"})),
        ("POST", "/v1/runs", auth, body({"inputs": {}})),
        ("POST", "/v1/runs", {"Authorization": f"Bearer {app_key}", **_JSON}, body({"workflow": _DOC})),
        ("POST", "/v1/runs?x=1", auth, body({"workflow": _DOC})),
        ("GET", wf, auth, None),
        ("POST", wf + "/", auth, body({})),
    ]


async def _answers(tmp_path: Path, name: str) -> tuple[list[tuple[int, Any]], int]:
    """The answers of one app to :func:`_requests`, and how many took the short way."""
    taken = 0
    real = run_route.bearer

    async def counted(request: Any) -> Any:  # the short way reads the key through this name
        nonlocal taken
        taken += 1
        return await real(request)

    settings = Settings(home=tmp_path / name, database_url=f"sqlite+aiosqlite:///{tmp_path / name}.db")
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(open_api(settings))
        client = api.client
        assert (await client.post("/v1/workflows", json=_DOC, headers=api.auth())).status_code == 201
        published = await client.post("/v1/workflows/greeter/publish", json={"note": "t"}, headers=api.auth())
        assert published.status_code == 201
        _made, app_key = await api.keys.create_key("default", name="app", app_id="greeter")
        run_route.bearer = counted  # type: ignore[assignment]
        try:
            answers = []
            for method, url, headers, content in await _requests(api.key, api.other_key, app_key):
                got = await client.request(method, url, headers=headers, content=content)
                kind = got.headers.get("content-type", "")
                if "json" in kind:
                    answers.append((got.status_code, _steady(got.json())))
                elif "event-stream" in kind:  # the events' names in order (their data holds ids and times)
                    names = [line for line in got.text.splitlines() if line.startswith("event:")]
                    answers.append((got.status_code, names))
                else:
                    answers.append((got.status_code, got.text))
        finally:
            run_route.bearer = real
    return answers, taken


async def test_the_short_way_answers_as_fastapi_does(tmp_path, monkeypatch) -> None:
    short, taken = await _answers(tmp_path, "short")
    monkeypatch.setattr(run_route, "short_way_for", lambda route: None)
    plain, untaken = await _answers(tmp_path, "plain")
    assert untaken == 0
    # what the short way takes: the bodies that validate with no query string and the plain
    # content type - five workflow runs (one streamed) (inputs are checked by the launch, not the body), the
    # three whose key is missing, wrong or not a bearer (401 from the short way), the bad and
    # the inline placement header, the unknown workflow, another tenant's key, the app's key,
    # and four document runs (the broken one and the app key's refused past the body)
    assert taken == 17
    for got, expected, request in zip(short, plain, await _requests("k", "o", "a"), strict=True):
        assert got == expected, request[:2]
    statuses = [status for status, _ in short]
    assert statuses.count(200) >= 4 and 401 in statuses and 422 in statuses and 202 in statuses
    assert short[3][1][:2] == ["event: meta", "event: run_started"] and short[3][1][-1] == "event: done"


@pytest.mark.parametrize("mode", ["blocking", "async"])
async def test_a_plain_start_runs(tmp_path, mode) -> None:
    settings = Settings(home=tmp_path / "h", database_url=f"sqlite+aiosqlite:///{tmp_path / 'h'}.db")
    async with open_api(settings) as api:
        got = await api.client.post(
            "/v1/runs",
            json={"workflow": _DOC, "inputs": {"name": "Di"}, "response_mode": mode},
            headers=api.auth(),
        )
        assert got.status_code == (200 if mode == "blocking" else 202)
        run_id = got.json()["run_id"]
        await api.service.follow_to_end("default", run_id)
        detail = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
        assert detail["status"] == "succeeded" and detail["answer"] == "Hello, Di!"
