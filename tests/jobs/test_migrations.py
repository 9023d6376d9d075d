"""The columns added for the hot path are filled in for jobs that existed before them.

The tests migrate the jobs table back and forth, so no scheduler may sweep it
meanwhile: on PostgreSQL a sweep's transaction that reads the table and then
writes it deadlocks with the migration's ``ALTER TABLE`` queued between the two.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("jobs", "0002_job_events_webhooks")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_scheduler")
def test_counts_dependencies_and_dependents_are_copied_for_existing_jobs(user: Any) -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("jobs")
    old = migrate(BEFORE)
    try:
        Job = old.get_model("jobs", "Job")
        JobChunk = old.get_model("jobs", "JobChunk")
        first = Job.objects.create(owner_id=user.pk, tool="noop", timeout_s=5, status="done")
        second = Job.objects.create(owner_id=user.pk, tool="noop", timeout_s=5, status="done")
        waiting = Job.objects.create(owner_id=user.pk, tool="noop", timeout_s=5)
        waiting.depends_on.set([second, first])
        for index in range(3):
            JobChunk.objects.create(job=first, index=index, item={"n": index})
    finally:
        new = migrate(latest)

    rows = {
        row["id"]: row
        for row in new.get_model("jobs", "Job").objects.values(
            "id", "partial_count", "dependency_ids", "has_dependents"
        )
    }
    assert rows[first.id]["partial_count"] == 3
    assert rows[second.id]["partial_count"] == 0
    assert rows[waiting.id]["dependency_ids"] == sorted([first.id, second.id])
    assert rows[first.id]["has_dependents"] and rows[second.id]["has_dependents"]
    assert not rows[waiting.id]["has_dependents"]
    assert rows[first.id]["dependency_ids"] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_scheduler")
def test_jobs_handed_to_rq_before_ready_at_existed_count_as_ready_since_then(user: Any) -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("jobs")
    old = migrate([("jobs", "0005_job_created_index")])
    try:
        Job = old.get_model("jobs", "Job")
        # Ended, so that no sweep of a scheduler still running from another test moves them.
        handed = Job.objects.create(
            owner_id=user.pk, tool="noop", timeout_s=5, status="done", enqueued_at=timezone.now()
        )
        never = Job.objects.create(owner_id=user.pk, tool="noop", timeout_s=5, status="cancelled")
    finally:
        new = migrate(latest)

    rows = {
        row["id"]: row
        for row in new.get_model("jobs", "Job").objects.values("id", "ready_at", "enqueued_at")
    }
    assert rows[handed.id]["ready_at"] == rows[handed.id]["enqueued_at"] is not None
    assert rows[never.id]["ready_at"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("no_scheduler")
def test_deliveries_made_before_owners_existed_belong_to_their_jobs_owner(
    user: Any, other_user: Any
) -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes("jobs")
    old = migrate([("jobs", "0013_verbose_names")])
    try:
        Job = old.get_model("jobs", "Job")
        WebhookDelivery = old.get_model("jobs", "WebhookDelivery")
        mine = Job.objects.create(owner_id=user.pk, tool="noop", timeout_s=5, status="done")
        theirs = Job.objects.create(
            owner_id=other_user.pk, tool="noop", timeout_s=5, status="failed"
        )
        for job, event in ((mine, "job_completed"), (theirs, "job_failed")):
            WebhookDelivery.objects.create(
                job=job,
                message_id=f"msg_{job.id}_{event}",
                url="https://example.com/hook",
                payload={"type": event, "timestamp": "", "data": {"job_id": job.id}},
                status="delivered",
            )
    finally:
        new = migrate(latest)

    rows = set(
        new.get_model("jobs", "WebhookDelivery").objects.values_list(
            "job_id", "owner_id", "event_type"
        )
    )
    assert rows == {
        (mine.id, user.pk, "job_completed"),
        (theirs.id, other_user.pk, "job_failed"),
    }
