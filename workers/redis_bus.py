"""Runs over Redis: the live event bus and the command channel shared by API replicas and workers.

**Event bus** (:class:`RedisEventBus`). The process that executes a run appends every
event of it - text deltas included - to one Redis Stream per run
(``<ns>:events:<tenant>:<run>``), capped with ``MAXLEN ~`` and given a time to live once
the run ends. Each entry holds the event's ``seq`` (the same number the SQL event log
stores), its ``type`` and its JSON. Any process follows a run from a sequence number
(:meth:`RedisEventBus.follow`): entries with ``seq`` at or below what the reader has
already delivered are skipped, so a client re-attaching with ``Last-Event-ID`` to another
API replica gets no gap and no duplicate. When the stream does not reach back far enough
(trimmed, or Redis lost it), the durable events come from the SQL log first; when Redis
is unreachable the reader keeps going on the SQL log alone (no text deltas) until Redis is
back. The SQL log never moves a reader past a stream entry it has not read yet (deltas
published while it read the log included): :class:`_Follower`. A run stopped while it was still queued ends in SQL only: a reader that sees no
stream entry for a second looks at the SQL log and the run's status.

Publishing never slows the run down: :class:`EventPublisher` buffers events and a
background task sends whatever is pending in one pipeline; while Redis is down it keeps
the events (in order) and retries with backoff, so nothing is lost across a Redis restart.

**Command channel** (:class:`RedisCommandChannel`, the engine's ``CommandChannel`` port).
A command is pushed onto a per-run list (``<ns>:cmd:<run>``, kept a day) *and*
published on the channel of the same name. Every process keeps one pattern subscription
(``<ns>:cmd:*``) fed into an in-memory cache, so the run service's poll every tenth of a
second costs no round trip and sees a stop within that. The list is the persisted flag: a
worker that starts polling after the command was sent reads it there, and after any
reconnect the subscription is made again and every polled run's list is read again.

Everything reconnects by itself: a failing call is retried with exponential backoff
(0.1 s doubling to 5 s) and logged once per outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from schemas.records import RunCommand

__all__ = [
    "DEFAULT_NAMESPACE",
    "EventPublisher",
    "RedisCommandChannel",
    "RedisEventBus",
    "TERMINAL_EVENTS",
    "mask_redis_url",
    "redis_client",
    "shielded",
]

logger = logging.getLogger("flowloom.redis")

DEFAULT_NAMESPACE = "flowloom"
#: events after which a run executes no more (a follower stops there)
TERMINAL_EVENTS = frozenset({"run_finished", "run_failed", "run_cancelled"})
_BACKOFF_MIN_S, _BACKOFF_MAX_S = 0.1, 5.0

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = weakref.WeakKeyDictionary()


def mask_redis_url(url: str) -> str:
    """``url`` with its password (and a user given without one) replaced by ``***``, safe
    to print: a Redis URL may carry ``redis://:password@host``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if "@" not in parts.netloc:
            return url
        credentials, host = parts.netloc.rsplit("@", 1)
        user = credentials.split(":", 1)[0] if ":" in credentials else ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparsable Redis URL>"


def redis_client(url: str) -> Any:
    """The ``redis.asyncio.Redis`` client of ``url`` for the running event loop (a client is
    bound to the loop it first connects on), with health checks and socket timeouts so a
    dead server is noticed instead of hanging a call."""
    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    client = per_loop.get(url)
    if client is None:
        from redis.asyncio import Redis

        client = Redis.from_url(
            url,
            decode_responses=True,
            health_check_interval=5,
            socket_connect_timeout=2,
            socket_keepalive=True,
        )
        per_loop[url] = client
    return client


def _connection_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a command whose caller went away may fail unseen


async def shielded(command: Awaitable[Any]) -> Any:
    """Await a Redis command that runs to its end even when the caller is cancelled.

    redis-py's asyncio client can leave a pooled connection unusable when a command is
    cancelled half-way (the next command on it never returns), and runs are cancelled at
    any point (a stop, a client going away). So every command runs in a task of its own;
    a cancelled caller stops waiting for it, the command itself completes.
    """
    task = asyncio.ensure_future(command)
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


