from __future__ import annotations

from typing import Any

import django_rq
import pytest
from rq.job import Job as RqJob

from jobs.models import Job, JobChunk
from tests.conftest import wait_until
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cooperative_tool_stops_when_cancelled(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 30, "steps": 300})
    wait_until(lambda: JobChunk.objects.filter(job_id=job_id).exists())

    response = api_client.delete(f"/api/jobs/{job_id}")

    assert response.status_code == 202
    assert response.json() == {"job_id": job_id, "status": "cancelling"}
    job = wait_for_status(job_id, "cancelled", "done", "failed", timeout=10)
    assert job.status == "cancelled"
    assert job.error_message == "Stopped on request."  # stopped by itself, not forced
    assert job.cancel_requested_at is not None


def test_a_tool_ignoring_cancel_is_stopped_after_the_grace_period(
    api_client: Any, rq_workers: Any
) -> None:
    job_id = started_job_id(api_client, "stubborn", {"seconds": 60})
    wait_for_status(job_id, "running")

    assert api_client.delete(f"/api/jobs/{job_id}").json()["status"] == "cancelling"

    job = wait_for_status(job_id, "cancelled", "done", "failed", timeout=20)
    assert job.status == "cancelled"
    assert "did not stop" in job.error_message.lower()
    # The work horse was stopped through RQ, not left running for its 60 s.
    rq_job = RqJob.fetch(job_id, connection=django_rq.get_connection("tools"))
    wait_until(lambda: rq_job.get_status(refresh=True) == "stopped", timeout=10)


def test_a_job_that_finished_first_is_never_reported_cancelled(
    api_client: Any, rq_workers: Any
) -> None:
    job_id = started_job_id(api_client, "noop")
    wait_for_status(job_id, "done")

    response = api_client.delete(f"/api/jobs/{job_id}")

    assert response.status_code == 409
    assert response.json()["error"]["details"]["status"] == "done"
    assert Job.objects.get(id=job_id).status == "done"
