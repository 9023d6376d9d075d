"""A transition hands back the row exactly as stored, read with or without RETURNING."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from jobs import lifecycle, services
from jobs.lifecycle import JobTransitionError
from jobs.models import Job

pytestmark = pytest.mark.django_db


def stored(job: Job) -> dict[str, Any]:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


@pytest.mark.parametrize("returning", [True, False], ids=["returning", "read-back"])
def test_transitions_return_the_stored_row(user: Any, monkeypatch: Any, returning: bool) -> None:
    if returning:
        assert lifecycle._returns_from_update(connection)  # both supported backends do
    else:
        monkeypatch.setattr(lifecycle, "_returns_from_update", lambda connection: False)
    job, created = services.job_create(owner=user, tool="noop", args={}, idempotency_key="k1")
    assert created

    started = lifecycle.job_start(job_id=job.id, worker_name="w1", timeout_s=30)
    assert started.status == Job.Status.RUNNING and started.worker_name == "w1"
    assert started.started_at is not None and started.deadline is not None
    assert started.deadline - started.started_at == timedelta(seconds=30)
    assert stored(started) == stored(Job.objects.get(id=job.id))

    lifecycle.job_partial(job_id=job.id, index=0, item={"n": 0})
    done = lifecycle.job_succeed(job_id=job.id, result={"rows": [1, 2]})
    assert done.status == Job.Status.DONE and done.result == {"rows": [1, 2]}
    assert done.partial_count == 1 and done.progress_fraction == 1.0
    assert stored(done) == stored(Job.objects.get(id=job.id))

    with pytest.raises(JobTransitionError) as refused:
        lifecycle.job_cancel(job_id=job.id)
    assert refused.value.current == Job.Status.DONE


def test_a_dependency_knows_it_has_dependents(user: Any) -> None:
    first, _ = services.job_create(owner=user, tool="noop", args={}, idempotency_key="a")
    second, _ = services.job_create(
        owner=user, tool="noop", args={}, idempotency_key="b", depends_on=[first.id]
    )
    rows = {j.id: j for j in Job.objects.all()}
    assert rows[first.id].has_dependents and not rows[second.id].has_dependents
    assert rows[second.id].dependency_ids == [first.id]
    assert rows[second.id].enqueued_at is None and rows[first.id].enqueued_at is not None
