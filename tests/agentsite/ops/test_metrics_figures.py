"""/metrics shows the work real workers did: jobs and turns by status, their durations."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessions.models import Run
from tests.agentsite.ops.scrape import Samples, samples_of, value
from tests.conftest import api_client_for, wait_until
from tests.jobs.factories import started_job_id, wait_for_status
from tests.sessions.test_runs_api import new_session, post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(make_user: Any) -> Client:
    return api_client_for(make_user("operator", is_staff=True))


def scrape(operator: Client) -> Samples:
    response = operator.get("/metrics")
    assert response.status_code == 200, response.content
    return samples_of(response.content.decode())


def count(samples: Samples, name: str, **labels: Any) -> float:
    return value(samples, name, **labels) or 0.0


def test_a_job_run_by_a_worker_is_counted_with_its_duration(
    api_client: Any, operator: Client, rq_workers: Any
) -> None:
    before = scrape(operator)

    job_id = started_job_id(api_client, "sleepy", {"seconds": 0.3, "steps": 1})
    wait_for_status(job_id, "done")
    after = scrape(operator)

    assert count(after, "agentsite_jobs", status="done") == 1
    assert count(after, "agentsite_jobs", status="queued") == 0
    series = {"tool": "sleepy", "status": "done"}
    name = "agentsite_job_duration_seconds"
    assert count(after, f"{name}_count", **series) == count(before, f"{name}_count", **series) + 1
    took = count(after, f"{name}_sum", **series) - count(before, f"{name}_sum", **series)
    assert took >= 0.3
    # It slept 0.3 s: above the 0.25 s bucket, within the +Inf one.
    assert count(after, f"{name}_bucket", le="0.25", **series) == count(
        before, f"{name}_bucket", le="0.25", **series
    )
    assert count(after, f"{name}_bucket", le="+Inf", **series) == count(
        after, f"{name}_count", **series
    )


def test_a_turn_reports_its_duration_and_time_to_first_token(
    api_client: Any, operator: Client, rq_workers: Any
) -> None:
    before = scrape(operator)
    session_id = new_session(api_client, model="offline")

    run_id = post(api_client, session_id, "hello there").json()["run_id"]
    run = wait_until(
        lambda: Run.objects.filter(pk=run_id, status__in=Run.TERMINAL).first(), timeout=30
    )
    after = scrape(operator)

    assert run.status == Run.Status.COMPLETED and run.first_token_at is not None
    assert count(after, "agentsite_runs", status="completed") == 1
    ttft = "agentsite_turn_time_to_first_token_seconds"
    assert count(after, f"{ttft}_count") == count(before, f"{ttft}_count") + 1
    observed = count(after, f"{ttft}_sum") - count(before, f"{ttft}_sum")
    assert observed == pytest.approx(run.time_to_first_token_ms / 1000, abs=0.001)
    turn = "agentsite_turn_duration_seconds"
    assert count(after, f"{turn}_count", status="completed") == (
        count(before, f"{turn}_count", status="completed") + 1
    )
