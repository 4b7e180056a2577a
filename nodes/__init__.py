"""Node behaviour: one module per node kind, registered in :data:`EXECUTORS`.

Importing this package registers every executor; :func:`check_catalog` verifies that
the executors and the catalog in :mod:`schemas.nodes` line up.
"""

from . import (  # noqa: F401  (registration)
    agent,
    chat,
    classify,
    code,
    extract,
    http_request,
    if_else,
    interactive,
    loop,
    query_extension,
    start,
    template,
    tool_call,
    unsupported,
    variables,
)
from .base import EXECUTORS, NodeExecutor, check_catalog, executor_for

__all__ = ["EXECUTORS", "NodeExecutor", "check_catalog", "executor_for"]
