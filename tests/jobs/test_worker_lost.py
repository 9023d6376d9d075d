from __future__ import annotations

import os
import signal
from typing import Any

import django_rq
import pytest
from rq import Worker

from jobs.models import JobEvent
from tests.conftest import wait_for_workers
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_whose_worker_is_killed_ends_failed_worker_lost(
    api_client: Any, rq_workers: Any, rq_scheduler: Any
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 120, "steps": 1000})
    job = wait_for_status(job_id, "running")
    rq_name, horse_pid = job.worker_name.rsplit("/", 1)
    connection = django_rq.get_connection("tools")
    worker = Worker.find_by_key(f"rq:worker:{rq_name}", connection=connection)
    assert worker is not None

    # The whole machine goes: the worker and its work horse, without a chance to clean up.
    os.kill(int(horse_pid), signal.SIGKILL)
    os.kill(worker.pid, signal.SIGKILL)
    # Keep two tool workers for the rest of the suite.
    rq_workers.start("worker-tools-replacement", "rqworker", "tools", "default")

    job = wait_for_status(job_id, "failed", "done", "cancelled", "timed_out", timeout=30)
    assert job.status == "failed"
    assert job.error_code == "worker_lost"
    assert JobEvent.objects.filter(job=job, event="job_failed").count() == 1
    wait_for_workers("tools", 2)
