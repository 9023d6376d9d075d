from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job, JobEvent
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_chatty_tool_cannot_flood_progress_events(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "chatty", {"updates": 20_000, "items": 3})

    job = wait_for_status(job_id, "done", "failed")

    assert job.status == "done"
    progress = JobEvent.objects.filter(job=job, event="job_progress")
    assert 1 <= progress.count() < 50
    # The last word is never lost to throttling.
    assert Job.objects.get(id=job_id).progress_message == "update 20000"
    assert job.chunks.count() == 3
