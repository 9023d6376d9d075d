"""An approved call survives faults between its approval and its job's start.

The approval is in the database before its job is anywhere else; what a killed
tool worker or a flushed Redis forgets, the sweep (``jobs/tasks.py``) and the
dispatch rebuild from the rows. Each test approves a request while no tool worker
can take its job, breaks something, and checks where everything ends: the
approval still ``approved``, one job for it, ``done`` on a worker that was not
broken, its completion in the session's log once and the agent told of it, the
log's ``seq`` dense.

Real turn and tool workers and the scheduler; the offline model asks for the
tests to be run, as in tests/sessions/test_approvals.py.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections import Counter
from typing import Any

import django_rq
import pytest
from django.test import Client
from rq import Queue, Worker
from rq.job import Job as RqJob

from jobs.models import Job, JobEvent
from sessions.models import AgentSession, Approval, Event, Run
from tests.conftest import Processes, wait_for_idle_workers, wait_for_workers, wait_until
from tests.jobs.factories import started_job_id, wait_for_status
from tests.jobs.test_worker_lost import children_of
from tests.sessions.factories import messages, wait_for_idle
from tests.sessions.test_approvals import ask_for_tests, decide

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = ("done", "failed", "cancelled", "timed_out")
ENDS = {"job_completed", "job_failed", "job_cancelled", "job_timed_out"}


def tool_workers() -> list[Any]:
    return list(Worker.all(queue=django_rq.get_queue("tools")))


def hold_tool_workers() -> str:
    """Every tool worker busy with RQ work that is no job of ours (they serve ``default``
    too) until the returned Redis key goes: the dispatch sees free slots, so a job it
    hands over waits in RQ."""
    wait_for_idle_workers("tools")
    key = f"test-hold-{uuid.uuid4().hex}"
    connection = django_rq.get_connection("default")
    connection.set(key, 1)
    queue = django_rq.get_queue("default")
    held = [queue.enqueue("tests.jobs.tools_for_tests.raw_wait_while", key) for _ in tool_workers()]
    wait_until(lambda: all(job.get_status(refresh=True) == "started" for job in held))
    return key


def fill_every_slot(client: Client) -> list[str]:
    """Every tool worker running a long job of ours: no slot is free, so an approved job
    is held in the database."""
    wait_for_idle_workers("tools")
    jobs = [
        started_job_id(client, "sleepy", {"seconds": 120, "steps": 1000}) for _ in tool_workers()
    ]
    wait_until(lambda: Job.objects.filter(id__in=jobs, status="running").count() == len(jobs))
    return jobs


def kill_tool_workers(rq_workers: Processes) -> set[str]:
    """SIGKILL every tool worker and its work horses, as a machine that loses power, then
    start as many fresh ones; returns the names of the dead."""
    dead = tool_workers()
    pids = {worker.pid for worker in dead}
    for worker in dead:
        assert worker.pid is not None
        for pid in [*children_of(worker.pid), worker.pid]:
            os.kill(pid, signal.SIGKILL)
        # A killed worker cannot say so: its registration goes, or it would count as a slot.
        worker.register_death()
    for proc in [proc for proc in rq_workers.procs if proc.pid in pids]:
        proc.wait(10)
    for _ in dead:
        rq_workers.start(f"worker-tools-{uuid.uuid4().hex[:8]}", "rqworker", "tools", "default")
    wait_for_workers("tools", len(dead))
    return {worker.name for worker in dead}


def approve_and_check_it_waits(client: Client, approval: Approval, job: Job) -> Approval:
    reply = decide(client, approval.id, decision="approve")
    assert reply.status_code == 200, reply.content
    approval.refresh_from_db()
    assert approval.status == "approved"
    job.refresh_from_db()
    assert job.status == "queued" and job.gate == "" and job.started_at is None
    return approval


def assert_it_ran_once_and_the_agent_was_told(
    session: AgentSession, approval: Approval, client: Client, dead: set[str]
) -> Job:
    job = wait_for_status(approval.job_id, *FINAL, timeout=120)
    assert job.status == "done", (job.error_code, job.error_message)
    assert job.worker_name and job.worker_name not in dead
    assert list(Job.objects.filter(session=session).values_list("id", flat=True)) == [job.id]
    events = Counter(JobEvent.objects.filter(job=job).values_list("event", flat=True))
    assert events["job_queued"] == events["job_started"] == events["job_completed"] == 1
    assert not {"job_failed", "job_cancelled", "job_timed_out"} & set(events)

    reply = client.get(f"/api/approvals/{approval.id}")
    assert reply.status_code == 200
    doc = reply.json()
    assert doc["status"] == "approved" and doc["job_id"] == job.id
    assert approval.decided_at is not None and doc["decided_at"] == approval.decided_at.isoformat()

    wait_for_idle(session, timeout=60)
    log = list(Event.objects.filter(session=session).order_by("seq"))
    assert [e.seq for e in log] == list(range(1, len(log) + 1))  # nothing lost or repeated
    kinds = Counter(e.kind for e in log)
    assert kinds["approval_requested"] == kinds["approval_decided"] == 1
    ends = [e for e in log if e.kind == "job_event" and e.payload.get("event") in ENDS]
    assert [(e.payload["job_id"], e.payload["event"]) for e in ends] == [(job.id, "job_completed")]
    assert ends[0].consumed_by is not None  # it woke the agent ...
    assert messages(session, ends[0].consumed_by)[-1].startswith("The tests finished:")
    runs = set(Run.objects.filter(session=session).values_list("status", flat=True))
    assert runs == {"completed"}  # ... and every turn ended well
    session.refresh_from_db()
    assert session.pending_approvals == 0
    return job


def test_tool_workers_killed_while_an_approved_job_waits_in_rq_lose_nothing(
    user: Any, api_client: Client, rq_workers: Processes, rq_scheduler: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)
    key = hold_tool_workers()

    approval = approve_and_check_it_waits(api_client, approval, job)
    wait_until(lambda: RqJob.exists(job.id, connection=django_rq.get_connection("tools")))
    assert Job.objects.get(pk=job.id).enqueued_at is not None  # handed to RQ, not started

    dead = kill_tool_workers(rq_workers)
    django_rq.get_connection("default").delete(key)

    assert_it_ran_once_and_the_agent_was_told(session, approval, api_client, dead)


def test_a_worker_killed_after_taking_the_approved_job_off_the_queue_loses_nothing(
    user: Any, api_client: Client, rq_workers: Processes, rq_scheduler: Any
) -> None:
    """The moment between a worker's dequeue and its start of the job: RQ has the job, in
    no queue, and nobody will run it. No signal can be timed to land there, so the
    dequeue is RQ's own, made here as a worker makes it (``tools`` and ``default``, as
    the tool workers serve them), and this process then never starts the job: what a
    worker killed right after its dequeue leaves behind."""
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)
    key = hold_tool_workers()
    connection = django_rq.get_connection("tools")

    approval = approve_and_check_it_waits(api_client, approval, job)
    wait_until(lambda: RqJob.exists(job.id, connection=connection))
    taken = Queue.dequeue_any(
        [django_rq.get_queue("tools"), django_rq.get_queue("default")],
        timeout=None,
        connection=connection,
    )
    assert taken is not None and taken[0].id == job.id

    django_rq.get_connection("default").delete(key)  # the live workers are free again

    assert_it_ran_once_and_the_agent_was_told(session, approval, api_client, set())


def test_tool_workers_killed_while_an_approved_job_is_held_for_a_slot_lose_nothing(
    user: Any, api_client: Client, rq_workers: Processes, rq_scheduler: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)
    running = fill_every_slot(api_client)

    approval = approve_and_check_it_waits(api_client, approval, job)
    assert Job.objects.get(pk=job.id).enqueued_at is None  # held in the database

    dead = kill_tool_workers(rq_workers)

    # The jobs the dead workers ran end worker_lost (the sweep), which frees their slots.
    for job_id in running:
        assert wait_for_status(job_id, *FINAL, timeout=60).error_code == "worker_lost"
    assert_it_ran_once_and_the_agent_was_told(session, approval, api_client, dead)


def test_redis_flushed_after_the_approval_loses_nothing(
    user: Any, api_client: Client, rq_workers: Processes, rq_scheduler: Any
) -> None:
    session, approval, job = ask_for_tests(user)
    wait_for_idle(session)
    hold_tool_workers()
    connection = django_rq.get_connection("tools")

    approval = approve_and_check_it_waits(api_client, approval, job)
    wait_until(lambda: RqJob.exists(job.id, connection=connection))
    assert Job.objects.get(pk=job.id).enqueued_at is not None  # handed to RQ, not started

    # The approved job's RQ entry goes with the rest; the key that held the workers too,
    # so they are free, and only the sweep can give them the job again.
    connection.flushdb()

    assert_it_ran_once_and_the_agent_was_told(session, approval, api_client, set())
