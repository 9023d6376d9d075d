from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job, JobEvent
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_reaches_done_with_its_output(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 0.2, "steps": 2})
    wait_for_status(job_id, "done")

    result = api_client.get(f"/api/jobs/{job_id}/result").json()
    assert result == {
        "job_id": job_id,
        "status": "done",
        "output": {"summary": "slept 0.2s in 2 steps", "steps": 2},
    }
    status = api_client.get(f"/api/jobs/{job_id}").json()
    assert status["progress"]["fraction"] == 1.0
    assert status["started_at"] and status["finished_at"] and status["deadline"]
    assert status["error"] is None


def test_every_transition_is_recorded_once(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "noop")
    wait_for_status(job_id, "done")
    events = list(JobEvent.objects.filter(job_id=job_id).values_list("event", flat=True))
    assert events == ["job_queued", "job_started", "job_completed"]
    job = Job.objects.get(id=job_id)
    assert job.heartbeat_at is not None and job.enqueued_at is not None


def test_a_tool_that_raises_ends_failed(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "failing")
    job = wait_for_status(job_id, "failed", "done")
    assert job.status == "failed"
    response = api_client.get(f"/api/jobs/{job_id}/result")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "job_failed"
    assert error["details"]["reason"] == "tool_error"
    assert "the tool broke" in error["details"]["message"]
