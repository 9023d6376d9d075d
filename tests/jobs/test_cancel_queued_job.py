from __future__ import annotations

from typing import Any

import pytest

from jobs import lifecycle
from jobs.models import Job, JobEvent
from tests.jobs.factories import started_job_id

# Not committed, so the jobs stay queued even while workers run.
pytestmark = pytest.mark.django_db


def test_a_queued_job_is_cancelled_at_once_and_never_starts(api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 0.1})

    response = api_client.delete(f"/api/jobs/{job_id}")

    assert response.status_code == 202
    assert response.json() == {"job_id": job_id, "status": "cancelled"}
    job = Job.objects.get(id=job_id)
    assert job.status == "cancelled" and job.finished_at is not None
    assert job.started_at is None
    events = list(JobEvent.objects.filter(job=job).values_list("event", flat=True))
    assert events == ["job_queued", "job_cancelled"]


def test_a_second_delete_is_refused_as_already_finished(api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 0.1})
    api_client.delete(f"/api/jobs/{job_id}")

    response = api_client.delete(f"/api/jobs/{job_id}")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "already_finished"


def test_a_cancelled_job_refuses_to_start_in_a_worker(api_client: Any) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 0.1})
    lifecycle.job_request_cancel(job_id=job_id)

    with pytest.raises(lifecycle.JobTransitionError):
        lifecycle.job_start(job_id=job_id)
    assert Job.objects.get(id=job_id).status == "cancelled"
