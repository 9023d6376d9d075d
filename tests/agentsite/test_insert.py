"""agentsite.core.queries.insert: a new row saved as ``save(force_insert=True)`` saves it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from agentsite.core.queries import insert
from jobs.models import Job, JobEvent

pytestmark = pytest.mark.django_db(transaction=True)


def new_job(owner: Any, key: str) -> Job:
    return Job(owner=owner, tool="noop", args={"n": [1, "two"]}, idempotency_key=key, timeout_s=30)


def test_the_row_is_what_the_orm_reads_back(user: Any, django_assert_num_queries: Any) -> None:
    job = new_job(user, "k1")
    with django_assert_num_queries(1):
        insert(job)
    assert not job._state.adding and job._state.db == "default"
    stored = Job.objects.get(pk=job.pk)
    assert (stored.owner_id, stored.tool, stored.args, stored.status) == (
        user.pk,
        "noop",
        {"n": [1, "two"]},
        Job.Status.QUEUED,
    )
    # auto_now_add stamped on the instance, as save() stamps it, and stored the same.
    assert job.created_at is not None and stored.created_at == job.created_at
    event = JobEvent(job=job, event="job_queued", payload={"status": "queued"})
    with django_assert_num_queries(1):
        insert(event)
    assert isinstance(event.pk, int)  # the automatic id, read back from the INSERT itself
    assert JobEvent.objects.get(pk=event.pk).payload == {"status": "queued"}
    second = JobEvent(job=job, event="job_started", payload={})
    insert(second)
    assert second.pk > event.pk


def test_a_unique_key_taken_raises_integrity_error_and_rolls_back_alone(user: Any) -> None:
    insert(new_job(user, "same"))
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(new_job(user, "same"))
    # The failed insert left the connection usable and wrote nothing.
    assert Job.objects.filter(owner=user, idempotency_key="same").count() == 1
