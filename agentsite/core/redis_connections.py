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

A primary whose host vanishes without a word (power lost, cut off the network)
sends no reset. redis-py's own keepalive gives an idle connection up after 45 s;
a connection that has sent a command and waits for its reply is not idle, and
would wait out the kernel's retransmissions (some fifteen minutes) before it
failed and looked again. Every connection made here by TCP carries
``DEAD_PEER_OPTIONS`` instead, which give a silent peer up in about 10 s either
way. (RQ's connection by ``REDIS_URL`` keeps redis-py's defaults: django-rq
passes a URL's connection nothing else.)
"""

from __future__ import annotations

import socket
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel

# How long a question to one sentinel may take before the next one is asked.
SENTINEL_TIMEOUT_S = 1.0

Sentinels = list[tuple[str, int]]

# TCP keepalive after 5 s without traffic, a probe a second, given up after 5 unanswered;
# data sent and not acknowledged for 10 s ends the connection too. (Each where the
# platform has it: all of them on Linux.)
_DEAD_PEER_TCP = {
    name: value
    for name, value in [
        ("TCP_KEEPIDLE", 5),
        ("TCP_KEEPINTVL", 1),
        ("TCP_KEEPCNT", 5),
        ("TCP_USER_TIMEOUT", 10_000),
    ]
    if hasattr(socket, name)
}
DEAD_PEER_OPTIONS: dict[str, Any] = {
    "socket_keepalive": True,
    "socket_keepalive_options": {getattr(socket, name): v for name, v in _DEAD_PEER_TCP.items()},
}


def dead_peer_options(url: str = "") -> dict[str, Any]:
    """``DEAD_PEER_OPTIONS`` for a TCP connection (by ``url``, or to a sentinels' primary);
    nothing for a Unix socket, whose peer cannot vanish unnoticed."""
    return {} if url.startswith("unix:") else dict(DEAD_PEER_OPTIONS)


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
        "CONNECTION_KWARGS": dead_peer_options(),
    }


def channel_layer_host(
    *, url: str, sentinels: Sentinels, master: str, sentinel_password: str, password: str, db: int
) -> dict[str, Any]:
    """The one entry of channels_redis's ``hosts`` (its sentinel form when there are sentinels)."""
    if not sentinels:
        return {"address": url, **dead_peer_options(url)}
    host: dict[str, Any] = {
        **dead_peer_options(),
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
    options: dict[str, Any] = {"db": settings.REDIS_DB, **dead_peer_options(), **kwargs}
    if settings.REDIS_PASSWORD:
        options["password"] = settings.REDIS_PASSWORD
    return options


def redis_client(**kwargs: Any) -> redis.Redis:
    """A client of the current primary; ``kwargs`` as ``redis.Redis`` takes them (timeouts)."""
    settings = _settings()
    if not settings.REDIS_SENTINELS:
        return redis.Redis.from_url(
            settings.REDIS_URL, **{**dead_peer_options(settings.REDIS_URL), **kwargs}
        )
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
        return redis.asyncio.Redis.from_url(
            settings.REDIS_URL, **{**dead_peer_options(settings.REDIS_URL), **kwargs}
        )
    sentinel = AsyncSentinel(
        settings.REDIS_SENTINELS,
        sentinel_kwargs=_sentinel_kwargs(settings.REDIS_SENTINEL_PASSWORD),
        **_master_options(**kwargs),
    )
    client: redis.asyncio.Redis = sentinel.master_for(settings.REDIS_SENTINEL_MASTER)
    return client


def settings_channel_layer_host() -> dict[str, Any]:
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
