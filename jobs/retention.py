"""How long finished jobs are kept, and the scheduler's pass that deletes older ones.

A job is deleted ``AGENTSITE_JOB_RETENTION_DAYS`` after it finished, with its
partial results, events and webhook deliveries and attempts, a bounded batch per
statement (``agentsite.core.batches``): the children first, the job row last, so
a pass cut short leaves whole jobs for the next one. Never deleted: a job that
has not finished, one a queued or running job depends on, one whose webhook is
still being delivered. Webhook deliveries of no job (a session's events) are
kept as long, from when they were made, unless still being delivered.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from agentsite.core.batches import Budget, parents_purge, retention_budget, rows_delete
from jobs.models import Job, JobChunk, JobEvent, WebhookAttempt, WebhookDelivery

DAY_MS = 24 * 3600 * 1000
LIVE = (Job.Status.QUEUED, Job.Status.RUNNING)


def job_retention_days() -> int:
    """Days a finished job is kept; 0: forever."""
    return int(settings.AGENTSITE_JOB_RETENTION_DAYS)


def job_retention_ms() -> int | None:
    """The same in milliseconds (an MCP task's ``ttl``); None: kept forever."""
    days = job_retention_days()
    return days * DAY_MS if days else None


def jobs_kept_sentence() -> str:
    """How long a finished job can be asked for ("" when jobs are kept forever)."""
    days = job_retention_days()
    return f"Finished jobs are kept {days} days, then deleted." if days else ""


def job_not_found_message() -> str:
    """What a caller is told for a job id that names nothing (perhaps no longer)."""
    return f"No such job. {jobs_kept_sentence()}".strip()


def jobs_expired(*, now: datetime | None = None) -> QuerySet[Job]:
    """Finished jobs past retention that nothing live still needs, oldest first."""
    cutoff = (now or timezone.now()) - timedelta(days=job_retention_days())
    through = Job.depends_on.through
    needed_by_live = through.objects.filter(to_job_id=OuterRef("pk"), from_job__status__in=LIVE)
    delivering = WebhookDelivery.objects.filter(
        job_id=OuterRef("pk"), status=WebhookDelivery.Status.PENDING
    )
    return (
        # "Not live" rather than "terminal": either way no index on status is worth
        # reading; this way no planner (SQLite's) is tempted to read every finished job.
        Job.objects.filter(finished_at__lt=cutoff)
        .exclude(status__in=LIVE)
        .exclude(Exists(needed_by_live))
        .exclude(Exists(delivering))
        .order_by("finished_at")
    )


def deliveries_expired(*, now: datetime | None = None) -> QuerySet[WebhookDelivery]:
    """Deliveries of no job made before retention, delivered or given up, oldest first."""
    cutoff = (now or timezone.now()) - timedelta(days=job_retention_days())
    return (
        WebhookDelivery.objects.filter(job__isnull=True, created_at__lt=cutoff)
        .exclude(status=WebhookDelivery.Status.PENDING)
        .order_by("created_at")
    )


def deliveries_purge(*, budget: Budget | None = None, now: datetime | None = None) -> int:
    """Delete deliveries of no job past retention with their attempts; returns how many went."""
    if not job_retention_days():
        return 0
    return parents_purge(
        lambda: deliveries_expired(now=now), delivery_attempts_delete, budget or retention_budget()
    )


def delivery_attempts_delete(ids: list[int], budget: Budget) -> bool:
    """Delete the attempts of deliveries ``ids``; False when the budget ran out first."""
    return rows_delete(WebhookAttempt.objects.filter(delivery_id__in=ids), budget)[1]


def jobs_purge(*, budget: Budget | None = None, now: datetime | None = None) -> int:
    """Delete finished jobs past retention, a batch at a time; returns how many jobs went."""
    if not job_retention_days():
        return 0
    return parents_purge(
        lambda: jobs_expired(now=now), job_children_delete, budget or retention_budget()
    )


def job_children_delete(ids: list[str], budget: Budget) -> bool:
    """Delete the rows that hang off jobs ``ids``; False when the budget ran out first."""
    through = Job.depends_on.through
    deliveries = WebhookDelivery.objects.filter(job_id__in=ids)
    delivery_ids = list(deliveries.values_list("pk", flat=True))  # about one per job
    children: list[QuerySet[Any]] = [
        WebhookAttempt.objects.filter(delivery_id__in=delivery_ids),
        deliveries,
        JobChunk.objects.filter(job_id__in=ids),
        JobEvent.objects.filter(job_id__in=ids),
        through.objects.filter(from_job_id__in=ids),
        through.objects.filter(to_job_id__in=ids),
    ]
    return all(rows_delete(rows, budget)[1] for rows in children)
