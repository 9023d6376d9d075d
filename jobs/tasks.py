"""RQ entry points of the jobs app. Thin: take an id, call the lifecycle or a service.

The sweep runs on the ``turns`` queue on purpose: its job is to notice tool
workers that died or hang, so it must not wait behind them on ``tools`` or
``default`` (which the tool workers also serve). It is a few indexed queries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import connections
from django.db.models import Q

from agentsite.core.clock import database_now_plus
from agentsite.core.periodic import PeriodicTask
from jobs import dispatch, lifecycle, retention, services, webhooks
from jobs.alive import silent_among
from jobs.handoff import connections_detach_inherited
from jobs.heartbeat import stop_horse
from jobs.lifecycle import JobTransitionError
from jobs.models import Job

log = logging.getLogger(__name__)

# A queued job RQ will not run this long after it was handed over is re-enqueued (Redis
# lost it, or the worker that took it died), keeping its slot. Only the moment between a
# commit and its enqueue, and a live worker's between its dequeue and the job's start, are
# raced; a second copy of a job is harmless (its start is a compare-and-set: it is refused).
REQUEUE_AFTER_S = 5


def deliver_webhook(delivery_id: int) -> None:
    connections_detach_inherited()
    try:
        webhooks.webhook_deliver(delivery_id=delivery_id)
    finally:
        connections.close_all()


def jobs_end_and_stop(job_ids: Iterable[str], end: Callable[[str], object]) -> int:
    """End each job through the lifecycle, then stop its work horse; returns how many ended.

    A job that another process ended first (JobTransitionError) is left alone.
    """
    count = 0
    for job_id in job_ids:
        try:
            end(job_id)
        except JobTransitionError:
            continue
        count += 1
        stop_horse(job_id)
    return count


def lost_jobs_fail() -> int:
    """Running jobs whose heartbeat went stale and whose key in Redis expired too: their
    worker was killed or hangs (not merely cut off from the database, ``jobs.alive``)."""
    stale = database_now_plus(-settings.AGENTSITE_JOB_HEARTBEAT_STALE_S)
    silent = Job.objects.filter(status=Job.Status.RUNNING).filter(
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale)
    )
    return jobs_end_and_stop(
        silent_among("job", silent.values_list("id", flat=True)),
        lambda job_id: lifecycle.job_fail(
            job_id=job_id,
            code="worker_lost",
            message="The worker running this job stopped sending heartbeats.",
        ),
    )


def overdue_jobs_stop() -> int:
    """Running jobs whose own runner did not stop them in time (a hung horse)."""
    cutoff = database_now_plus(-2 * settings.AGENTSITE_JOB_STOP_GRACE_S)
    running = Job.objects.filter(status=Job.Status.RUNNING)
    timed_out = jobs_end_and_stop(
        running.filter(deadline__lt=cutoff).values_list("id", flat=True),
        lambda job_id: lifecycle.job_time_out(job_id=job_id, message="Past its deadline; stopped."),
    )
    cancelled = jobs_end_and_stop(
        running.filter(cancel_requested_at__lt=cutoff).values_list("id", flat=True),
        lambda job_id: lifecycle.job_cancel(
            job_id=job_id, message="Did not stop after the cancel request."
        ),
    )
    return timed_out + cancelled


def waiting_jobs_release() -> int:
    """Queued jobs whose dependencies ended while nobody released them (a crash in between)."""
    waiting = Job.objects.filter(
        status=Job.Status.QUEUED, ready_at__isnull=True, gate=""
    ).values_list("id", flat=True)[:200]
    return sum(lifecycle.job_release_if_ready(job_id=j) in {"released", "failed"} for j in waiting)


def lost_enqueues_repeat() -> int:
    """Queued jobs handed to RQ a while ago that RQ will not run: Redis no longer knows
    them (it was flushed), or a worker took one off the queue and died before starting it."""
    before = database_now_plus(-REQUEUE_AFTER_S)
    candidates = Job.objects.filter(status=Job.Status.QUEUED, enqueued_at__lt=before)
    count = 0
    for job_id, timeout_s in candidates.values_list("id", "timeout_s")[:100]:
        if not dispatch.rq_will_run(job_id):
            dispatch.rq_enqueue(job_id, timeout_s)
            count += 1
    return count


def jobs_sweep() -> dict[str, int]:
    """One pass over live jobs, webhook retries, expired idempotency keys and held jobs.

    The passes over live jobs are skipped when no job is queued or running (one indexed
    look): what an idle server pays every ``AGENTSITE_JOB_SWEEP_S``. A job that starts
    just after the look is its own path's to hand over, and the next pass sees it.
    """
    live = Job.objects.filter(status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).exists()
    passes: list[tuple[str, Callable[[], int], bool]] = [
        ("lost", lost_jobs_fail, live),
        ("overdue", overdue_jobs_stop, live),
        ("released", waiting_jobs_release, live),
        ("requeued", lost_enqueues_repeat, live),
        ("webhook_retries", webhooks.webhook_retries_due, True),
        ("keys_expired", services.idempotency_keys_expire, True),
        # Last: the passes above may have freed slots or held jobs again.
        ("dispatched", dispatch.jobs_dispatch, live),
    ]
    return {name: run() if due else 0 for name, run, due in passes}


def sweep_jobs() -> dict[str, int]:
    """The scheduler's periodic pass (``jobs_sweep``)."""
    return jobs_sweep()


def purge_jobs() -> dict[str, int]:
    """The scheduler's retention pass: finished jobs past ``AGENTSITE_JOB_RETENTION_DAYS``,
    and webhook deliveries of no job as old. Each pass is bounded
    (``AGENTSITE_RETENTION_BATCHES``)."""
    return {
        "jobs_deleted": retention.jobs_purge(),
        "deliveries_deleted": retention.deliveries_purge(),
    }


PERIODIC: list[PeriodicTask] = [
    (sweep_jobs, settings.AGENTSITE_JOB_SWEEP_S),
    (purge_jobs, settings.AGENTSITE_RETENTION_SWEEP_S),
]
