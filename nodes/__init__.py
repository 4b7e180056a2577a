"""Node behaviour: one module per node kind, registered in :data:`EXECUTORS`.

Importing this package registers every executor; :func:`check_catalog` verifies that
the executors and the catalog in :mod:`schemas.nodes` line up.
"""

from . import if_else, interactive, start, template, variables  # noqa: F401  (registration)
from .base import EXECUTORS, NodeExecutor, check_catalog, executor_for

try:  # pragma: no cover - present once the HTTP node lands
    from . import http_request  # noqa: F401
except ImportError:
    pass

__all__ = ["EXECUTORS", "NodeExecutor", "check_catalog", "executor_for"]
