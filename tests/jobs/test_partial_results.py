from __future__ import annotations

from typing import Any

import pytest

from jobs.models import JobChunk
from tests.conftest import wait_until
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_partial_results_are_paged_while_running_and_after(
    api_client: Any, rq_workers: Any
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 2, "steps": 8})
    wait_until(lambda: JobChunk.objects.filter(job_id=job_id).count() >= 2)

    early = api_client.get(f"/api/jobs/{job_id}/result?cursor=0&limit=1").json()
    assert early == {"items": [{"step": 0}], "next_cursor": 1, "complete": False}

    wait_for_status(job_id, "done")
    pages, cursor = [], 1
    while True:
        page = api_client.get(f"/api/jobs/{job_id}/result?cursor={cursor}&limit=3").json()
        pages.extend(page["items"])
        cursor = page["next_cursor"]
        if page["complete"]:
            break
    assert pages == [{"step": i} for i in range(1, 8)]
    assert cursor == 8
