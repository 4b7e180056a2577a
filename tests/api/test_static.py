"""The canvas served at ``/`` by the API app (:mod:`api.static`): files of the built app,
the single-page fallback, the build hint when it is not built, and the API never shadowed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.static import BUILD_COMMAND, canvas_response
from engine.settings import Settings

INDEX = "<!doctype html><div id='root'></div><script src='/assets/app-1a2b.js'></script>"


def _dist(tmp_path: Path) -> Path:
    dist = tmp_path / "web" / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(INDEX)
    (dist / "assets" / "app-1a2b.js").write_text("console.log('canvas')")
    (dist / "favicon.svg").write_text("<svg/>")
    return dist


async def _client(tmp_path: Path, dist: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(home=tmp_path / "home", web_dist=dist)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://flowloom.test") as client:
            yield client


@pytest.fixture
async def built(tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(tmp_path, _dist(tmp_path)):
        yield client


@pytest.fixture
async def unbuilt(tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(tmp_path, tmp_path / "nowhere" / "dist"):
        yield client


async def test_root_serves_the_built_index_without_caching(built):
    response = await built.get("/")
    assert response.status_code == 200 and response.text == INDEX
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"


async def test_assets_are_served_with_a_long_cache(built):
    response = await built.get("/assets/app-1a2b.js")
    assert response.status_code == 200 and response.text == "console.log('canvas')"
    assert "immutable" in response.headers["cache-control"]
    assert (await built.get("/favicon.svg")).text == "<svg/>"


async def test_app_routes_fall_back_to_the_index(built):
    for path in ("/workflows/hello", "/runs/abc123/trace", "/settings"):
        response = await built.get(path)
        assert response.status_code == 200 and response.text == INDEX, path


async def test_missing_files_are_not_found_not_the_index(built):
    response = await built.get("/assets/missing-9z.js")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


async def test_api_paths_are_never_shadowed(built):
    assert (await built.get("/health")).json()["status"] == "ok"
    assert "paths" in (await built.get("/openapi.json")).json()
    docs = await built.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower() and docs.text != INDEX
    unknown = await built.get("/v1/no-such-route")
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"
    assert (await built.get("/v1/runs")).status_code == 401
    assert (await built.post("/somewhere", json={})).status_code in (404, 405)


async def test_unbuilt_canvas_says_how_to_build_it(unbuilt):
    for path in ("/", "/workflows/hello"):
        response = await unbuilt.get(path)
        assert response.status_code == 200, path
        assert BUILD_COMMAND in response.text.replace("&amp;", "&") and "Traceback" not in response.text
    assert (await unbuilt.get("/health")).status_code == 200
    assert (await unbuilt.get("/v1/no-such-route")).status_code == 404


def test_paths_leaving_the_folder_are_refused(tmp_path):
    dist = _dist(tmp_path)
    (tmp_path / "web" / "secret.txt").write_text("secret")
    (dist / "link.txt").symlink_to(tmp_path / "web" / "secret.txt")
    assert canvas_response(dist, "../secret.txt") is None
    assert canvas_response(dist, "link.txt") is None
    fallback: Any = canvas_response(dist, "../../etc")
    assert Path(fallback.path) == (dist / "index.html").resolve()


async def test_openai_paths_without_v1_are_json_404s_saying_to_use_v1(built):
    # OpenAI(base_url="http://host:port") calls /models and /chat/completions: a page
    # there would pass for an answer (the SDK then fails reading it), a 404 says why
    for method, path in (("GET", "/models"), ("GET", "/models/knowledge_qa"), ("POST", "/chat/completions"),
                         ("POST", "/completions"), ("POST", "/embeddings"), ("POST", "/responses")):
        for accept in ("application/json", "text/html,application/xhtml+xml,*/*;q=0.8"):
            response = await built.request(method, path, json={} if method == "POST" else None,
                                           headers={"Accept": accept})
            assert response.status_code == 404, (method, path, accept)
            message = response.json()["error"]["message"]
            assert message.startswith(f"no route {path}: the OpenAI-compatible API is under /v1"), message
            assert 'OpenAI(base_url="http://flowloom.test/v1")' in message, message


async def test_the_page_fallback_answers_only_requests_that_accept_html(built):
    for accept in ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "*/*", "text/*"):
        response = await built.get("/settings", headers={"Accept": accept})
        assert response.status_code == 200 and response.text == INDEX, accept
    for path in ("/", "/settings"):
        response = await built.get(path, headers={"Accept": "application/json"})
        assert response.status_code == 404 and response.json()["error"]["type"] == "not_found", path
    # the built app's own files are served whatever the client accepts
    script = await built.get("/assets/app-1a2b.js", headers={"Accept": "application/json"})
    assert script.status_code == 200 and script.text == "console.log('canvas')"


async def test_the_build_hint_is_a_page_for_browsers_only(unbuilt):
    assert (await unbuilt.get("/", headers={"Accept": "application/json"})).status_code == 404
    assert BUILD_COMMAND in (await unbuilt.get("/", headers={"Accept": "text/html"})).text.replace("&amp;", "&")
