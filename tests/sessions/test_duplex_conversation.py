"""The user keeps talking while a job runs; its completion comes back as an event.

With the offline model: "run the tests" starts a run_tests job; an unrelated
question is answered while that job has not finished; then the completion
event wakes the agent, which reports the outcome.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from jobs.services import job_create
from sessions.models import Event, Run
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import make_session, messages, wait_for_idle, wait_for_run
from tests.sessions.tools_for_tests import gate_open

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_agent_answers_while_the_tests_run_then_reports_them(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user, model="offline")
    # Keep both tool workers busy so the test job stays unfinished until we say so.
    blockers = [
        job_create(owner=user, tool="gated", args={"gate": f"duplex-{i}"}, idempotency_key=f"b{i}")[
            0
        ]
        for i in range(2)
    ]
    wait_until(lambda: Job.objects.filter(status="running").count() == 2)

    _, first = message_post(session=session, text="Please run the tests")
    first = wait_for_run(first.id)
    job = Job.objects.get(session=session)
    assert job.tool == "run_tests" and job.run_id == first.id
    assert f"Started run_tests as {job.id}" in messages(session, first)[-1]

    _, second = message_post(session=session, text="What can you do?")
    second = wait_for_run(second.id)
    job.refresh_from_db()
    assert second.status == Run.Status.COMPLETED
    assert job.status not in Job.TERMINAL  # answered while the job was still unfinished
    assert "run the tests" in messages(session, second)[-1]

    for blocker in blockers:
        gate_open(blocker.args["gate"])
    wait_until(lambda: Job.objects.get(pk=job.id).is_terminal, timeout=90)
    wait_for_idle(session)

    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    completion = Event.objects.get(
        session=session, kind="job_event", payload__job_id=job.id, payload__event="job_completed"
    )
    third = completion.consumed_by
    assert third is not None and third.status == Run.Status.COMPLETED
    report = messages(session, third)[-1]
    assert report.startswith("The tests finished:")
    assert job.result is not None and job.result["summary"] in report
