"""The canvas: the web app (``web/``, built by Vite into ``web/dist``) served by the API
app at ``/``, next to the API it calls.

- A file of the built app (``index.html``, ``assets/...``) is served as it is; hashed
  assets are cached for a year, ``index.html`` never (a new build shows at once).
- Any other ``GET`` path that is not the API's (``/v1/...``, ``/health``,
  ``/openapi.json``, ``/docs``, and OpenAI's paths without ``/v1``: ``/models``,
  ``/chat/completions``..., whose 404 says to use ``/v1``) and does not name a file (no
  ``.`` in its last part) is the app's own route: it gets ``index.html`` (single-page
  fallback) when the request accepts HTML (a browser's navigation, ``*/*``). A client
  that accepts only other types (``Accept: application/json``: an API client at a wrong
  path) gets the API's JSON 404: a page it cannot read would pass for an answer.
- Nothing here shadows the API: the canvas answers only requests no route of the app
  matched (it hooks the app's 404), so a route added later always wins, and the API's
  own 404s (an unknown ``/v1`` path) stay JSON.
- When the app is not built, the canvas paths answer a short page saying how to build
  it (``npm --prefix web ci && npm --prefix web run build``).

The folder is ``Settings.web_dist`` (``FLOWLOOM_WEB_DIST``), else ``web/dist`` of the
source tree this package is in (an editable install, as the README sets up). It is
looked up on every request, so building the app while the server runs needs no restart.
"""

from __future__ import annotations

import html
import inspect
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.settings import Settings

from .errors import OPENAI_ROOT_PARTS

__all__ = ["BUILD_COMMAND", "canvas_response", "default_dist", "dist_of", "install_canvas"]

#: how to build the canvas (said by the page served while it is not built)
BUILD_COMMAND = "npm --prefix web ci && npm --prefix web run build"
#: first path parts that belong to the API, never to the canvas
_API_PARTS = frozenset({"v1", "health", "metrics", "openapi.json", "docs", "redoc"}) | OPENAI_ROOT_PARTS
#: media types of an ``Accept`` header that take the canvas's page
_HTML_TYPES = frozenset({"text/html", "text/*", "*/*"})
_YEAR = "public, max-age=31536000, immutable"


def default_dist() -> Path:
    """``web/dist`` of the source tree holding this package."""
    return Path(__file__).resolve().parents[1] / "web" / "dist"


def dist_of(settings: Settings) -> Path:
    """The built app's folder: ``settings.web_dist``, else :func:`default_dist`."""
    chosen = getattr(settings, "web_dist", None)
    return Path(chosen).expanduser() if chosen else default_dist()


def _not_built(dist: Path) -> HTMLResponse:
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Flowloom</title></head>"
        "<body style='font-family: sans-serif; max-width: 40em; margin: 3em auto'>"
        "<h1>Flowloom</h1><p>The API is running, but the canvas (the web app) is not built: "
        f"<code>{html.escape(str(dist / 'index.html'))}</code> does not exist.</p>"
        f"<p>Build it from the repository's root with:</p><pre>{html.escape(BUILD_COMMAND)}</pre>"
        "<p>then reload this page (no restart needed). The API's description is at "
        "<a href='/openapi.json'>/openapi.json</a> (and <a href='/docs'>/docs</a>, whose viewer loads "
        "from the internet).</p>"
        "</body></html>"
    )
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


def _accepts_html(accept: str | None) -> bool:
    """True when an ``Accept`` header (None or empty: no header) takes an HTML page."""
    if not accept:
        return True
    return any(part.split(";", 1)[0].strip().lower() in _HTML_TYPES for part in accept.split(","))


def canvas_response(dist: Path, path: str, accept: str | None = None) -> Response | None:
    """What the canvas answers for ``path`` (URL path without the leading ``/``) asked with
    the ``Accept`` header ``accept``: a file of ``dist``, ``index.html`` for an app route,
    the build hint when ``dist`` has no ``index.html``; None when the path is the API's,
    names a file that does not exist, or is a page for a client that accepts no HTML."""
    parts = [p for p in path.split("/") if p]
    if parts and parts[0] in _API_PARTS:
        return None
    page = _accepts_html(accept)
    root = dist.resolve()
    index = root / "index.html"
    if not index.is_file():
        return _not_built(dist) if page else None
    if parts:
        target = (root / "/".join(parts)).resolve()
        # A path that leaves the folder (``..``, a symlink out) is not the canvas's.
        if target.is_relative_to(root) and target.is_file():
            cache = _YEAR if parts[0] == "assets" else "no-cache"
            return FileResponse(target, headers={"Cache-Control": cache})
        if "." in parts[-1]:
            return None
    return FileResponse(index, headers={"Cache-Control": "no-cache"}) if page else None


def install_canvas(app: FastAPI, dist: Path) -> None:
    """Serve the canvas from ``dist`` for the ``GET``/``HEAD`` requests no route matched.

    Call it after :func:`api.errors.install_error_handlers`: it wraps the app's handler of
    HTTP errors and hands it every error that is not such a 404."""
    previous = app.exception_handlers.get(StarletteHTTPException)

    async def on_http(request: Request, exc: Any) -> Response:
        if exc.status_code == 404 and request.method in ("GET", "HEAD"):
            answer = canvas_response(dist, request.url.path.lstrip("/"), request.headers.get("accept"))
            if answer is not None:
                return answer
        if previous is None:  # pragma: no cover - the app always installs one first
            raise exc
        handled = previous(request, exc)  # Starlette's handlers may be plain functions
        return await handled if inspect.isawaitable(handled) else handled

    app.add_exception_handler(StarletteHTTPException, on_http)
