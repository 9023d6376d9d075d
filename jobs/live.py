"""Per-process connections for live notifications: the channel layer and Redis.

Job transitions happen in short-lived work horses and in request threads. A
fresh event loop per message (``async_to_sync``) would open a new channel-layer
connection every time; instead each process keeps one loop in a daemon thread
and one Redis client, both recreated after a fork.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

import django_rq
from channels.layers import get_channel_layer
from redis import Redis

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_S = 5.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_redis: Redis | None = None
_pid: int | None = None


def _reset_after_fork() -> None:
    global _loop, _redis, _pid
    if _pid != os.getpid():
        _loop, _redis, _pid = None, None, os.getpid()


def redis_connection() -> Redis:
    """This process's Redis client for cancel signals."""
    global _redis
    with _lock:
        _reset_after_fork()
        if _redis is None:
            _redis = django_rq.get_connection("tools")
        return _redis


def _publisher_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        _reset_after_fork()
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="job-publisher", daemon=True).start()
            _loop = loop
        return _loop


def warm_up() -> None:
    """Open this process's channel-layer connection in the background, without waiting.

    A work horse calls it first thing, so the connection is ready by the time
    the job's first transition publishes (a publish to a group nobody joins).
    """
    layer = get_channel_layer()
    if layer is None:
        return
    from django.conf import settings

    message = {"type": "jobs.warm_up"}
    group = f"{settings.REDIS_PREFIX}.jobs.warm-up"
    try:
        asyncio.run_coroutine_threadsafe(layer.group_send(group, message), _publisher_loop())
    except Exception:
        log.debug("channel layer warm-up failed", exc_info=True)


def group_send(groups: list[str], message: dict[str, Any]) -> None:
    """Send ``message`` to each group; the database already holds the truth, so failures log."""
    layer = get_channel_layer()
    if layer is None:
        return

    async def send_all() -> None:
        for group in groups:
            await layer.group_send(group, message)

    try:
        future = asyncio.run_coroutine_threadsafe(send_all(), _publisher_loop())
        future.result(timeout=PUBLISH_TIMEOUT_S)
    except Exception:
        log.warning("could not publish %s to %s", message.get("type"), groups, exc_info=True)
