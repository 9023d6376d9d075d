from __future__ import annotations

from typing import Any

import pytest

from jobs.models import JobEvent
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tool_that_swallows_every_exception_still_times_out(
    api_client: Any, rq_workers: Any
) -> None:
    job_id = started_job_id(api_client, "stubborn", {"seconds": 60}, timeout_s=1)

    job = wait_for_status(job_id, "timed_out", "done", "failed", "cancelled", timeout=20)

    assert job.status == "timed_out"
    assert job.error_code == "deadline_exceeded"
    assert JobEvent.objects.filter(job=job, event="job_timed_out").count() == 1
    result = api_client.get(f"/api/jobs/{job_id}/result")
    assert result.status_code == 409
    assert result.json()["error"]["code"] == "job_timed_out"


def test_a_cooperative_tool_past_its_deadline_ends_timed_out(
    api_client: Any, rq_workers: Any
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 30, "steps": 300}, timeout_s=0.5)

    job = wait_for_status(job_id, "timed_out", "done", "failed", "cancelled", timeout=20)

    assert job.status == "timed_out"
    assert JobEvent.objects.filter(job=job, event="job_timed_out").count() == 1
