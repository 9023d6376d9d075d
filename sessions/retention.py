"""The scheduler's pass that deletes for good the sessions their owners deleted.

``session_delete`` only marks a session deleted (every path answers 404 from
then on); ``AGENTSITE_SESSION_RETENTION_DAYS`` later this pass deletes the row
with its events, runs and responses, a bounded batch per statement
(``agentsite.core.batches``): the events first, the session row last, so a pass
cut short leaves whole sessions for the next one. A session still in use — a
queued or running turn, or a job of it not yet finished — is left alone; its jobs
outlive it (they are kept by the jobs' own retention).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from agentsite.core.batches import Budget, parents_purge, retention_budget, rows_delete, rows_update
from jobs.models import Job
from sessions.models import AgentSession, Event, Run


def sessions_expired(*, now: datetime | None = None) -> QuerySet[AgentSession]:
    """Deleted sessions past retention that nothing live still uses, oldest first."""
    days = settings.AGENTSITE_SESSION_RETENTION_DAYS
    cutoff = (now or timezone.now()) - timedelta(days=days)
    live_runs = Run.objects.filter(
        session_id=OuterRef("pk"), status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    )
    live_jobs = Job.objects.filter(session_id=OuterRef("pk")).exclude(status__in=Job.TERMINAL)
    return (
        AgentSession.objects.filter(deleted_at__lt=cutoff)
        .exclude(Exists(live_runs))
        .exclude(Exists(live_jobs))
        .order_by("deleted_at")
    )


def sessions_purge(*, budget: Budget | None = None, now: datetime | None = None) -> int:
    """Delete deleted sessions past retention, a batch at a time; returns how many went."""
    if not settings.AGENTSITE_SESSION_RETENTION_DAYS:
        return 0
    return parents_purge(
        lambda: sessions_expired(now=now), session_children_delete, budget or retention_budget()
    )


def session_children_delete(ids: list[str], budget: Budget) -> bool:
    """Delete the events and runs of sessions ``ids`` and let go of their jobs.

    False when the budget ran out first. The responses that speak in a session
    (few per session) go with its row.
    """
    return (
        rows_delete(Event.objects.filter(session_id__in=ids), budget)[1]
        and rows_update(Job.objects.filter(session_id__in=ids), budget, session=None, run=None)[1]
        and rows_delete(Run.objects.filter(session_id__in=ids), budget)[1]
    )
