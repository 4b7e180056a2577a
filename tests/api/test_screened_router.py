"""The path screen of the API's routers (:mod:`api.screened_router`): it passes over a
path exactly when no route of the router matches it, so FastAPI's answer - the route, its
path parameters, 405 for another method, the trailing-slash redirect - is the same."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.routing import Match, Mount

from api.routes import routers
from api.screened_router import ScreenedRouter, screen_of

_SEGMENT = st.text(alphabet="abz09-_.~%", min_size=1, max_size=6)


def _router() -> ScreenedRouter:
    router = ScreenedRouter(prefix="/v1/things")

    @router.get("")
    async def things() -> dict[str, str]:
        return {"route": "things"}

    @router.get("/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"route": "thing", "thing_id": thing_id}

    @router.post("/{thing_id}/runs")
    async def run(thing_id: str) -> dict[str, str]:
        return {"route": "run", "thing_id": thing_id}

    @router.get("/files/{name:path}")
    async def file(name: str) -> dict[str, str]:
        return {"route": "file", "name": name}

    return router


def _app() -> FastAPI:
    app = FastAPI()
    app.include_router(_router())
    other = ScreenedRouter(prefix="/v1/others")

    @other.get("/{other_id}/runs")
    async def other_runs(other_id: str) -> dict[str, str]:
        return {"route": "other", "other_id": other_id}

    app.include_router(other)
    return app


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_SEGMENT, max_size=5), st.booleans(), st.sampled_from(["/v1/things", "/v1/others", "/v1", ""])
)
def test_the_screen_matches_a_path_exactly_when_a_route_does(
    segments: list[str], slash: bool, base: str
) -> None:
    routes = _router().routes
    path = base + "".join("/" + s for s in segments) + ("/" if slash else "")
    scope = {"type": "http", "method": "GET", "path": path, "root_path": ""}
    by_routes = any(route.matches(scope)[0] is not Match.NONE for route in routes)
    screen = screen_of(routes)
    assert screen is not None
    assert (screen.match(path) is not None) == by_routes


def test_a_router_with_a_mount_is_not_screened() -> None:
    router = _router()
    router.routes.append(Mount("/v1/things/static", app=FastAPI()))
    assert screen_of(router.routes) is None


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        ("GET", "/v1/things", 200, {"route": "things"}),
        ("GET", "/v1/things/a%20b", 200, {"route": "thing", "thing_id": "a b"}),
        ("POST", "/v1/things/7/runs", 200, {"route": "run", "thing_id": "7"}),
        ("GET", "/v1/things/files/a/b.txt", 200, {"route": "file", "name": "a/b.txt"}),
        ("GET", "/v1/others/3/runs", 200, {"route": "other", "other_id": "3"}),
        ("GET", "/v1/things/7/runs", 405, None),  # the path is known: another method
        ("POST", "/v1/things/7/runs/extra", 404, None),
        ("GET", "/v1/nothing", 404, None),
    ],
)
async def test_screened_routers_answer_as_fastapi_does(
    method: str, path: str, status: int, body: object
) -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.request(method, path)
        assert response.status_code == status
        if body is not None:
            assert response.json() == body


async def test_a_trailing_slash_is_still_redirected() -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/v1/things/7/")
        assert response.status_code == 307 and response.headers["location"] == "http://test/v1/things/7"


def test_every_route_of_the_screened_api_routers_passes_its_screen() -> None:
    screened = [router for router in routers if isinstance(router, ScreenedRouter)]
    assert screened  # the run start's path goes through them
    for router in screened:
        screen = screen_of(router.routes)
        assert screen is not None
        for route in router.routes:
            path = route.path_format.replace("{name:path}", "a/b")
            for name in route.param_convertors:
                path = path.replace("{" + name + "}", "x1")
            assert screen.match(path) is not None, path