def _pack(encoder: Any, stack: list[tuple[tuple[Any, ...], Any]]) -> bytes:
    """The commands of a pipeline's ``stack`` (``(args, options)`` pairs) as one RESP
    request: what redis-py's ``pack_commands`` sends, built in one join (its per-argument
    buffer juggling and checks cost more than the few commands of a run's events). A
    first argument with spaces is split as redis-py splits it; every argument but a
    ``str`` goes through the connection's ``encoder`` (int, float and bytes as redis-py
    sends them; an unsupported type raises its DataError)."""
    out: list[bytes] = []
    for args, _options in stack:
        head = args[0]
        if isinstance(head, str) and " " in head:
            args = (*head.split(), *args[1:])
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else encoder.encode(arg)
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


async def _round_trip(client: Any, pipe: Any) -> list[Any]:
    """Send the commands collected in the non-transactional ``pipe`` in one request on a
    connection of ``client``'s pool and read every reply; returns the replies (raw: no
    response callbacks) and raises the first error reply once all were read, as
    ``pipe.execute()`` does - with a fraction of its work per command (its packing,
    callbacks and per-operation bookkeeping were most of a short run's Redis cost). A
    connection that fails is dropped and the request sent again on a fresh one under the
    connection's retry policy, as ``pipe.execute()`` does; past it, redis-py's
    ConnectionError / TimeoutError is raised (the callers back off and send again)."""
    from redis.exceptions import ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    stack = pipe.command_stack
    if not stack:
        return []
    pool = client.connection_pool
    connection = await pool.get_connection()

    async def attempt() -> list[Any]:
        await connection.send_packed_command(_pack(connection.encoder, stack), check_health=True)
        replies: list[Any] = []
        try:
            # The replies of one request under one deadline (the connection's socket
            # timeout), not one each: redis-py arms and cancels a timer per read otherwise,
            # about a quarter of the CPU of a run's last round trip (ten replies). A read
            # stopped by the deadline drops the connection, as a read that timed out does.
            async with asyncio.timeout(connection.socket_timeout):
                for _command in stack:
                    try:
                        replies.append(await connection.read_response(timeout=math.inf))
                    except ResponseError as exc:
                        replies.append(exc)
        except TimeoutError:
            await connection.disconnect(nowait=True)
            raise RedisTimeoutError(f"Timeout reading from {connection.host}:{connection.port}") from None
        return replies

    async def dropped(_error: BaseException) -> None:
        await connection.disconnect()

    try:
        replies = await connection.retry.call_with_retry(attempt, dropped)
    except BaseException:
        await connection.disconnect()  # never back to the pool with replies unread
        raise
    finally:
        await pool.release(connection)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


def _cancelling() -> None:
    """Raise CancelledError when the current task is being cancelled: redis-py turns a
    cancellation in the middle of a command into a connection error, which the retry
    loops here would otherwise take for an outage and go on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class _Backoff:
    """Exponential backoff that logs the first failure of an outage and the recovery."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.delay = 0.0

    async def failed(self, exc: BaseException) -> None:
        _cancelling()
        if self.delay == 0.0:
            logger.warning("redis unreachable (%s): %s; retrying with backoff", self.what, exc)
        self.delay = min(max(self.delay * 2, _BACKOFF_MIN_S), _BACKOFF_MAX_S)
        await asyncio.sleep(self.delay)

    def ok(self) -> None:
        if self.delay:
            logger.warning("redis reachable again (%s)", self.what)
        self.delay = 0.0


# ------------------------------------------------------------------ event bus


