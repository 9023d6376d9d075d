"""RQ entry points of the A2A app and its periodic pass."""

from __future__ import annotations

from datetime import timedelta

import django_rq
from django.utils import timezone

from a2a_api.models import AgentTask
from a2a_api.services import TERMINAL
from agentsite.core.periodic import PeriodicTask
from jobs.live import redis_connection

PUSH_SWEEP_S = 60
# How long after its last change a task that never ended is still looked at.
PUSH_SWEEP_HORIZON = timedelta(days=7)


def push_sweep() -> int:
    """The tasks whose state a lost pass may not have posted (Redis was away when the log
    moved): each configured task not yet posted as ended, changed within the horizon."""
    since = timezone.now() - PUSH_SWEEP_HORIZON
    tasks = (
        AgentTask.objects.filter(push_configs__isnull=False, updated_at__gte=since)
        .exclude(pushed_state__in=TERMINAL)
        .values_list("id", flat=True)
        .distinct()
    )
    due = list(tasks[:500])
    queue = django_rq.get_queue("default", connection=redis_connection(), commit_mode="auto")
    for task_id in due:  # each posted by the pass that knows the A2A types
        queue.enqueue("a2a_api.notify.push_task", task_id, job_timeout=60, result_ttl=60)
    return len(due)


PERIODIC: list[PeriodicTask] = [(push_sweep, PUSH_SWEEP_S)]
