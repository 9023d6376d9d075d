"""Where every Redis client of agentsite comes from: one server by URL, or a primary
found through Redis Sentinel.

With ``REDIS_SENTINELS`` set, nothing connects to a fixed address: RQ's queues
and workers (``RQ_QUEUES``, built by ``rq_connection``), the channel layer
(``channel_layer_host``), cancel signals, quota counters, live publishing,
metrics and health checks all ask the sentinels for the current primary each
time they open a connection. A client whose primary dies sees a connection
error on its next command; the outage-riding code (``agentsite.core.workers``,
the callers' ``RedisError`` handling) waits as for any Redis outage, and the
next connection reaches whichever replica the sentinels promoted.

``settings.py`` builds its configuration from the pure functions here
(``sentinels_parse``, ``rq_connection``, ``channel_layer_host``); running code
asks ``redis_client`` and ``async_redis_client``, which read the settings.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel

# How long a question to one sentinel may take before the next one is asked.
SENTINEL_TIMEOUT_S = 1.0

Sentinels = list[tuple[str, int]]


def sentinels_parse(raw: str) -> tuple[Sentinels, str | None]:
    """``host:port,host:port,…`` as (host, port) pairs, or the error that names the bad entry.

    An IPv6 address goes in brackets: ``[::1]:26379``.
    """
    sentinels: Sentinels = []
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            return [], f"{entry!r} is not host:port"
        sentinels.append((host, int(port)))
    return sentinels, None


def _sentinel_kwargs(sentinel_password: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "socket_timeout": SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
    }
    if sentinel_password:
        kwargs["password"] = sentinel_password
    return kwargs


def rq_connection(
    *, url: str, sentinels: Sentinels, master: str, sentinel_password: str, password: str, db: int
) -> dict[str, Any]:
    """The connection part of an ``RQ_QUEUES`` entry (django-rq's ``SENTINELS`` form
    when there are sentinels)."""
    if not sentinels:
        return {"URL": url}
    return {
        "SENTINELS": sentinels,
        "MASTER_NAME": master,
        "PASSWORD": password or None,
        "DB": db,
        "SENTINEL_KWARGS": _sentinel_kwargs(sentinel_password),
    }


def channel_layer_host(
    *, url: str, sentinels: Sentinels, master: str, sentinel_password: str, password: str, db: int
) -> str | dict[str, Any]:
    """The one entry of channels_redis's ``hosts`` (its sentinel form when there are sentinels)."""
    if not sentinels:
        return url
    host: dict[str, Any] = {
        "sentinels": sentinels,
        "master_name": master,
        "sentinel_kwargs": _sentinel_kwargs(sentinel_password),
        "db": db,
    }
    if password:
        host["password"] = password
    return host


def _settings() -> Any:
    from django.conf import settings

    return settings


def sentinel_configured() -> bool:
    return bool(_settings().REDIS_SENTINELS)


def _master_options(**kwargs: Any) -> dict[str, Any]:
    settings = _settings()
    options: dict[str, Any] = {"db": settings.REDIS_DB, **kwargs}
    if settings.REDIS_PASSWORD:
        options["password"] = settings.REDIS_PASSWORD
    return options


def redis_client(**kwargs: Any) -> redis.Redis:
    """A client of the current primary; ``kwargs`` as ``redis.Redis`` takes them (timeouts)."""
    settings = _settings()
    if not settings.REDIS_SENTINELS:
        return redis.Redis.from_url(settings.REDIS_URL, **kwargs)
    sentinel = Sentinel(
        settings.REDIS_SENTINELS,
        sentinel_kwargs=_sentinel_kwargs(settings.REDIS_SENTINEL_PASSWORD),
        **_master_options(**kwargs),
    )
    client: redis.Redis = sentinel.master_for(settings.REDIS_SENTINEL_MASTER)
    return client


def async_redis_client(**kwargs: Any) -> redis.asyncio.Redis:
    """``redis_client`` for asyncio code."""
    settings = _settings()
    if not settings.REDIS_SENTINELS:
        return redis.asyncio.Redis.from_url(settings.REDIS_URL, **kwargs)
    sentinel = AsyncSentinel(
        settings.REDIS_SENTINELS,
        sentinel_kwargs=_sentinel_kwargs(settings.REDIS_SENTINEL_PASSWORD),
        **_master_options(**kwargs),
    )
    client: redis.asyncio.Redis = sentinel.master_for(settings.REDIS_SENTINEL_MASTER)
    return client


def settings_channel_layer_host() -> str | dict[str, Any]:
    """``channel_layer_host`` of the running settings."""
    settings = _settings()
    return channel_layer_host(
        url=settings.REDIS_URL,
        sentinels=settings.REDIS_SENTINELS,
        master=settings.REDIS_SENTINEL_MASTER,
        sentinel_password=settings.REDIS_SENTINEL_PASSWORD,
        password=settings.REDIS_PASSWORD,
        db=settings.REDIS_DB,
    )
