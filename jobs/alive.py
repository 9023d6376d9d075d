"""The second sign of life of running work: a key in Redis beside the database heartbeat.

A running job's heartbeat, and a turn's, is a row the database holds. While the
database is away — a failover: the primary lost, the standby not yet promoted — no
heartbeat can be written, and once the standby takes over, the scheduler would find
every heartbeat older than the stale limit and declare lost work whose worker is
alive and only waiting for the database. So the worker also says it is alive in
Redis, a key per job or run that expires after the same stale limit, and work is
declared lost only when both are silent: its heartbeat in the database stale, and
no key in Redis.

A key's life is counted by Redis itself (its TTL): no host's clock enters into it.
Redis may vanish: a key that is missing (Redis flushed, down or failed over) leaves
the database's heartbeat to judge alone, as it would without these keys.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings

from jobs.live import redis_connection

log = logging.getLogger(__name__)


def alive_key(kind: str, work_id: str) -> str:
    return f"{settings.REDIS_PREFIX}:alive:{kind}:{work_id}"


def alive_mark(kind: str, work_ids: Iterable[str], ttl_s: float) -> bool:
    """``work_ids`` of ``kind`` (``job``, ``run``) are alive for ``ttl_s`` more seconds;
    False if Redis could not be told (it is away: the database's heartbeat judges alone)."""
    keys = [alive_key(kind, work_id) for work_id in work_ids]
    if not keys:
        return True
    try:
        with redis_connection().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(key, 1, px=int(ttl_s * 1000))
            pipe.execute()
    except Exception as exc:
        log.debug("could not mark %d %ss alive: %s", len(keys), kind, exc)
        return False
    return True


def silent_among(kind: str, work_ids: Iterable[str]) -> list[str]:
    """Those of ``work_ids`` with no key in Redis: they did not say they were alive within
    their TTL. All of them if Redis is away (the database's heartbeat then judges alone)."""
    ids = list(work_ids)
    if not ids:
        return []
    try:
        found = redis_connection().mget([alive_key(kind, work_id) for work_id in ids])
    except Exception as exc:
        log.warning("could not ask Redis which %ss are alive: %s", kind, exc)
        return ids
    return [work_id for work_id, there in zip(ids, found, strict=True) if there is None]
