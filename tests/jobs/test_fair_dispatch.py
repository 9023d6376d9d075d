"""Tool workers are shared fairly among owners: a backlog waits in the database, not in RQ.

Real tool workers run the jobs, one or several; the order is read from the rows
(``started_at``), never from how long anything took.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import django_rq
import pytest
from django.utils import timezone
from rq import Worker
from rq.job import Job as RqJob

from jobs.models import Job, JobEvent
from tests.conftest import Processes, wait_for_idle_workers, wait_for_workers, wait_until
from tests.jobs.factories import started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = ("done", "failed", "cancelled", "timed_out")
SLOW = {"seconds": 1, "steps": 4}


def tool_workers() -> int:
    return len(Worker.all(queue=django_rq.get_queue("tools")))


def start_order() -> list[str]:
    started = Job.objects.filter(started_at__isnull=False).order_by("started_at", "id")
    return list(started.values_list("id", flat=True))


@pytest.fixture(params=[1, 2], ids=["one tool worker", "two tool workers"])
def tool_worker_layout(request: Any, rq_workers: Processes) -> Iterator[int]:
    """The session's tool workers, or only one of them: the others are stopped for the
    test (once idle) and replaced after it."""
    wanted: int = request.param
    queue = django_rq.get_queue("tools")
    wait_for_idle_workers("tools")
    extra = [worker.pid for worker in Worker.all(queue=queue)][wanted:]
    for proc in [proc for proc in rq_workers.procs if proc.pid in extra]:
        rq_workers.stop(proc)
    wait_until(lambda: tool_workers() == wanted, timeout=30)
    yield wanted
    for _ in extra:
        name = f"worker-tools-{uuid.uuid4().hex[:8]}"
        rq_workers.start(name, "rqworker", "tools", "default")
    wait_for_workers("tools", wanted + len(extra))


def test_a_users_first_job_starts_before_another_users_backlog(
    api_client: Any, other_api_client: Any, tool_worker_layout: int
) -> None:
    """Before, with one worker: each of A's jobs that ended handed its slot to A's next
    (neither owner had a job in flight, and A's were older), and B's ran last."""
    workers = tool_worker_layout
    flood = [started_job_id(api_client, "sleepy", SLOW) for _ in range(4 * workers)]
    # Every worker busy with the flood, so B's job finds no free slot.
    wait_until(lambda: Job.objects.filter(id__in=flood, status="running").count() == workers)

    single = started_job_id(other_api_client, "sleepy", {"seconds": 0.2, "steps": 2})

    for job_id in [*flood, single]:
        assert wait_for_status(job_id, *FINAL, timeout=60).status == "done"
    first = Job.objects.get(id=single)
    # The flood's backlog: its jobs still held in the database when B's arrived.
    backlog = list(Job.objects.filter(id__in=flood, enqueued_at__gt=first.created_at))
    assert len(backlog) >= len(flood) - workers - 1
    # B's job took the first free slot: it was handed to RQ before the backlog, but for
    # slots freed while its own acceptance was still uncommitted (a dispatch then cannot
    # see it; on PostgreSQL one runs beside that transaction) ...
    handed_over = first.enqueued_at
    assert handed_over is not None
    handed_ahead = [job for job in backlog if job.enqueued_at and job.enqueued_at < handed_over]
    assert len(handed_ahead) < workers
    # ... and started before it, but for jobs taking workers freed at the same moment.
    order = start_order()
    ahead = [job for job in backlog if order.index(job.id) < order.index(single)]
    assert len(ahead) < workers


def test_a_backlog_is_held_in_the_database_and_a_flushed_redis_does_not_strand_it(
    api_client: Any, rq_workers: Any, rq_scheduler: Any
) -> None:
    # The tool workers are busy with other RQ work (they serve `default` too), so
    # the jobs handed over wait in RQ, where the flush loses them.
    busy = [django_rq.get_queue("default").enqueue("time.sleep", 3) for _ in range(tool_workers())]
    wait_until(lambda: all(j.get_status(refresh=True) == "started" for j in busy))
    jobs = [started_job_id(api_client, "noop") for _ in range(tool_workers() + 3)]
    held = Job.objects.filter(id__in=jobs, enqueued_at__isnull=True, started_at__isnull=True)
    assert held.count() == 3
    connection = django_rq.get_connection("tools")
    held_ids = list(held.values_list("id", flat=True))
    assert not any(RqJob.exists(job_id, connection=connection) for job_id in held_ids)

    connection.flushdb()

    for job_id in jobs:
        assert wait_for_status(job_id, *FINAL, timeout=60).status == "done"


def test_a_held_job_is_cancelled_at_once_and_never_starts(api_client: Any, rq_workers: Any) -> None:
    jobs = [started_job_id(api_client, "sleepy", SLOW) for _ in range(tool_workers() + 2)]
    last = Job.objects.get(id=jobs[-1])
    assert last.status == "queued" and last.enqueued_at is None  # held, not in RQ

    response = api_client.delete(f"/api/jobs/{last.id}")

    assert response.status_code == 202
    assert response.json() == {"job_id": last.id, "status": "cancelled"}
    for job_id in jobs[:-1]:
        assert wait_for_status(job_id, *FINAL, timeout=60).status == "done"
    last.refresh_from_db()
    assert last.status == "cancelled" and last.started_at is None
    events = list(JobEvent.objects.filter(job=last).values_list("event", flat=True))
    assert events == ["job_queued", "job_cancelled"]


def test_a_held_job_nobody_dispatched_is_handed_over_by_the_sweep(
    user: Any, rq_workers: Any, rq_scheduler: Any
) -> None:
    # As if its dispatch on commit had failed (Redis away just then): held, unasked.
    job = Job.objects.create(owner=user, tool="noop", timeout_s=5, ready_at=timezone.now())

    assert wait_for_status(job.id, *FINAL, timeout=60).status == "done"
