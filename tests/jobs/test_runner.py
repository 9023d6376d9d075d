"""jobs.runner.run_job: the one entry point, under any worker or the tool worker's hand-off."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from jobs import handoff, lifecycle
from jobs.models import Job
from jobs.runner import run_job

# run_job ends on its own connections, so the rows it reads must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def in_this_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Not a forked horse: the connections are this test's own, not inherited ones."""
    monkeypatch.setattr(handoff, "connections_detach_inherited", lambda: None)
    yield
    handoff.STARTED_BY_WORKER.clear()


def queued(user: Any, tool: str, args: dict[str, Any] | None = None) -> Job:
    # Counted as handed to RQ, so the suite's scheduler leaves it to this test.
    return Job.objects.create(
        owner=user, tool=tool, args=args or {}, timeout_s=30, enqueued_at=timezone.now()
    )


def test_under_any_worker_it_records_the_start_and_the_end_itself(user: Any) -> None:
    job = queued(user, "sleepy", {"seconds": 0.1, "steps": 2})

    assert run_job(job.id) is None

    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    assert job.result == {"summary": "slept 0.1s in 2 steps", "steps": 2}
    assert job.worker_name == f"local/{os.getpid()}" and job.partial_count == 2


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("failing", {}, "tool_error"),
        ("no_such_tool", {}, "unknown_tool"),
        ("sleepy", {"seconds": "long"}, "invalid_arguments"),
    ],
)
def test_a_job_that_cannot_run_ends_failed_with_the_reason(
    user: Any, tool: str, args: dict[str, Any], code: str
) -> None:
    job = queued(user, tool, args)

    run_job(job.id)

    job.refresh_from_db()
    assert (job.status, job.error_code) == (Job.Status.FAILED, code)


def test_a_job_that_is_no_longer_queued_is_left_alone(user: Any) -> None:
    job = queued(user, "sleepy")
    lifecycle.job_cancel(job_id=job.id)

    assert run_job(job.id) is None
    assert Job.objects.get(id=job.id).status == Job.Status.CANCELLED


def test_after_the_worker_started_it_the_horse_only_returns_the_outcome(user: Any) -> None:
    job = queued(user, "noop")
    handoff.job_start_in_worker(job_id=job.id, worker_name="w1")

    outcome = run_job(job.id)

    assert outcome == {
        "transition": "job_succeed",
        "kwargs": {"result": {"summary": "nothing to do"}},
    }
    assert Job.objects.get(id=job.id).status == Job.Status.RUNNING
    handoff.job_finish_in_worker(job_id=job.id, outcome=outcome, horse_status="finished")
    assert Job.objects.get(id=job.id).status == Job.Status.DONE
    assert job.id not in handoff.STARTED_BY_WORKER
