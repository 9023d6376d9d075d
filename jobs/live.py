"""Per-process connections for live notifications: the channel layer and Redis.

Job transitions happen in short-lived work horses and in request threads. A
fresh event loop per message (``async_to_sync``) would open a new channel-layer
connection every time; instead each process keeps one Redis client (and, for
other channel layers, one event loop in a daemon thread), recreated after a fork.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import django_rq
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis import Redis

from agentsite.compat import channels_redis
from agentsite.core.redis_connections import settings_channel_layer_host
from jobs.documents import JobStatusDoc
from jobs.groups import owner_jobs_group

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


@functools.cache
def direct_publish_prefix() -> str | None:
    """The channel prefix when the layer is Redis pub/sub on our one Redis, else None.

    Such a layer's ``group_send`` is a single PUBLISH of the serialised message
    (``agentsite.compat.channels_redis``). Doing that PUBLISH on
    this process's synchronous client, rather than through ``group_send`` on
    the publishing loop, spares the worker a trip through the loop for every
    message, and so CPU on every job (``bench/jobs.py``). The price is knowing the
    layer's group channel name: tests/jobs/test_live_updates.py checks that a
    real subscriber of the layer receives what is published this way.

    Read once (it is asked at every event a turn streams), and again after any
    setting changes (tests change them; a running server's never do).
    """
    config: dict[str, Any] = settings.CHANNEL_LAYERS.get("default", {})
    options: dict[str, Any] = config.get("CONFIG", {})
    if config.get("BACKEND") != channels_redis.PUBSUB_BACKEND or options.get("hosts") != [
        settings_channel_layer_host()
    ]:
        return None
    return str(options.get("prefix", "asgi"))


@receiver(setting_changed)
def _publish_settings_changed(**kwargs: Any) -> None:
    direct_publish_prefix.cache_clear()


def group_send(group: str, message: Mapping[str, object]) -> None:
    """Send ``message`` to ``group``; the database already holds the truth, so failures log."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        prefix = direct_publish_prefix()
        if prefix is not None:
            data = channels_redis.serialized(layer, message)
            redis_connection().publish(channels_redis.group_channel(prefix, group), data)
            return
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), _loop_get())
        future.result(timeout=PUBLISH_TIMEOUT_S)
    except Exception:
        log.warning("could not publish %s to %s", message.get("type"), group, exc_info=True)


def group_send_many(messages: Sequence[tuple[str, Mapping[str, object]]]) -> None:
    """Send each (group, message) in order: on the direct path, one round trip for all."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return
    prefix = direct_publish_prefix()
    if prefix is None:
        for group, message in messages:
            group_send(group, message)
        return
    try:
        pipe = redis_connection().pipeline(transaction=False)
        for group, message in messages:
            pipe.publish(
                channels_redis.group_channel(prefix, group),
                channels_redis.serialized(layer, message),
            )
        pipe.execute()
    except Exception:
        log.warning("could not publish %d messages", len(messages), exc_info=True)


class JobUpdateMessage(TypedDict):
    """``job.update``: a job changed; sent to its owner's group (``owner_jobs_group``)."""

    type: Literal["job.update"]
    job: JobStatusDoc
    event: str


def job_update_send(*, owner_id: int, job: JobStatusDoc, event: str) -> None:
    """Tell the owner's watchers (MCP task waits) that one of their jobs changed."""
    message: JobUpdateMessage = {"type": "job.update", "job": job, "event": str(event)}
    group_send(owner_jobs_group(owner_id), message)
