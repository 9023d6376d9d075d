"""Per-process connections for live notifications: the channel layer and Redis.

Job transitions happen in short-lived work horses and in request threads. A
fresh event loop per message (``async_to_sync``) would open a new channel-layer
connection every time; instead each process keeps one Redis client (and, for
other channel layers, one event loop in a daemon thread), recreated after a fork.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

import django_rq
from channels.layers import get_channel_layer
from django.conf import settings
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


def _loop_get() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        _reset_after_fork()
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="job-publisher", daemon=True).start()
            _loop = loop
        return _loop


PUBSUB_BACKEND = "channels_redis.pubsub.RedisPubSubChannelLayer"


def direct_publish_prefix() -> str | None:
    """The channel prefix when the layer is Redis pub/sub on our one Redis, else None.

    Such a layer's ``group_send`` is a single PUBLISH of the serialised message
    to ``{prefix}__group__{group}``; doing that PUBLISH on this process's
    synchronous client spares a work horse an event loop and a second
    connection. tests/jobs/test_live_updates.py checks a real subscriber of
    the layer receives what is published this way.
    """
    config: dict[str, Any] = settings.CHANNEL_LAYERS.get("default", {})
    options: dict[str, Any] = config.get("CONFIG", {})
    if config.get("BACKEND") != PUBSUB_BACKEND or options.get("hosts") != [settings.REDIS_URL]:
        return None
    return str(options.get("prefix", "asgi"))


def group_send(groups: list[str], message: dict[str, Any]) -> None:
    """Send ``message`` to each group; the database already holds the truth, so failures log."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        prefix = direct_publish_prefix()
        if prefix is not None:
            data = layer.serialize(message)
            with redis_connection().pipeline(transaction=False) as pipe:
                for group in groups:
                    pipe.publish(f"{prefix}__group__{group}", data)
                pipe.execute()
            return
        future = asyncio.run_coroutine_threadsafe(_send_all(layer, groups, message), _loop_get())
        future.result(timeout=PUBLISH_TIMEOUT_S)
    except Exception:
        log.warning("could not publish %s to %s", message.get("type"), groups, exc_info=True)


async def _send_all(layer: Any, groups: list[str], message: dict[str, Any]) -> None:
    for group in groups:
        await layer.group_send(group, message)
