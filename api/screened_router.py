"""An ``APIRouter`` that passes over a request path none of its routes can match in one
regex search, instead of one route at a time.

FastAPI matches a request against every included router in turn, and each router against
each of its routes (a regex match, the method, scope bookkeeping per route). A run start,
``POST /v1/workflows/{id}/runs``, comes after the health, run, key and workflow routes:
about thirty route matches per request before its own, a measurable share of a short
run's CPU. :class:`ScreenedRouter` joins its routes' path patterns into one alternation
(their names dropped) and answers "no match" when the path matches none of them; any path
one of them matches goes to FastAPI's own matching as before, so which route answers,
its path parameters, the 405 of a known path with another method and the trailing-slash
redirect are all unchanged.

The screen is built from the routes' own path patterns, so the router must be included
without a prefix of its own (``app.include_router(router)``, as :func:`api.app.create_app`
does): its routes' paths are then the whole request paths. A router holding a route
without a plain path pattern (a mount, a host) is not screened.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter
from starlette.routing import Match, Route, get_route_path
from starlette.types import Scope

__all__ = ["ScreenedRouter", "screen_of"]

_GROUP = re.compile(r"\(\?P<[^>]+>")


def screen_of(routes: list[Any]) -> re.Pattern[str] | None:
    """One pattern that matches exactly the paths some route of ``routes`` matches (their
    ``path_regex`` patterns with named groups made plain), or None when a route has no
    plain path pattern (it could match paths no pattern describes)."""
    patterns = []
    for route in routes:
        if not isinstance(route, Route):  # APIRoute is a Route; a Mount or Host is not
            return None
        patterns.append(_GROUP.sub("(?:", route.path_regex.pattern))
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


class ScreenedRouter(APIRouter):
    """``APIRouter`` whose :meth:`matches` first screens the path (module docstring)."""

    _screen: re.Pattern[str] | None = None
    _screened_routes: int = -1

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            if self._screened_routes != len(self.routes):  # routes added since: build it again
                self._screen, self._screened_routes = screen_of(self.routes), len(self.routes)
            if self._screen is not None and self._screen.match(get_route_path(scope)) is None:
                return Match.NONE, {}
        return super().matches(scope)
