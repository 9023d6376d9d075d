"""Finished jobs are deleted after AGENTSITE_JOB_RETENTION_DAYS, a bounded batch at a time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agentsite.core.batches import Budget
from jobs.models import Job, JobChunk, JobEvent, WebhookAttempt, WebhookDelivery
from jobs.retention import deliveries_purge, jobs_purge
from jobs.services import idempotency_keys_expire
from jobs.tasks import PERIODIC, purge_jobs

pytestmark = pytest.mark.django_db

S = Job.Status


def job(owner: Any, status: str = S.DONE, *, days_ago: float | None = 40, **fields: Any) -> Job:
    """A job created and (unless live) finished ``days_ago`` days ago."""
    at = timezone.now() - timedelta(days=days_ago or 0)
    row = Job.objects.create(
        owner=owner,
        tool="now",
        timeout_s=5,
        status=status,
        finished_at=at if status in Job.TERMINAL else None,
        **fields,
    )
    Job.objects.filter(pk=row.pk).update(created_at=at)
    return row


def with_history(row: Job, *, chunks: int = 3, delivery: str = "delivered") -> Job:
    """Give ``row`` partial results, events and a webhook delivery with an attempt."""
    JobChunk.objects.bulk_create(JobChunk(job=row, index=i, item={"i": i}) for i in range(chunks))
    JobEvent.objects.create(job=row, event="job.done")
    sent = WebhookDelivery.objects.create(
        owner_id=row.owner_id,
        event_type="job_completed",
        job=row,
        message_id=f"msg_{row.id}",
        url="https://example.com/",
        payload={},
        status=delivery,
    )
    WebhookAttempt.objects.create(delivery=sent, number=1, status_code=200)
    return row


def exists(row: Job) -> bool:
    return Job.objects.filter(pk=row.pk).exists()


def test_finished_jobs_past_retention_go_with_everything_that_hangs_off_them(user: Any) -> None:
    old = with_history(job(user, S.DONE))
    failed = with_history(job(user, S.FAILED))
    recent = with_history(job(user, S.DONE, days_ago=29))

    assert jobs_purge() == 2

    assert not exists(old) and not exists(failed) and exists(recent)
    assert set(JobChunk.objects.values_list("job_id", flat=True)) == {recent.id}
    assert set(JobEvent.objects.values_list("job_id", flat=True)) == {recent.id}
    assert set(WebhookDelivery.objects.values_list("job_id", flat=True)) == {recent.id}
    assert WebhookAttempt.objects.get().delivery.job_id == recent.id


def event_delivery(owner: Any, *, days_ago: float, status: str = "delivered") -> WebhookDelivery:
    """A delivery of no job (a session's event) made ``days_ago`` days ago, with an attempt."""
    row = WebhookDelivery.objects.create(
        owner=owner,
        event_type="approval.requested",
        message_id=f"msg_event_{WebhookDelivery.objects.count()}",
        url="https://example.com/",
        payload={},
        status=status,
    )
    at = timezone.now() - timedelta(days=days_ago)
    WebhookDelivery.objects.filter(pk=row.pk).update(created_at=at)
    WebhookAttempt.objects.create(delivery=row, number=1, status_code=200)
    return row


def test_deliveries_of_no_job_past_retention_go_with_their_attempts(user: Any) -> None:
    delivered = event_delivery(user, days_ago=40)
    failed = event_delivery(user, days_ago=40, status="failed")
    retrying = event_delivery(user, days_ago=40, status="pending")
    recent = event_delivery(user, days_ago=29)
    of_a_recent_job = with_history(job(user, S.DONE, days_ago=1))
    WebhookDelivery.objects.filter(job=of_a_recent_job).update(
        created_at=timezone.now() - timedelta(days=40)
    )

    assert deliveries_purge(budget=Budget(size=1, batches=20)) == 2

    kept = {
        retrying.pk,
        recent.pk,
        *of_a_recent_job.webhook_deliveries.values_list("pk", flat=True),
    }
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == kept
    assert set(WebhookAttempt.objects.values_list("delivery_id", flat=True)) == kept
    assert not {delivered.pk, failed.pk} & kept


def test_what_is_still_live_or_needed_stays(user: Any) -> None:
    running = job(user, S.RUNNING)
    queued = job(user, S.QUEUED)
    needed = job(user, S.DONE)
    waiting = job(user, S.QUEUED)
    waiting.depends_on.add(needed)
    delivering = with_history(job(user, S.DONE), delivery="pending")
    done_dependent = job(user, S.DONE)
    done_dependency = job(user, S.DONE)
    done_dependent.depends_on.add(done_dependency)

    assert jobs_purge() == 2

    assert all(exists(j) for j in (running, queued, needed, waiting, delivering))
    assert not exists(done_dependent) and not exists(done_dependency)
    assert list(waiting.depends_on.all()) == [needed]


def test_a_pass_deletes_a_bounded_number_of_rows_and_leaves_the_rest_for_the_next(
    user: Any, settings: Any
) -> None:
    settings.AGENTSITE_RETENTION_BATCH, settings.AGENTSITE_RETENTION_BATCHES = 2, 4
    jobs = [with_history(job(user), chunks=4) for _ in range(3)]
    rows = JobChunk.objects.count() + JobEvent.objects.count() + Job.objects.count()

    # Two rows a statement, four statements: not even the first two jobs' chunks.
    assert jobs_purge() == 0
    assert Job.objects.count() == 3
    assert JobChunk.objects.count() + JobEvent.objects.count() + Job.objects.count() < rows

    passes = 1
    while Job.objects.exists():
        jobs_purge()
        passes += 1
        assert passes < 20
    assert passes > 2
    assert not JobChunk.objects.exists() and not WebhookAttempt.objects.exists()
    assert not any(exists(j) for j in jobs)


def test_retention_zero_keeps_every_job(user: Any, settings: Any) -> None:
    settings.AGENTSITE_JOB_RETENTION_DAYS = 0
    old = job(user, S.DONE, days_ago=4000)
    assert jobs_purge() == 0
    assert exists(old)


def test_the_retention_setting_decides_what_is_old(user: Any, settings: Any) -> None:
    settings.AGENTSITE_JOB_RETENTION_DAYS = 2
    kept, gone = job(user, days_ago=1), job(user, days_ago=3)
    assert jobs_purge() == 1
    assert exists(kept) and not exists(gone)


def test_a_deleted_jobs_id_is_not_found_with_how_long_jobs_are_kept(
    user: Any, api_client: Any
) -> None:
    old = job(user)
    jobs_purge()
    for path in (f"/api/jobs/{old.id}", f"/api/jobs/{old.id}/result"):
        response = api_client.get(path)
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert error["message"] == "No such job. Finished jobs are kept 30 days, then deleted."
    assert api_client.delete(f"/api/jobs/{old.id}").status_code == 404


def test_expired_idempotency_keys_are_released_a_bounded_batch_at_a_time(user: Any) -> None:
    past = timezone.now() - timedelta(seconds=1)
    for n in range(5):
        job(user, days_ago=0, idempotency_key=f"k{n}", idempotency_expires_at=past)
    live = job(user, days_ago=0, idempotency_key="live", idempotency_expires_at=past + timedelta(1))

    assert idempotency_keys_expire(budget=Budget(size=2, batches=1)) == 2
    assert idempotency_keys_expire(budget=Budget(size=2, batches=5)) == 3
    assert list(Job.objects.exclude(idempotency_key=None).values_list("pk", flat=True)) == [live.pk]


def test_the_scheduler_runs_the_retention_pass() -> None:
    from agentsite.cron import periodic_tasks
    from sessions.tasks import purge_sessions

    registered = {func for func, _ in periodic_tasks()}
    assert {purge_jobs, purge_sessions} <= registered
    assert (purge_jobs, 60) in PERIODIC
