"""Node memory: small JSON values a node keeps across runs of the same chat.

The question classifier keeps its last result in node memory, so that the next turn can
show it to the model: the classification is stored under a key made of the chat id and
the node id and read back on the next turn. This module is the store behind that.

Interface (:class:`NodeMemoryBase`), every method async:

- ``get(key, default=None)``: the stored value (a fresh copy), or ``default`` when
  the key is missing or expired.
- ``set(key, value, ttl=None)``: store a JSON value (dict, list, str, number, bool,
  null) for ``ttl`` seconds (None: no expiry). A value that is not JSON
  (``NaN``, a set, an object) is refused with ``TypeError``/``ValueError`` before
  anything is written, so what is stored is exactly what ``get`` returns.
- ``delete(key)``: True when a live value was removed.

Keys are plain strings; every store prefixes them with its ``namespace``
(``flowloom`` by default) so several applications can share one Redis database or
directory. :func:`engine.ports.node_memory_key` builds the key a node uses.

Implementations:

- :class:`FileNodeMemory` (the embedded default): one JSON file per key under a
  directory - ``<Settings.home>/memory`` by default. Files are written to a
  temporary name and renamed, so a crash never leaves a torn value, and values
  survive restarts. Safe for one process; several processes writing the same key
  race (last writer wins) - use Redis for more than one process.
- :class:`RedisNodeMemory`: ``redis.asyncio`` against a Redis URL; expiry
  is Redis' own (``PX``), so it is shared by every process. A command runs to its end
  even when the node that called it is cancelled (a stopped run), since a command
  cancelled half-way can leave a pooled connection unusable.

:func:`node_memory_for` picks Redis when ``Settings.redis_url`` is set, else the local
store; the driver (CLI, API, worker) passes it to runs as ``RunDeps.memory``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
import weakref
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from engine.settings import Settings, private_directory

from .redis_bus import shielded

__all__ = [
    "DEFAULT_NAMESPACE",
    "FileNodeMemory",
    "NodeMemoryBase",
    "RedisNodeMemory",
    "node_memory_for",
]

DEFAULT_NAMESPACE = "flowloom"


def _encode(value: Any) -> str:
    # allow_nan=False: NaN/Infinity are not JSON and would not round-trip through other clients.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _check_ttl(ttl: float | None) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return float(ttl)


class NodeMemoryBase(ABC):
    """Async key -> JSON value store with optional per-key TTL (seconds); implements the
    engine's :class:`~engine.ports.NodeMemory` port."""

    def __init__(self, namespace: str = DEFAULT_NAMESPACE) -> None:
        if not namespace:
            raise ValueError("namespace must be a non-empty string")
        self.namespace = namespace

    def full_key(self, key: str) -> str:
        """``namespace:key``.

        Raises:
            ValueError: ``key`` is not a non-empty string.
        """
        if not isinstance(key, str) or not key:
            raise ValueError(f"memory key must be a non-empty string, got {key!r}")
        return f"{self.namespace}:{key}"

    @abstractmethod
    async def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default`` when missing or expired."""

    @abstractmethod
    async def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store ``value`` (JSON) under ``key``, expiring after ``ttl`` seconds (None: never).

        Raises:
            TypeError / ValueError: ``value`` is not JSON, or ``ttl`` is not positive.
        """

    @abstractmethod
    async def delete(self, key: str) -> bool:
        """Remove ``key``; True when a live value was there."""

    async def close(self) -> None:  # noqa: B027 - a no-op default that stores with connections override
        """Release connections (no-op for stores without any)."""


