"""A running job rides out a database restart or failover: its heartbeat, progress and
partial results, and it is not declared lost while it is cut off from the database."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError, transaction
from django.utils import timezone

from agentsite.core.database import through_database_outage
from jobs import handoff, lifecycle
from jobs.heartbeat import Heartbeat
from jobs.models import Job, JobChunk, JobEvent
from jobs.tasks import lost_jobs_fail
from jobs.tools.context import JobToolContext
from tests.agentsite.test_database import database_away_for
from tests.conftest import python_elsewhere, subprocess_env, wait_until

# The scheduler's sweep of lost jobs, run in a process that reaches the database.
SWEEP = "from jobs.tasks import lost_jobs_fail; print(lost_jobs_fail())"

pytestmark = pytest.mark.django_db(transaction=True)


def running_job(user: Any) -> Job:
    job = Job.objects.create(owner=user, tool="sleepy", args={}, timeout_s=60)
    return lifecycle.job_start(job_id=job.id, worker_name="test")


def test_the_heartbeat_beats_again_once_the_database_is_back(user: Any) -> None:
    job = running_job(user)
    ctx = JobToolContext(job)
    heartbeat = Heartbeat(ctx)
    with database_away_for(2.5):
        beats = threading.Thread(target=heartbeat.beat_loop, daemon=True)
        beats.start()
        time.sleep(1.5)  # its first beats fail
    try:
        # Before: the first failure ended the beat thread, and the sweep failed the
        # job as worker_lost although its tool was running.
        assert wait_until(
            lambda: Job.objects.get(pk=job.pk).heartbeat_at != job.heartbeat_at, timeout=10
        )
        assert beats.is_alive()
    finally:
        heartbeat.finished.set()
        beats.join(5)


def test_a_job_cut_off_from_the_database_is_not_declared_lost_while_it_lives(
    user: Any, no_scheduler: None
) -> None:
    """A failover: the worker cannot reach the database, the scheduler (on the promoted
    standby) can, and finds the job's last heartbeat long past."""
    job = running_job(user)
    stale = timezone.now() - timedelta(seconds=settings.AGENTSITE_JOB_HEARTBEAT_STALE_S + 5)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    scheduler = subprocess_env()
    heartbeat = Heartbeat(JobToolContext(job))
    with database_away_for(60):
        heartbeat.start()
        try:
            time.sleep(settings.AGENTSITE_JOB_HEARTBEAT_S + 1)  # its beats fail
            # Before: failed as worker_lost, its tool still running.
            assert python_elsewhere(SWEEP, scheduler) == "0"
        finally:
            heartbeat.finished.set()
            heartbeat.join(10)
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING


def test_a_job_silent_in_the_database_and_in_redis_is_declared_lost(user: Any) -> None:
    job = running_job(user)
    stale = timezone.now() - timedelta(seconds=settings.AGENTSITE_JOB_HEARTBEAT_STALE_S + 5)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    assert lost_jobs_fail() == 1
    assert Job.objects.get(pk=job.pk).error_code == "worker_lost"


def test_a_partial_result_waits_for_the_database_and_is_kept(user: Any) -> None:
    job = running_job(user)
    ctx = JobToolContext(job)
    with database_away_for(1.5):
        # Before: the tool got the OperationalError and the job failed with tool_error.
        assert ctx.partial({"step": 0}) == 0
    assert list(JobChunk.objects.filter(job=job).values_list("item", flat=True)) == [{"step": 0}]


def test_a_partial_result_waiting_for_the_database_holds_back_no_heartbeat(user: Any) -> None:
    job = running_job(user)
    ctx = JobToolContext(job)
    with database_away_for(4):
        writer = threading.Thread(target=ctx.partial, args=({"step": 0},), daemon=True)
        writer.start()
        time.sleep(0.5)  # the tool waits for the database, in its partial result
        # What the heartbeat thread does before each beat.
        started = time.monotonic()
        ctx.progress_flush()
        # Before: it waited for the tool's partial result to be written, and the job's
        # heartbeat with it, for as long as the database was away.
        assert time.monotonic() - started < 1
    writer.join(20)
    assert list(JobChunk.objects.filter(job=job).values_list("item", flat=True)) == [{"step": 0}]


