"""The routers of the HTTP API, one module per resource (``/v1/...``).

- :mod:`.health`: ``GET /health`` (open, no key).
- :mod:`.runs`: ``/v1/runs``: start a run of a workflow document, list, get with node
  runs, stop, resume, and the SSE stream of a run's events.
- :mod:`.keys`: ``/v1/keys``: the tenant's API keys (admin keys only).
"""

from __future__ import annotations

from . import health, keys, runs

__all__ = ["health", "keys", "routers", "runs"]

#: Every router, in the order they appear in the OpenAPI document.
routers = [health.router, runs.router, keys.router]