class FileNodeMemory(NodeMemoryBase):
    """JSON files under ``directory`` (created on first write), one per key.

    The file name is the SHA-256 of the namespaced key, so any key is a safe file
    name; the file holds ``{"key", "value", "expires_at"}`` (Unix seconds or null).
    Expired files are removed when read; :meth:`purge_expired` sweeps them all.
    A file that cannot be read as such a record counts as missing.
    """

    def __init__(self, directory: str | os.PathLike[str], namespace: str = DEFAULT_NAMESPACE) -> None:
        super().__init__(namespace)
        self.directory = Path(directory)

    def _path(self, full_key: str) -> Path:
        return self.directory / (hashlib.sha256(full_key.encode()).hexdigest() + ".json")

    def _read(self, full_key: str) -> tuple[bool, Any]:
        path = self._path(full_key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return False, None
        except (OSError, ValueError):
            return False, None
        if not isinstance(record, dict) or record.get("key") != full_key or "value" not in record:
            return False, None
        expires = record.get("expires_at")
        if isinstance(expires, (int, float)) and time.time() >= expires:
            path.unlink(missing_ok=True)
            return False, None
        return True, record["value"]

    def _write(self, full_key: str, text: str) -> None:
        private_directory(self.directory)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self._path(full_key))  # atomic: readers see the old or the new file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _delete(self, full_key: str) -> bool:
        live, _ = self._read(full_key)
        self._path(full_key).unlink(missing_ok=True)
        return live

    async def get(self, key: str, default: Any = None) -> Any:
        found, value = await asyncio.to_thread(self._read, self.full_key(key))
        return value if found else default

    async def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        full = self.full_key(key)
        ttl = _check_ttl(ttl)
        encoded = _encode(value)  # refuse non-JSON before touching the disk
        expires_at = "null" if ttl is None else repr(time.time() + ttl)
        record = f'{{"key":{json.dumps(full)},"value":{encoded},"expires_at":{expires_at}}}'
        await asyncio.to_thread(self._write, full, record)

    async def delete(self, key: str) -> bool:
        return await asyncio.to_thread(self._delete, self.full_key(key))

    def _purge(self) -> int:
        removed = 0
        if not self.directory.is_dir():
            return 0
        now = time.time()
        for path in self.directory.glob("*.json"):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            expires = record.get("expires_at") if isinstance(record, dict) else None
            if isinstance(expires, (int, float)) and now >= expires:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    async def purge_expired(self) -> int:
        """Delete every expired file; returns how many were removed."""
        return await asyncio.to_thread(self._purge)


class RedisNodeMemory(NodeMemoryBase):
    """Values as JSON strings in Redis; TTL via ``PX`` (millisecond precision).

    A ``redis.asyncio`` client is bound to
    the event loop it first connects on, so this store keeps one client per running
    loop (a process that calls ``asyncio.run`` twice still works); pass ``client``
    to use one you manage instead.

    Raises:
        ValueError: neither ``url`` nor ``client`` given.
    """

    def __init__(
        self, url: str | None = None, namespace: str = DEFAULT_NAMESPACE, *, client: Any = None
    ) -> None:
        super().__init__(namespace)
        self.url = url or None
        if self.url is None and client is None:
            raise ValueError("RedisNodeMemory needs a URL (FLOWLOOM_REDIS_URL) or a client")
        self._client = client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client for the running loop."""
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            from redis.asyncio import Redis

            assert self.url is not None  # __init__ refuses a store with neither URL nor client
            client = Redis.from_url(self.url, decode_responses=True)
            self._clients[loop] = client
        return client

    async def get(self, key: str, default: Any = None) -> Any:
        raw = await shielded(self.client().get(self.full_key(key)))
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except ValueError:
            return default  # written by someone else, not JSON: same as missing

    async def set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        full = self.full_key(key)
        ttl = _check_ttl(ttl)
        encoded = _encode(value)
        px = None if ttl is None else max(1, int(round(ttl * 1000)))
        await shielded(self.client().set(full, encoded, px=px))

    async def delete(self, key: str) -> bool:
        return bool(await shielded(self.client().delete(self.full_key(key))))

    async def close(self) -> None:
        clients = [self._client] if self._client is not None else []
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, client in list(self._clients.items()):
            if loop is running:  # other loops' clients cannot be awaited here; they die with their loop
                clients.append(client)
                del self._clients[loop]
        for client in clients:
            await client.aclose()


def node_memory_for(settings: Settings) -> NodeMemoryBase:
    """The node memory store ``settings`` ask for: Redis at ``settings.redis_url`` when set,
    else local files under ``<settings.home>/memory``."""
    if settings.redis_url:
        return RedisNodeMemory(settings.redis_url)
    return FileNodeMemory(settings.home / "memory")
