"""A tool worker runs its tool jobs one after another in one warm work horse.

RQ forks a horse per job, and that fork was most of a short job's cost. These
tests run a worker of their own (``tests.jobs.private_worker``) to know which
horse ran each job, and check that reuse never costs a job: a horse that was
killed, stopped by force or told to retire is replaced, and no horse outlives
its worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import django_rq
import pytest
from django.db import connections
from django.utils import timezone
from rq import Queue, Worker

from jobs.dispatch import rq_enqueue
from jobs.models import Job, JobEvent
from tests.conftest import Processes, alive, wait_until
from tests.jobs.factories import wait_for_status
from tests.jobs.test_worker_lost import children_of

pytestmark = pytest.mark.django_db(transaction=True)


FINAL = ("done", "failed", "cancelled", "timed_out")


class PrivateWorker:
    def __init__(self, processes: Processes, owner: Any, env: dict[str, str]) -> None:
        self.owner = owner
        name = f"horse-{uuid.uuid4().hex[:8]}"
        self.queue = Queue(name, connection=django_rq.get_connection("tools"))
        self.proc: subprocess.Popen[bytes] = processes.start_python(
            name, "-m", "tests.jobs.private_worker", name, env=env
        )
        wait_until(lambda: Worker.all(queue=self.queue), timeout=30)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, tool: str, args: dict[str, Any] | None = None, timeout_s: float = 60) -> str:
        job = Job.objects.create(
            owner=self.owner,
            tool=tool,
            args=args or {},
            timeout_s=timeout_s,
            enqueued_at=timezone.now(),  # handed over: the dispatch leaves it alone
        )
        rq_enqueue(str(job.id), timeout_s, queue=self.queue)
        return str(job.id)

    def running(self, tool: str, args: dict[str, Any]) -> str:
        """Start a job and wait until its tool runs."""
        job_id = self.start(tool, args)
        wait_for_status(job_id, "running")
        return job_id

    def stepping(self, seconds: int = 60) -> str:
        """Start a ``sleepy`` job and wait for its first step, so its tool runs in the horse.

        ``running`` is not enough to kill a horse mid-job: the worker starts the job
        before it hands it over, and a horse killed before it began a job leaves it
        to be queued again (nothing ran), not failed.
        """
        job_id = self.start("sleepy", {"seconds": seconds, "steps": seconds * 10})
        wait_until(lambda: Job.objects.filter(pk=job_id, partial_count__gt=0).exists())
        return job_id

    def run(self, tool: str, args: dict[str, Any] | None = None) -> Job:
        """Run a job to its end; it must end ``done``."""
        job = wait_for_status(self.start(tool, args), *FINAL)
        assert job.status == "done", (job.error_code, job.error_message)
        return job

    def horse_of(self, tool: str = "whoami") -> int:
        """The pid of the horse that ran a ``tool`` job (a child of this worker)."""
        result = self.run(tool).result
        assert result is not None and result["pid"] != self.pid
        return int(result["pid"])


@pytest.fixture
def private_worker(processes: Processes, user: Any) -> Iterator[Callable[..., PrivateWorker]]:
    started: list[PrivateWorker] = []

    def start(**env: str) -> PrivateWorker:
        worker = PrivateWorker(processes, user, env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        processes.stop(worker.proc)


def test_consecutive_tool_jobs_run_in_one_horse(private_worker: Any) -> None:
    worker = private_worker()
    pids = [worker.horse_of() for _ in range(4)]
    # Before: RQ forked a fresh horse for every job, four pids.
    assert len(set(pids)) == 1
    assert children_of(worker.pid) == pids[:1]  # idle, waiting for the next job


def test_a_horse_gives_way_to_a_new_one_after_max_jobs(private_worker: Any) -> None:
    worker = private_worker(AGENTSITE_JOB_HORSE_MAX_JOBS="2")
    pids = [worker.horse_of() for _ in range(5)]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
    assert not alive(pids[0]) and not alive(pids[2])  # retired and reaped


def test_max_jobs_one_forks_a_horse_per_job_as_plain_rq(private_worker: Any) -> None:
    worker = private_worker(AGENTSITE_JOB_HORSE_MAX_JOBS="1")
    pids = [worker.horse_of() for _ in range(3)]
    assert len(set(pids)) == 3


def test_a_job_that_leaves_a_thread_running_retires_its_horse(private_worker: Any) -> None:
    worker = private_worker()
    first = worker.horse_of("leaves_a_thread")
    # Before: the next job ran beside the thread the last one left.
    second = worker.horse_of()
    assert second != first
    assert not alive(first)
    assert worker.horse_of() == second  # the new horse is kept as usual


def test_a_job_stopped_by_force_takes_its_horse_and_the_next_job_gets_a_new_one(
    private_worker: Any, api_client: Any
) -> None:
    worker = private_worker()
    first = worker.horse_of()
    job_id = worker.running("stubborn", {"seconds": 60})
    assert api_client.delete(f"/api/jobs/{job_id}").status_code == 202
    job = wait_for_status(job_id, *FINAL, timeout=30)
    assert job.status == "cancelled"
    wait_until(lambda: not alive(first))
    # The worker did not take the kill for a lost horse: one end, the cancel.
    ends = JobEvent.objects.filter(job_id=job_id, event__in=["job_failed", "job_cancelled"])
    assert list(ends.values_list("event", flat=True)) == ["job_cancelled"]
    assert worker.horse_of() != first


def test_a_horse_killed_mid_job_fails_that_job_and_the_next_runs_in_a_new_horse(
    private_worker: Any,
) -> None:
    worker = private_worker()
    first = worker.horse_of()
    job_id = worker.stepping()
    os.kill(first, signal.SIGKILL)
    job = wait_for_status(job_id, *FINAL, timeout=30)
    assert (job.status, job.error_code) == ("failed", "worker_lost")
    assert JobEvent.objects.filter(job_id=job_id, event="job_failed").count() == 1
    second = worker.horse_of()
    assert second != first
    assert children_of(worker.pid) == [second]


def test_an_idle_horse_exits_with_its_worker(private_worker: Any) -> None:
    worker = private_worker()
    horse = worker.horse_of()
    os.kill(worker.pid, signal.SIGKILL)
    # Before there was no idle horse to leave behind; now it must not outlive its worker.
    wait_until(lambda: not alive(horse), timeout=10)


def test_a_stopped_worker_takes_its_idle_horse_with_it(private_worker: Any) -> None:
    worker = private_worker()
    horse = worker.horse_of()
    worker.proc.terminate()
    assert worker.proc.wait(20) == 0
    assert not alive(horse)


def test_a_cold_shutdown_mid_job_takes_the_horse_and_records_the_jobs_end(
    private_worker: Any,
) -> None:
    worker = private_worker()
    horse = worker.horse_of()
    job_id = worker.stepping()
    worker.proc.terminate()  # warm shutdown: it would wait for the job...
    time.sleep(1.2)  # (RQ ignores a second signal within a second of the first)
    worker.proc.terminate()  # ...cold shutdown: it will not
    worker.proc.wait(20)
    job = wait_for_status(job_id, *FINAL, timeout=30)
    assert (job.status, job.error_code) == ("failed", "worker_lost")
    assert not alive(horse)


def test_a_horse_reads_the_database_after_every_other_process_let_go_of_it(
    private_worker: Any,
) -> None:
    worker = private_worker()
    horse = worker.horse_of()
    # A task other than a tool job: the worker forks it a horse of its own, and lets
    # go of its database connection first.
    task = worker.queue.enqueue("tests.jobs.tools_for_tests.raw_noop")
    wait_until(lambda: task.get_status(refresh=True) == "finished")
    connections.close_all()  # and the test's own: nobody has the database open now
    # Before, on SQLite: the horse, forked holding the worker's connection, read a
    # stale view of the file from then on: its heartbeat found the job not running
    # and stopped it ("cancelled"), or its connections failed with "database disk
    # image is malformed".
    job = worker.run("sleepy", {"seconds": 0.3, "steps": 3})
    assert job.result is not None
    assert worker.horse_of() == horse
