"""Services the bench scripts start for themselves: waiting until they answer."""

from __future__ import annotations

import time

__all__ = ["wait_for_redis"]


def wait_for_redis(url: str, timeout_s: float = 10.0) -> None:
    """Return once the Redis server at ``url`` answers PING; re-raise its last connection
    error after ``timeout_s`` seconds (a server that never came up)."""
    from redis import Redis

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if Redis.from_url(url, socket_connect_timeout=0.2).ping():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
