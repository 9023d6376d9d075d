"""Each user's limits: what they are, and how a refusal for being over one reads.

A limit is the ``AGENTSITE_QUOTA_*`` setting unless the user's ``UserQuota`` row
(the admin) says otherwise; 0 means no limit. The services that own what is
counted (``jobs.services``: live jobs; ``sessions.services``: turns and
messages; ``jobs.mcp.sessions``: open MCP sessions) compare their count with
``quota_limit`` and refuse with ``quota_exceeded``, before they create anything.

Counts and inserts race between concurrent requests of one user: the services
count inside the transaction that inserts, after ``quota_lock``. SQLite takes
its write lock when such a transaction begins (``transaction_mode``
IMMEDIATE), so there the lock is already held; PostgreSQL takes a
transaction-scoped advisory lock per user and quota.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from enum import StrEnum

from django.conf import settings
from django.db import connection
from redis import Redis, RedisError

from accounts.models import UserQuota
from agentsite.compat.django import CompiledQuery
from agentsite.core.errors import QuotaExceeded
from agentsite.core.telemetry import metrics_redis

log = logging.getLogger(__name__)

# What a client over a count limit is told to wait: the count falls as work ends.
BUSY_RETRY_AFTER_S = 5


class Quota(StrEnum):
    """Each limit, named as its ``UserQuota`` field."""

    LIVE_JOBS = "live_jobs"
    LIVE_TURNS = "live_turns"
    MESSAGES_PER_MINUTE = "messages_per_minute"
    MCP_SESSIONS = "mcp_sessions"
    PENDING_APPROVALS = "pending_approvals"

    @property
    def setting(self) -> str:
        return f"AGENTSITE_QUOTA_{self.name}"


WHAT = {
    Quota.LIVE_JOBS: "jobs queued or running at once",
    Quota.LIVE_TURNS: "model turns queued or running at once",
    Quota.MESSAGES_PER_MINUTE: "messages a minute",
    Quota.MCP_SESSIONS: "open MCP sessions",
    Quota.PENDING_APPROVALS: "requests waiting for your answer",
}


# Asked at every message and job a user sends: compiled once.
_OVERRIDES = CompiledQuery(
    lambda user_id: UserQuota.objects.filter(user_id=user_id).values_list(
        *(q.value for q in Quota)
    ),
    user_id=int,
)


def quota_limits(*, user_id: int | str) -> dict[Quota, int | None]:
    """The user's limit for each quota (one query); None where there is none."""
    row = _OVERRIDES.one_or_none(user_id=int(user_id))
    overrides = dict(zip((q.value for q in Quota), row, strict=True)) if row is not None else {}
    limits: dict[Quota, int | None] = {}
    for quota in Quota:
        value = overrides.get(quota.value)
        if value is None:
            value = getattr(settings, quota.setting)
        limits[quota] = int(value) or None
    return limits


def quota_limit(*, user_id: int | str, quota: Quota) -> int | None:
    """The user's limit for ``quota``; None when there is none."""
    return quota_limits(user_id=user_id)[quota]


def quota_exceeded(quota: Quota, limit: int, *, retry_after_s: int) -> QuotaExceeded:
    retry_after_s = max(1, retry_after_s)
    return QuotaExceeded(
        f"You are at your limit of {limit} {WHAT[quota]}; try again in {retry_after_s} s.",
        {"quota": quota.value, "limit": limit, "retry_after_s": retry_after_s},
        retry_after_s=retry_after_s,
    )


def quota_lock(*, user_id: int | str, quota: Quota) -> None:
    """Serialise the user's count-then-insert for ``quota`` until the transaction ends."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"quota:{quota.value}:{user_id}"]
            )


# --- rates --------------------------------------------------------------------------

# A sliding window in a sorted set: a member per accepted request, scored by its time.
# Returns nil when the request is taken, else the seconds until the oldest leaves.
TAKE_SCRIPT = """
local key, now, window, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if redis.call('ZCARD', key) >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tostring(tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', key, now, ARGV[4])
redis.call('PEXPIRE', key, math.ceil(window * 1000))
return false
"""
RATE_WINDOW_S = 60.0


def _redis() -> Redis:
    # The process's client with short timeouts: a rate is best effort, and a Redis
    # that is away must not hold up (or fail) the request it would count.
    return metrics_redis()


def _rate_key(quota: Quota, user_id: int | str) -> str:
    return f"{settings.REDIS_PREFIX}:quota:{quota.value}:{user_id}"


def rate_take(*, user_id: int | str, quota: Quota, limit: int) -> str:
    """Count one request in the user's last minute; ``quota_exceeded`` when it is full.

    Returns the request's mark, for ``rate_give_back`` if the request fails after all.
    Redis forgetting a window (a flush) forgets recent requests, nothing else; while
    Redis is away the rate is not counted: the request goes on (only the database
    is the truth, and it does not depend on Redis).
    """
    mark = uuid.uuid4().hex
    try:
        wait = _redis().eval(
            TAKE_SCRIPT, 1, _rate_key(quota, user_id), time.time(), RATE_WINDOW_S, limit, mark
        )
    except RedisError as exc:
        log.warning("%s not counted for user %s, Redis is away: %r", quota.value, user_id, exc)
        return mark
    if wait is not None:
        raise quota_exceeded(quota, limit, retry_after_s=math.ceil(float(wait)))
    return mark


def rate_give_back(*, user_id: int | str, quota: Quota, mark: str) -> None:
    """Forget a request ``rate_take`` counted that was refused for another reason."""
    try:
        _redis().zrem(_rate_key(quota, user_id), mark)
    except RedisError as exc:
        log.warning("%s mark of user %s not given back: %r", quota.value, user_id, exc)
