"""A real Redis server for tests, started by pytest-redis on a free port.

``flowloom_redis_proc`` (session) runs ``redis-server`` from ``PATH`` in a temporary
directory; ``flowloom_redis`` is a sync client that flushes every database after
each test; ``redis_url`` is the URL to give :class:`workers.memory.RedisNodeMemory`
or ``FLOWLOOM_REDIS_URL``. There is no skip: without ``redis-server`` installed
the fixture errors, so a missing server shows up as a failure, not as green.
"""

from __future__ import annotations

import shutil

import pytest
from pytest_redis import factories

__all__ = ["flowloom_redis", "flowloom_redis_proc", "redis_url"]

# port=None: pytest-redis picks any free port, so parallel sessions do not collide.
flowloom_redis_proc = factories.redis_proc(executable=shutil.which("redis-server"), port=None)
flowloom_redis = factories.redisdb("flowloom_redis_proc", decode=True)


@pytest.fixture
def redis_url(flowloom_redis_proc, flowloom_redis) -> str:
    """``redis://host:port/0`` of the test server (flushed after the test)."""
    return f"redis://{flowloom_redis_proc.host}:{flowloom_redis_proc.port}/0"
