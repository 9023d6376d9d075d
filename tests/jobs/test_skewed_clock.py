"""A host whose clock is off by 30 s: its live work is not declared lost, its dead work is.

Liveness is judged on the database's clock (``agentsite.core.clock``): a heartbeat
and a deadline are written with it and judged against it, whatever the clocks of
the host that writes them and of the scheduler's host that judges them say.

The tool worker here runs under libfaketime (Debian's ``faketime``), its clock 30 s
behind or ahead of the database's and of this process's; the turn worker's
heartbeat is written here under a clock set back the same way. On SQLite, which
is one host's file, the database's clock is the host's: the worker's run on
PostgreSQL.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from agentsite.core.clock import database_now, database_now_plus
from jobs import dispatch, services
from jobs.models import Job
from jobs.tasks import REQUEUE_AFTER_S, lost_enqueues_repeat, lost_jobs_fail
from sessions.models import AgentSession, Run
from sessions.runs import runs_beat, runs_reap
from tests.conftest import Processes, wait_until
from tests.jobs.factories import wait_for_status
from tests.jobs.test_warm_horse import PrivateWorker
from tests.jobs.test_worker_lost import children_of

FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"), None)
SKEW_S = 30

pytestmark = pytest.mark.django_db(transaction=True)
# A worker process under libfaketime, against the database's clock.
needs_faketime = [
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="SQLite lives on one host: its clock is that host's (DATABASE_URL=postgres://…)",
    ),
    pytest.mark.skipif(
        FAKETIME is None, reason="libfaketime is not installed (apt install faketime)"
    ),
]


def skewed_worker(processes: Processes, owner: Any, offset: str) -> PrivateWorker:
    return PrivateWorker(processes, owner, {"LD_PRELOAD": str(FAKETIME), "FAKETIME": offset})


def faketime(test: Any) -> Any:
    for mark in needs_faketime:
        test = mark(test)
    return test


@faketime
def test_a_job_on_a_host_whose_clock_is_behind_is_not_declared_lost(
    processes: Processes, user: Any
) -> None:
    worker = skewed_worker(processes, user, f"-{SKEW_S}s")
    try:
        job_id = worker.start("sleepy", {"seconds": 6, "steps": 12})
        wait_for_status(job_id, "running")
        # Judged by the scheduler's rule, here, on and off, until the job ends.
        declared_lost = []

        def ended() -> bool:
            declared_lost.append(lost_jobs_fail())
            return Job.objects.get(pk=job_id).is_terminal

        wait_until(ended, timeout=60)
        job = Job.objects.get(pk=job_id)
        assert job.status == "done", (job.status, job.error_code)
        assert sum(declared_lost) == 0
        # Its times are the database's, not the worker's 30 s behind.
        assert job.started_at is not None and job.started_at > job.created_at
    finally:
        processes.stop(worker.proc)


@faketime
def test_a_dead_job_on_a_host_whose_clock_is_ahead_is_found_in_the_usual_time(
    processes: Processes, user: Any, settings: Any
) -> None:
    worker = skewed_worker(processes, user, f"+{SKEW_S}s")
    try:
        job_id = worker.start("sleepy", {"seconds": 120, "steps": 600})
        wait_for_status(job_id, "running")
        horses = wait_until(lambda: children_of(worker.pid))
        for pid in [worker.pid, *horses]:
            os.kill(pid, signal.SIGKILL)
        worker.proc.wait(10)
        # Its heartbeats were not 30 s in the future: it goes stale after the usual
        # AGENTSITE_JOB_HEARTBEAT_STALE_S, well before its host's 30 s would let it.
        stale_s = settings.AGENTSITE_JOB_HEARTBEAT_STALE_S
        assert stale_s + 10 < SKEW_S
        wait_until(lambda: lost_jobs_fail() == 1, timeout=stale_s + 10)
        job = Job.objects.get(pk=job_id)
        assert (job.status, job.error_code) == ("failed", "worker_lost")
    finally:
        processes.stop(worker.proc)


def test_a_turn_beating_on_a_host_whose_clock_is_behind_is_not_reaped(user: Any) -> None:
    session = AgentSession.objects.create(owner=user)
    run = Run.objects.create(session=session, owner=user, status=Run.Status.RUNNING)
    behind = timezone.now() - timedelta(seconds=SKEW_S)
    with mock.patch("django.utils.timezone.now", return_value=behind):
        runs_beat(run_ids=[run.id])  # the turn worker's host
    assert runs_reap() == {"failed": 0, "requeued": 0}  # the scheduler's host
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


# --- the other comparisons of times that different hosts write ------------------------


def ahead() -> Any:
    """This process's clock SKEW_S ahead, as on a host whose clock is."""
    later = timezone.now() + timedelta(seconds=SKEW_S)
    return mock.patch("django.utils.timezone.now", return_value=later)


def test_a_hand_over_is_stamped_with_the_databases_time_whoever_hands_it_over(
    user: Any, settings: Any
) -> None:
    settings.AGENTSITE_JOB_SLOTS = 1
    # The one slot taken (by a row no worker runs), so the new job is held, not handed
    # to the run's RQ workers.
    taking = Job.objects.create(
        owner=user, tool="noop", args={}, timeout_s=60, status=Job.Status.RUNNING
    )
    Job.objects.filter(pk=taking.pk).update(enqueued_at=database_now())
    job, _ = services.job_create(owner=user, tool="noop", args={}, idempotency_key="held")
    assert Job.objects.get(pk=job.pk).enqueued_at is None
    Job.objects.filter(pk=taking.pk).update(status=Job.Status.DONE)
    with ahead():  # a worker host, handing the slot of its job over
        assert dispatch.jobs_dispatch() == 1
    handed_at = Job.objects.get(pk=job.pk).enqueued_at
    # Before: 30 s in the future, so its owner looked served last and waited behind others.
    assert handed_at is not None and abs((handed_at - timezone.now()).total_seconds()) < 5


def test_the_sweep_on_a_host_ahead_does_not_enqueue_again_a_job_just_handed_over(
    user: Any,
) -> None:
    job = Job.objects.create(
        owner=user, tool="noop", args={}, timeout_s=60, ready_at=timezone.now()
    )
    # Handed over a moment ago; its enqueue, after the commit, has not reached RQ yet.
    Job.objects.filter(pk=job.pk).update(enqueued_at=database_now())
    with ahead():
        # Before: taken for a job RQ lost 5 s after its hand-over, and enqueued twice.
        assert lost_enqueues_repeat() == 0
    Job.objects.filter(pk=job.pk).update(enqueued_at=database_now_plus(-REQUEUE_AFTER_S - 1))
    assert lost_enqueues_repeat() == 1


def test_the_reaper_on_a_host_ahead_does_not_take_a_new_run_for_a_forgotten_one(
    user: Any,
) -> None:
    session = AgentSession.objects.create(owner=user)
    Run.objects.create(session=session, owner=user, status=Run.Status.QUEUED)
    with ahead():
        # Before: every queued run not yet in RQ looked forgotten and was enqueued again.
        assert runs_reap() == {"failed": 0, "requeued": 0}
