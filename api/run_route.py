"""The run-start routes' request handler: FastAPI's, with a short way for a plain request.

A run start (``POST /v1/runs``, ``POST /v1/workflows/{id}/runs``) is the API's hottest
request, and of a short run's server CPU FastAPI's generic request handling takes a
large share: it solves the route's three dependants (the route, :func:`api.run_context.run_context`
and the bearer scheme under it) parameter kind by parameter kind, computes their cache
keys, parses the ``Content-Type`` with :mod:`email`, and builds a sub-response nobody
uses - about 7 % of the server's instructions for a three-node run (bench/README.md).

:class:`RunStartRoute` is an ``APIRoute`` whose handler first tries a short way, for the
request FastAPI itself would take as sent: no query string (every query parameter at its
default), ``Content-Type: application/json`` exactly, a JSON body the route's body field
validates (FastAPI's own field, so the same value), no dependency overrides, and
FastAPI's native telemetry not observing the request. The key and the placement then
come from the same :func:`~api.run_context.run_context` (its 401 and 422 raised as
FastAPI would raise them, the key checked before anything is stored), and the endpoint
gets the arguments FastAPI would give it. Any other request - a query string, another
content type, a body that is not JSON or does not validate - goes to FastAPI's handler
untouched, so every validation error, its shape and its order (a malformed body's 422,
then the key's 401, then the body's fields) stay FastAPI's own.

The short way is built only for an endpoint of the shape it knows (:func:`short_way_for`):
string path parameters, optional query parameters, one model body, the ``run_context``
dependency and nothing else; any other route, or a FastAPI whose route internals moved,
is served by FastAPI's handler alone (``tests/api/test_run_route.py`` holds both run
routes to the short way and the answers of both ways equal).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from copy import deepcopy
from typing import Any

import fastapi.routing
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .auth import bearer
from .run_context import run_context

__all__ = ["RunStartRoute", "short_way_for"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
#: the short way's answer: the endpoint's response, or None to hand the request to FastAPI
ShortWay = Callable[[Request], Awaitable[Response | None]]


def _effective(route: APIRoute) -> Any:
    """The route as FastAPI builds its handler: for a route of an included router, the
    inclusion's context (its dependencies and overrides added); else the route. None
    when this FastAPI does not say (its internals moved): the short way is then not built,
    as it could miss a dependency the inclusion adds."""
    var = getattr(fastapi.routing, "_effective_route_context_var", None)
    if var is None:
        return None
    context = var.get()
    return context if context is not None and getattr(context, "original_route", None) is route else route


def _plain_str(field: Any) -> bool:
    """A parameter FastAPI validates to the very string it received."""
    info = field.field_info
    return info.annotation is str and not info.metadata


def short_way_for(route: Any) -> ShortWay | None:
    """The short way for ``route`` (an ``APIRoute`` or the inclusion context of one),
    or None when its endpoint is not of the shape the short way knows (module docstring)."""
    dependant = getattr(route, "dependant", None)
    body = getattr(route, "body_field", None)
    if dependant is None or body is None or getattr(route, "_embed_body_fields", True):
        return None
    inner = dependant.dependencies
    annotation = body.field_info.annotation
    if (
        not inspect.iscoroutinefunction(dependant.call)
        or dependant.header_params
        or dependant.cookie_params
        or len(dependant.body_params) != 1
        or not (isinstance(annotation, type) and issubclass(annotation, BaseModel))
        or len(inner) != 1
        or inner[0].call is not run_context
        or inner[0].name is None
        or not all(_plain_str(f) for f in dependant.path_params)
        or any(f.field_info.is_required() or f.field_info.validate_default for f in dependant.query_params)
        or any(
            getattr(dependant, name) is not None
            for name in (
                "request_param_name",
                "websocket_param_name",
                "http_connection_param_name",
                "response_param_name",
                "background_tasks_param_name",
                "security_scopes_param_name",
            )
        )
    ):
        return None
    endpoint = dependant.call
    context_name: str = inner[0].name
    paths = [(f.name, f.alias) for f in dependant.path_params]
    queries = [(f.name, f.field_info.default) for f in dependant.query_params]

    async def short_way(request: Request) -> Response | None:
        if (
            request.scope.get("query_string")
            or request.headers.get("content-type") != "application/json"
            or request.app.dependency_overrides
            or get_telemetry_data() is not None
        ):
            return None
        try:
            if not await request.body():
                return None
            received = await request.json()
        except HTTPException:  # over the size cap, too deep (api.limits): answered as FastAPI would
            raise
        except Exception:  # not JSON, a client gone mid-body: FastAPI's handler answers it
            return None
        value, errors = body.validate(received, {}, loc=("body",))
        if errors:
            return None
        values = {name: request.path_params[alias] for name, alias in paths}
        values.update((name, deepcopy(default)) for name, default in queries)
        values[body.name] = value
        values[context_name] = await run_context(request, await bearer(request))
        answer = await endpoint(**values)
        if not isinstance(answer, Response):
            raise TypeError(f"{endpoint.__name__} must answer with a Response on the short way")
        return answer

    return short_way


class RunStartRoute(APIRoute):
    """``APIRoute`` whose handler tries :func:`short_way_for` first (module docstring)."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()
        effective = _effective(self)
        short = short_way_for(effective) if effective is not None else None
        if short is None:
            return handler

        async def app(request: Request) -> Response:
            answer = await short(request)
            return answer if answer is not None else await handler(request)

        return app
