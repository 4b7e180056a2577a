"""The routers of the HTTP API, one module per resource (``/v1/...``).

- :mod:`.health`: ``GET /health`` (liveness) and ``GET /ready`` (readiness), open (no key).
- :mod:`.runs`: ``/v1/runs``: start a run of a workflow document, list, get with node
  runs, stop, resume, and the SSE stream of a run's events.
- :mod:`.keys`: ``/v1/keys``: the tenant's API keys (admin keys only).
- :mod:`.workflows`: ``/v1/workflows``: saved workflows (drafts, published versions,
  validate, import, export) and runs of them.
- :mod:`.env_secrets`: ``/v1/workflows/{id}/secrets``: the values of a workflow's
  secret environment variables (set, delete; never read back).
- :mod:`.node_runs`: ``/v1/workflows/{id}/nodes/{node_id}/run``: one node of the draft
  run on its own, and what it reads and its last run.
- :mod:`.catalog`: ``GET /v1/node-kinds``: every node kind of the engine's catalog.
- :mod:`.openai_compat`: ``POST /v1/chat/completions`` and ``GET /v1/models``: published
  workflows as OpenAI chat models (the ``openai`` SDK is a client).
- :mod:`.mcp`: ``/v1/mcp``: published workflows as the tools of an MCP server (Streamable HTTP).
- :mod:`.quotas`: ``/v1/quotas``: the tenant's and its apps' quotas (admin keys).
- :mod:`.datasets`: ``/v1/datasets``: knowledge bases: datasets, their documents
  (uploads, ingestion progress as SSE) and searches.
- :mod:`.providers`: ``/v1/model-providers``: the tenant's own model providers (keys
  write-only), their models and its default models.
- :mod:`.model_overrides`: ``/v1/model-capabilities/{name}``: a model's limits and
  capabilities as the tenant's runs see them, and the tenant's overrides (admin keys).
"""

from __future__ import annotations

from . import (
    catalog,
    datasets,
    env_secrets,
    health,
    keys,
    mcp,
    model_overrides,
    node_runs,
    openai_compat,
    providers,
    quotas,
    runs,
    workflows,
)

__all__ = [
    "catalog",
    "datasets",
    "env_secrets",
    "health",
    "keys",
    "mcp",
    "model_overrides",
    "node_runs",
    "openai_compat",
    "providers",
    "quotas",
    "routers",
    "runs",
    "workflows",
]

#: Every router, in the order they appear in the OpenAPI document.
routers = [
    health.router,
    runs.router,
    keys.router,
    workflows.router,
    workflows.run_router,
    env_secrets.router,
    node_runs.router,
    catalog.router,
    openai_compat.router,
    quotas.router,
    mcp.router,
    datasets.router,
    providers.router,
    model_overrides.router,
]