def test_progress_while_the_database_is_away_is_written_once_it_is_back(user: Any) -> None:
    job = running_job(user)
    ctx = JobToolContext(job)
    with database_away_for(60):
        ctx.progress(0.5, "half way")  # Before: the OperationalError reached the tool.
    ctx.progress_flush()
    assert Job.objects.get(pk=job.pk).progress_message == "half way"


def test_the_worker_records_a_jobs_end_once_the_database_is_back(user: Any) -> None:
    job = running_job(user)
    handoff.STARTED_BY_WORKER[job.id] = job
    outcome = {"transition": "job_succeed", "kwargs": {"result": {"summary": "slept"}}}
    with database_away_for(1.5):
        through_database_outage(
            lambda: handoff.job_finish_in_worker(
                job_id=job.id, outcome=outcome, horse_status="finished"
            ),
            what="test",
        )
    # Before: the first try forgot the job, so the second did nothing and the job
    # stayed running until the sweep failed it as worker_lost.
    job.refresh_from_db()
    assert (job.status, job.result) == (Job.Status.DONE, {"summary": "slept"})
    assert job.id not in handoff.STARTED_BY_WORKER


def test_a_connection_lost_inside_a_transaction_is_not_retried(user: Any) -> None:
    """Retrying only the failed part would run half a transaction on a new connection."""
    calls: list[int] = []

    def lost() -> None:
        calls.append(1)
        raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError), transaction.atomic():
        through_database_outage(lost, what="inside a transaction")
    assert calls == [1]


def test_a_start_whose_answer_was_lost_is_the_workers_own_when_tried_again(user: Any) -> None:
    """A failover in the commit of the start: the database has it, the worker never heard."""
    job = Job.objects.create(owner=user, tool="sleepy", args={}, timeout_s=60)
    lifecycle.job_start(job_id=job.id, worker_name="worker-a")  # committed, answer lost
    handoff.job_start_in_worker(job_id=job.id, worker_name="worker-a")  # the try again
    # Before: refused as already running, so the horse never ran it and the sweep later
    # failed it as worker_lost, its worker alive.
    started = handoff.STARTED_BY_WORKER[job.id]
    assert started is not None and started.status == Job.Status.RUNNING
    outcome = {"transition": "job_succeed", "kwargs": {"result": {"summary": "slept"}}}
    handoff.job_finish_in_worker(job_id=job.id, outcome=outcome, horse_status="finished")
    assert Job.objects.get(pk=job.pk).status == Job.Status.DONE


def test_a_job_another_worker_started_is_not_taken(user: Any) -> None:
    job = Job.objects.create(owner=user, tool="sleepy", args={}, timeout_s=60)
    lifecycle.job_start(job_id=job.id, worker_name="worker-a")
    handoff.job_start_in_worker(job_id=job.id, worker_name="worker-b")
    assert handoff.STARTED_BY_WORKER[job.id] is None


def test_an_end_whose_answer_was_lost_is_recorded_once_when_tried_again(user: Any) -> None:
    job = running_job(user)
    handoff.STARTED_BY_WORKER[job.id] = job
    lifecycle.job_succeed(job_id=job.id, result={"summary": "slept"})  # committed, answer lost
    outcome = {"transition": "job_succeed", "kwargs": {"result": {"summary": "slept"}}}
    handoff.job_finish_in_worker(job_id=job.id, outcome=outcome, horse_status="finished")
    job.refresh_from_db()
    assert (job.status, job.result) == (Job.Status.DONE, {"summary": "slept"})
    assert JobEvent.objects.filter(job=job, event="job_completed").count() == 1
