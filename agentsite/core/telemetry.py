"""Counters every process may bump, and the open-stream count of a web process.

Each process writes to Redis (best effort, short timeouts) what ``/metrics``
(``agentsite.ops.metrics``) reads back for the whole deployment: reconnects to
Redis and the database, and the websockets and SSE streams a web process holds.
This module imports no app, so workers, web processes and the scheduler use it alike.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from typing import Any

from django.conf import settings
from redis import Redis
from redis.exceptions import RedisError

from agentsite.core.redis_connections import redis_client

log = logging.getLogger(__name__)

# A scrape waits at most this long for Redis before reporting it down.
REDIS_TIMEOUT_S = 1.0
STREAM_KINDS = ("websocket", "sse")
STREAMS_PUBLISH_S = 2.0
STREAMS_STALE_S = 10.0
STORES = ("redis", "database")


def _key(name: str) -> str:
    return f"{settings.REDIS_PREFIX}:metrics:{name}"


_redis_lock = threading.Lock()
_redis_client: tuple[int, Redis] | None = None


def metrics_redis() -> Redis:
    """This process's Redis client for metrics, with short timeouts (made again after a fork)."""
    global _redis_client
    with _redis_lock:
        if _redis_client is None or _redis_client[0] != os.getpid():
            client = redis_client(
                socket_connect_timeout=REDIS_TIMEOUT_S,
                socket_timeout=REDIS_TIMEOUT_S,
            )
            _redis_client = (os.getpid(), client)
        return _redis_client[1]


# --- reconnects -------------------------------------------------------------------


def reconnect_count(store: str) -> None:
    """A process works against ``store`` again after losing it (best effort)."""
    try:
        metrics_redis().hincrby(_key("reconnects"), store, 1)
    except RedisError as exc:
        log.debug("reconnect to %s not counted: %r", store, exc)


_database_lost = False
_database_lost_lock = threading.Lock()


def database_lost() -> None:
    """This process lost its database connection; its next connection is a reconnect."""
    global _database_lost
    with _database_lost_lock:
        _database_lost = True


def on_connection_created(sender: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: count the first connection after a loss."""
    global _database_lost
    with _database_lost_lock:
        lost, _database_lost = _database_lost, False
    if lost:
        reconnect_count("database")


# --- open streams -------------------------------------------------------------------


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class OpenStreams:
    """This web process's open websockets and SSE responses, published to Redis."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(STREAM_KINDS, 0)
        self.lock = threading.Lock()
        self.publisher: threading.Thread | None = None

    def opened(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1
            if self.publisher is None:  # only processes that serve streams publish
                self.publisher = threading.Thread(
                    target=self.publish_forever, name="metrics-streams", daemon=True
                )
                self.publisher.start()
                atexit.register(self.withdraw)

    def closed(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] -= 1

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)

    def publish_forever(self) -> None:
        while True:
            try:
                self.publish(metrics_redis())
            except RedisError as exc:
                log.debug("open stream counts not published: %r", exc)
            time.sleep(STREAMS_PUBLISH_S)

    def publish(self, conn: Redis) -> None:
        now = conn.time()[0]
        me = process_name()
        pipe = conn.pipeline()
        for kind, n in self.snapshot().items():
            pipe.hset(_key("open-streams"), f"{kind}|{me}", f"{n} {now}")
        pipe.expire(_key("open-streams"), int(STREAMS_STALE_S * 6))
        pipe.execute()

    def withdraw(self) -> None:
        """Take this process's counts back as it exits: the others would count its
        streams, closed with it, until they went stale (``STREAMS_STALE_S``)."""
        me = process_name()
        try:
            metrics_redis().hdel(_key("open-streams"), *(f"{kind}|{me}" for kind in STREAM_KINDS))
        except RedisError as exc:
            log.debug("open stream counts not withdrawn: %r", exc)

    def totals(self, conn: Redis) -> dict[str, int]:
        """Open streams of every web process: this one's own count plus the others' fresh ones."""
        entries: dict[bytes, bytes] = conn.hgetall(_key("open-streams"))  # type: ignore[assignment]
        now = conn.time()[0]
        me = process_name()
        totals = self.snapshot()
        stale = []
        for field, value in entries.items():
            kind, _, process = field.decode().partition("|")
            count, _, at = value.decode().partition(" ")
            if process == me or kind not in totals:
                continue
            if now - int(at) > STREAMS_STALE_S:
                stale.append(field)
                continue
            totals[kind] += int(count)
        if stale:
            conn.hdel(_key("open-streams"), *stale)
        return totals


OPEN_STREAMS = OpenStreams()


class StreamsCounted:
    """ASGI middleware: counts accepted websockets and ``text/event-stream`` responses."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind: str | None = None

        async def counting_send(message: Any) -> None:
            nonlocal kind
            if kind is None and _opens_stream(message):
                kind = "websocket" if message["type"] == "websocket.accept" else "sse"
                OPEN_STREAMS.opened(kind)
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if kind is not None:
                OPEN_STREAMS.closed(kind)


def _opens_stream(message: Any) -> bool:
    if message["type"] == "websocket.accept":
        return True
    if message["type"] != "http.response.start":
        return False
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bool(value.split(b";")[0].strip() == b"text/event-stream")
    return False
