"""``/healthz``: the database, Redis, the workers of each queue and the scheduler.

Anyone may ask whether the site is up (200 ``{"status": "ok"}``, or 503
``{"status": "down"}``); the state of each part (worker counts, queue lengths,
error messages that may name hosts) is shown to staff only, logged in or with
an API token, as ``/metrics`` is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import django_rq
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from rq import Worker
from rq.cron_scheduler_registry import get_registry_key as cron_registry_key

from agentsite.web.auth import request_caller

WORKER_QUEUES = ("turns", "tools")
# RQ workers write a heartbeat at least every DEFAULT_WORKER_TTL (420 s) while
# idle and more often while busy; the scheduler every few seconds.
WORKER_STALE_AFTER = timedelta(seconds=480)
SCHEDULER_STALE_AFTER = timedelta(seconds=180)


def database_state() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:
        return {"ok": False, "error": str(exc)}


def redis_state() -> dict[str, Any]:
    try:
        django_rq.get_connection("default").ping()
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": str(exc)}


def queue_workers_state(queue_name: str) -> dict[str, Any]:
    try:
        queue = django_rq.get_queue(queue_name)
        workers = Worker.all(queue=queue)
    except Exception as exc:
        return {"ok": False, "workers": 0, "error": str(exc)}
    now = timezone.now()
    beats = [w.last_heartbeat for w in workers if w.last_heartbeat is not None]
    alive = [b for b in beats if now - _aware(b) < WORKER_STALE_AFTER]
    last = max(beats, default=None)
    return {
        "ok": bool(alive),
        "workers": len(alive),
        "queued": len(queue),
        "last_heartbeat": _aware(last).isoformat() if last else None,
    }


def scheduler_state() -> dict[str, Any]:
    try:
        conn = django_rq.get_connection("default")
        entries: list[tuple[bytes, float]] = conn.zrange(  # type: ignore[assignment]
            cron_registry_key(), 0, -1, withscores=True
        )
    except Exception as exc:
        return {"ok": False, "error": str(exc)}
    now = timezone.now().timestamp()
    last = max((float(score) for _, score in entries), default=None)
    ok = last is not None and now - last < SCHEDULER_STALE_AFTER.total_seconds()
    last_iso = datetime.fromtimestamp(last, tz=UTC).isoformat() if last else None
    return {"ok": ok, "last_heartbeat": last_iso}


def _aware(moment: datetime) -> datetime:
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


def details_allowed(request: HttpRequest) -> bool:
    """A staff user, by login or API token; False when the database cannot tell."""
    try:
        return bool(getattr(request_caller(request), "is_staff", False))
    except DatabaseError:
        return False


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    state: dict[str, Any] = {"database": database_state(), "redis": redis_state()}
    if state["redis"]["ok"]:
        state["workers"] = {name: queue_workers_state(name) for name in WORKER_QUEUES}
        state["scheduler"] = scheduler_state()
    else:
        state["workers"] = {name: {"ok": False, "workers": 0} for name in WORKER_QUEUES}
        state["scheduler"] = {"ok": False}
    healthy = (
        state["database"]["ok"]
        and state["redis"]["ok"]
        and all(w["ok"] for w in state["workers"].values())
        and state["scheduler"]["ok"]
    )
    state["status"] = "ok" if healthy else "down"
    if not details_allowed(request):
        state = {"status": state["status"]}
    return JsonResponse(state, status=200 if healthy else 503)
