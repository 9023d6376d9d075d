from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from tests.jobs.factories import started_job_id, wait_for_status

FINAL = ("done", "failed", "cancelled", "timed_out")


@pytest.mark.django_db(transaction=True)
def test_a_job_waits_for_its_dependencies_then_runs(api_client: Any, rq_workers: Any) -> None:
    first = started_job_id(api_client, "sleepy", {"seconds": 1, "steps": 4})
    second = started_job_id(api_client, "noop")
    dependent = started_job_id(api_client, "noop", depends_on=[first, second])
    assert Job.objects.get(id=dependent).enqueued_at is None  # not occupying a worker

    wait_for_status(dependent, *FINAL)

    jobs = {j.id: j for j in Job.objects.all()}
    assert jobs[dependent].status == "done"
    started, finished = jobs[dependent].started_at, jobs[first].finished_at
    assert started is not None and finished is not None and started >= finished
    status = api_client.get(f"/api/jobs/{dependent}").json()
    assert status["depends_on"] == sorted([first, second])


@pytest.mark.django_db(transaction=True)
def test_a_failed_dependency_fails_the_dependent_naming_it(
    api_client: Any, rq_workers: Any
) -> None:
    broken = started_job_id(api_client, "failing")
    dependent = started_job_id(api_client, "noop", depends_on=[broken])
    chained = started_job_id(api_client, "noop", depends_on=[dependent])

    job = wait_for_status(dependent, *FINAL)

    assert job.status == "failed"
    assert job.error_code == "dependency_failed"
    assert broken in job.error_message
    assert job.started_at is None
    assert wait_for_status(chained, *FINAL).error_code == "dependency_failed"


@pytest.mark.django_db  # nothing is committed, so no worker takes the jobs
def test_a_cancelled_dependency_fails_the_dependent(api_client: Any) -> None:
    waiting_on = started_job_id(api_client, "sleepy")
    dependent = started_job_id(api_client, "noop", depends_on=[waiting_on])

    api_client.delete(f"/api/jobs/{waiting_on}")

    job = Job.objects.get(id=dependent)
    assert job.status == "failed"
    assert job.error_code == "dependency_failed"
    assert f"dependency {waiting_on} ended cancelled" == job.error_message


@pytest.mark.django_db
def test_depending_on_an_already_failed_job_fails_at_once(api_client: Any) -> None:
    gone = started_job_id(api_client, "sleepy")
    api_client.delete(f"/api/jobs/{gone}")

    dependent = started_job_id(api_client, "noop", depends_on=[gone])

    assert Job.objects.get(id=dependent).status == "failed"
