from __future__ import annotations

from datetime import timedelta
from typing import Any

import django_rq
import pytest
from django.utils import timezone
from rq.job import Job as RqJob

from jobs.models import Job
from jobs.tasks import lost_enqueues_repeat
from tests.jobs.factories import started_job_id

# Not committed: the job never reached RQ, as if Redis had been flushed since.
pytestmark = pytest.mark.django_db


def test_a_queued_job_that_redis_lost_is_enqueued_again(api_client: Any) -> None:
    job_id = started_job_id(api_client, "noop")
    Job.objects.filter(id=job_id).update(enqueued_at=timezone.now() - timedelta(minutes=5))
    connection = django_rq.get_connection("tools")
    assert not RqJob.exists(job_id, connection=connection)

    assert lost_enqueues_repeat() == 1

    assert job_id in django_rq.get_queue("tools").get_job_ids()
    assert lost_enqueues_repeat() == 0
    django_rq.get_queue("tools").remove(job_id)
