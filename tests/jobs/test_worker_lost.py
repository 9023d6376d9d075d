from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import django_rq
import pytest
from rq import Worker

from jobs.models import JobEvent
from tests.conftest import wait_for_workers, wait_until
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the worker's work horse)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_job_whose_worker_is_killed_ends_failed_worker_lost(
    api_client: Any, rq_workers: Any, rq_scheduler: Any
) -> None:
    job_id = started_job_id(api_client, "sleepy", {"seconds": 120, "steps": 1000})
    job = wait_for_status(job_id, "running")
    connection = django_rq.get_connection("tools")
    worker = Worker.find_by_key(f"rq:worker:{job.worker_name}", connection=connection)
    assert worker is not None and worker.pid is not None
    worker_pid = worker.pid
    horses = wait_until(lambda: children_of(worker_pid))

    # The whole machine goes: the worker and its work horse, without a chance to clean up.
    for pid in [worker.pid, *horses]:
        os.kill(pid, signal.SIGKILL)
    # Keep two live tool workers for the rest of the suite; the dead one's
    # registration goes first, or it would count as one of them.
    worker.register_death()
    rq_workers.start("worker-tools-replacement", "rqworker", "tools", "default")

    job = wait_for_status(job_id, "failed", "done", "cancelled", "timed_out", timeout=30)
    assert job.status == "failed"
    assert job.error_code == "worker_lost"
    assert JobEvent.objects.filter(job=job, event="job_failed").count() == 1
    wait_for_workers("tools", 2)