class RedisEventBus:
    """Per-run event streams (module docstring).

    ``url``: the Redis URL; ``maxlen``: entries kept per stream (approximately: Redis
    trims whole nodes); ``ttl_s``: seconds a stream lives after its run ended.
    """

    def __init__(
        self, url: str, *, namespace: str = DEFAULT_NAMESPACE, maxlen: int = 10_000, ttl_s: float = 3600.0
    ) -> None:
        self.url, self.namespace, self.maxlen, self.ttl_s = url, namespace, maxlen, ttl_s

    def key(self, tenant_id: str, run_id: str) -> str:
        """The stream's key: ``<ns>:events:<tenant>:<run>``."""
        return f"{self.namespace}:events:{tenant_id}:{run_id}"

    def publisher(
        self, tenant_id: str, run_id: str, *, first: Callable[[Any], None] | None = None
    ) -> EventPublisher:
        """A publisher for one execution of the run (call :meth:`EventPublisher.close` at
        its end); ``first``: see :class:`EventPublisher`."""
        return EventPublisher(self, tenant_id, run_id, first=first)

    async def rewind(self, tenant_id: str, run_id: str, seq: int) -> int:
        """Delete the stream's entries with ``seq`` above ``seq`` (what a crashed execution
        published after its last checkpoint: the next execution publishes those numbers
        again, with what really happened); returns how many were deleted."""
        client = redis_client(self.url)
        key = self.key(tenant_id, run_id)
        stale = [
            entry_id
            for entry_id, fields in await shielded(client.xrange(key))
            if int(fields.get("seq", 0)) > seq
        ]
        if stale:
            await shielded(client.xdel(key, *stale))
        return len(stale)

    def follow(
        self,
        tenant_id: str,
        run_id: str,
        after_seq: int,
        *,
        durable: Callable[[int], Awaitable[list[dict[str, Any]]]],
        ended: Callable[[], Awaitable[bool]],
        block_ms: int = 1000,
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's events with ``seq > after_seq`` as JSON objects, in ``seq`` order, each
        once, until the run ends (or pauses).

        ``durable(after)``: the SQL log's events after ``after`` (every event but the text
        deltas); ``ended()``: True when the run has ended or is paused (the database's word).
        The log is read when the follower starts, both when no entry came for ``block_ms`` and
        while Redis is unreachable; the log is also read when the stream skips numbers
        (it does not reach back far enough, or a stretch of the run executed where nothing
        publishes). How the two are merged: :class:`_Follower`.
        """
        return _Follower(self, tenant_id, run_id, after_seq, durable, ended, block_ms).events()


class _Follower:
    """One reader of a run's stream, with the SQL log behind it.

    The stream holds every event an execution published, in ``seq`` order; the SQL log
    holds the durable events of every execution, but no text deltas. The rule that keeps
    the reader from skipping a stream entry is that the SQL log never moves the reader past
    a number the stream may still deliver:

    - an entry read from the stream whose ``seq`` jumps past the next one expected shows
      the numbers the stream will never have: the SQL log's events below it fill in;
    - after a quiet spell the SQL log is read, *then* the stream's unread entries: when
      there are some, the stream goes on (the SQL log only fills its gaps, as above).
      When there are none, the log's events are taken only as far as they run on without
      a gap (a durable event right after the last one delivered cannot be preceded by a
      delta). A gap - deltas the reader has not seen - is crossed only when the stream
      stayed silent for a whole further ``block_ms`` (or Redis is unreachable) with the same
      gap open: the run executes where nothing publishes, or its deltas were lost. A worker's
      publisher sends an event within milliseconds of emitting it (a node's deltas before
      the node's end), long before that further ``block_ms`` is over, so its deltas are on
      the stream by then; only a publisher cut off from Redis for longer loses them to
      this reader, as any outage does.
    """

    def __init__(
        self,
        bus: RedisEventBus,
        tenant_id: str,
        run_id: str,
        after_seq: int,
        durable: Callable[[int], Awaitable[list[dict[str, Any]]]],
        ended: Callable[[], Awaitable[bool]],
        block_ms: int,
    ) -> None:
        self.bus, self.run_id, self.block_ms = bus, run_id, block_ms
        self.key = bus.key(tenant_id, run_id)
        self.durable, self.ended = durable, ended
        self.cursor = _Cursor(after_seq)
        self.last_id = "0-0"  # the last stream entry read
        self.gap: tuple[int, int] | None = None  # (seen, next durable seq) left open at the last quiet look

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The events (see :meth:`RedisEventBus.follow`)."""
        backoff = _Backoff(f"following run {self.run_id}")
        errors = _connection_errors()
        quiet = True  # look at the SQL log before waiting: at the start, after a quiet spell or an outage
        started = False
        while not self.cursor.done:
            if quiet:
                # The status before the log: a run that ended has its end in the log read next.
                # (At the start the log alone decides: an ended run's log has its end.)
                done = started and await self.ended()
                started = True
                fresh, settled = await self._look()
                for event in fresh:
                    yield event
                    if event["type"] == "run_paused" and await self.ended():
                        return
                if self.cursor.done or (done and settled):
                    return
            try:
                reply = await shielded(
                    redis_client(self.bus.url).xread({self.key: self.last_id}, count=500, block=self.block_ms)
                )
                backoff.ok()
            except errors as exc:
                await backoff.failed(exc)
                reply = None
            quiet = not reply
            if quiet:
                continue
            for event in await self._read(reply[0][1]):
                yield event
                if event["type"] == "run_paused" and await self.ended():
                    return

    async def _look(self) -> tuple[list[dict[str, Any]], bool]:
        """After a quiet spell: ``(the events to deliver, settled)``; settled when the stream
        had nothing unread and the SQL log no gap left open."""
        logged = await self.durable(self.cursor.seen)
        try:  # the stream after the log: what it holds now it will deliver, in order
            reply = await shielded(redis_client(self.bus.url).xread({self.key: self.last_id}, count=500))
        except _connection_errors():
            _cancelling()
            reply = None
        if reply:
            return await self._read(reply[0][1]), False
        fresh = self.cursor.take(_contiguous(logged, self.cursor.seen))
        rest = [event for event in logged if event["seq"] > self.cursor.seen]
        if not rest or self.cursor.done:
            self.gap = None
            return fresh, True
        gap = (self.cursor.seen, rest[0]["seq"])
        if self.gap != gap:
            self.gap = gap  # maybe deltas still on their way: give the stream a further block_ms
            return fresh, False
        self.gap = None  # the stream stayed silent: these deltas never come
        return fresh + self.cursor.take(rest), True

    async def _read(self, entries: list[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
        """The events of stream ``entries`` past what was delivered, with the SQL log's
        events before any number the stream skips."""
        self.last_id = entries[-1][0]
        self.gap = None
        fresh: list[dict[str, Any]] = []
        for _, fields in entries:
            event = json.loads(fields["data"])
            if event["seq"] > self.cursor.seen + 1 and not self.cursor.done:
                # The stream does not have what comes before this entry (trimmed, lost, or
                # executed where nothing publishes): the durable events of that stretch.
                below = [e for e in await self.durable(self.cursor.seen) if e["seq"] < event["seq"]]
                fresh += self.cursor.take(below)
            fresh += self.cursor.take([event])
        return fresh


def _contiguous(events: list[dict[str, Any]], seen: int) -> list[dict[str, Any]]:
    """The leading events of ``events`` (in ``seq`` order) that follow ``seen`` without a gap."""
    run: list[dict[str, Any]] = []
    for event in events:
        if event["seq"] <= seen:
            continue
        if event["seq"] != seen + 1:
            break
        run.append(event)
        seen = event["seq"]
    return run


class _Cursor:
    """What a follower has delivered: the last ``seq`` and whether the run's end was among it."""

    def __init__(self, seen: int) -> None:
        self.seen, self.done = seen, False

    def take(self, events: Any) -> list[dict[str, Any]]:
        """The events past :attr:`seen`, in order, up to the run's end (then :attr:`done`)."""
        fresh: list[dict[str, Any]] = []
        for event in events:
            if self.done:
                break
            if event["seq"] <= self.seen:
                continue
            self.seen = event["seq"]
            fresh.append(event)
            self.done = event["type"] in TERMINAL_EVENTS
        return fresh


def _wake_up(nap: asyncio.Future[None]) -> None:
    if not nap.done():
        nap.set_result(None)


class EventPublisher:
    """Sends one execution's events to the run's stream in the background, in order.

    :meth:`add` never blocks and never fails; :meth:`close` waits (up to ``flush_s``) for
    what is pending, then sets the stream's time to live when the run has ended.

    ``gap_s``: the shortest time between two sends. The first event after a quiet spell
    goes at once; events that follow within ``gap_s`` wait for it and travel together
    (so a run of instant nodes costs a pipeline or two, not one per checkpoint); a close
    sends what is pending at once. A reader sees an event at most ``gap_s`` late.

    ``first``: adds the caller's own commands to the pipeline that carries the first
    events (a worker entering its executing set), so they cost no round trip of their own.
    """

    def __init__(
        self,
        bus: RedisEventBus,
        tenant_id: str,
        run_id: str,
        *,
        flush_s: float = 30.0,
        gap_s: float = 0.002,
        first: Callable[[Any], None] | None = None,
    ) -> None:
        self.bus, self.run_id, self.flush_s, self.gap_s = bus, run_id, flush_s, gap_s
        self.key = bus.key(tenant_id, run_id)
        self._pending: list[tuple[int, str, str]] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._also: Callable[[Any], None] | None = None
        self._first = first
        self._nap: asyncio.Future[None] | None = None  # set while waiting out ``gap_s``
        self._task = asyncio.create_task(self._pump(), name=f"publish {run_id}")

    def add(self, event: Any) -> None:
        """Queue an event model (``seq``, ``type``, ``model_dump``) for the stream."""
        data = event.model_dump_json() if hasattr(event, "model_dump_json") else json.dumps(event)
        self._pending.append((event.seq, event.type, data))
        self._wake.set()

    async def _pump(self) -> None:
        backoff = _Backoff(f"publishing run {self.run_id}")
        errors = _connection_errors()
        loop = asyncio.get_running_loop()
        sent = -1e9
        while True:
            await self._wake.wait()
            if not self._closing and (wait := sent + self.gap_s - loop.time()) > 0:
                await self._gap(loop, wait)
            await asyncio.sleep(0)  # one loop pass: the events the run emits in this pass go in one pipeline
            self._wake.clear()
            sent = loop.time()
            while self._pending or (self._closing and self._also is not None):
                batch = self._pending[:500]
                last = self._closing and len(self._pending) <= 500  # the close's commands ride along
                try:
                    client = redis_client(self.bus.url)
                    pipe = client.pipeline(transaction=False)  # collects the commands only
                    if self._first is not None:
                        self._first(pipe)
                    for seq, kind, data in batch:
                        pipe.xadd(
                            self.key,
                            {"seq": seq, "type": kind, "data": data},
                            maxlen=self.bus.maxlen,
                            approximate=True,
                        )
                    if last and self._also is not None:
                        self._also(pipe)
                    await shielded(_round_trip(client, pipe))
                    backoff.ok()
                except errors as exc:
                    await backoff.failed(exc)
                    continue
                self._first = None
                del self._pending[: len(batch)]
                if last:
                    self._also = None
            if self._closing:
                return

    async def _gap(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        """Wait ``seconds``, or less when :meth:`close` is called meanwhile."""
        self._nap = loop.create_future()
        timer = loop.call_later(seconds, _wake_up, self._nap)
        try:
            await self._nap
        finally:
            timer.cancel()
            self._nap = None

    async def close(self, ended: bool, *, also: Callable[[Any], None] | None = None) -> None:
        """Flush, then (``ended``) let the stream expire after the bus's ``ttl_s`` (a caller
        that has commands of its own passes ``ended=False`` and ``also``, which adds them -
        ``EXPIRE key ttl_s`` among them - to the pipeline that carries the last events, or
        to one of their own when none are pending: one round trip for both). Events
        that could not be sent within ``flush_s`` (Redis down all that time) are dropped
        with a warning, with ``also``'s commands: the durable ones are in the SQL log."""
        self._also = also
        self._closing = True
        self._wake.set()
        if self._nap is not None:
            _wake_up(self._nap)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.flush_s)
        except TimeoutError:
            logger.warning(
                "run %s: %d live events not delivered to redis (the durable ones are in the database)",
                self.run_id,
                len(self._pending),
            )
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            return
        if ended:
            with contextlib.suppress(*_connection_errors()):
                await shielded(redis_client(self.bus.url).expire(self.key, int(self.bus.ttl_s)))


# ------------------------------------------------------------------ commands


class RedisCommandChannel:
    """The engine's ``CommandChannel`` over Redis (module docstring).

    ``ttl_s``: seconds a run's command list is kept (longer than any run);
    ``resync_s``: seconds between two reads of a polled run's list besides the
    subscription (a safety net; the subscription delivers within milliseconds).
    """

    def __init__(
        self, url: str, *, namespace: str = DEFAULT_NAMESPACE, ttl_s: float = 86400.0, resync_s: float = 2.0
    ) -> None:
        self.url, self.namespace, self.ttl_s, self.resync_s = url, namespace, ttl_s, resync_s
        self._cache: dict[str, dict[int, RunCommand]] = {}
        self._polled: dict[str, float] = {}  # run id -> monotonic time of the last list read
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    def key(self, run_id: str) -> str:
        """The run's list and channel: ``<ns>:cmd:<run>``."""
        return f"{self.namespace}:cmd:{run_id}"

    async def send(self, tenant_id: str, command: RunCommand) -> None:
        """Push ``command`` onto the run's list and publish it; its id is its position (1..n).
        The caller has checked the run belongs to ``tenant_id`` (the run service does)."""
        client = redis_client(self.url)
        key = self.key(command.run_id)
        payload = command.model_dump(mode="json")
        position = await shielded(client.rpush(key, json.dumps({**payload, "tenant_id": tenant_id})))
        payload["id"] = position
        await shielded(client.expire(key, int(self.ttl_s)))
        await shielded(client.publish(key, json.dumps(payload)))

    async def poll(self, run_id: str, after_id: int = 0) -> list[RunCommand]:
        """Commands for ``run_id`` with ``id > after_id``: from the subscription's cache,
        reading the run's list on the first poll, every ``resync_s`` and after a reconnect."""
        self._ensure_listener()
        now = time.monotonic()
        if now - self._polled.get(run_id, -1e9) >= self.resync_s:
            self._polled[run_id] = now
            try:
                await self._read_list(run_id)
            except _connection_errors():
                _cancelling()
                self._polled[run_id] = -1e9  # read again as soon as Redis answers
        return sorted(
            (c for c in self._cache.get(run_id, {}).values() if c.id > after_id), key=lambda c: c.id
        )

    async def _read_list(self, run_id: str) -> None:
        raw = await shielded(redis_client(self.url).lrange(self.key(run_id), 0, -1))
        cache = self._cache.setdefault(run_id, {})
        for position, item in enumerate(raw, start=1):
            data = json.loads(item)
            data.pop("tenant_id", None)
            cache[position] = RunCommand.model_validate({**data, "id": position})

    def forget(self, run_id: str) -> None:
        """Drop what is cached for a run that ended here."""
        self._cache.pop(run_id, None)
        self._polled.pop(run_id, None)

    def _ensure_listener(self) -> None:
        loop = asyncio.get_running_loop()
        if self._listener is None or self._listener.done() or self._listener.get_loop() is not loop:
            self._listener = asyncio.create_task(self._listen(), name="redis command listener")

    async def _listen(self) -> None:
        """Keep the pattern subscription alive: after a reconnect every polled run's list
        is read again (a command sent while the connection was down is found there)."""
        backoff = _Backoff("command subscription")
        errors = _connection_errors()
        prefix = f"{self.namespace}:cmd:"
        while True:
            pubsub = redis_client(self.url).pubsub(ignore_subscribe_messages=True)
            try:
                await shielded(pubsub.psubscribe(prefix + "*"))
                self._subscribed.set()
                for run_id in list(self._polled):
                    self._polled[run_id] = -1e9  # resync on the next poll
                backoff.ok()
                while True:
                    # Not shielded: this connection is the subscription's own (closed below when
                    # listening ends), and a shielded read left pending when the process closes
                    # the channel would fail after its loop stopped, logged as a traceback.
                    message = await pubsub.get_message(timeout=1.0)
                    if message and message.get("type") == "pmessage":
                        self._deliver(str(message["channel"])[len(prefix) :], message["data"])
            except errors as exc:
                self._subscribed.clear()
                await backoff.failed(exc)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    def _deliver(self, run_id: str, data: str) -> None:
        if run_id not in self._polled:
            return  # not a run this process executes
        with contextlib.suppress(ValueError, TypeError):
            command = RunCommand.model_validate(json.loads(data))
            self._cache.setdefault(run_id, {})[command.id] = command

    async def close(self) -> None:
        """Stop the subscription."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
